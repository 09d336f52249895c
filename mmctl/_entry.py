"""The console script: exit 130 with one line for Ctrl-C even while the CLI is still importing.

``mmctl.cli.app`` sets the signal handlers, but importing it (typer, click)
takes a tenth of a second; a Ctrl-C in that window would otherwise print a
``KeyboardInterrupt`` traceback. This module imports nothing heavy itself.
"""

from __future__ import annotations

import sys


def run() -> None:
    try:
        from mmctl.cli.app import main
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted by SIGINT\n")
        sys.exit(130)
    sys.exit(main())
