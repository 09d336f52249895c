"""When each request goes and which arm it measures.

Arms are interleaved request by request: the requests come in blocks of one
request per arm, all on the same work item, each block in a seeded random
order — A B, B A, A B … — so drift on a shared machine (another job, a warm
cache, thermal limits) lands on every arm alike, never on one block of them.
Arrivals follow ``vllm bench serve``: gaps drawn from a gamma distribution
with shape ``burstiness`` and mean ``1 / rate`` (burstiness 1: Poisson), or
all at once for rate ``inf``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Slot:
    """One request of the run: its position, arm and work item."""

    index: int
    arm: int
    item: int


def interleaved(num: int, arms: int, items: int, seed: int) -> list[Slot]:
    """``num`` requests: block ``b`` sends item ``b % items`` once per arm, in a seeded order."""
    rng = np.random.default_rng(seed)
    slots: list[Slot] = []
    block = 0
    while len(slots) < num:
        for arm in rng.permutation(arms):
            if len(slots) < num:
                slots.append(Slot(len(slots), int(arm), block % items))
        block += 1
    return slots


def arrival_gaps(num: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """Seconds to wait before each request (the first goes at once)."""
    if math.isinf(rate):
        return [0.0] * num
    rng = np.random.default_rng(seed + 1)
    theta = 1.0 / (rate * burstiness)
    gaps = rng.gamma(shape=burstiness, scale=theta, size=num)
    gaps[0] = 0.0
    return [float(g) for g in gaps]
