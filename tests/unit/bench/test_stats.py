"""Summary statistics with vLLM's names; the bootstrap interval of a ratio of medians."""

from __future__ import annotations

import numpy as np
import pytest

from mmctl.bench.stats import percentile_word, ratio_of_medians, summary


def test_summary_uses_vllm_names_and_numpy_percentiles():
    values = [0.010, 0.020, 0.030, 0.100]
    doc = summary("ttft", values, [50, 99, 99.9])
    assert set(doc) == {
        "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p50_ttft_ms", "p99_ttft_ms",
        "p99.9_ttft_ms",
    }  # fmt: skip
    ms = np.asarray(values) * 1000
    assert doc["mean_ttft_ms"] == pytest.approx(ms.mean())
    assert doc["median_ttft_ms"] == pytest.approx(25.0)
    assert doc["p99_ttft_ms"] == pytest.approx(np.percentile(ms, 99))
    assert summary("itl", [], [99])["p99_itl_ms"] == 0.0  # vLLM's `values or 0`


def test_percentile_words():
    assert [percentile_word(p) for p in (50, 99.0, 99.9)] == ["50", "99", "99.9"]


def test_ratio_interval_holds_the_point_and_separates_clear_differences():
    rng = np.random.default_rng(1)
    fast = rng.normal(0.5, 0.02, 40)
    slow = rng.normal(1.0, 0.04, 40)
    r = ratio_of_medians(fast, slow, seed=3)
    assert r is not None
    assert r["ci_low"] <= r["ratio"] <= r["ci_high"] < 0.6 and r["n"] == [40, 40]
    same = ratio_of_medians(slow, rng.permutation(slow), seed=3)
    assert same is not None and same["ci_low"] <= 1.0 <= same["ci_high"]
    assert ratio_of_medians([], slow) is None
    # Seeded: the same interval every time.
    assert ratio_of_medians(fast, slow, seed=3) == r
