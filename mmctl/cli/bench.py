"""`mmctl bench`: load-test a vLLM gRPC worker (or several) with video, inline vs shm, side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmctl.choices import (
    BENCH_BURSTINESS,
    BENCH_NUM_PROMPTS,
    BENCH_WARMUP,
    DEFAULT_PIXEL_CACHE_MB,
    DEFAULT_PRUNING_METHOD,
    DEFAULT_PRUNING_RATE,
    MediaRef,
    PixelFormat,
    Processing,
    Transport,
)
from mmctl.cli._options import (
    BundleOpt,
    CaCertOpt,
    HeaderOpt,
    JsonOpt,
    MaxTokensOpt,
    MediaRefOpt,
    PixelCacheOpt,
    PixelDtypesOpt,
    ProcessingOpt,
    PromptOpt,
    TargetsOpt,
    TlsOpt,
    VideoPruningMethodOpt,
    VideoPruningRateOpt,
    WorkerModelDirOpt,
    default_text,
)

if TYPE_CHECKING:
    from rich.console import Console

    from mmctl.bench.runner import BenchResult, Record

HELP = """Load-test vLLM gRPC workers with video: TTFT, TPOT, ITL and E2E per arm.

Flags are named as `vllm bench serve` names them. An arm is one transport
and pixel dtype (--transport inline,shm × --pixel-dtype …); arms are
interleaved request by request in a seeded order, and the report gives each
arm's figures and the ratio of medians shm/inline with a 95% bootstrap
interval. Work items are prepared (decoded, preprocessed, tokenized) once
before the run; each request then pays for its hand-off, build and
Generate. The machine's floors for the same bytes are measured in the same
run: memcpy, a fresh /dev/shm file, a bare grpcio call.

Workload, one of: --video FILE and --audio FILE (repeatable; each file one
item), --dataset FILE.jsonl (OpenAI
batch lines or {"id", "prompt", "media": [...]}), --sizes 1MB,16MB,100MB
(synthetic Qwen-VL videos whose pixel tensor has that size; a size over the
worker's mm_encoder_budget for one item is split into equal videos within
it, up to its video limit per request).

What video pruning buys: --baseline HOST:PORT names a worker of the same
model that does not prune; the --target workers are pruning ones
(--video-pruning-rate R as they were started). Every arm gets a twin sent to
the baseline, laid out without pruning, in the same interleaved blocks, and
the report gives both sides' median prompt tokens, TTFT and E2E and pruned
over unpruned (--json: pruned_over_unpruned).

A model no mmctl family handles is preprocessed by the worker
(--processing auto, said once on stderr; --processing worker asks for it
with any model): each item is prepared once as the media_refs request send
makes, sent inline (one arm, inline/media_refs; --transport shm and --sizes
are refused: there is no tensor to place or size); its payload is the
request's bytes, and the machine floors (a tensor's) are not measured. So is a workload with sound
(--audio, or dataset lines with audio): smg-grpc-servicer takes sound only as
media_refs.

Examples:

\b
  mmctl bench --sizes 1MB,16MB,100MB --num-prompts 60
  mmctl bench --video clip.mp4 --max-concurrency 1,4,16 --plot latency.png
  mmctl bench --dataset eval.jsonl -t gpu1:50051,gpu2:50051 --transport inline
  mmctl bench --sizes 4MB --request-rate 20 --burstiness 0.5 --json | jq .shm_over_inline
  mmctl bench --video clip.mp4 --save-result run.json --per-request requests.jsonl
  mmctl bench --sizes 1MB --max-concurrency 1,4 --save-result --result-dir results/
  mmctl bench --video clip.mp4 --processing worker --media-ref file
  mmctl bench --audio speech.wav --num-prompts 40 --max-concurrency 1,4
  mmctl bench --video clip.mp4 -t gpu1:50051 --video-pruning-rate 0.75 --baseline gpu2:50051

