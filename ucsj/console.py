"""Terminal output: messages on stderr, a progress bar only on an interactive terminal."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

# Piped output gets 120 columns rather than rich's 80, so report tables stay on one line a row.
err = Console(
    stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else 120
)
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)
_quiet = False


def configure(quiet: bool = False, verbose: bool = False) -> None:
    global _quiet
    _quiet = quiet
    logger = logging.getLogger("ucsj")
    logger.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("ucsj: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.ERROR if quiet else logging.WARNING)
    logger.propagate = False


def info(message: str) -> None:
    """A status line on stderr (stdout stays clean for data), unless --quiet."""
    if not _quiet:
        err.print(message, markup=False)


def interactive() -> bool:
    return not _quiet and sys.stderr.isatty() and not os.environ.get("CI")


@contextmanager
def progress(description: str, total: int | None) -> Iterator[callable]:
    """Yield an `advance()` function; draws a bar only on an interactive terminal."""
    if not interactive():
        yield lambda *_: None
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )
    with bar:
        task = bar.add_task(description, total=total)
        yield lambda *_: bar.advance(task)
