"""Several ways of sending the same thing, on one set-up, interleaved.

``mmctl demo`` (inline vs shared memory) and ``mmctl send
--compare-processing`` (client vs worker preprocessing) compare variants of
one request. Each variant pays the same set-up — one :class:`Session`, opened
once — and the variants run in turns (A, B, A, B, …), so neither is charged
a one-time warm-up or catches the machine in a quieter moment. The
representative of a variant is its median run by total time, shown whole, so
its rows still add up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmctl.client.client import Client
from mmctl.client.options import Hooks, SendOptions, media_inputs
from mmctl.client.run import SendResult
from mmctl.timing import Timeline


@dataclass
class Comparison:
    #: Set-up laps of the shared session (``probe_s``, ``model_files_s``,
    #: ``tokenizer_s``) and their ``total_s``.
    setup: dict[str, float]
    #: Every run of each variant, in the order they ran.
    runs: dict[str, list[SendResult]]

    @property
    def median(self) -> dict[str, SendResult]:
        """Each variant's median run by total time (the lower middle of an even count)."""
        out = {}
        for name, runs in self.runs.items():
            ordered = sorted(runs, key=lambda r: r.timings["total_s"])
            out[name] = ordered[(len(ordered) - 1) // 2]
        return out

    def totals(self, name: str) -> list[float]:
        return [r.timings["total_s"] for r in self.runs[name]]


def compare(
    client: Client,
    media: Sequence[Path],
    base: SendOptions,
    variants: dict[str, dict[str, Any]],
    rounds: int = 3,
    warmup: bool = True,
    hooks: Hooks | None = None,
) -> Comparison:
    """Send ``media`` with ``base`` changed by each variant's fields, ``rounds``
    times in turn on ``client``'s one set-up, after a warm-up round
    (first-use costs: imports, the first shm file, caches) kept out of the
    figures."""
    options = {name: base.but(**changes) for name, changes in variants.items()}
    inputs = media_inputs(media)
    setup = Timeline()
    client.session(setup)
    hooks = hooks or Hooks()
    runs: dict[str, list[SendResult]] = {name: [] for name in options}
    for round_ in range(rounds + (1 if warmup else 0)):
        for name, opts in options.items():
            result = client.run(opts, inputs, hooks, Timeline())
            if round_ or not warmup:
                runs[name].append(result)
    return Comparison(setup.rows(), runs)
