"""The console script: exit 130 with one line for Ctrl-C even while the CLI is still importing.

``mmctl.cli.app`` sets the signal handlers, but importing it (typer, click)
takes a tenth of a second; a Ctrl-C in that window would otherwise print a
``KeyboardInterrupt`` traceback, and a SIGTERM would kill the process
without a word. This module imports nothing heavy itself. (A signal that
lands before the interpreter runs any of it takes the default action.)
"""

from __future__ import annotations

import signal
import sys


class _Stopped(BaseException):
    def __init__(self, name: str) -> None:
        self.name = name


def _stop(signum: int, _frame: object) -> None:
    raise _Stopped(signal.Signals(signum).name)


def run() -> None:
    signal.signal(signal.SIGTERM, _stop)
    try:
        from mmctl.cli.app import main
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted by SIGINT\n")
        sys.exit(130)
    except _Stopped as stop:
        sys.stderr.write(f"Error: interrupted by {stop.name}\n")
        sys.exit(130)
    sys.exit(main())
