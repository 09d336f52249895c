"""The batch progress bar's rate and time left (mmctl/cli/_pace.py), on a clock the test moves."""

from __future__ import annotations

from mmctl.cli._pace import WINDOW_S, Pace


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_items_the_output_held_already_are_not_a_rate():
    clock = Clock()
    pace = Pace(100, clock)
    for _ in range(60):  # a resumed run: 60 lines answered before, counted at once
        pace.skip()
    clock.now += 0.5
    assert pace.rate() == 0.0
    assert pace.text() == "0.0/s, time left unknown"
    for _ in range(4):
        clock.now += 1.0
        pace.done()
    assert pace.rate() == 4 / 4.5
    assert pace.left_s() == 36 / (4 / 4.5)  # 100 - 60 skipped - 4 finished


def test_the_rate_falls_while_nothing_finishes():
    clock = Clock()
    pace = Pace(50, clock)
    for _ in range(20):
        clock.now += 0.5
        pace.done()
    busy = pace.rate()
    clock.now += 20  # a stall: the estimate must not stay where it was
    assert pace.rate() < busy
    clock.now += WINDOW_S  # nothing in the window any more
    assert pace.rate() == 0.0
    assert pace.left_s() is None


def test_done_is_zero_left():
    clock = Clock()
    pace = Pace(2, clock)
    clock.now += 2
    pace.done()
    pace.skip()
    assert pace.left_s() == 0.0
    assert pace.text() == "0.5/s, 0:00:00 left"
