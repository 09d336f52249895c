"""Ctrl-C and SIGTERM inside an event loop: a handler of ours while a block runs.

The command line turns SIGINT/SIGTERM into an exception (``cli/app.py``);
long asyncio runs (``bench``, ``batch``) want a gentler stop — finish or
cancel what is in flight, keep what is done. Signals reach only the main
thread, so elsewhere (a library caller's worker thread) nothing is installed.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
