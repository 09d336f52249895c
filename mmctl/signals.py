"""Ctrl-C and SIGTERM: a handler of ours inside an event loop, and a bound on
how long a stopped command may take to exit.

The command line turns SIGINT/SIGTERM into an exception (``cli/app.py``);
long asyncio runs (``bench``, ``batch``) want a gentler stop — finish or
cancel what is in flight, keep what is done. Signals reach only the main
thread, so elsewhere (a library caller's worker thread) nothing is installed.

A stop must never hang: :func:`watch_stops` arms a watchdog at the first
stop signal — seen by a thread of its own through the interpreter's wakeup
fd, so it fires even while the main thread is stuck in C code — which, if the
process is still alive after the grace period, says so, removes this
process's own ``/dev/shm`` files and exits 130.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_signals(
    loop: asyncio.AbstractEventLoop, handler: Callable[[signal.Signals], None]
) -> Iterator[None]:
    """``handler(sig)`` on SIGINT/SIGTERM while the block runs; the previous
    handlers afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, handler, sig)
    try:
        yield
    finally:
        for sig, before in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, before)


_armed = threading.Event()
_watching = threading.Event()


def watch_stops() -> None:
    """Arm the exit watchdog at the first SIGINT/SIGTERM (main thread only;
    once per process: in-process callers such as tests call ``main`` often)."""
    if threading.current_thread() is not threading.main_thread() or _watching.is_set():
        return
    _watching.set()
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter
        os.close(read)
        os.close(write)
        return
    wanted = {int(sig) for sig in STOP_SIGNALS}

    def listen() -> None:
        while True:
            try:
                data = os.read(read, 16)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum in wanted:
                    arm(signal.Signals(signum).name)

    threading.Thread(target=listen, name="mmctl-stop-listener", daemon=True).start()


_hooked = threading.Event()


def reraise_ignored_stops() -> None:
    """Deliver again a stop our handler raised where Python cannot propagate it.

    The CLI's handler raises :class:`~mmctl.errors.Interrupted`; when the signal
    lands inside a weakref callback or a ``__del__`` (the import system's module
    locks have one), Python prints it as "Exception ignored … Traceback" and the
    command carries on. This hook has the signal tripped again a moment later, so the
    handler runs once that callback has returned and the stop propagates like
    any other (the watchdog, armed by the first delivery, bounds it either way).
    Other unraisable exceptions go to the hook that was there before."""
    if _hooked.is_set():
        return
    _hooked.set()
    from mmctl.errors import Interrupted

    previous = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        stop = unraisable.exc_value
        if isinstance(stop, Interrupted) and stop.signal_name in signal.Signals.__members__:
            # From another thread, a moment later: tripped from here, the
            # handler would run inside this hook (Python code too), and its
            # exception would be ignored again.
            again = threading.Timer(
                0.01, _thread.interrupt_main, args=(signal.Signals[stop.signal_name],)
            )
            again.daemon = True
            again.start()
            return
        previous(unraisable)

    sys.unraisablehook = hook


def arm(name: str) -> None:
    """Start the exit watchdog once (later calls do nothing)."""
    if _armed.is_set():
        return
    _armed.set()
    from mmctl import settings

    grace = settings.stop_grace_s()

    def watch() -> None:
        time.sleep(grace)
        with suppress(OSError):
            sys.stderr.write(
                f"Error: interrupted by {name}; clean-up did not finish within {grace:g} s\n"
            )
            sys.stderr.flush()
        _remove_own_shm_files()
        os._exit(130)

    threading.Thread(target=watch, name="mmctl-stop-watchdog", daemon=True).start()


def _remove_own_shm_files() -> None:
    from mmctl.transport.shm import own_files, shm_dir

    folder = shm_dir()
    for name in own_files(folder):
        with suppress(OSError):
            os.unlink(folder / name)
