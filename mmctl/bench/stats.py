"""Summary statistics with ``vllm bench serve``'s names, and ratios with their uncertainty."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Resamples of the bootstrap interval (2,000: the interval's ends move < 1% between seeds).
BOOTSTRAP = 2000


def percentile_word(p: float) -> str:
    """vLLM's key spelling: 99 → ``"99"``, 99.9 → ``"99.9"``."""
    return str(int(p)) if int(p) == p else str(p)


def summary(name: str, seconds: Sequence[float], percentiles: Sequence[float]) -> dict[str, float]:
    """``mean_<name>_ms``, ``median_…``, ``std_…``, ``p<P>_…`` as vLLM computes them
    (numpy, linear interpolation; zeros when there are no values)."""
    values = np.asarray(seconds, dtype=np.float64) * 1000 if len(seconds) else np.zeros(1)
    doc = {
        f"mean_{name}_ms": float(values.mean()),
        f"median_{name}_ms": float(np.median(values)),
        f"std_{name}_ms": float(values.std()),
    }
    for p in percentiles:
        doc[f"p{percentile_word(p)}_{name}_ms"] = float(np.percentile(values, p))
    return doc


def ratio_of_medians(
    num: Sequence[float], den: Sequence[float], seed: int = 0, level: float = 0.95
) -> dict[str, Any] | None:
    """median(num) / median(den) with a percentile-bootstrap interval: each
    sample resampled with replacement, :data:`BOOTSTRAP` times."""
    if not len(num) or not len(den):
        return None
    a, b = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    point = float(np.median(a) / np.median(b))
    rng = np.random.default_rng(seed)
    ra = np.median(a[rng.integers(0, len(a), (BOOTSTRAP, len(a)))], axis=1)
    rb = np.median(b[rng.integers(0, len(b), (BOOTSTRAP, len(b)))], axis=1)
    ratios = ra / rb
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return {
        "ratio": point,
        "ci_low": float(low),
        "ci_high": float(high),
        "level": level,
        "n": [len(a), len(b)],
    }
