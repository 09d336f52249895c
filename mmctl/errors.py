"""Typed errors and the exit codes they map to.

Library code raises these with structured fields and never prints or exits;
the CLI's one error boundary (:func:`mmctl.cli.app.main`) renders each as a
single ``Error: …`` line on stderr and exits with its :class:`ExitCode`.
Exit codes are a public interface for shell scripts: never renumber them.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes (documented in docs/commands/index.md's table)."""

    OK = 0
    #: A bug in mmctl: anything not covered below. Tracebacks with --debug.
    UNEXPECTED = 1
    #: The command line itself is wrong (unknown option, bad value).
    USAGE = 2
    #: Bad input: missing/unreadable/undecodable media, bad model files.
    BAD_INPUT = 3
    #: The worker answered and refused the request (e.g. INVALID_ARGUMENT).
    REJECTED = 4
    #: The worker is unreachable, unhealthy, or the deadline passed.
    UNAVAILABLE = 5
    #: A safety or layout check failed (mrope walk, worker capability).
    CHECK_FAILED = 6
    #: A batch ran to its end and some items failed (their output lines say why).
    SOME_FAILED = 7
    #: A batch ran to its end and no item succeeded.
    ALL_FAILED = 8
    #: The worker ended the generation early: aborted, or no completion came.
    INCOMPLETE = 9
    #: ``batch``: its output file could not be written (disk full, I/O error); the
    #: file ends at its last complete line and ``--resume`` continues.
    OUTPUT_FAILED = 10
    #: Interrupted by SIGINT (Ctrl-C) or SIGTERM; nothing left behind.
    INTERRUPTED = 130
    #: stdout's reader went away (``| head``): output stopped there, quietly,
    #: as a Unix tool ends on SIGPIPE (128 + 13); nothing left behind.
    OUTPUT_CLOSED = 141


class MmctlError(Exception):
    """Base of every error mmctl expects to happen.

    ``message`` is one sentence for the user; ``hint`` optionally says what to
    try next. Subclasses fix the exit code.
    """

    exit_code: ExitCode = ExitCode.UNEXPECTED

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(MmctlError):
    """Arguments that parse but do not make sense together."""

    exit_code = ExitCode.USAGE


class InputError(MmctlError):
    """The user's files (media, model directory, request file) are unusable."""

    exit_code = ExitCode.BAD_INPUT


class UnknownFamily(InputError):
    """The model's ``config.json`` is no mmctl family's: only its worker can
    preprocess its media (``--processing worker``)."""

    def __init__(self, message: str, *, model_type: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.model_type = model_type


class WorkerRejected(MmctlError):
    """The worker answered with an error status for this request."""

    exit_code = ExitCode.REJECTED


class WorkerUnavailable(MmctlError):
    """No usable answer: connection refused, unhealthy, deadline exceeded."""

    exit_code = ExitCode.UNAVAILABLE


class CheckFailed(MmctlError):
    """A client-side safety check refused to go on."""

    exit_code = ExitCode.CHECK_FAILED


class Interrupted(BaseException):
    """Raised from the SIGINT/SIGTERM handler so cleanup code runs normally.

    A ``BaseException``, like ``KeyboardInterrupt``: no ``except Exception``
    on the way (a tokenizer's loader, a decoder's fallback) can swallow it and
    turn Ctrl-C into another error's exit code. Not a ``KeyboardInterrupt``
    itself: typer turns those into a silent exit 130, and the line saying
    what stopped the command would be lost.
    """

    exit_code = ExitCode.INTERRUPTED
    hint: str | None = None

    def __init__(self, signal_name: str = "SIGINT", detail: str | None = None) -> None:
        self.signal_name = signal_name
        self.message = f"interrupted by {signal_name}" + (f"; {detail}" if detail else "")
        super().__init__(self.message)
        self.signal_name = signal_name


class OutputClosed(BaseException):
    """stdout was closed by its reader (``mmctl send … | head -1``).

    Normal for a pipe, so it is not an error: nothing is printed and the exit
    code is 141, what a shell reports for a tool ended by SIGPIPE. A
    ``BaseException`` like :class:`Interrupted`, so that no ``except
    Exception`` on the way turns it into another failure while every
    ``finally`` (shm cleanup) still runs.
    """

    exit_code = ExitCode.OUTPUT_CLOSED

    def __init__(self, stream: str = "stdout") -> None:
        super().__init__(f"{stream} was closed by its reader")


class GenerationIncomplete(MmctlError):
    """The answer is partial: the worker aborted it or the stream stopped early."""

    exit_code = ExitCode.INCOMPLETE


class OutputFailed(MmctlError):
    """A batch's output file could not be written; the run stopped there."""

    exit_code = ExitCode.OUTPUT_FAILED


class SomeFailed(MmctlError):
    """A batch finished; some of its items failed."""

    exit_code = ExitCode.SOME_FAILED


class AllFailed(MmctlError):
    """A batch finished; none of its items succeeded."""

    exit_code = ExitCode.ALL_FAILED
