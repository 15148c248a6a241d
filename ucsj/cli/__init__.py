"""The command line: a thin click layer over the library, one module per command group.

Exit codes: 0 ok, 1 a quality gate failed, 2 usage or input error, 3 backend or runtime error,
130 interrupted.
"""

from __future__ import annotations

import logging
import sys
import traceback

import click

from ucsj import console
from ucsj.cli import (  # noqa: F401  (importing them registers their commands)
    analyses,
    baselines,
    cache_commands,
    converters,
    local,
    pipeline,
)
from ucsj.cli.base import cli
from ucsj.errors import EXIT_BACKEND, EXIT_INPUT, UcsjError
from ucsj.io import release_inputs
from ucsj.redact import redact

INTERRUPTED = "ucsj: interrupted; rerun the same command to resume from the cache"
EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> None:
    """Entry point: map errors to the documented exit codes and one clear line on stderr."""
    try:
        sys.exit(_run(argv))
    finally:
        release_inputs()


def _run(argv: list[str] | None) -> int:
    try:
        cli.main(args=argv, prog_name="ucsj", standalone_mode=False)
    except click.exceptions.Abort as exc:
        interrupted = isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt)
        _say(INTERRUPTED if interrupted else "ucsj: aborted")
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return EXIT_INPUT if exc.exit_code == 2 else exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except UcsjError as exc:
        _say(f"ucsj: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        _say(INTERRUPTED)
        return EXIT_INTERRUPTED
    except OSError as exc:
        _say(f"ucsj: error: {exc}")
        return EXIT_BACKEND
    except Exception as exc:  # a bug: one line, the traceback only at -v, never a secret
        logging.getLogger("ucsj").debug("%s", redact(traceback.format_exc()))
        _say(f"ucsj: internal error (please report it; -v shows details): {_describe(exc)}")
        return EXIT_BACKEND
    return 0


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _say(message: str) -> None:
    console.err.print(redact(message), markup=False)
