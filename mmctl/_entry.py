"""The console script: exit 130 with one line for Ctrl-C even while the CLI is still importing.

``mmctl.cli.app`` sets the signal handlers, but importing it (typer, click)
takes a tenth of a second. A handler that raised there could raise inside
the import machinery's own callbacks, where Python prints the exception as
"ignored" (a traceback) and the import — and the command — carries on. So
until the CLI's handlers take over, a stop signal is only *noted*, and acted
on (one line, exit 130) as soon as the import is done: :func:`stopped`.
This module imports nothing heavy itself. A signal that lands before the
interpreter runs any of it is Python's to answer: the default action at first,
then exit 1 ("Fatal Python error: init_import_site") while ``site`` imports, then
a KeyboardInterrupt traceback (tests wait for the handlers set here, not a time).
"""

from __future__ import annotations

import signal
import sys

#: Stop signals received before the CLI installed its own handlers.
_noted: list[str] = []


def _note(signum: int, _frame: object) -> None:
    _noted.append(signal.Signals(signum).name)


def stopped() -> str | None:
    """The first stop signal noted while the CLI was importing, if any."""
    return _noted[0] if _noted else None


def run() -> None:
    signal.signal(signal.SIGINT, _note)
    signal.signal(signal.SIGTERM, _note)
    try:
        from mmctl.cli.app import main
    except KeyboardInterrupt:  # a SIGINT before the line above ran
        _noted.append("SIGINT")
    if stopped() is not None:
        sys.stderr.write(f"Error: interrupted by {stopped()}\n")
        sys.exit(130)
    sys.exit(main(stopped=stopped))
