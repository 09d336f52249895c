"""`mmctl batch`: a dataset through one or more workers, resumable, locally or on Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mmctl.choices import (
    BATCH_MAX_CONCURRENCY,
    DEFAULT_PIXEL_CACHE_MB,
    DEFAULT_PRUNING_METHOD,
    DEFAULT_PRUNING_RATE,
    REMOTE_MEDIA_MAX_MB,
    MediaRef,
    Processing,
)
from mmctl.cli._options import (
    BundleOpt,
    CaCertOpt,
    HeaderOpt,
    JsonOpt,
    MaxTokensOpt,
    MediaRefOpt,
    NegotiatedPixelDtypeOpt,
    PixelCacheOpt,
    ProcessingOpt,
    PromptOpt,
    SendTimeoutOpt,
    TargetsOpt,
    TlsOpt,
    VideoPruningMethodOpt,
    VideoPruningRateOpt,
    WorkerModelDirOpt,
    default_text,
)

HELP = """Run a dataset through vLLM gRPC workers; one output line per input line.

INPUT: JSONL, one request a line — the OpenAI batch format `vllm run-batch`
reads ({"custom_id", "method", "url": "/v1/chat/completions", "body":
{"messages": [...], "max_tokens", ...}} with video_url / image_url parts) or
{"id", "prompt", "media": ["clip.mp4", ...]}. Paths are relative to INPUT's
folder; file:// and data: URLs work; http(s) media only with
--allow-remote-media.

-o OUT.jsonl gets the OpenAI batch output shape ({"id", "custom_id",
"response": {"status_code", "body": chat.completion}, "error"}) plus an
"mmctl" key (timings, transport, bytes, worker), written as each item
finishes. A bad line or a failing item is an error line; the batch goes on.
--resume skips the ids OUT already answers and tries its failed ones again
(--keep-failed: keeps them), so a killed run continues where it stopped.
One run writes OUT at a time (OUT.lock beside it names the holder); OUT is
never the input. If OUT cannot be written (disk full) the run stops, OUT
ends at its last complete line, and --resume continues once there is room.
The summary goes to stderr (--json: the counts on stdout).

Engines: local (default) preprocesses in --workers processes and sends on
one event loop; ray runs the same on a Ray cluster: preprocessing as Ray
tasks on every node's CPUs, one sender per node (pip install 'mmctl[ray]';
--ray-address, else $RAY_ADDRESS, else a local instance). Several --target workers share the items,
each to the least busy; each is probed every second, and one that does not
answer healthy within 5 s (frozen, gone) or whose requests fail is taken out
(its items go to the others) and put back when a probe answers. Media asked
about again (several questions of one clip) are decoded once: --pixel-cache-mb
keeps the preprocessed pixels (least recently used out first; on Ray, per
node, and such items go to the node that holds them).

A model no mmctl family handles is preprocessed by the workers
(--processing auto, said once on stderr): each item goes as media_refs
(--media-ref data: the files inside the request; file: their paths, for
workers on this host), inline; --processing worker asks for that with any
model.

Examples:

\b
  mmctl batch eval.jsonl -o answers.jsonl
  mmctl batch eval.jsonl -o answers.jsonl -t gpu1:50051,gpu2:50051 --max-concurrency 16
  mmctl batch eval.jsonl -o answers.jsonl --resume      # after a crash or Ctrl-C
  mmctl batch eval.jsonl -o answers.jsonl --engine ray --ray-address auto
  mmctl batch -i eval.jsonl --output-file answers.jsonl   # vllm run-batch's spelling
  mmctl batch eval.jsonl -o answers.jsonl --processing worker --media-ref file

