"""Tensors through ``/dev/shm`` (ARCHITECTURE §4): the producer side and the worker's reader.

One module for both ends so they cannot drift: ``mmctl send`` writes
segments with :class:`ShmArena`, the stub worker reads them with
:func:`read_handle`, which mirrors the real servicer (``smg_grpc_servicer.mm_shm``):
name checks, ``O_NOFOLLOW``, regular files only, exact ``nbytes`` at
``offset``, and unlink right after a successful open.

Producer rules: one file per tensor, created with ``O_CREAT|O_EXCL`` and mode
0600, named ``mmctl-<pid>-<seq>-<random>``, preallocated (so a full
``/dev/shm`` fails at creation, not with SIGBUS while writing) and written
once through a shared mapping. Every file the worker did not consume is
removed when the arena closes, whatever the reason (RPC error, deadline,
Ctrl-C); files of dead mmctl processes are swept by :func:`sweep_dead` and
``mmctl shm gc``.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmctl.errors import InputError

PREFIX = "mmctl-"
NAME_RE = re.compile(r"^mmctl-(\d+)-\d+-[0-9a-f]+$")


def shm_dir() -> Path:
    """``/dev/shm`` (``$MMCTL_SHM_DIR`` overrides it, for tests of broken setups)."""
    from mmctl import settings

    return settings.shm_dir()


class ShmUnavailable(InputError):
    """``/dev/shm`` is missing, full or not writable."""


class ShmReadError(ValueError):
    """The worker side could not read a handle (the message names why)."""


# ---- the worker's reader ---------------------------------------------------


def validated_name(name: str) -> str:
    """The real worker's name rule: strip one leading ``/``-run; refuse traversal."""
    name = name.lstrip("/")
    if not name or "/" in name or name in (".", "..") or "\x00" in name:
        raise ShmReadError(f"Invalid TensorData.shm name: {name!r}")
    return name


def read_handle(name: str, offset: int, nbytes: int, *, unlink: bool = True) -> bytes:
    """``nbytes`` at ``offset`` of ``/dev/shm/<name>``; the file is unlinked once opened."""
    clean = validated_name(name)
    path = shm_dir() / clean
    fd = None
    opened = False
    try:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise ShmReadError(f"TensorData.shm is a symlink: {name!r}") from None
            raise ShmReadError(f"TensorData.shm {name!r}: {err.strerror}") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ShmReadError(f"TensorData.shm is not a regular file: {name!r}")
        opened = True
        # Never allocate more than the file holds: a client asking for a
        # terabyte must get the short-read error, not exhaust our memory.
        available = max(0, info.st_size - int(offset))
        raw = os.pread(fd, min(int(nbytes), available), int(offset)) if available else b""
    finally:
        if fd is not None:
            os.close(fd)
        if opened and unlink:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    if len(raw) != int(nbytes):
        raise ShmReadError(
            f"TensorData.shm byte length mismatch for name={name!r}: "
            f"expected {int(nbytes)}, got {len(raw)}"
        )
    return raw


