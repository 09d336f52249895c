"""Arms interleaved request by request in a seeded order; vLLM's arrival process."""

from __future__ import annotations

import math

import numpy as np

from mmctl.bench.schedule import arrival_gaps, interleaved


def test_blocks_hold_every_arm_once_on_one_item():
    slots = interleaved(num=60, arms=3, items=2, seed=7)
    assert [s.index for s in slots] == list(range(60))
    orders = set()
    for b in range(20):
        block = slots[3 * b : 3 * b + 3]
        assert sorted(s.arm for s in block) == [0, 1, 2]
        assert {s.item for s in block} == {b % 2}
        orders.add(tuple(s.arm for s in block))
    assert len(orders) > 1  # not one fixed order: A B C, then C A B, …
    assert interleaved(60, 3, 2, seed=7) == slots
    assert interleaved(60, 3, 2, seed=8) != slots


def test_a_partial_last_block():
    slots = interleaved(num=5, arms=2, items=1, seed=0)
    assert len(slots) == 5 and sum(s.arm == 0 for s in slots) in (2, 3)


def test_poisson_and_gamma_gaps():
    assert arrival_gaps(5, math.inf, 1.0, 0) == [0.0] * 5
    gaps = np.asarray(arrival_gaps(20_000, rate=50.0, burstiness=1.0, seed=0))
    assert gaps[0] == 0.0
    assert abs(gaps[1:].mean() - 1 / 50) < 0.001  # mean 1/rate
    assert abs(gaps[1:].std() / gaps[1:].mean() - 1) < 0.05  # exponential: CV 1
    bursty = np.asarray(arrival_gaps(20_000, rate=50.0, burstiness=0.25, seed=0))[1:]
    assert abs(bursty.mean() - 1 / 50) < 0.002 and bursty.std() / bursty.mean() > 1.8
