"""The one output sink of every command.

Convention (README "Output"): results go to stdout; progress, notes, warnings
and hints go to stderr so they never pollute what a script parses. With
``--json`` a command prints exactly one JSON document on stdout (commands that
stream say so in their help and print one document per line). Rich is
imported only when something is rendered for a person.

In a terminal, stdout and stderr are the same screen: a progress bar redraws
its line and clears it when it stops, so anything written to stdout while it
runs is erased. Every write to stdout therefore first ends the bar
(:meth:`Output.end_progress`); the streamed answer and the results always
come after it, never under it.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID


class Output:
    """Where a command's results and messages go. Streams are injectable for tests."""

    def __init__(
        self,
        *,
        json_mode: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.json_mode = json_mode
        self._stdout = stdout or sys.stdout
        self._stderr = stderr or sys.stderr
        self._console: Console | None = None
        self._err_console: Console | None = None
        self._bar: Progress | None = None
        self._bar_lock = threading.Lock()  # frames arrive on the preprocessing thread
        self._warned: set[str] = set()

    @property
    def console(self) -> Console:
        """A rich console on stdout, for human results."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self._stdout, highlight=False, soft_wrap=True)
        return self._console

    @property
    def err_console(self) -> Console:
        """A rich console on stderr, for progress bars."""
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(file=self._stderr, highlight=False)
        return self._err_console

    # ---- stdout: results ----

    def result(self, doc: dict[str, Any], human: Callable[[Any], None] | None = None) -> None:
        """Emit a command's result: ``doc`` as JSON, or ``human(console)``."""
        self.end_progress()
        if self.json_mode or human is None:
            self.json_line(doc)
        else:
            human(self.console)

    def json_line(self, doc: dict[str, Any]) -> None:
        """One compact JSON document on one line of stdout."""
        self.end_progress()
        self._stdout.write(json.dumps(doc, separators=(",", ":"), default=_json_default) + "\n")
        self._stdout.flush()

    def text(self, chunk: str) -> None:
        """Streamed text (the answer as it arrives), as it is."""
        self.end_progress()
        self._stdout.write(chunk)
        self._stdout.flush()

    # ---- stderr: progress and messages ----

    @contextmanager
    def frames(self, enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
        """A frames progress bar on stderr while the block runs (only in a
        terminal, never with --json); yields the ``on_frame(done, total)``
        callback, or ``None`` when there is no bar. The bar appears with the
        first frame, so set-up before decoding (connecting, loading) shows none."""
        if not enabled or self.json_mode or not self.err_console.is_terminal:
            yield None
            return
        state: dict[str, Any] = {}

        def on_frame(done: int, total: int) -> None:
            with self._bar_lock:
                if "bar" not in state:
                    if state.get("closed"):
                        return
                    state["bar"], state["task"] = self._start_bar()
                    self._bar = state["bar"]
                bar: Progress = state["bar"]
                if self._bar is bar:
                    bar.update(state["task"], completed=done, total=total)

        try:
            yield on_frame
        finally:
            with self._bar_lock:
                state["closed"] = True
            self.end_progress()

    def _start_bar(self) -> tuple[Progress, TaskID]:
        bar = self._new_bar()
        task = bar.add_task("frames", total=None)
        bar.start()
        return bar, task

    def progress(self) -> Progress | None:
        """A started progress bar on stderr for long work (description, bar,
        done/total, elapsed, time left) — ``None`` with ``--json`` or without a
        terminal. Like the frames bar it ends at the first stdout write (or
        :meth:`end_progress`), and notes print above it. Add its tasks."""
        if self.json_mode or not self.err_console.is_terminal:
            return None
        bar = self._new_bar(eta=True)
        with self._bar_lock:
            self._bar = bar
        bar.start()
        return bar

    def _new_bar(self, eta: bool = False) -> Progress:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns: list[Any] = [
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        ]
        if eta:
            columns.append(TimeRemainingColumn())
        return Progress(
            *columns,
            console=self.err_console,
            transient=True,
            # Our stdout writes go past rich, after end_progress(); a
            # redirect would send print() output to stderr instead.
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def end_progress(self) -> None:
        """Stop and clear the progress bar, if one runs (idempotent)."""
        with self._bar_lock:
            bar, self._bar = self._bar, None
        if bar is not None:
            bar.stop()

    def note(self, message: str) -> None:
        self._message(message)

    def warn(self, message: str) -> None:
        """``Warning: …`` on stderr, once per message (a demo sends one clip many times)."""
        if message not in self._warned:
            self._warned.add(message)
            self._message(f"Warning: {message}")

    def _message(self, line: str) -> None:
        with self._bar_lock:
            bar = self._bar
        if bar is not None:
            bar.console.print(line, markup=False, highlight=False)  # above the bar
        else:
            self._stderr.write(line + "\n")
            self._stderr.flush()


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


# ---- tables shared by the commands that print timings ----


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:,.1f} ms"


def size(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB" if n >= 2**20 else f"{n:,} B"
