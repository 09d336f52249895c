"""Tensors through ``/dev/shm`` (ARCHITECTURE §4): the producer side and the worker's reader.

One module for both ends so they cannot drift: ``mmctl send`` writes
segments with :class:`ShmArena`, the stub worker reads them with
:func:`read_handle`, which mirrors the real servicer (``smg_grpc_servicer.mm_shm``):
name checks, ``O_NOFOLLOW``, exact ``nbytes`` at ``offset``, unlink after
reading — and is stricter where the real one is unsafe (regular files of
allowed owners only, never blocks on a FIFO, unlinks only what it read).

Producer rules: one file per tensor, created with ``O_CREAT|O_EXCL`` and mode
0600, named ``mmctl-<pid>-<seq>-<random>``, preallocated (so a full
``/dev/shm`` fails at creation, not with SIGBUS while writing) and written
once. Every file the worker did not consume is removed when the arena
closes, whatever the reason (RPC error, deadline, Ctrl-C).

This process's own files are the names its arenas created and have not
removed yet (:func:`own_files`): a count of "mmctl files in ``/dev/shm``"
must not include another process's, which come and go on a shared machine,
and a name's PID says nothing across PID namespaces.

Ownership (ARCHITECTURE §4): the producer holds a shared ``flock`` on each
file from its creation until the arena closes, i.e. for as long as a worker
may read it. A file is a leftover only if an exclusive lock on it can be
taken — never because its name's PID is "not running here": PIDs mean
nothing across PID namespaces (containers sharing ``/dev/shm``), locks live
on the inode and hold across them. :func:`sweep_dead` and ``mmctl shm gc``
remove only what they could lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import re
import secrets
import stat
import threading
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


#: Names this process created and has not removed (whether or not a worker
#: consumed the file meanwhile). A forked child starts with none of them.
_made: set[str] = set()
_made_lock = threading.Lock()


def _forget_in_child() -> None:
    global _made_lock
    _made.clear()
    _made_lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_forget_in_child)


def own_files(folder: Path | None = None) -> list[str]:
    """This process's mmctl files still in ``folder``: created here, not yet
    removed and not consumed by a worker. Another process's files never count,
    whatever PID their names carry."""
    folder = folder or shm_dir()
    with _made_lock:
        names = sorted(_made)
    return [n for n in names if os.path.lexists(folder / n)]


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


def read_handle(
    name: str, offset: int, nbytes: int, *, owners: frozenset[int] | None = None
) -> bytes:
    """``nbytes`` at ``offset`` of ``/dev/shm/<name>``, unlinked once read.

    Two rules on top of the real reader's (SECURITY.md says why the real
    worker lacks them): with ``owners``, only files owned by one of those uids
    are read — the stub may run as a more privileged user than its clients —
    and a file is unlinked only after a successful read, so a request cannot
    delete what it could not read.
    """
    clean = validated_name(name)
    path = shm_dir() / clean
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ShmReadError(f"TensorData.shm is a symlink: {name!r}") from None
        raise ShmReadError(f"TensorData.shm {name!r}: {err.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ShmReadError(f"TensorData.shm is not a regular file: {name!r}")
        if owners is not None and info.st_uid not in owners:
            raise ShmReadError(
                f"TensorData.shm {name!r} is owned by uid {info.st_uid}; this worker reads "
                f"only files of uid {', '.join(map(str, sorted(owners)))}"
            )
        # Never allocate more than the file holds: a client asking for a
        # terabyte must get the short-read error, not exhaust our memory.
        available = max(0, info.st_size - int(offset))
        raw = os.pread(fd, min(int(nbytes), available), int(offset)) if available else b""
    finally:
        os.close(fd)
    if len(raw) != int(nbytes):
        raise ShmReadError(
            f"TensorData.shm byte length mismatch for name={name!r}: "
            f"expected {int(nbytes)}, got {len(raw)}"
        )
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
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

    def unmap(self) -> None:
        """Drop the mapping; the file stays open and locked (it is still ours)."""
        if self._map is not None:
            with contextlib.suppress(BufferError):  # a view still exists; freed with it
                self._map.close()
            self._map = None

    def close(self) -> None:
        """Drop the mapping and the descriptor, and with it the ownership lock."""
        self.unmap()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ShmArena:
    """The shm files of one request; everything not consumed is removed on close.

    Thread-safe, and closing is final: a request cancelled while a helper
    thread still builds it closes its arena at once, and a file that thread
    creates afterwards is refused instead of leaking.
    """

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or shm_dir()
        self.segments: list[Segment] = []
        self._seq = 0
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> ShmArena:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self, nbytes: int, mapped: bool = True) -> Segment:
        """A new file of ``nbytes`` (preallocated); ``mapped``: with a writable mapping."""
        if not self.folder.is_dir():
            raise ShmUnavailable(f"{self.folder} does not exist; shared memory is unavailable here")
        with self._lock:
            if self._closed:
                raise ShmUnavailable("the request's shared-memory files were already released")
            name, path, fd = self._create_owned()
            segment = Segment(name, path, nbytes, fd, None)
            self.segments.append(segment)  # tracked before anything else can fail
            with _made_lock:
                _made.add(name)
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

    def _create_owned(self) -> tuple[str, Path, int]:
        """A new empty file, already locked as ours.

        Between ``open`` and ``flock`` a sweeper may lock the new file and
        remove it; then our shared lock fails or lands on an unlinked inode
        (``st_nlink == 0``), and we try a fresh name.
        """
        for _ in range(8):
            self._seq += 1
            name = f"{PREFIX}{os.getpid()}-{self._seq}-{secrets.token_hex(4)}"
            path = self.folder / name
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(path, flags, 0o600)
            except OSError as err:
                raise ShmUnavailable(f"cannot create {path}: {err.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                if os.fstat(fd).st_nlink > 0:
                    return name, path, fd
            except BlockingIOError:
                pass
            os.close(fd)
        raise ShmUnavailable(f"cannot create a file in {self.folder}: removed while created")

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
        return segment

    def discard(self, segment: Segment) -> None:
        """Remove a segment that will not be sent (it was never the worker's)."""
        with self._lock:
            if segment in self.segments:
                self.segments.remove(segment)
        self._remove(segment)

    def pending(self) -> list[Segment]:
        """Segments whose file still exists (not consumed by a worker)."""
        return [s for s in self.segments if s.path.exists()]

    def close(self) -> list[str]:
        """Remove every file the worker did not consume; returns their names."""
        with self._lock:
            self._closed = True
            segments, self.segments = self.segments, []
        return [s.name for s in segments if self._remove(s)]

    @staticmethod
    def _remove(segment: Segment) -> bool:
        # Unlink while still holding the lock: a sweeper never sees the
        # file unlocked before it is gone.
        try:
            segment.path.unlink()
            removed = True
        except FileNotFoundError:
            removed = False  # the worker consumed it
        finally:
            segment.close()
        with _made_lock:  # a file that could not be removed stays counted as ours
            _made.discard(segment.name)
        return removed


# ---- housekeeping ----------------------------------------------------------


@dataclass(frozen=True)
class Leftover:
    name: str
    pid: int  # the producer's PID in *its* namespace: shown, never trusted
    alive: bool  # a live process holds the file's ownership lock
    nbytes: int
    mtime: float


@contextlib.contextmanager
def _claimed(path: Path) -> Iterator[bool]:
    """Whether no live mmctl process owns ``path``; if so, held exclusively
    for the duration (so its owner cannot appear in between).

    A file we cannot even open (another user's, a FIFO, gone) is never ours
    to judge: it counts as owned.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        yield False
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            yield False
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def leftovers(folder: Path | None = None) -> Iterator[Leftover]:
    """mmctl's files in ``/dev/shm``, with whether a live process still owns them."""
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
        with _claimed(folder / entry.name) as free:
            alive = not free
        yield Leftover(entry.name, int(match.group(1)), alive, info.st_size, info.st_mtime)


def sweep_dead(folder: Path | None = None) -> list[str]:
    """Remove mmctl files no live process owns (whatever PID namespace it runs in)."""
    folder = folder or shm_dir()
    removed = []
    for item in leftovers(folder):
        if item.alive:
            continue
        path = folder / item.name
        with _claimed(path) as free:
            if not free:  # claimed since it was listed
                continue
            try:
                path.unlink()
                removed.append(item.name)
            except OSError:
                pass
    return removed