Exit codes: 0 every request answered; 2 usage (--transport shm or --sizes
with worker processing); 3 bad input (media, dataset, a model no family
handles with --processing client); 4 some requests failed (the report names their gRPC codes); 5 a
worker unreachable; 6 a check refused an arm (shm with a worker on another
host, a pixel dtype the worker does not take) or a size (more than one
request to the worker may carry); 130 interrupted (the partial report is
printed, shm files removed).
"""


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


_VideoOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--video", metavar="FILE", help="A clip to send (repeatable).", show_default=False
    ),
]
_AudioOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--audio",
        metavar="FILE",
        help="A sound file to send (repeatable; the worker processes it).",
        show_default=False,
    ),
]
_DatasetOpt = Annotated[
    Path | None,
    typer.Option(
        "--dataset",
        metavar="FILE.jsonl",
        help="Work items, one JSON line each.",
        show_default=False,
    ),
]
_SizesOpt = Annotated[
    str | None,
    typer.Option(
        "--sizes",
        metavar="SIZE[,SIZE…]",
        help="Synthetic videos of these pixel-tensor sizes (512KB, 16MB, 1GiB).",
        show_default=False,
    ),
]
_TransportOpt = Annotated[
    str | None,
    typer.Option(
        "--transport",
        metavar="inline,shm",
        help="Transports to compare (each an arm)."
        + default_text("inline,shm; inline alone with worker processing"),
        show_default=False,
    ),
]
_NumPromptsOpt = Annotated[
    int,
    typer.Option(
        "--num-prompts", metavar="N", help="Requests per concurrency level, all arms together."
    ),
]
_MaxConcurrencyOpt = Annotated[
    str,
    typer.Option(
        "--max-concurrency",
        metavar="C[,C…]",
        help="Requests in flight at most; a list runs each in turn.",
    ),
]
_RequestRateOpt = Annotated[
    str,
    typer.Option(
        "--request-rate",
        metavar="R|inf",
        help="Requests per second (Poisson arrivals; inf: all at once).",
    ),
]
_BurstinessOpt = Annotated[
    float,
    typer.Option(
        "--burstiness",
        metavar="B",
        help="Gamma shape of the arrival gaps (1: Poisson; < 1 burstier).",
    ),
]
_WarmupOpt = Annotated[
    int,
    typer.Option(
        "--warmup",
        "--num-warmups",
        metavar="K",
        help="Unmeasured requests per arm first (vLLM: --num-warmups).",
    ),
]
_SeedOpt = Annotated[
    int, typer.Option("--seed", metavar="S", help="Seed of the arm order and arrivals.")
]
_IgnoreEosOpt = Annotated[
    bool, typer.Option("--ignore-eos", help="Generate max-tokens tokens every time.")
]
_PercentilesOpt = Annotated[
    str,
    typer.Option(
        "--percentiles",
        "--metric-percentiles",
        metavar="P[,P…]",
        help="Percentiles to report.",
    ),
]
_SaveResultOpt = Annotated[
    bool,
    typer.Option(
        "--save-result",
        help="Save vllm bench serve's result document: to FILE.json when one follows, "
        "else to --result-dir/--result-filename (several concurrencies: one file each, "
        "-concurrencyC before .json). Every file written is named on stderr.",
    ),
]
_SaveToOpt = Annotated[
    str | None,
    typer.Argument(metavar="FILE.json", hidden=True, show_default=False),
]
_ResultDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--result-dir",
        metavar="DIR",
        help="Folder of the --save-result file (vLLM's flag; without it the current one).",
        show_default=False,
    ),
]
_ResultFilenameOpt = Annotated[
    str | None,
    typer.Option(
        "--result-filename",
        metavar="NAME.json",
        help="Name of the --save-result file (vLLM's flag; without it "
        "mmctl-bench-<rate>qps-<date>.json, as vLLM names its own).",
        show_default=False,
    ),
]
_PerRequestOpt = Annotated[
    Path | None,
    typer.Option(
        "--per-request",
        metavar="FILE.jsonl",
        help="One line per request: arm, target, timings, bytes, error.",
        show_default=False,
    ),
]
_PlotOpt = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        metavar="FILE.png",
        help="Latency at each of --percentiles vs payload size and concurrency (needs "
        "mmctl[plot]).",
        show_default=False,
    ),
]
_NoFloorsOpt = Annotated[bool, typer.Option("--no-floors", help="Skip the machine floors.")]
_ReuseHashesOpt = Annotated[
    bool,
    typer.Option(
        "--reuse-hashes",
        help="Send each item's real content hash (a real worker's encoder cache then hits).",
    ),
]
_BaselineOpt = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        metavar="HOST:PORT",
        help="A worker of the same model that does not prune video: each arm's twin goes "
        "there, laid out without pruning, and the report compares (needs "
        "--video-pruning-rate).",
        show_default=False,
    ),
]
_TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        help="Deadline of each Generate." + default_text("none"),
        show_default=False,
    ),
]


def bench(
    target: TargetsOpt = None,
    video: _VideoOpt = None,
    audio: _AudioOpt = None,
    dataset: _DatasetOpt = None,
    sizes: _SizesOpt = None,
    transport: _TransportOpt = None,
    pixel_dtype: PixelDtypesOpt = None,
    processing: ProcessingOpt = Processing.AUTO,
    media_ref: MediaRefOpt = MediaRef.DATA,
    num_prompts: _NumPromptsOpt = BENCH_NUM_PROMPTS,
    max_concurrency: _MaxConcurrencyOpt = "1",
    request_rate: _RequestRateOpt = "inf",
    burstiness: _BurstinessOpt = BENCH_BURSTINESS,
    warmup: _WarmupOpt = BENCH_WARMUP,
    seed: _SeedOpt = 0,
    max_tokens: MaxTokensOpt = None,
    ignore_eos: _IgnoreEosOpt = False,
    prompt: PromptOpt = None,
    percentiles: _PercentilesOpt = "50,90,99",
    save_result: _SaveResultOpt = False,
    save_to: _SaveToOpt = None,
    result_dir: _ResultDirOpt = None,
    result_filename: _ResultFilenameOpt = None,
    per_request: _PerRequestOpt = None,
    plot: _PlotOpt = None,
    no_floors: _NoFloorsOpt = False,
    reuse_hashes: _ReuseHashesOpt = False,
    timeout: _TimeoutOpt = None,
    header: HeaderOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    model_dir: WorkerModelDirOpt = None,
    bundle: BundleOpt = None,
    pixel_cache_mb: PixelCacheOpt = DEFAULT_PIXEL_CACHE_MB,
    video_pruning_rate: VideoPruningRateOpt = DEFAULT_PRUNING_RATE,
    video_pruning_method: VideoPruningMethodOpt = DEFAULT_PRUNING_METHOD,
    baseline: _BaselineOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from mmctl import settings
    from mmctl.bench import workload
    from mmctl.bench.files import SaveTarget, write_files
    from mmctl.bench.runner import BenchConfig, run
    from mmctl.cli._inputs import connection, prompt_text
    from mmctl.cli._output import Output
    from mmctl.errors import UsageError
    from mmctl.request.build import Sampling

    output = Output(json_mode=json_out, schema="bench")
    saving = SaveTarget.of(save_result, save_to, result_dir, result_filename)
    items = workload.choose(video, dataset, _csv(sizes), audio)
    if plot is not None:
        from mmctl.bench.plot import require

        require()
    try:
        transports = None if transport is None else tuple(Transport(t) for t in _csv(transport))
        fmts = tuple(PixelFormat(f) for f in _csv(pixel_dtype)) or (None,)
    except ValueError as err:
        raise UsageError(f"{err}") from None
    try:
        levels = tuple(int(c) for c in _csv(max_concurrency))
        pct = tuple(float(p) for p in _csv(percentiles))
        rate = float(request_rate)
    except ValueError:
        raise UsageError(
            "--max-concurrency, --percentiles and --request-rate take numbers"
        ) from None
    cfg = BenchConfig(
        targets=tuple(_csv(target)) or (settings.target(),),
        items=tuple(items),
        transports=transports,
        pixel_dtypes=fmts,
        num_prompts=num_prompts,
        max_concurrency=levels,
        request_rate=rate,
        burstiness=burstiness,
        warmup=warmup,
        seed=seed,
        prompt=prompt_text(prompt, None),
        sampling=Sampling(max_tokens=max_tokens, ignore_eos=ignore_eos),
        percentiles=pct,
        floors=not no_floors,
        unique_hashes=not reuse_hashes,
        processing=processing,
        media_ref=media_ref,
        connection=connection(
            header=header,
            tls=tls,
            ca_cert=ca_cert,
            timeout=timeout,
            model_dir=model_dir,
            bundle=bundle,
            pixel_cache_mb=pixel_cache_mb,
            video_pruning_rate=video_pruning_rate,
            video_pruning_method=video_pruning_method,
        ),
        baseline=baseline,
    )
    live = _Live(output)
    try:
        result = run(cfg, live)
    finally:
        live.close()
    for path in write_files(result, saving, per_request, plot):
        output.note(f"wrote {path}")
    from mmctl.bench.report import bench_doc, failure

    doc = bench_doc(result)
    output.result(doc, human=lambda console: render(console, result, doc))
    failed = failure(result)
    if failed is not None:
        raise failed


class _Live:
    """The run's progress (a bar in a terminal, nothing otherwise): stage, done/total, errors."""

    def __init__(self, output: Any) -> None:
        self.output = output
        self.bar = output.progress()
        self.task: Any = None
        self.label = ""
        self.errors = 0

    def stage(self, text: str, total: int | None = None) -> None:
        if self.bar is None:
            return
        if total is None:
            self.bar.advance(self.task)
            return
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.label, self.errors = text, 0
        self.task = self.bar.add_task(text, total=total)

    def done(self, record: Record) -> None:
        if self.bar is None or self.task is None:
            return
        if not record.ok:
            self.errors += 1
            self.bar.update(self.task, description=f"{self.label} ({self.errors} errors)")
        self.bar.advance(self.task)

    def note(self, message: str) -> None:
        self.output.note(message)

    def close(self) -> None:
        self.output.end_progress()