def namespace_id() -> str:
    """``<boot_id>:<st_dev of /dev/shm>``: equal on both sides means a shared ``/dev/shm``."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        return f"{boot}:{os.stat(shm_dir()).st_dev}"
    except OSError:
        return ""


# ---- the producer ----------------------------------------------------------


@dataclass
class Segment:
    """One shared-memory file holding one tensor."""

    name: str
    path: Path
    nbytes: int
    _fd: int
    _map: mmap.mmap | None

    def array(self, dtype: np.dtype | type, shape: tuple[int, ...]) -> np.ndarray:
        """A writable numpy view of the whole file (write the tensor straight into it)."""
        if self._map is None:  # zero-length tensors have no mapping
            return np.empty(shape, dtype=dtype)
        return np.ndarray(shape, dtype=dtype, buffer=self._map)

    def close(self) -> None:
        if self._map is not None:
            with contextlib.suppress(BufferError):  # a view still exists; freed with it
                self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ShmArena:
    """The shm files of one request; everything not consumed is removed on close."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or shm_dir()
        self.segments: list[Segment] = []
        self._seq = 0

    def __enter__(self) -> ShmArena:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self, nbytes: int, mapped: bool = True) -> Segment:
        """A new file of ``nbytes`` (preallocated); ``mapped``: with a writable mapping."""
        if not self.folder.is_dir():
            raise ShmUnavailable(f"{self.folder} does not exist; shared memory is unavailable here")
        self._seq += 1
        name = f"{PREFIX}{os.getpid()}-{self._seq}-{secrets.token_hex(4)}"
        path = self.folder / name
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as err:
            raise ShmUnavailable(f"cannot create {path}: {err.strerror}") from None
        segment = Segment(name, path, nbytes, fd, None)
        self.segments.append(segment)  # tracked before anything else can fail
        try:
            if nbytes:
                os.posix_fallocate(fd, 0, nbytes)
            if nbytes and mapped:
                segment._map = mmap.mmap(
                    fd, nbytes, mmap.MAP_SHARED, mmap.PROT_WRITE | mmap.PROT_READ
                )
        except OSError as err:
            self._remove(segment)
            reason = "full" if err.errno == errno.ENOSPC else err.strerror
            raise ShmUnavailable(
                f"cannot allocate {nbytes} bytes in {self.folder}: {reason}"
            ) from None
        return segment

    def put(self, array: np.ndarray) -> Segment:
        """A segment holding ``array``'s bytes: one copy, by ``pwrite``.

        ``pwrite`` into tmpfs copies while the kernel allocates the pages;
        writing through a fresh mapping instead takes a page fault per 4 KiB
        and measured twice as slow (bench/handoff.py).
        """
        data = np.ascontiguousarray(array)
        segment = self.create(data.nbytes, mapped=False)
        view = data.data.cast("B")
        done = 0
        try:
            while done < len(view):
                done += os.pwrite(segment._fd, view[done:], done)
        except OSError as err:
            self._remove(segment)
            raise ShmUnavailable(f"cannot write {segment.path}: {err.strerror}") from None
        segment.close()
        return segment

    def discard(self, segment: Segment) -> None:
        """Remove a segment that will not be sent (it was never the worker's)."""
        self.segments.remove(segment)
        self._remove(segment)

    def pending(self) -> list[Segment]:
        """Segments whose file still exists (not consumed by a worker)."""
        return [s for s in self.segments if s.path.exists()]

    def close(self) -> list[str]:
        """Remove every file the worker did not consume; returns their names."""
        removed = []
        for segment in self.segments:
            if self._remove(segment):
                removed.append(segment.name)
        self.segments.clear()
        return removed

    @staticmethod
    def _remove(segment: Segment) -> bool:
        segment.close()
        try:
            segment.path.unlink()
            return True
        except FileNotFoundError:
            return False


# ---- housekeeping ----------------------------------------------------------


@dataclass(frozen=True)
class Leftover:
    name: str
    pid: int
    alive: bool
    nbytes: int
    mtime: float


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftovers(folder: Path | None = None) -> Iterator[Leftover]:
    """mmctl's files in ``/dev/shm``, with whether their producer still runs."""
    folder = folder or shm_dir()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        match = NAME_RE.match(entry.name)
        if not match:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        pid = int(match.group(1))
        yield Leftover(entry.name, pid, _alive(pid), info.st_size, info.st_mtime)


def sweep_dead(folder: Path | None = None) -> list[str]:
    """Remove files left by mmctl processes that no longer exist."""
    folder = folder or shm_dir()
    removed = []
    for item in leftovers(folder):
        if item.alive:
            continue
        try:
            (folder / item.name).unlink()
            removed.append(item.name)
        except OSError:
            pass
    return removed