Exit codes: from what OUT holds at the end, 0 every item answered; 2 usage
(OUT holds results without --resume/--overwrite, OUT is the input, another
run holds OUT, --transport shm with worker processing); 3 bad input (a model
no family handles with --processing client); 5 no worker (or Ray cluster) answers; 6 a check
refused the transport; 7 some items failed (their lines say why); 8 no item
answered; 10 OUT could not be written (--resume continues), or OUT.lock is
not the lock file mmctl makes (a link planted there: left as it is); 130 interrupted
(finished items are in OUT; --resume continues).
"""


_InputOpt = Annotated[Path | None, typer.Argument(metavar="INPUT", hidden=True, show_default=False)]
_InputFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--input-file",
        "-i",
        metavar="IN.jsonl",
        help="The input, as vllm run-batch names it (or give INPUT).",
        show_default=False,
    ),
]
_OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "--output-file",
        "-o",
        metavar="OUT.jsonl",
        help="Where the output lines go (required).",
        show_default=False,
    ),
]
_EngineOpt = Annotated[
    str, typer.Option("--engine", metavar="[local|ray]", help="Where items are processed.")
]
_RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        metavar="ADDR",
        help="A Ray cluster: auto (the one this host belongs to), HOST:6379, or "
        "ray://HOST:10001 (Ray Client)."
        + default_text("$RAY_ADDRESS, else a local instance with --workers CPUs"),
        show_default=False,
    ),
]
_WorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--workers",
        metavar="N",
        help="Preprocessing processes (Ray: preprocessing actors, one CPU each)."
        + default_text("the cores; on a Ray cluster, its CPUs"),
        show_default=False,
    ),
]
_MaxConcurrencyOpt = Annotated[
    int, typer.Option("--max-concurrency", metavar="C", help="Requests in flight at most.")
]
_ResumeOpt = Annotated[
    bool,
    typer.Option("--resume", help="Continue OUT: skip the ids it answers, retry its failed ones."),
]
_KeepFailedOpt = Annotated[
    bool,
    typer.Option(
        "--keep-failed", help="With --resume: keep OUT's error lines (do not retry them)."
    ),
]
_TransportOpt = Annotated[
    str,
    typer.Option(
        "--transport",
        metavar="[auto|inline|shm]",
        help="auto: shared memory with workers on this host, inline elsewhere.",
    ),
]
_AllowRemoteMediaOpt = Annotated[
    bool,
    typer.Option("--allow-remote-media", help="Fetch http(s) media (with --max-remote-mb)."),
]
_MaxRemoteMbOpt = Annotated[
    int, typer.Option("--max-remote-mb", metavar="MB", help="Largest fetched medium.")
]


def batch(
    input: _InputOpt = None,
    input_file: _InputFileOpt = None,
    output: _OutputOpt = None,
    target: TargetsOpt = None,
    engine: _EngineOpt = "local",
    ray_address: _RayAddressOpt = None,
    workers: _WorkersOpt = None,
    max_concurrency: _MaxConcurrencyOpt = BATCH_MAX_CONCURRENCY,
    resume: _ResumeOpt = False,
    keep_failed: _KeepFailedOpt = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Start OUT over.")] = False,
    transport: _TransportOpt = "auto",
    prompt: PromptOpt = None,
    max_tokens: MaxTokensOpt = None,
    pixel_dtype: NegotiatedPixelDtypeOpt = None,
    processing: ProcessingOpt = Processing.AUTO,
    media_ref: MediaRefOpt = MediaRef.DATA,
    pixel_cache_mb: PixelCacheOpt = DEFAULT_PIXEL_CACHE_MB,
    allow_remote_media: _AllowRemoteMediaOpt = False,
    max_remote_mb: _MaxRemoteMbOpt = REMOTE_MEDIA_MAX_MB,
    timeout: SendTimeoutOpt = None,
    header: HeaderOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    model_dir: WorkerModelDirOpt = None,
    bundle: BundleOpt = None,
    video_pruning_rate: VideoPruningRateOpt = DEFAULT_PRUNING_RATE,
    video_pruning_method: VideoPruningMethodOpt = DEFAULT_PRUNING_METHOD,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli._inputs import connection, prompt_text
    from mmctl.cli._output import Output
    from mmctl.errors import AllFailed, Interrupted, SomeFailed, UsageError
    from mmctl.run_batch.api import batch as run_batch

    if input is not None and input_file is not None and input != input_file:
        raise UsageError("give the input once: INPUT or -i/--input-file")
    source = input or input_file
    if source is None:
        raise UsageError("no input: mmctl batch INPUT -o OUT.jsonl (or -i INPUT)")
    if output is None:
        raise UsageError("no output: -o/--output-file OUT.jsonl is required")
    output_sink = Output(json_mode=json_out, schema="batch")
    # Seconds pass before the first item (probing, the tokenizer; Ray's start-up).
    output_sink.status(
        "starting Ray and the pipeline…"
        if engine == "ray"
        else "probing the workers, loading the model files…"
    )
    bar = _Bar(output_sink)
    try:
        counts = run_batch(
            source,
            output,
            targets=target,
            engine=engine,
            workers=workers,
            max_concurrency=max_concurrency,
            resume=resume,
            overwrite=overwrite,
            keep_failed=keep_failed,
            transport=transport,
            prompt=prompt_text(prompt, None),
            max_tokens=max_tokens,
            pixel_dtype=pixel_dtype.value if pixel_dtype else None,
            processing=processing,
            media_ref=media_ref,
            allow_remote_media=allow_remote_media,
            max_remote_mb=max_remote_mb,
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
            ray_address=ray_address,
            on_start=bar.start,
            on_done=bar.done,
            on_skip=bar.skip,
            on_warning=output_sink.warn,
            on_note=output_sink.note,
        )
    finally:
        bar.close()
    doc = counts.as_dict()
    # The product is OUT: the summary is a report about it, so it goes to
    # stderr; --json keeps the whole document on stdout.
    if json_out:
        output_sink.json_line(doc)
    else:
        _render(output_sink.err_console, doc)
    if counts.interrupted_by:
        raise Interrupted(
            counts.interrupted_by,
            f"{counts.not_started} of {counts.total} items not started; {output} holds the "
            "finished ones; --resume continues",
        )
    failed, answered = counts.failed_in_output, counts.answered_in_output
    if failed and answered:
        raise SomeFailed(
            f"{failed} of {failed + answered} items failed (error lines in {output})",
            hint=_retry_hint(counts),
        )
    if failed:
        raise AllFailed(
            f"no item answered ({failed} error lines in {output})", hint=_retry_hint(counts)
        )


def _retry_hint(counts: Any) -> str:
    """Which of OUT's failures ``--resume`` can fix, and what the others need."""
    retry, fixed_first = counts.split_errors()

    def told(codes: dict[str, int]) -> tuple[int, str]:
        return sum(codes.values()), ", ".join(f"{n} {code}" for code, n in codes.items())

    parts = []
    if retry:
        n, codes = told(retry)
        parts.append(f"--resume tries again the {n} the worker failed ({codes})")
    if fixed_first:
        n, codes = told(fixed_first)
        its, fails, them = ("its", "fails", "it") if n == 1 else ("their", "fail", "them")
        parts.append(
            f"the {n} refused for {its} input line or media ({codes}) {fails} again until "
            f"fixed; --resume then tries {them}"
        )
    if counts.kept_failed:
        parts.append(f"--resume without --keep-failed tries the {counts.kept_failed} kept again")
    return "; ".join(parts)