# ---- the report for people ----


def render(console: Console, result: BenchResult, doc: dict[str, Any]) -> None:
    from rich import box
    from rich.table import Table

    from mmctl.cli._output import size

    cfg = result.config
    console.print(
        f"mmctl bench: {', '.join(cfg.targets)}"
        + (f" (baseline {cfg.baseline}, no pruning)" if cfg.baseline else "")
        + f"; arms {', '.join(doc['arms'])}; "
        f"{cfg.num_prompts} requests per level, interleaved (seed {cfg.seed}); "
        f"request rate {cfg.request_rate:g}/s"
    )
    for prep in doc["prepared"]:
        where = f"for {doc['baseline']}, " if prep["baseline"] else ""
        if prep["pixel_dtype"] is None:  # media_refs: the worker expands the prompt
            console.print(
                f"  {prep['item']} ({where}media_refs): a {size(prep['payload_bytes'])} request, "
                f"{prep['prompt_tokens']} prompt tokens before the worker expands them, "
                f"prepared in {prep['preprocess_s']:.3f} s"
            )
            continue
        console.print(
            f"  {prep['item']} ({where}{prep['pixel_dtype']}): {prep['payload_bytes'] / 1e6:.2f} MB of "
            f"pixels, {prep['prompt_tokens']} prompt tokens, prepared in {prep['preprocess_s']:.3f} s"
            + (" (pixel cache)" if "hit" in prep["pixel_cache"] else "")
        )
        if doc["video_pruning"]["enabled"] and prep["video_tokens"] and not prep["baseline"]:
            from mmctl.cli._render import pruning_line

            kept = {"video_tokens": prep["video_tokens"], "kept_tokens": prep["kept_video_tokens"]}
            console.print(f"    video: {pruning_line({**doc['video_pruning'], **kept})}")
    for n, run in enumerate(doc["runs"]):
        arms = run["arms"]
        table = Table(
            title=f"max concurrency {run['max_concurrency']}: {run['completed']} requests in "
            f"{run['duration']:.2f} s",
            title_justify="left",
            box=box.SIMPLE,
        )
        table.add_column("")
        for name in arms:
            table.add_column(name, justify="right")
        table.add_column("all", justify="right")
        columns = [*arms.values(), run]
        for label, key, fmt in _rows(cfg.percentiles):
            table.add_row(label, *(format(c[key], fmt) for c in columns))
        table.add_row(
            "Errors",
            *(", ".join(f"{k} {v}" for k, v in c["errors"].items()) or "-" for c in columns),
        )
        console.print(table)
        for fmt, ratio in run["shm_over_inline"].items():
            for metric in ("e2el", "ttft"):
                _ratio_line(console, f"shm/inline ({fmt}) median {metric.upper()}", ratio[metric])
            if len(ratio["by_item"]) > 1:
                for item, by in ratio["by_item"].items():
                    _ratio_line(console, f"  {item}: E2EL", by["e2el"])
        if run.get("pruned_over_unpruned"):
            _pruning_table(console, doc, run["pruned_over_unpruned"])
        if "by_target" in run:
            _target_table(console, run["by_target"], cfg.percentiles)
        if n == 0 and run["floor_ratios"]:
            _floor_table(console, result, run["floor_ratios"], run["max_concurrency"])
        cpu = run["client_cpu_s_per_request"]
        if cpu is not None:
            console.print(f"client CPU: {cpu * 1000:.1f} ms per request")
    res = doc["resources"]
    console.print(
        f"open fds {res['fds_before']} → {res['fds_after']}; this run's /dev/shm files "
        f"{res['shm_files_before']} → {res['shm_files_after']}; peak RSS {res['peak_rss_mb']:.0f} MB"
    )
    if result.interrupted:
        console.print("interrupted: the figures cover the requests that finished")


