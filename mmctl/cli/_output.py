"""The one output sink of every command.

Convention (docs/commands/index.md, "Output"): results go to stdout; progress, notes, warnings
and hints go to stderr so they never pollute what a script parses. With
``--json`` a command prints exactly one JSON document on stdout (commands that
stream say so in their help and print one document per line). Rich is
imported only when something is rendered for a person.

In a terminal, stdout and stderr are the same screen: a progress bar redraws
its line and clears it when it stops, so anything written to stdout while it
runs is erased. Every write to stdout therefore first ends the bar
(:meth:`Output.end_progress`); the streamed answer and the results always
come after it, never under it.

Piped output is for scripts and for people who copy from it: tables are
neither wrapped to a width nor padded at the end of a line (:class:`_Unpadded`),
so a path is whole on its line. A reader that closes stdout early (``| head``)
ends the command quietly (:class:`mmctl.errors.OutputClosed`).
"""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from mmctl.errors import OutputClosed

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID
    from rich.status import Status


class Output:
    """Where a command's results and messages go. Streams are injectable for tests."""

    def __init__(
        self,
        *,
        json_mode: bool = False,
        schema: str | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.json_mode = json_mode
        #: The name of the command's document (:mod:`mmctl.schemas`): each JSON
        #: document printed names its schema and version first.
        self.schema = schema
        self._stdout = stdout or sys.stdout
        self._stderr = stderr or sys.stderr
        self._console: Console | None = None
        self._err_console: Console | None = None
        self._bar: Progress | Status | None = None  # what redraws stderr now
        self._bar_lock = threading.Lock()  # frames arrive on the preprocessing thread
        self._warned: set[str] = set()

    @property
    def console(self) -> Console:
        """A rich console on stdout, for human results."""
        if self._console is None:
            self._console = _console(self._stdout, soft_wrap=True)
        return self._console

    @property
    def err_console(self) -> Console:
        """A rich console on stderr, for progress bars and reports beside the result."""
        if self._err_console is None:
            self._err_console = _console(self._stderr, soft_wrap=False)
        return self._err_console

    # ---- stdout: results ----

    def result(
        self,
        doc: dict[str, Any],
        human: Callable[[Any], None] | None = None,
        schema: str | None = None,
    ) -> None:
        """Emit a command's result: ``doc`` as JSON, or ``human(console)``."""
        self.end_progress()
        if self.json_mode or human is None:
            self.json_line(doc, schema)
        else:
            human(self.console)

    def json_line(self, doc: dict[str, Any], schema: str | None = None) -> None:
        """One compact JSON document on one line of stdout, named by its schema
        (``schema``, else the command's)."""
        global _documents
        name = schema or self.schema
        if name is not None:
            from mmctl.schemas import named

            doc = named(name, doc)
        self._write(json.dumps(doc, separators=(",", ":"), default=_json_default) + "\n")
        _documents += 1

    def text(self, chunk: str) -> None:
        """Streamed text (the answer as it arrives), as it is."""
        self._write(chunk)

    def _write(self, text: str) -> None:
        self.end_progress()
        try:
            self._stdout.write(text)
            self._stdout.flush()
        except BrokenPipeError:
            raise _closed(self._stdout) from None

    def written(
        self, doc: dict[str, Any], human: Callable[[Any], None], schema: str | None = None
    ) -> None:
        """A command whose product is a file (``build -o``): ``--json``'s
        document on stdout (named ``schema``, else the command's); for a person
        the summary goes to stderr and stdout stays empty, like ``curl -o``."""
        if self.json_mode:
            self.json_line(doc, schema)
        else:
            self.report(human)

    # ---- stderr: what a person reads beside the result ----

    def report(self, human: Callable[[Any], None]) -> None:
        """Decisions, checks and timings beside the result: on stderr, so that
        stdout carries the product alone (``ANSWER=$(mmctl send …)``); nothing
        with ``--json``, whose document holds them."""
        if self.json_mode:
            return
        self.end_progress()
        human(self.err_console)

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
                    self._stop_status()
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

    def progress(self, pace: Callable[[], str] | None = None) -> Progress | None:
        """A started progress bar on stderr for long work (description, bar,
        done/total, elapsed, time left — or ``pace()``'s text, read at every
        redraw, in place of rich's own estimate) — ``None`` with ``--json`` or
        without a terminal. Like the frames bar it ends at the first stdout
        write (or :meth:`end_progress`), and notes print above it. Add its
        tasks."""
        if self.json_mode or not self.err_console.is_terminal:
            return None
        bar = self._new_bar(eta=True, pace=pace)
        with self._bar_lock:
            self._stop_status()
            self._bar = bar
        bar.start()
        return bar

    def _stop_status(self) -> None:
        # Under _bar_lock: rich runs one live display at a time.
        if self._bar is not None and not hasattr(self._bar, "add_task"):
            self._bar.stop()
            self._bar = None

    def _new_bar(self, eta: bool = False, pace: Callable[[], str] | None = None) -> Progress:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class PaceColumn(ProgressColumn):
            def render(self, task: Any) -> Text:
                assert pace is not None
                return Text(pace())

        columns: list[Any] = [
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        ]
        if pace is not None:
            columns.append(PaceColumn())
        elif eta:
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

    def status(self, text: str) -> None:
        """A one-line status with a spinner on stderr while nothing else shows
        (connecting, loading the tokenizer: seconds of a blank screen
        otherwise); a new text replaces it; it ends like a progress bar, at the
        first stdout write or bar. Only in a terminal, never with --json."""
        if self.json_mode or not self.err_console.is_terminal:
            return
        with self._bar_lock:
            current = self._bar
            if current is None:
                from rich.status import Status

                spinner = Status(text, console=self.err_console)
                self._bar = spinner
                spinner.start()
                return
        if not hasattr(current, "add_task"):  # a status: new words; a bar stays
            current.update(text)

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


#: JSON documents this process has printed on stdout since :func:`documents_reset`:
#: a command that fails after its document (``health``, a partial ``send``)
#: prints no error document besides it.
_documents = 0


def documents_reset() -> None:
    global _documents
    _documents = 0


def documents_printed() -> int:
    return _documents


def error_document(
    stream: TextIO, command: str, message: str, hint: str | None, exit_code: int, kind: str
) -> None:
    """A failure in ``--json`` mode: ``mmctl.error``'s document on stdout (the
    ``Error:`` line still goes to stderr), so a script reading stdout always
    gets one document."""
    from mmctl.schemas import named

    doc = {
        "command": command,
        "exit_code": exit_code,
        "error": {"kind": kind, "message": _one_line(message), "hint": hint and _one_line(hint)},
    }
    try:
        stream.write(json.dumps(named("error", doc), separators=(",", ":")) + "\n")
        stream.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass  # stdout is gone: the stderr line and the exit code still say it


#: Width of a console that is not a terminal: wide enough that no table wraps.
UNWRAPPED = 1 << 20


def _console(stream: TextIO, *, soft_wrap: bool) -> Console:
    from rich.console import Console

    if stream.isatty():
        console = Console(file=stream, highlight=False, soft_wrap=soft_wrap)
    else:
        unpadded: Any = _Unpadded(stream)  # a TextIO by what rich uses of it
        console = Console(file=unpadded, highlight=False, soft_wrap=True, width=UNWRAPPED)
    # rich's own handling exits 1, the code of a bug in mmctl.
    console.on_broken_pipe = lambda: _raise(_closed(stream))  # type: ignore[method-assign]
    return console


def _raise(err: BaseException) -> None:
    raise err


def _closed(stream: TextIO) -> OutputClosed:
    silence(stream)
    return OutputClosed(getattr(stream, "name", "stdout"))


def reader_gone(stream: TextIO) -> bool:
    """Whether ``stream`` is a pipe whose reader has closed it (poll says
    POLLERR for such a pipe's write end): how a click exit 1 that was really
    a closed pipe (a help page into ``| head``) is told from a real one."""
    import select

    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


def silence(stream: TextIO) -> None:
    """Point a closed pipe's descriptor at /dev/null: the interpreter's last
    flush at exit would meet the closed pipe again and print "Exception ignored"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # a stream without a descriptor (tests): nothing will flush it


class _Unpadded(io.TextIOBase):
    """A stream that drops the spaces ending each line: rich pads every table
    cell to its column's width, and piped output that a script parses or a
    person copies should carry no trailing blanks."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        if lines:
            try:
                self._stream.write("".join(line.rstrip(" ") + "\n" for line in lines))
            except BrokenPipeError:
                raise _closed(self._stream) from None
        return len(text)

    def flush(self) -> None:
        try:
            if self._partial:
                self._stream.write(self._partial)
                self._partial = ""
            self._stream.flush()
        except BrokenPipeError:
            raise _closed(self._stream) from None

    def fileno(self) -> int:
        return self._stream.fileno()


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