def _render(console: Any, doc: dict[str, Any]) -> None:
    from mmctl.cli._output import size

    errors = ", ".join(f"{n} {code}" for code, n in doc["errors"].items())
    skipped = f", {doc['skipped']} already in {doc['output']}"
    if doc["kept_failed"]:
        skipped += f" ({doc['kept_failed']} of them failed, kept)"
    retried = f", {doc['retried']} failed before and tried again" if doc["retried"] else ""
    left = f", {doc['not_started']} not started" if doc["interrupted_by"] else ""
    console.print(
        f"{doc['total']} items: {doc['succeeded']} answered, {doc['failed']} failed"
        + (f" ({errors})" if errors else "")
        + skipped
        + retried
        + left
        + f"; {doc['wall_s']:.1f} s"
        + (f" ({doc['startup_s']:.1f} s Ray start-up)" if doc["engine"] == "ray" else ""),
        markup=False,
    )
    cache = doc["pixel_cache"]
    if cache.get("hits") or cache.get("shared"):
        console.print(
            f"  pixel cache: {cache['hits'] + cache['shared']} of "
            f"{cache['hits'] + cache['shared'] + cache['misses']} media served without decoding "
            f"({size(cache['hit_bytes'])}); {size(cache['bytes'])} kept of "
            f"{size(cache['budget_bytes'])}",
            markup=False,
        )
    if len(doc["by_target"]) > 1 or any(c["failed"] for c in doc["by_target"].values()):
        for target, c in doc["by_target"].items():
            console.print(f"  {target}: {c['answered']} answered, {c['failed']} failed",
                          markup=False)  # fmt: skip


class _Bar:
    """Items done of the total, with this run's rate and time left (a bar in a
    terminal, else nothing): :class:`~mmctl.cli._pace.Pace`."""

    def __init__(self, output: Any) -> None:
        self.output = output
        self.bar: Any = None
        self.task: Any = None
        self.failed = 0
        self.pace: Any = None

    def start(self, total: int) -> None:
        from mmctl.cli._pace import Pace

        self.pace = Pace(total)
        self.bar = self.output.progress(pace=self.pace.text)
        if self.bar is not None:
            self.task = self.bar.add_task("items", total=total)

    def done(self, ok: bool) -> None:
        if self.bar is None:
            return
        self.pace.done()
        self._advance(ok)

    def skip(self, ok: bool) -> None:
        if self.bar is None:
            return
        self.pace.skip()
        self._advance(ok)

    def _advance(self, ok: bool) -> None:
        self.failed += not ok
        failed = f" ({self.failed} failed)" if self.failed else ""
        self.bar.update(self.task, description=f"items{failed}")
        self.bar.advance(self.task)

    def close(self) -> None:
        self.output.end_progress()


batch.__doc__ = HELP
