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

#: Each arm's colour, the same in both panels: a colour map whose darker shades
#: tell the right panel's payloads apart (a colour of its own per series there
#: made C1 the shm arm on the left and inline's second payload on the right).
ARM_MAPS = ("Blues", "Oranges", "Greens", "Purples", "Reds", "Greys")

#: How each percentile is drawn, in the order asked for (``--percentiles``): a line
#: style and a marker, so that single points (one payload size, one
#: concurrency) are told apart as well as lines; one legend says which is which.
STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (1, 3)), "v"), ((0, (5, 1)), "P"))


def require() -> None:
    """Fail before the run, not after it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib", hint="pip install 'mmctl[plot]'") from None


def write(result: BenchResult, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = figure(result, result.config.percentiles)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def style(n: int) -> tuple[Any, str]:
    """The line style and marker of the ``n``-th percentile."""
    return STYLES[n % len(STYLES)]


def arm_colour(n: int, shade: int = 0, shades: int = 1) -> tuple[float, ...]:
    """The ``n``-th arm's colour; ``shade`` of ``shades`` (a payload) darker as it grows."""
    from matplotlib import colormaps

    where = 0.75 if shades == 1 else 0.45 + 0.5 * shade / (shades - 1)
    return tuple(colormaps[ARM_MAPS[n % len(ARM_MAPS)]](where))


def label(percentile: float) -> str:
    return f"p{percentile:g}"


def figure(result: BenchResult, percentiles: Sequence[float]) -> Any:
    """The two panels: E2E latency against payload size (at the lowest
    concurrency) and against concurrency (an arm's colour, a shade of it per payload),
    each percentile of ``percentiles`` in both, in its own :func:`style`.
    Ticks are the values asked for: the concurrency levels as plain numbers
    (1, 4, 16 — not 2^0, 2^2, 2^4) and each payload by its item's name
    (``1MB`` as given to ``--sizes``, not the 0.995 MB it holds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, (by_size, by_conc) = plt.subplots(1, 2, figsize=(12, 4.8))
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
    low = min(levels)
    arms: list[tuple[Any, str]] = []  # (colour, arm) of the left panel's series
    lines: list[tuple[Any, str]] = []  # (colour, arm and payload) of the right panel's
    for number, (arm, sizes) in enumerate(sorted(data.items())):
        colour = arm_colour(number)
        arms.append((colour, arm))
        # Against payload size, at the lowest concurrency (no queueing).
        xs = sorted(s for s in sizes if low in sizes[s])
        for n, p in enumerate(percentiles):
            dash, marker = style(n)
            ys = [float(np.percentile(sizes[x][low], p)) for x in xs]
            by_size.plot([x / 1e6 for x in xs], ys, linestyle=dash, marker=marker, color=colour,
                         gid=f"{arm}|{label(p)}")  # fmt: skip
        # Against concurrency, one series per payload size.
        for shade, size in enumerate(sorted(sizes)):
            series = f"{arm} {_name(names, size)}"
            colour = arm_colour(number, shade, len(sizes))
            lines.append((colour, series))
            cs = sorted(sizes[size])
            for n, p in enumerate(percentiles):
                dash, marker = style(n)
                ys = [float(np.percentile(sizes[size][c], p)) for c in cs]
                by_conc.plot(cs, ys, linestyle=dash, marker=marker, color=colour,
                             gid=f"{series}|{label(p)}")  # fmt: skip
    # The ticks name the payloads (``1MB`` as given to --sizes, or a file's
    # name); only their places are sizes, so the label claims no unit.
    by_size.set_xlabel(f"payload (placed by size), max concurrency {low}")
    by_conc.set_xlabel("max concurrency")
    for ax, shown_series in ((by_size, arms), (by_conc, lines)):
        ax.set_ylabel("E2E latency (ms)")
        ax.grid(True, alpha=0.3)
        if shown_series:
            handles = [Line2D([], [], color=c, linewidth=3) for c, _ in shown_series]
            ax.legend(handles, [name for _, name in shown_series], fontsize="small")
    if len({s for sizes in data.values() for s in sizes}) > 2:
        by_size.set_xscale("log")
    if len(set(levels)) > 2:
        by_conc.set_xscale("log", base=2)
    sizes_shown = sorted(names)
    _ticks(by_size, [s / 1e6 for s in sizes_shown], [_name(names, s) for s in sizes_shown])
    shown = sorted(set(levels))
    _ticks(by_conc, shown, [str(c) for c in shown])
    fig.suptitle("mmctl bench: end-to-end latency per arm")
    keys = [
        Line2D([], [], color="0.25", linestyle=style(n)[0], marker=style(n)[1])
        for n in range(len(percentiles))
    ]
    fig.legend(keys, [label(p) for p in percentiles], loc="upper center", ncol=len(keys),
               bbox_to_anchor=(0.5, 0.94), frameon=False, handlelength=3)  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1, 0.88))
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
