"""The output file: one OpenAI batch output line per input line, appended as each finishes.

The shape ``vllm run-batch`` writes and the OpenAI Batch API returns:
``{"id", "custom_id", "response": {"status_code", "request_id", "body"},
"error"}`` — the body a ``chat.completion`` — plus an ``mmctl`` key with the
timings, transport, bytes and worker.

The file is the run's only record, so it is kept like a journal:

* **One writer.** ``OUT.lock`` beside it holds an exclusive ``flock`` (and
  the holder's PID) for the whole run; a second run on the same file is
  refused. The lock dies with its process, so a killed run leaves at most
  a stale, unlocked ``OUT.lock`` that the next run takes over.
* **Never the input.** An OUT that is the input file (the same inode, also
  through a symlink or a hard link) is refused before anything is opened
  for writing.
* **Whole lines.** Each line goes out with ``os.write`` (no buffer to lose);
  a write that fails (disk full, I/O error) cuts the file back to its last
  complete line and raises :class:`~mmctl.errors.OutputFailed`; a kill
  mid-write leaves a torn last line that the next ``--resume`` cuts off.
* **Resume.** ``--resume`` keeps the answered lines and, unless
  ``keep_failed``, drops the error lines so those items are tried again.
  When anything is dropped the file is rewritten to a sibling and renamed
  over OUT (atomic: a kill leaves the old file or the new one, never half).

Only a regular file (or a new one) gets the lock and ``--resume``; a device
or a pipe (``/dev/null``, ``/dev/stdout``) is written as it is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
import uuid
from pathlib import Path
from typing import Any

from mmctl.dataset import id_key
from mmctl.errors import InputError, OutputFailed, UsageError

#: Error codes a retry cannot fix: the same line and media are refused again
#: (the line, its id, its media, the prompt's layout check, the worker's
#: INVALID_ARGUMENT) until INPUT or the files change. The others — the worker
#: gone or overloaded (``unavailable``, ``deadline_exceeded``, …), a Ray node
#: lost — are what ``--resume`` retries for.
INPUT_ERRORS = frozenset(
    {
        "invalid_line",
        "invalid_id",
        "duplicate_id",
        "invalid_input",
        "no_media",
        "check_failed",
        "invalid_argument",
    }
)


def success_line(
    custom_id: str,
    request_id: str,
    model: str,
    text: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    mmctl: dict[str, Any],
) -> dict[str, Any]:
    body = {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return {
        "id": _line_id(),
        "custom_id": custom_id,
        "response": {"status_code": 200, "request_id": request_id, "body": body},
        "error": None,
        "mmctl": mmctl,
    }


def error_line(
    custom_id: Any, code: str, message: str, status: int = 400, mmctl: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "id": _line_id(),
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": None, "body": None},
        "error": {"code": code, "message": message},
        "mmctl": mmctl or {},
    }


def _line_id() -> str:
    return f"batch_req_{uuid.uuid4().hex}"


class OutputFile:
    """Lines appended one by one under a lock; what OUT already holds (``done``)."""

    def __init__(
        self,
        path: Path,
        *,
        input: Path | None = None,
        resume: bool = False,
        overwrite: bool = False,
        keep_failed: bool = False,
    ) -> None:
        self.path = path
        #: Keys (:func:`~mmctl.dataset.id_key`) of the items OUT holds a line for.
        self.done: set[str] = set()
        #: Keys of the error lines kept (``keep_failed``), a subset of ``done``.
        self.kept_failed: set[str] = set()
        #: Error lines dropped so that their items are tried again.
        self.retried = 0
        self._fd = -1
        self._lock_fd = -1
        self._lock_path: Path | None = None
        self._created = False
        self.lines = 0
        self.size = 0  # bytes of complete lines in a regular OUT
        self.real = path
        if path.is_dir():
            raise UsageError(f"-o {path} is a directory")
        source = _stat(input) if input is not None else None
        before = _stat(path)
        if source is not None and before is not None and _same(source, before):
            raise UsageError(
                f"-o {path} is the input file {input}", hint="write the output somewhere else"
            )
        self.regular = before is None or stat.S_ISREG(before.st_mode)
        try:
            if self.regular:
                self._open_regular(source, resume=resume, overwrite=overwrite, keep=keep_failed)
            else:
                if resume:
                    raise UsageError(f"--resume reads OUT back: {path} is not a regular file")
                self._fd = _open(path, os.O_WRONLY | os.O_APPEND)
        except BaseException:
            self._release()
            raise

    # ---- opening ----

    def _open_regular(
        self, source: os.stat_result | None, *, resume: bool, overwrite: bool, keep: bool
    ) -> None:
        real = self.path.resolve()  # the lock and a rewrite act on the file, not a link to it
        self.real = real
        if not real.parent.is_dir():
            raise OutputFailed(f"cannot write {self.path}: no such folder {real.parent}")
        self._lock(real)
        with contextlib.suppress(FileNotFoundError):  # a rewrite a kill interrupted
            _part(real).unlink()
        self._created = not real.exists()
        self._fd = _open(real, os.O_RDWR | os.O_CREAT)
        now = os.fstat(self._fd)
        if source is not None and _same(source, now):  # swapped in since the check above
            raise UsageError(f"-o {self.path} is the input file", hint="write it elsewhere")
        if now.st_size > 0 and not (resume or overwrite):
            raise UsageError(
                f"{self.path} already holds results",
                hint="--resume continues it (retrying its failed items), --overwrite starts over",
            )
        if overwrite and not resume:
            os.ftruncate(self._fd, 0)
        elif now.st_size > 0:
            self._read_back(real, keep)
        self.size = os.lseek(self._fd, 0, os.SEEK_END)

    def _lock(self, real: Path) -> None:
        lock = real.with_name(real.name + ".lock")
        while True:
            fd = _open_lock(lock)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                os.close(fd)
                raise UsageError(
                    f"{self.path} is being written by another mmctl batch "
                    f"(pid {holder or 'unknown'}, {lock})",
                    hint="one run per output file; wait for it, or write elsewhere",
                ) from None
            # The holder removes the lock file as it lets go: make sure ours is
            # still the one at that name, or two runs could each hold "a" lock.
            if _same_file(os.fstat(fd), _stat(lock)):
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd, self._lock_path = fd, lock

    def _read_back(self, real: Path, keep: bool) -> None:
        """Read OUT's lines: which items are done; rewrite it without a torn
        tail and without the error lines to retry."""
        raw = _read_all(self._fd)
        cut = raw.rfind(b"\n") + 1
        answered: dict[str, bytes] = {}
        failed: dict[str, bytes] = {}
        for n, line in enumerate(raw[:cut].splitlines(), 1):
            try:
                doc = json.loads(line)
                key = id_key(doc["custom_id"])
                ok = doc["error"] is None
            except (ValueError, KeyError, TypeError, RecursionError):
                raise InputError(
                    f"--resume: {self.path}:{n} is not a batch output line",
                    hint="is -o the output of an earlier mmctl batch?",
                ) from None
            (answered if ok else failed).setdefault(key, line)
        failed = {k: v for k, v in failed.items() if k not in answered}
        kept = list(answered.values()) + (list(failed.values()) if keep else [])
        self.done = set(answered) | (set(failed) if keep else set())
        self.kept_failed = set(failed) if keep else set()
        self.retried = 0 if keep else len(failed)
        self.lines = len(kept)
        if len(kept) == raw[:cut].count(b"\n") and cut == len(raw):
            return  # nothing to cut or drop
        if cut < len(raw) and len(kept) == raw[:cut].count(b"\n"):
            os.ftruncate(self._fd, cut)  # only a torn tail (a killed run): cut it off
            return
        # Keep the lines' order: the answered first, in the order they came.
        order = {line: n for n, line in enumerate(raw[:cut].splitlines())}
        kept.sort(key=order.__getitem__)
        self._replace(real, b"".join(line + b"\n" for line in kept))

    def _replace(self, real: Path, data: bytes) -> None:
        """``data`` becomes OUT atomically: a sibling, synced, renamed over it."""
        part = _part(real)
        try:
            fd = _open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(part, real)
            _sync_dir(real.parent)
        except OSError as err:
            with contextlib.suppress(OSError):
                part.unlink()
            raise OutputFailed(
                f"--resume: cannot rewrite {self.path} without its failed lines: "
                f"{err.strerror or err}",
                hint="--keep-failed continues without rewriting it",
            ) from None
        os.close(self._fd)
        self._fd = _open(real, os.O_RDWR)

    # ---- writing ----

    def write(self, doc: dict[str, Any]) -> None:
        """Append ``doc`` as one line; :class:`OutputFailed` (the file cut back
        to its last complete line) when it cannot be written."""
        data = (json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        try:
            _write_all(self._fd, data)
        except OSError as err:
            if self.regular:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self.size)
            raise OutputFailed(
                f"cannot write {self.path}: {err.strerror or err} (after {self.lines} lines); "
                "the run stopped, nothing more was sent",
                hint="free some space, then --resume continues where it stopped",
            ) from None
        if self.regular:
            self.size += len(data)
        self.lines += 1
        self.done.add(id_key(doc["custom_id"]))

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)  # a device (/dev/null) cannot be synced
            if self._created and self.lines == 0 and self.regular:
                with contextlib.suppress(OSError):  # a run that wrote nothing leaves no file
                    if os.fstat(self._fd).st_size == 0:
                        self.real.unlink()
            os.close(self._fd)
            self._fd = -1
        self._release()

    def _release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            assert self._lock_path is not None
            with contextlib.suppress(OSError):
                self._lock_path.unlink()  # while still holding it (see _lock)
            os.close(self._lock_fd)
            self._lock_fd = -1


def _open_lock(lock: Path) -> int:
    """``OUT.lock``, opened without following a link: the run writes its PID
    into it, and a link planted there (to a file of the user's) must not make
    it write elsewhere. Only a regular file with no other name is ours."""
    try:
        fd = os.open(
            lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644
        )
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OutputFailed(
                f"{lock} is a symbolic link, not the lock file mmctl makes; refusing to follow it",
                hint="remove it (no mmctl batch made it), then run again",
            ) from None
        raise OutputFailed(f"cannot open {lock}: {err.strerror or err}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        what = "a hard link to another file" if stat.S_ISREG(info.st_mode) else "not a regular file"
        raise OutputFailed(
            f"{lock} is {what}, not the lock file mmctl makes; refusing to write into it",
            hint="remove it (no mmctl batch made it), then run again",
        )
    return fd


def _part(real: Path) -> Path:
    return real.with_name(real.name + ".resume-part")


def _open(path: Path, flags: int) -> int:
    try:
        return os.open(path, flags | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise OutputFailed(f"cannot open {path}: {err.strerror or err}") from None


def _stat(path: Path | None) -> os.stat_result | None:
    try:
        return os.stat(path) if path is not None else None
    except OSError:
        return None


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _same_file(a: os.stat_result, b: os.stat_result | None) -> bool:
    return b is not None and _same(a, b)


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n == 0:  # not seen on Linux; a loop without progress must not spin
            raise OSError(errno.EIO, "the write made no progress")
        view = view[n:]


def _sync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
