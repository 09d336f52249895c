"""The one output sink of every command.

Convention (README "Output"): results go to stdout; progress, notes, warnings
and hints go to stderr so they never pollute what a script parses. With
``--json`` a command prints exactly one JSON document on stdout (commands that
stream say so in their help and print one document per line). Rich is
imported only when something is rendered for a person.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TextIO


class Output:
    """Where a command's results and messages go.

    ``json_mode``: results are JSON documents. ``quiet``: stderr notes are
    dropped (warnings and errors are not). Streams are injectable for tests.
    """

    def __init__(
        self,
        *,
        json_mode: bool = False,
        quiet: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        self._stdout = stdout or sys.stdout
        self._stderr = stderr or sys.stderr
        self._console = None
        self._err_console = None

    @property
    def console(self):
        """A rich console on stdout, for human results."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self._stdout, highlight=False, soft_wrap=True)
        return self._console

    @property
    def err_console(self):
        """A rich console on stderr, for progress bars and status."""
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(file=self._stderr, highlight=False)
        return self._err_console

    def result(self, doc: dict[str, Any], human: Callable[[Any], None] | None = None) -> None:
        """Emit a command's result: ``doc`` as JSON, or ``human(console)``."""
        if self.json_mode or human is None:
            self.json_line(doc)
        else:
            human(self.console)

    def json_line(self, doc: dict[str, Any]) -> None:
        """One compact JSON document on one line of stdout."""
        self._stdout.write(json.dumps(doc, separators=(",", ":"), default=_json_default) + "\n")
        self._stdout.flush()

    def note(self, message: str) -> None:
        if not self.quiet:
            self._stderr.write(message + "\n")

    def warn(self, message: str) -> None:
        self._stderr.write(f"Warning: {message}\n")


def _json_default(value: Any) -> Any:
    # numpy scalars and arrays, paths and enums show up in result documents.
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "__fspath__"):
        return str(value)
    if hasattr(value, "value"):
        return value.value
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def render_error(stream: TextIO, message: str, hint: str | None) -> None:
    """The single ``Error: …`` line (plus an optional ``Hint: …`` line)."""
    stream.write(f"Error: {_one_line(message)}\n")
    if hint:
        stream.write(f"Hint: {_one_line(hint)}\n")
    stream.flush()


def _one_line(text: str) -> str:
    return " ".join(text.split())
