"""Terminal output: messages on stderr, a progress bar only on an interactive terminal."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from rich.progress import Progress

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


def data_on_stdout() -> None:
    """A command's output goes to standard output: its tables and summaries go to stderr, so
    that stdout holds exactly the output's bytes (`report --json - | jq`)."""
    out.stderr = True


def tables_on_stdout() -> None:
    """Tables back on standard output (each command starts so)."""
    out.stderr = False


def info(message: str) -> None:
    """A status line on stderr (stdout stays clean for data), unless --quiet."""
    if not _quiet:
        err.print(message, markup=False)


def interactive() -> bool:
    return not _quiet and sys.stderr.isatty() and not os.environ.get("CI")


class ProgressBar:
    """`start(total)` once the total is known, then `advance()` per item; both do nothing
    when no bar is drawn."""

    def __init__(self, bar: Progress | None, description: str) -> None:
        self._bar, self._description, self._task = bar, description, None

    def start(self, total: int) -> None:
        if self._bar is not None:
            self._task = self._bar.add_task(self._description, total=total)

    def advance(self, *_: object) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task)


@contextmanager
def progress(description: str) -> Iterator[ProgressBar]:
    """A progress bar on an interactive terminal only (never when piped, under CI or -q)."""
    if not interactive():
        yield ProgressBar(None, description)
        return
    from rich.progress import (  # here: most commands never draw a bar
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )
    with bar:
        yield ProgressBar(bar, description)
