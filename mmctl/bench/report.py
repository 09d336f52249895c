"""The bench's numbers as documents: ``--json``, ``--save-result`` (vLLM's shape), ``--per-request``.

Metric names and definitions are ``vllm bench serve``'s: TTFT from the
request's start to its first token, TPOT = (E2E − TTFT) / (output tokens − 1)
per request, ITL = every gap between streamed tokens, E2E to the
completion; ``mean_/median_/std_/p<P>_<metric>_ms``, ``request_throughput``,
``output_throughput``. A request starts when it has a concurrency slot, so
E2E includes mmctl's own per-request work (hand-off, build), which is also
reported alone.
"""

from __future__ import annotations

import datetime
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mmctl.bench.runner import UNPRUNED, BenchResult, Level, Record
from mmctl.bench.stats import ratio_of_medians, summary
from mmctl.choices import Transport
from mmctl.errors import Interrupted, MmctlError, WorkerRejected, WorkerUnavailable


def metrics(records: Sequence[Record], duration: float, pct: Sequence[float]) -> dict[str, Any]:
    ok = [r for r in records if r.ok]
    inputs = sum(r.prompt_tokens for r in ok)
    outputs = sum(r.output_tokens for r in ok)
    per_s = 1 / duration if duration > 0 else 0.0
    tpots = [
        (r.latency_s - r.ttft_s) / (r.output_tokens - 1)
        for r in ok
        if r.output_tokens > 1 and r.latency_s is not None and r.ttft_s is not None
    ]
    doc: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": inputs,
        "total_output_tokens": outputs,
        "request_throughput": len(ok) * per_s,
        "output_throughput": outputs * per_s,
        "total_token_throughput": (inputs + outputs) * per_s,
        **summary("ttft", [r.ttft_s for r in ok if r.ttft_s is not None], pct),
        **summary("tpot", tpots, pct),
        **summary("itl", [x for r in ok for x in r.itl_s], pct),
        **summary("e2el", [r.latency_s for r in ok if r.latency_s is not None], pct),
        **summary("handoff", [r.handoff_s for r in ok], pct),
        **summary("build", [r.build_s for r in ok], pct),
        **summary("client_queue_time", [r.queue_s for r in ok], pct),
        "payload_mb_per_s": (
            statistics.median(r.payload_bytes / r.latency_s / 1e6 for r in ok if r.latency_s)
            if ok
            else 0.0
        ),
        "errors": dict(Counter(r.error_code for r in records if r.error_code)),
    }
    return doc


def shm_over_inline(records: Sequence[Record], seed: int) -> dict[str, Any]:
    """For each pixel dtype with both arms: shm's median over inline's, E2E and
    TTFT, with a 95% bootstrap interval — per work item, and pooled over
    items with each request scaled by its item's inline median (so a 100 MB
    item and a 1 MB one weigh alike instead of mixing two distributions)."""
    out: dict[str, Any] = {}
    by_arm: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.ok and r.latency_s is not None and r.ttft_s is not None:
            by_arm[r.arm].append(r)
    for arm in sorted(by_arm):
        kind, _, fmt = arm.partition("/")
        other = f"{Transport.INLINE.value}/{fmt}"
        if kind != Transport.SHM.value or other not in by_arm:
            continue
        shm, inline = by_arm[arm], by_arm[other]
        items = sorted({r.item for r in shm} & {r.item for r in inline})
        doc: dict[str, Any] = {}
        for name, attr in (("e2el", "latency_s"), ("ttft", "ttft_s")):
            doc[name] = _pooled_ratio(shm, inline, items, attr, seed)
        doc["by_item"] = {
            item: {
                name: ratio_of_medians(
                    [getattr(r, attr) for r in shm if r.item == item],
                    [getattr(r, attr) for r in inline if r.item == item],
                    seed,
                )
                for name, attr in (("e2el", "latency_s"), ("ttft", "ttft_s"))
            }
            for item in items
        }
        out[fmt] = doc
    return out


def pruned_over_unpruned(records: Sequence[Record], seed: int) -> dict[str, Any]:
    """For each arm with its ``--baseline`` twin: what the worker's video
    pruning buys — the median prompt tokens, TTFT and E2E of each side (the
    worker's own prompt count, after pruning), and pruned over unpruned as
    ratios of medians with a 95% bootstrap interval, pooled over items as
    :func:`shm_over_inline` pools them (each request scaled by its item's
    unpruned median; with one item the ratio is the medians' own)."""
    out: dict[str, Any] = {}
    by_arm: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.ok and r.latency_s is not None and r.ttft_s is not None:
            by_arm[r.arm].append(r)
    for arm in sorted(by_arm):
        twin = f"{arm}/{UNPRUNED}"
        if twin not in by_arm:
            continue
        pruned, plain = by_arm[arm], by_arm[twin]
        items = sorted({r.item for r in pruned} & {r.item for r in plain})
        sides = (pruned, plain)
        doc: dict[str, Any] = {
            "baseline_arm": twin,
            "median_prompt_tokens": [statistics.median(r.prompt_tokens for r in x) for x in sides],
            "median_ttft_ms": [statistics.median(r.ttft_s or 0.0 for r in x) * 1000 for x in sides],
            "median_e2el_ms": [
                statistics.median(r.latency_s or 0.0 for r in x) * 1000 for x in sides
            ],
        }
        for name, attr in (("ttft", "ttft_s"), ("e2el", "latency_s")):
            doc[name] = _pooled_ratio(pruned, plain, items, attr, seed)
        out[arm] = doc
    return out