def _rows(percentiles: tuple[float, ...]) -> list[tuple[str, str, str]]:
    """vLLM's report rows (median stands for P50), then mmctl's per-request phases."""
    rows = [
        ("Successful requests", "completed", "d"),
        ("Failed requests", "failed", "d"),
        ("Request throughput (req/s)", "request_throughput", ".2f"),
        ("Output token throughput (tok/s)", "output_throughput", ".1f"),
    ]
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL")):
        rows.append((f"Mean {label} (ms)", f"mean_{metric}_ms", ".2f"))
        rows.append((f"Median {label} (ms)", f"median_{metric}_ms", ".2f"))
        for p in percentiles:
            if p != 50:
                word = str(int(p)) if int(p) == p else str(p)
                rows.append((f"P{word} {label} (ms)", f"p{word}_{metric}_ms", ".2f"))
    top = max(percentiles)
    word = str(int(top)) if int(top) == top else str(top)
    for metric, label in (("handoff", "hand-off"), ("build", "build")):
        rows.append((f"Median {label} (ms)", f"median_{metric}_ms", ".2f"))
        rows.append((f"P{word} {label} (ms)", f"p{word}_{metric}_ms", ".2f"))
    rows.append(("Payload MB/s (median)", "payload_mb_per_s", ".1f"))
    return rows


