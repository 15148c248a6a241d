"""The `ucsj` console script: an interrupt while the CLI's modules are still loading ends
quietly with the documented 130, like one at any later moment."""

from __future__ import annotations

import os  # os and sys are loaded by Python's own start-up: importing them cannot be cut
import sys


def main() -> None:
    try:
        from ucsj.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("ucsj: interrupted\n")
        sys.stderr.flush()
        # Nothing was written yet; skip an interpreter shutdown over half-imported modules,
        # which can end in a second report of the interrupt instead of the exit code.
        os._exit(130)
    cli_main()
