"""``mmctl bench --plot FILE.png``: latency percentiles per arm, against payload size and concurrency.

matplotlib (the ``plot`` extra), Agg backend: a PNG with no display.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
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
    import matplotlib.pyplot as plt

    fig = figure(result)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def figure(result: BenchResult) -> Any:
    """The two panels. Ticks are the values asked for: the concurrency levels
    as plain numbers (1, 4, 16 — not 2^0, 2^2, 2^4) and each payload by its
    item's name (``1MB`` as given to ``--sizes``, not the 0.995 MB it holds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_size, by_conc) = plt.subplots(1, 2, figsize=(12, 4.5))
    names: dict[int, set[str]] = defaultdict(set)  # payload bytes → the items that have it
    # E2E latency (ms) by arm → payload bytes → concurrency.
    data: dict[str, dict[int, dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for level in result.levels:
        for r in level.records:
            if r.ok and r.latency_s is not None:
                data[r.arm][r.payload_bytes][level.concurrency].append(r.latency_s * 1000)
                names[r.payload_bytes].add(r.item)
    levels = [lvl.concurrency for lvl in result.levels]
    styles = {50: "-", 90: "--", 99: ":"}
    markers = "osD^v<>ph"
    for n, (arm, sizes) in enumerate(sorted(data.items())):
        colour = f"C{n}"
        # Against payload size, at the lowest concurrency (no queueing).
        low = min(levels)
        xs = sorted(s for s in sizes if low in sizes[s])
        for p in PERCENTILES:
            ys = [float(np.percentile(sizes[x][low], p)) for x in xs]
            by_size.plot([x / 1e6 for x in xs], ys, styles[p], color=colour, marker="o",
                         label=arm if p == 50 else None)  # fmt: skip
        # Against concurrency, one line per payload size.
        for k, size in enumerate(sorted(sizes)):
            cs = sorted(sizes[size])
            for p in (50, 99):
                ys = [float(np.percentile(sizes[size][c], p)) for c in cs]
                label = f"{arm} {_name(names, size)}" if p == 50 else None
                by_conc.plot(cs, ys, styles[p], color=colour, marker=markers[k % len(markers)],
                             label=label)  # fmt: skip
    by_size.set_xlabel(f"payload (MB), max concurrency {min(levels)}")
    by_conc.set_xlabel("max concurrency (p50 solid, p99 dotted)")
    for ax in (by_size, by_conc):
        ax.set_ylabel("E2E latency (ms)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    if len({s for sizes in data.values() for s in sizes}) > 2:
        by_size.set_xscale("log")
    if len(set(levels)) > 2:
        by_conc.set_xscale("log", base=2)
    sizes_shown = sorted(names)
    _ticks(by_size, [s / 1e6 for s in sizes_shown], [_name(names, s) for s in sizes_shown])
    shown = sorted(set(levels))
    _ticks(by_conc, shown, [str(c) for c in shown])
    fig.suptitle("mmctl bench: end-to-end latency per arm (p50 solid, p90 dashed, p99 dotted)")
    fig.tight_layout()
    return fig


def _ticks(ax: Any, at: Sequence[float], labels: list[str]) -> None:
    """Exactly these ticks, these labels, no minor ticks (a log axis adds its own)."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    if not at:
        return
    ax.xaxis.set_major_locator(FixedLocator(list(at)))
    ax.xaxis.set_major_formatter(FixedFormatter(labels))
    ax.xaxis.set_minor_locator(NullLocator())


def _name(names: dict[int, set[str]], size: int) -> str:
    """A payload by its item's name; by its size when items of several names share it."""
    found = names.get(size, set())
    return next(iter(found)) if len(found) == 1 else f"{size / 1e6:.3g} MB"
