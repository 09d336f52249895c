"""A batch's helper processes die with it, even when it is killed with SIGKILL.

Nothing runs in a process killed with SIGKILL, so its children must notice
on their own:

* pool processes ask the kernel for a SIGKILL when their parent dies
  (Linux ``prctl(PR_SET_PDEATHSIG)``), then check that the parent did not
  die before they asked. When they are gone, multiprocessing's resource
  tracker sees the end of its pipe and removes the ``sem.mp-*`` semaphores
  it was keeping (it outlived a killed batch only because the pool kept
  that pipe open);
* a Ray instance mmctl started is watched by a small reaper process
  (:class:`RayReaper`), started before Ray: twice a second it notes the
  batch's new descendants (Ray's GCS, raylet, agents, workers; Ray renames
  its agents and workers, so their command lines cannot be matched later),
  and it is told the Ray session's folder once Ray runs. When its pipe from
  the batch ends without the word that the batch stopped Ray itself, it
  kills the descendants it noted and every process with a file open in the
  session's folder (each Ray process logs there; this catches one started
  after the last look). Ray's agents outlived their raylet for half a
  minute or more. Processes the caller had before the batch are never
  touched.

Semaphores that some other killed pool left behind (``sem.mp-*`` in
``/dev/shm``: no process maps them any more) are found by :func:`semaphores`
and removed by ``mmctl shm gc``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: ``PR_SET_PDEATHSIG`` from ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1
#: What the batch writes to the reaper when it stopped Ray itself.
_DONE = b"done\n"


def die_with_parent(parent: int) -> None:
    """Make this process die when ``parent`` (its parent) does (Linux; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the request above
        os._exit(0)


class RayReaper:
    """A process that kills what the batch started under it unless
    :meth:`close` says that the batch stopped it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "mmctl.run_batch.children", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the batch's group must not reach it
        )

    def session(self, folder: str) -> None:
        """Tell the reaper the Ray session's folder."""
        if self.proc is not None and self.proc.stdin is not None:
            with suppress(OSError):
                self.proc.stdin.write(f"session {folder}\n".encode())
                self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc is None:
            return
        stdin: IO[bytes] | None = self.proc.stdin
        with suppress(OSError):
            if stdin is not None:
                stdin.write(_DONE)
                stdin.close()
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.proc = None


#: How often the reaper notes the batch's descendants (s).
_LOOK_EVERY_S = 0.5


def descendants(root: int) -> dict[int, str]:
    """``root``'s descendants now: pid → its start time (``/proc/PID/stat``
    field 22, so that a reused pid is not mistaken for one of them)."""
    parent: dict[int, int] = {}
    started: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            parent[int(name)] = int(fields[1])
            started[int(name)] = fields[19].decode()
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        for child, ppid in parent.items():
            if ppid == pid and child not in found:
                found[child] = started[child]
                todo.append(child)
    return found


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _reap(batch: int) -> int:
    import select

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    me = os.getpid()
    before = set(descendants(batch))  # the caller's own children stay out of it
    seen: dict[int, str] = {}
    found: set[str] = set()  # session folders the processes' command lines name
    said = b""
    while True:
        ready, _, _ = select.select([sys.stdin.buffer], [], [], _LOOK_EVERY_S)
        if ready:
            chunk = os.read(sys.stdin.fileno(), 4096)
            if not chunk:
                break
            said += chunk
            continue
        for pid, start in descendants(batch).items():
            if pid != me and pid not in before and pid not in seen:
                seen[pid] = start
                found.update(_sessions_named_by(pid))
    lines = said.decode(errors="replace").splitlines()
    if _DONE.decode().strip() in lines:
        return 0
    for pid, start in seen.items():
        if _start_time(pid) == start:
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    # Told once Ray runs; before that (killed during Ray's start-up), the
    # folder its first processes' command lines name.
    sessions = {line.split(" ", 1)[1] for line in lines if line.startswith("session ")} | found
    for _ in range(3) if sessions else ():
        for folder in sessions:
            for pid in _using(folder):
                if pid != me and pid not in before:
                    with suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
        time.sleep(_LOOK_EVERY_S)
    return 0


#: A Ray session's folder in a command line (``--log_dir=/tmp/ray/session_…/logs``).
_SESSION_RE = re.compile(rb"(/[^\s=\x00]*/session_\d{4}-\d\d-\d\d_[\d_-]+)")


def _sessions_named_by(pid: int) -> set[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read()
    except OSError:
        return set()
    return {m.decode(errors="replace") for m in _SESSION_RE.findall(text)}


def _using(folder: str) -> list[int]:
    """Processes with ``folder`` in their command line or a file open in it."""
    needle = folder.rstrip("/") + "/"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with suppress(OSError):
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if needle.encode() in f.read():
                    found.append(int(name))
                    continue
            for fd in os.listdir(f"/proc/{name}/fd"):
                with suppress(OSError):
                    if os.readlink(f"/proc/{name}/fd/{fd}").startswith(needle):
                        found.append(int(name))
                        break
    return found


if __name__ == "__main__":
    sys.exit(_reap(int(sys.argv[1])))


# ---- multiprocessing's semaphores left in /dev/shm -------------------------------

#: How multiprocessing names its semaphores (``/dev/shm/sem.mp-…`` on Linux).
SEM_PREFIX = "sem.mp-"


@dataclass(frozen=True)
class Semaphore:
    name: str
    #: Some process maps it (a semaphore in use is always mapped by its creator).
    in_use: bool


def semaphores(folder: Path) -> list[Semaphore]:
    """This user's ``sem.mp-*`` files in ``folder`` and whether a process maps
    them. A pool killed before its resource tracker could clean up leaves
    them; mmctl's own pool no longer does (see above). When a process of this
    user cannot be read, every semaphore counts as in use."""
    try:
        found = [
            e.name
            for e in os.scandir(folder)
            if e.name.startswith(SEM_PREFIX) and e.stat(follow_symlinks=False).st_uid == os.getuid()
        ]
    except OSError:
        return []
    if not found:
        return []
    mapped = _mapped(folder)
    sems = []
    for name in sorted(found):
        try:
            inode = os.stat(folder / name, follow_symlinks=False).st_ino
        except OSError:
            continue  # removed meanwhile
        sems.append(Semaphore(name, mapped is None or inode in mapped))
    return sems


def remove_unused_semaphores(folder: Path) -> list[str]:
    removed = []
    for sem in semaphores(folder):
        if not sem.in_use:
            with suppress(FileNotFoundError):
                (folder / sem.name).unlink()
                removed.append(sem.name)
    return removed


def _mapped(folder: Path) -> set[int] | None:
    """Inodes of files in ``folder``'s file system that some process maps
    (``None``: unknown). By inode, not by name: glibc's ``sem_open`` maps a
    temporary file and links it to the semaphore's name after, so a live
    semaphore shows in ``/proc/PID/maps`` as ``/dev/shm/sem.XXXXXX (deleted)``;
    read by name, every live pool's semaphores looked unused, and ``shm gc``
    removed them under the running pool."""
    try:
        dev = os.stat(folder).st_dev
    except OSError:
        return None
    device = f"{os.major(dev):02x}:{os.minor(dev):02x}".encode()
    inodes: set[int] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                maps = f.read()
        except FileNotFoundError:
            continue  # it exited
        except OSError:
            if pid == "1":
                continue  # an init that hides its maps (a sandbox's) runs no batch pool
            try:
                mine = os.stat(f"/proc/{pid}").st_uid == os.getuid()
            except OSError:
                continue
            if mine:
                return None
            continue
        for line in maps.splitlines():
            fields = line.split(None, 5)
            if len(fields) >= 5 and fields[3] == device:
                inodes.add(int(fields[4]))
    return inodes