def _pooled_ratio(
    num: Sequence[Record], den: Sequence[Record], items: Sequence[str], attr: str, seed: int
) -> dict[str, Any] | None:
    """median(num) / median(den) of ``attr``, each request scaled by its item's
    median in ``den``."""
    scale = {
        item: statistics.median(getattr(r, attr) for r in den if r.item == item) for item in items
    }
    return ratio_of_medians(
        [getattr(r, attr) / scale[r.item] for r in num if r.item in scale],
        [getattr(r, attr) / scale[r.item] for r in den if r.item in scale],
        seed,
    )


def _floor_ratios(result: BenchResult, records: Sequence[Record]) -> dict[str, Any]:
    """Each arm's median hand-off (and inline's E2E) over the floors of the same bytes."""
    out: dict[str, Any] = {}
    for size, floor in result.floors.items():
        mine = [r for r in records if r.ok and str(r.payload_bytes) == size]
        by_arm: dict[str, list[Record]] = defaultdict(list)
        for r in mine:
            by_arm[r.arm].append(r)
        for arm, recs in sorted(by_arm.items()):
            handoff = statistics.median(r.handoff_s for r in recs)
            row: dict[str, Any] = {
                "bytes": int(size),
                "handoff_s": handoff,
                "handoff_over_memcpy": handoff / floor["memcpy_s"],
                "handoff_over_fresh_shm_file": handoff / floor["fresh_shm_file_s"],
            }
            if arm.startswith(Transport.INLINE.value) and "grpc_unary_s" in floor:
                e2el = statistics.median(r.latency_s or 0.0 for r in recs)
                row["e2el_over_grpc_unary"] = e2el / floor["grpc_unary_s"]
            out[f"{arm} @ {recs[0].item}"] = row
    return out


def level_doc(result: BenchResult, level: Level) -> dict[str, Any]:
    cfg = result.config
    pct = cfg.percentiles
    records = level.records
    completed = sum(r.ok for r in records)
    by_target: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_target[r.target].append(r)
    doc: dict[str, Any] = {
        "max_concurrency": level.concurrency,
        "duration": level.duration_s,
        **metrics(records, level.duration_s, pct),
        "cancelled": level.cancelled,
        "client_cpu_s_per_request": level.cpu_s / completed if completed else None,
        "arms": {
            arm.name: metrics([r for r in records if r.arm == arm.name], level.duration_s, pct)
            for arm in result.arms
        },
        "shm_over_inline": shm_over_inline(records, cfg.seed),
        "floor_ratios": _floor_ratios(result, records),
    }
    if len(by_target) > 1:
        doc["by_target"] = {
            t: metrics(recs, level.duration_s, pct) for t, recs in sorted(by_target.items())
        }
    if cfg.baseline is not None:
        doc["pruned_over_unpruned"] = pruned_over_unpruned(records, cfg.seed)
    return doc


def bench_doc(result: BenchResult) -> dict[str, Any]:
    """The ``--json`` document. ``shm_over_inline`` at the top is the first
    concurrency level's (each level in ``runs`` has its own)."""
    cfg = result.config
    runs = [level_doc(result, level) for level in result.levels]
    prepared = [
        {
            "item": p.item.label,
            "pixel_dtype": fmt.value if fmt else None,
            "payload_bytes": p.payload_bytes,
            "media_items": sum(len(b.hashes) for b in p.plan.batches) + len(p.plan.media_refs),
            "preprocess_s": p.prepare_s,
            "prompt_tokens": len(p.plan.input_ids),
            "pixel_cache": list(p.cached),
            # What the worker's video pruning saves (equal when it does not prune).
            "video_tokens": p.video_tokens[0],
            "kept_video_tokens": p.video_tokens[1],
            # Laid out for --baseline (no pruning): its arms' twins send it.
            "baseline": baseline,
        }
        for baseline, prepared_items in ((False, result.prepared), (True, result.unpruned))
        for (_, fmt), p in prepared_items.items()
    ]
    doc: dict[str, Any] = {
        "date": datetime.datetime.now().strftime("%Y%m%d-%H%M%S"),
        "backend": "vllm-grpc",
        "targets": list(cfg.targets),
        "model": result.model,
        "num_prompts": cfg.num_prompts,
        "request_rate": _rate(cfg.request_rate),
        "burstiness": cfg.burstiness,
        "max_concurrency": list(cfg.max_concurrency),
        "percentiles": list(cfg.percentiles),
        "seed": cfg.seed,
        "video_pruning": cfg.connection.video_pruning.as_dict(),
        "baseline": cfg.baseline,
        "arms": [a.name for a in result.arms],
        "processing": result.processing.as_dict() if result.processing else None,
        "prepared": prepared,
        "pixel_cache": result.pixel_cache,
        "floors": result.floors,
        "resources": result.resources.as_dict(),
        "interrupted": result.interrupted,
        "runs": runs,
    }
    if runs and runs[0]["shm_over_inline"]:
        doc["shm_over_inline"] = runs[0]["shm_over_inline"]
    if runs and runs[0].get("pruned_over_unpruned"):
        doc["pruned_over_unpruned"] = runs[0]["pruned_over_unpruned"]
    return doc


