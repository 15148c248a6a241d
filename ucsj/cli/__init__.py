"""The command line: a thin click layer over the library, one module per command group.

Exit codes: 0 ok, 1 a quality gate failed, 2 usage or input error, 3 backend or runtime error,
4 requests pending (--cache collect).
"""

from __future__ import annotations

import sys

import click

from ucsj import console
from ucsj.cli import (  # noqa: F401  (importing them registers their commands)
    analyses,
    baselines,
    batch_commands,
    cache_commands,
    converters,
    local,
    pipeline,
)
from ucsj.cli.base import cli
from ucsj.errors import EXIT_BACKEND, EXIT_INPUT, UcsjError

INTERRUPTED = "ucsj: interrupted; rerun the same command to resume from the cache"


def main(argv: list[str] | None = None) -> None:
    """Entry point: map errors to the documented exit codes and one clear line on stderr."""
    try:
        cli.main(args=argv, prog_name="ucsj", standalone_mode=False)
    except click.exceptions.Abort as exc:
        interrupted = isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt)
        console.err.print(INTERRUPTED if interrupted else "ucsj: aborted", markup=False)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_INPUT if exc.exit_code == 2 else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except UcsjError as exc:
        console.err.print(f"ucsj: error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        console.err.print(INTERRUPTED, markup=False)
        sys.exit(130)
    except OSError as exc:
        console.err.print(f"ucsj: error: {exc}", markup=False)
        sys.exit(EXIT_BACKEND)
    sys.exit(0)
