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
  (:func:`watch_ray`): it waits on a pipe from the batch; at the pipe's end
  without the word that the batch shut Ray down itself, it kills the
  processes of that Ray session (its agents outlive their raylet for half a
  minute or more).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import suppress
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
    """A process that kills the Ray session ``session_dir`` names unless
    :meth:`close` says that the batch stopped it."""

    def __init__(self, session_dir: str) -> None:
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "mmctl.run_batch.children", session_dir],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the batch's group must not reach it
        )

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


def session_pids(session_dir: str) -> list[int]:
    """The processes whose command line names ``session_dir`` (Linux ``/proc``)."""
    needle = session_dir.encode()
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        with suppress(OSError), open(f"/proc/{name}/cmdline", "rb") as f:
            if needle in f.read():
                found.append(int(name))
    return found


def _reap(session_dir: str) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    said = b""
    with suppress(OSError):
        while chunk := sys.stdin.buffer.read(64):
            said += chunk
    if said == _DONE:
        return 0
    for pid in session_pids(session_dir):
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(_reap(sys.argv[1]))
