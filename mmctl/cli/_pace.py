"""Rate and time left for a progress bar: items finished by this run, over a recent window.

An item the output held already (``--resume``) costs no time, so it counts
toward done but not toward the rate (it made "3239.7/s" when a resumed run
began). The rate is the items finished in the last :data:`WINDOW_S`
seconds over that window (or over the time since the work began, when
shorter), read whenever the bar redraws — so it falls while nothing
finishes instead of freezing at its last value, and the time left is
``left / rate`` (none while nothing has finished).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

#: The window the rate is measured over (s).
WINDOW_S = 30.0


class Pace:
    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.total = total
        self.began = clock()
        self.finished = 0
        self.skipped = 0
        self.recent: deque[float] = deque()

    def skip(self) -> None:
        self.skipped += 1

    def done(self) -> None:
        self.finished += 1
        self.recent.append(self.clock())

    def rate(self) -> float:
        """Items a second, this run's, over the recent window."""
        now = self.clock()
        while self.recent and self.recent[0] < now - WINDOW_S:
            self.recent.popleft()
        span = min(WINDOW_S, now - self.began)
        return len(self.recent) / span if span > 0 else 0.0

    def left_s(self) -> float | None:
        rate = self.rate()
        left = self.total - self.finished - self.skipped
        if left <= 0:
            return 0.0
        return left / rate if rate > 0 else None

    def text(self) -> str:
        """``"2.4/s, 0:01:10 left"`` (``"…, time left unknown"`` before any finished)."""
        left = self.left_s()
        when = "time left unknown" if left is None else f"{_clock(left)} left"
        return f"{self.rate():.1f}/s, {when}"


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
