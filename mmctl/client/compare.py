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

from mmctl.choices import Processing
from mmctl.client.client import Client
from mmctl.client.options import Hooks, SendOptions, media_inputs
from mmctl.client.run import SendResult
from mmctl.errors import UsageError
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

    def as_dict(self) -> dict[str, Any]:
        """Each variant's median run, the shared set-up and whether the answers agree."""
        median = self.median
        doc: dict[str, Any] = {name: run.as_dict() for name, run in median.items()}
        doc["setup_s"] = {k: round(v, 6) for k, v in self.setup.items()}
        doc["same_answer"] = len({run.answer for run in median.values()}) == 1
        return doc


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


def compare_processing(
    client: Client, media: Sequence[Path], base: SendOptions, hooks: Hooks | None = None
) -> Comparison:
    """``send --compare-processing``: ``media`` once with mmctl preprocessing
    (``client``) and once with the worker's (``worker``), on one set-up."""
    if base.processing is not Processing.AUTO:  # given: not the default
        raise UsageError("--compare-processing runs both --processing modes itself")
    variants: dict[str, dict[str, Any]] = {
        "client": {"processing": Processing.CLIENT},
        "worker": {"processing": Processing.WORKER},
    }
    return compare(client, media, base, variants, rounds=1, hooks=hooks)