def _target_table(console: Console, by_target: dict[str, Any], pct: tuple[float, ...]) -> None:
    from rich import box
    from rich.table import Table

    top = max(pct)
    word = str(int(top)) if int(top) == top else str(top)
    table = Table(title="per target", title_justify="left", box=box.SIMPLE)
    for name in ("target", "requests", "failed", "median E2EL ms", f"P{word} E2EL ms", "errors"):
        table.add_column(name, justify="left" if name in ("target", "errors") else "right")
    for target, m in by_target.items():
        table.add_row(
            target,
            str(m["completed"] + m["failed"]),
            str(m["failed"]),
            f"{m['median_e2el_ms']:.2f}",
            f"{m[f'p{word}_e2el_ms']:.2f}",
            ", ".join(f"{k} {v}" for k, v in m["errors"].items()) or "-",
        )
    console.print(table)


def _pruning_table(console: Console, doc: dict[str, Any], effect: dict[str, Any]) -> None:
    """Each arm against its baseline twin: medians of both sides and their ratio."""
    from rich import box
    from rich.table import Table

    pruning = doc["video_pruning"]
    for arm, e in effect.items():
        table = Table(
            title=f"video pruning ({pruning['method']} {pruning['rate']:g}) against "
            f"{doc['baseline']} (no pruning), {arm} (medians)",
            title_justify="left",
            box=box.SIMPLE,
        )
        for name in ("", "pruned", "unpruned", "pruned/unpruned"):
            table.add_column(name, justify="left" if not name else "right")
        tokens = e["median_prompt_tokens"]
        table.add_row("prompt tokens", f"{tokens[0]:g}", f"{tokens[1]:g}",
                      f"{tokens[0] / tokens[1]:.3f}")  # fmt: skip
        for label, key in (("TTFT (ms)", "ttft"), ("E2EL (ms)", "e2el")):
            ms, r = e[f"median_{key}_ms"], e[key]
            table.add_row(
                label,
                f"{ms[0]:.2f}",
                f"{ms[1]:.2f}",
                f"{r['ratio']:.3f} [95% CI {r['ci_low']:.3f}–{r['ci_high']:.3f}]" if r else "-",
            )
        console.print(table)


