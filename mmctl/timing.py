"""Wall-clock phases that add up: a run is timed as consecutive laps.

Each :meth:`Timeline.lap` closes the phase that just ran, so the phases
cover the run without gaps or overlaps and always sum to
:attr:`Timeline.total_s` — the timing tables print no number that does not
add up. Work that runs *inside* a phase on another thread (preprocessing
overlapped with decoding) is reported apart, never as a row of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Timeline:
    """Consecutive named phases of one run, in seconds (laps of one name add up)."""

    def __init__(self, on_lap: Callable[[str], None] | None = None) -> None:
        self.started = self._last = time.perf_counter()
        self.phases: dict[str, float] = {}
        #: Told each phase's name as it ends (a terminal's status line follows the run).
        self.on_lap = on_lap

    def lap(self, name: str) -> float:
        """End the running phase as ``name``; returns its length."""
        now = time.perf_counter()
        spent = now - self._last
        self.phases[name] = self.phases.get(name, 0.0) + spent
        self._last = now
        if self.on_lap is not None:
            self.on_lap(name)
        return spent

    def rebook(self, seconds: float, of: str, name: str) -> None:
        """Book ``seconds`` of phase ``of`` as phase ``name``: work one step did
        for the next (the tokenizer loaded while the model files were read,
        for the ids the config does not carry) stays under its own name. The
        phases still sum to the total."""
        seconds = min(max(seconds, 0.0), self.phases.get(of, 0.0))
        if seconds:
            self.phases[of] -= seconds
            self.phases[name] = self.phases.get(name, 0.0) + seconds

    @property
    def total_s(self) -> float:
        """From the start to the last lap: exactly the sum of the phases."""
        return self._last - self.started

    def rows(self) -> dict[str, float]:
        """The phases plus ``total_s``, in the order they first ran."""
        return {**self.phases, "total_s": self.total_s}
