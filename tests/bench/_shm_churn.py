"""Another process's files coming and going in /dev/shm, as on a shared CI machine.

``_shm_churn.py FOLDER PID...`` creates and removes, until SIGTERM, files an
mmctl client and a multiprocessing pool would make there: ``mmctl-*`` files
named with its own PID and with each PID given (a process in another PID
namespace may carry the same number as the run under test), half of them
held with a shared ``flock`` as a live client holds its files, and
``sem.mp-*`` semaphores. Each is removed again after a few tenths of a
second; on SIGTERM every file it still has is removed and it prints how
many it made.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import sys
import time
from pathlib import Path


def main() -> None:
    folder = Path(sys.argv[1])
    pids = [os.getpid(), *map(int, sys.argv[2:])]
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    rng = random.Random(os.getpid())
    live: list[tuple[float, Path, int]] = []  # (remove at, path, fd or -1)
    made = 0
    print("ready", flush=True)
    while not stop:
        now = time.monotonic()
        for entry in [e for e in live if e[0] <= now]:
            live.remove(entry)
            _remove(entry[1], entry[2])
        kind = rng.random()
        if kind < 0.8:
            name = f"mmctl-{rng.choice(pids)}-{made}-{rng.getrandbits(32):08x}"
        else:
            name = f"sem.mp-{rng.getrandbits(40):010x}"
        path = folder / name
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"\0" * 64)
        if rng.random() < 0.5:
            fcntl.flock(fd, fcntl.LOCK_SH)  # a live client's file: never swept
        else:
            os.close(fd)  # a dead client's file: a sweep may take it first
            fd = -1
        made += 1
        live.append((now + rng.uniform(0.05, 0.6), path, fd))
        time.sleep(0.01)
    for _, path, fd in live:
        _remove(path, fd)
    print(f"made {made}", flush=True)


def _remove(path: Path, fd: int) -> None:
    path.unlink(missing_ok=True)
    if fd >= 0:
        os.close(fd)


if __name__ == "__main__":
    main()
