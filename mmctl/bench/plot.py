"""``mmctl bench --plot FILE.png``: latency percentiles per arm, against payload size and concurrency.

matplotlib (the ``plot`` extra), Agg backend: a PNG with no display.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from mmctl.bench.runner import BenchResult
from mmctl.errors import UsageError

PERCENTILES = (50, 90, 99)


def require() -> None:
    """Fail before the run, not after it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib", hint="pip install 'mmctl[plot]'") from None


def write(result: BenchResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_size, by_conc) = plt.subplots(1, 2, figsize=(12, 4.5))
    # E2E latency by (arm, payload bytes) and by (arm, concurrency), every level pooled.
    sizes: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    concs: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for level in result.levels:
        for r in level.records:
            if r.ok and r.latency_s is not None:
                sizes[r.arm][r.payload_bytes].append(r.latency_s * 1000)
                concs[r.arm][level.concurrency].append(r.latency_s * 1000)
    _lines(by_size, sizes, "payload (MB)", 1e-6)
    _lines(by_conc, concs, "max concurrency", 1.0)
    fig.suptitle("mmctl bench: end-to-end latency (p50 solid, p90 dashed, p99 dotted)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _lines(ax: Any, data: dict[str, dict[int, list[float]]], xlabel: str, scale: float) -> None:
    styles = {50: "-", 90: "--", 99: ":"}
    for n, (arm, points) in enumerate(sorted(data.items())):
        xs = sorted(points)
        colour = f"C{n}"
        for p in PERCENTILES:
            ys = [float(np.percentile(points[x], p)) for x in xs]
            label = arm if p == 50 else None
            ax.plot([x * scale for x in xs], ys, styles[p], color=colour, marker="o", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("E2E latency (ms)")
    if len({x for points in data.values() for x in points}) > 2:
        ax.set_xscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
