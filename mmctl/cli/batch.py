"""`mmctl batch`: a dataset through one or more workers, resumable, locally or on Ray."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mmctl.cli._options import (
    BundleOpt,
    CaCertOpt,
    HeaderOpt,
    JsonOpt,
    MaxTokensOpt,
    ModelDirOpt,
    NegotiatedPixelDtypeOpt,
    PromptOpt,
    SendTimeoutOpt,
    TargetsOpt,
    TlsOpt,
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
"mmctl" key (timings, transport, bytes, worker), appended and flushed as
each item finishes. A bad line or a failing item is an error line; the
batch goes on. --resume skips the ids already in OUT, so a killed run
continues where it stopped.

Engines: local (default) preprocesses in --workers processes and sends on
one event loop; ray runs the same as a Ray Data pipeline across a cluster
(pip install 'mmctl[ray]'). Several --target workers share the items
round-robin; one that stops answering is taken out (its items retried once
elsewhere) and put back when its health check passes.

Examples:

\b
  mmctl batch eval.jsonl -o answers.jsonl
  mmctl batch eval.jsonl -o answers.jsonl -t gpu1:50051,gpu2:50051 --max-concurrency 16
  mmctl batch eval.jsonl -o answers.jsonl --resume      # after a crash or Ctrl-C
  mmctl batch eval.jsonl -o answers.jsonl --engine ray --ray-address auto

Exit codes: 0 every item answered; 2 usage (OUT holds results without
--resume/--overwrite); 3 bad input; 5 no worker answers; 6 a check refused
the transport; 7 some items failed (their lines say why); 8 no item
succeeded; 130 interrupted (finished items are in OUT; --resume continues).
"""


def batch(
    input: Annotated[Path, typer.Argument(metavar="INPUT", hidden=True, show_default=False)],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", metavar="OUT.jsonl", help="Where the output lines go."),
    ],
    target: TargetsOpt = None,
    engine: Annotated[
        str, typer.Option("--engine", metavar="[local|ray]", help="Where items are processed.")
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            metavar="ADDR",
            help="A Ray cluster (auto: the one this host belongs to)."
            + default_text("a local instance with --workers CPUs"),
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            metavar="N",
            help="Preprocessing processes (or Ray CPUs)." + default_text("the cores"),
            show_default=False,
        ),
    ] = None,
    max_concurrency: Annotated[
        int, typer.Option("--max-concurrency", metavar="C", help="Requests in flight at most.")
    ] = 8,
    resume: Annotated[
        bool, typer.Option("--resume", help="Skip the ids already in OUT; append the rest.")
    ] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Start OUT over.")] = False,
    transport: Annotated[
        str,
        typer.Option(
            "--transport",
            metavar="[auto|inline|shm]",
            help="auto: shared memory with workers on this host, inline elsewhere.",
        ),
    ] = "auto",
    prompt: PromptOpt = None,
    max_tokens: MaxTokensOpt = None,
    pixel_dtype: NegotiatedPixelDtypeOpt = None,
    allow_remote_media: Annotated[
        bool,
        typer.Option("--allow-remote-media", help="Fetch http(s) media (with --max-remote-mb)."),
    ] = False,
    max_remote_mb: Annotated[
        int, typer.Option("--max-remote-mb", metavar="MB", help="Largest fetched medium.")
    ] = 256,
    timeout: SendTimeoutOpt = None,
    header: HeaderOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    model_dir: ModelDirOpt = None,
    bundle: BundleOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli._inputs import prompt_text
    from mmctl.cli._output import Output
    from mmctl.errors import AllFailed, Interrupted, SomeFailed
    from mmctl.run_batch.api import batch as run_batch

    output_sink = Output(json_mode=json_out)
    bar = _Bar(output_sink)
    try:
        counts = run_batch(
            input,
            output,
            targets=target,
            engine=engine,
            workers=workers,
            max_concurrency=max_concurrency,
            resume=resume,
            overwrite=overwrite,
            transport=transport,
            prompt=prompt_text(prompt, None),
            max_tokens=max_tokens,
            pixel_dtype=pixel_dtype.value if pixel_dtype else None,
            allow_remote_media=allow_remote_media,
            max_remote_mb=max_remote_mb,
            headers=header,
            tls=ca_cert or tls,
            timeout=timeout,
            model_dir=model_dir,
            bundle=bundle,
            ray_address=ray_address,
            on_start=bar.start,
            on_done=bar.done,
        )
    finally:
        bar.close()
    doc = counts.as_dict()
    output_sink.result(doc, human=lambda console: _render(console, doc))
    if counts.interrupted_by:
        raise Interrupted(counts.interrupted_by, f"{output} holds the finished items; --resume")
    sent = counts.succeeded + counts.failed
    if counts.failed and counts.succeeded:
        raise SomeFailed(f"{counts.failed} of {sent} items failed (error lines in {output})")
    if counts.failed:
        raise AllFailed(f"no item succeeded ({counts.failed} error lines in {output})")


def _render(console: Any, doc: dict[str, Any]) -> None:
    errors = ", ".join(f"{n} {code}" for code, n in doc["errors"].items())
    console.print(
        f"{doc['total']} items: {doc['succeeded']} answered, {doc['failed']} failed"
        + (f" ({errors})" if errors else "")
        + f", {doc['skipped']} already in {doc['output']}; {doc['wall_s']:.1f} s"
        + (f" ({doc['startup_s']:.1f} s Ray start-up)" if doc["engine"] == "ray" else "")
    )


class _Bar:
    """Items done of the total, with rate and time left (a bar in a terminal, else nothing)."""

    def __init__(self, output: Any) -> None:
        self.output = output
        self.bar: Any = None
        self.task: Any = None
        self.failed = self.finished = 0
        self.began = 0.0

    def start(self, total: int) -> None:
        self.bar = self.output.progress()
        if self.bar is not None:
            self.task = self.bar.add_task("items", total=total)
            self.began = time.monotonic()

    def done(self, ok: bool) -> None:
        if self.bar is None:
            return
        self.finished += 1
        self.failed += not ok
        rate = self.finished / max(time.monotonic() - self.began, 1e-9)
        failed = f", {self.failed} failed" if self.failed else ""
        self.bar.update(self.task, description=f"items ({rate:.1f}/s{failed})")
        self.bar.advance(self.task)

    def close(self) -> None:
        self.output.end_progress()


batch.__doc__ = HELP