def _ratio_line(console: Console, label: str, r: dict[str, Any] | None) -> None:
    if r:
        console.print(
            f"{label}: {r['ratio']:.3f} [95% CI {r['ci_low']:.3f}–{r['ci_high']:.3f}], "
            f"n={r['n'][0]}+{r['n'][1]}"
        )


def _floor_table(
    console: Console, result: BenchResult, ratios: dict[str, Any], concurrency: int
) -> None:
    from rich import box
    from rich.table import Table

    floors = Table(
        title="the machine's floors for the same bytes (median ms)",
        title_justify="left",
        box=box.SIMPLE,
    )
    for name in ("MB", "memcpy", "new /dev/shm file", "bare grpcio call"):
        floors.add_column(name, justify="right")
    for floor in result.floors.values():
        grpc_s = floor.get("grpc_unary_s")
        floors.add_row(
            f"{floor['bytes'] / 1e6:.2f}",
            f"{floor['memcpy_s'] * 1000:.2f}",
            f"{floor['fresh_shm_file_s'] * 1000:.2f}",
            f"{grpc_s * 1000:.1f}" if grpc_s else "-",
        )
    console.print(floors)
    table = Table(
        title=f"each arm against them (medians; requests at concurrency {concurrency})",
        title_justify="left",
        box=box.SIMPLE,
    )
    for name in ("arm @ item", "hand-off ms", "× memcpy", "× new file", "E2E × grpc call"):
        table.add_column(name, justify="left" if name == "arm @ item" else "right")
    for key, row in ratios.items():
        table.add_row(
            key,
            f"{row['handoff_s'] * 1000:.2f}",
            f"{row['handoff_over_memcpy']:.2f}",
            f"{row['handoff_over_fresh_shm_file']:.2f}",
            f"{row['e2el_over_grpc_unary']:.2f}" if "e2el_over_grpc_unary" in row else "-",
        )
    console.print(table)


bench.__doc__ = HELP