def result_paths(
    levels: list[int],
    *,
    filename: str | None,
    folder: Path | None,
    request_rate: float,
    now: datetime.datetime | None = None,
) -> dict[int, Path]:
    """Where ``--save-result`` writes each concurrency level's document.

    ``filename`` (``--save-result FILE`` or ``--result-filename``) defaults
    to vLLM's pattern, ``mmctl-bench-<rate>qps-<date>.json``; ``folder``
    (``--result-dir``) to the current one. With several levels each file
    gets ``-concurrencyC`` before its suffix, as vLLM names one run per
    concurrency."""
    if filename is None:
        stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
        filename = f"mmctl-bench-{_rate(request_rate)}qps-{stamp}.json"
    base = Path(filename)
    if folder is not None and not base.is_absolute():
        base = folder / base
    if len(levels) == 1:
        return {levels[0]: base}
    return {c: base.with_name(f"{base.stem}-concurrency{c}{base.suffix}") for c in levels}


def vllm_doc(result: BenchResult, level: Level) -> dict[str, Any]:
    """One level as ``vllm bench serve --save-result`` writes it (same keys where
    the metric is the same), with mmctl's extras under ``mmctl``."""
    cfg = result.config
    records = level.records
    summary_doc = level_doc(result, level)
    doc: dict[str, Any] = {
        "date": datetime.datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "vllm-grpc",
        "backend": "vllm-grpc",
        "label": "mmctl",
        "model_id": str(result.model.get("source", "")),
        "tokenizer_id": str(result.model.get("source", "")),
        "num_prompts": cfg.num_prompts,
        "request_rate": _rate(cfg.request_rate),
        "burstiness": cfg.burstiness,
        "max_concurrency": level.concurrency,
        "duration": level.duration_s,
    }
    for key in (
        "completed", "failed", "total_input_tokens", "total_output_tokens",
        "request_throughput", "output_throughput", "total_token_throughput",
    ):  # fmt: skip
        doc[key] = summary_doc[key]
    doc.update(
        {
            "input_lens": [r.prompt_tokens for r in records],
            "output_lens": [r.output_tokens for r in records],
            "ttfts": [r.ttft_s or 0.0 for r in records],
            "itls": [r.itl_s for r in records],
            "latencies": [r.latency_s or 0.0 for r in records],
            "start_times": [r.start_s for r in records],
            "queue_times": [r.queue_s for r in records],
            "generated_texts": [r.text for r in records],
            "errors": [r.error or "" for r in records],
        }
    )
    for name in ("ttft", "tpot", "itl", "e2el", "client_queue_time"):
        doc.update({k: v for k, v in summary_doc.items() if k.endswith(f"_{name}_ms")})
    doc["mmctl"] = {
        k: summary_doc[k]
        for k in ("arms", "shm_over_inline", "floor_ratios", "errors", "pruned_over_unpruned")
        if k in summary_doc  # pruned_over_unpruned: with --baseline only
    }
    doc["mmctl"].update(
        {"floors": result.floors, "resources": result.resources.as_dict(), "arm_of_request": [
            r.arm for r in records
        ]}
    )  # fmt: skip
    return doc


def _rate(rate: float) -> float | str:
    # JSON has no infinity: "inf", as vLLM's argument reads.
    return "inf" if math.isinf(rate) else rate


def failure(result: BenchResult) -> MmctlError | Interrupted | None:
    """The error a finished run ends with (its exit code), ``None`` when every
    request was answered: interrupted, the workers unreachable, or refusals."""
    if result.interrupted_by:
        return Interrupted(
            result.interrupted_by, "the report above holds the requests that finished"
        )
    codes = Counter(r.error_code for lvl in result.levels for r in lvl.records if r.error_code)
    if not codes:
        return None
    total = sum(len(lvl.records) for lvl in result.levels)
    what = ", ".join(f"{n} {code}" for code, n in codes.most_common())
    message = f"{sum(codes.values())} of {total} requests failed ({what})"
    if {"UNAVAILABLE", "DEADLINE_EXCEEDED"} & set(codes):
        return WorkerUnavailable(message)
    return WorkerRejected(message, hint="--per-request FILE.jsonl lists each error")
