"""The `ucsj` console script: an interrupt while the CLI's modules are still loading ends
quietly with the documented 130, like one at any later moment."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from ucsj.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("ucsj: interrupted\n")
        sys.exit(130)
    cli_main()
