"""`mmctl send`: a video or image to a worker, inline or through /dev/shm, with the answer and timings."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from mmctl.cli._options import (
    BundleOpt,
    CaCertOpt,
    ChatOpt,
    FamilyOpt,
    FpsOpt,
    HeaderOpt,
    JsonOpt,
    MaxFramesOpt,
    MaxPixelsOpt,
    MaxTokensOpt,
    MinFramesOpt,
    MinPixelsOpt,
    ModelDirOpt,
    NumFramesOpt,
    PixelDtypeOpt,
    PromptOpt,
    RequestIdOpt,
    SeedOpt,
    StopOpt,
    StreamOpt,
    SystemOpt,
    TargetOpt,
    TemperatureOpt,
    TimeoutOpt,
    TlsOpt,
    TopKOpt,
    TopPOpt,
)

EXAMPLES = """
Examples:

  mmctl send clip.mp4 -p "Which colours appear, in order?" --shm

  mmctl send clip.mp4 --target gpu-box:50051 --inline --json | jq .answer

  mmctl send photo.jpg clip.mp4 -p "Is the photo in the clip?" --max-tokens 64

  mmctl send --request request.pb          # replay `mmctl build` output

  mmctl send clip.mp4 --compare-processing # client vs worker processing

Exit codes: 0 answered, 2 usage, 3 bad input (or /dev/shm unusable
with --shm), 4 the worker refused the request, 5 worker unreachable,
deadline or died, 6 a safety check refused to send, 130 interrupted
(shm files removed).
"""


class TransportChoice(StrEnum):
    auto = "auto"
    inline = "inline"
    shm = "shm"


class Processing(StrEnum):
    client = "client"
    worker = "worker"


class MediaRef(StrEnum):
    data = "data"
    file = "file"


def send(
    media: Annotated[
        list[Path] | None,
        typer.Argument(help="Video and image files, in prompt order.", show_default=False),
    ] = None,
    prompt: PromptOpt = "Describe this.",
    target: TargetOpt = None,
    transport: Annotated[
        TransportChoice,
        typer.Option("--transport", help="How tensors travel; auto compares /dev/shm identity."),
    ] = TransportChoice.auto,
    shm: Annotated[bool, typer.Option("--shm", help="Shorthand for --transport shm.")] = False,
    inline: Annotated[
        bool, typer.Option("--inline", help="Shorthand for --transport inline.")
    ] = False,
    shm_min_bytes: Annotated[
        int, typer.Option("--shm-min-bytes", help="Tensors smaller than this stay inline.")
    ] = 64 * 1024,
    pixel_dtype: PixelDtypeOpt = None,
    processing: Annotated[
        Processing,
        typer.Option("--processing", help="client: mmctl preprocesses; worker: send media_refs."),
    ] = Processing.client,
    media_ref: Annotated[
        MediaRef,
        typer.Option("--media-ref", help="With --processing worker: data: URLs, or file:// paths."),
    ] = MediaRef.data,
    compare_processing: Annotated[
        bool,
        typer.Option("--compare-processing", help="Run client and worker processing; compare."),
    ] = False,
    request: Annotated[
        Path | None, typer.Option("--request", help="Replay a request file from `mmctl build`.")
    ] = None,
    max_tokens: MaxTokensOpt = 128,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    top_k: TopKOpt = None,
    seed: SeedOpt = None,
    stop: StopOpt = None,
    stream: StreamOpt = True,
    timeout: TimeoutOpt = None,
    request_id: RequestIdOpt = None,
    header: HeaderOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    skip_checks: Annotated[
        bool,
        typer.Option("--skip-checks", help="Send even when a safety check refuses (debugging)."),
    ] = False,
    refresh_bundle: Annotated[
        bool, typer.Option("--refresh-bundle", help="Fetch the worker's tokenizer bundle again.")
    ] = False,
    system: SystemOpt = None,
    chat: ChatOpt = True,
    model_dir: ModelDirOpt = None,
    bundle: BundleOpt = None,
    family: FamilyOpt = None,
    fps: FpsOpt = None,
    num_frames: NumFramesOpt = None,
    min_frames: MinFramesOpt = None,
    max_frames: MaxFramesOpt = None,
    min_pixels: MinPixelsOpt = None,
    max_pixels: MaxPixelsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Send media to a vLLM gRPC worker and print the answer with a timing breakdown."""
    from mmctl.cli._model import overrides, sampling
    from mmctl.cli._output import Output
    from mmctl.cli._progress import FrameProgress
    from mmctl.client.channel import resolve_target
    from mmctl.client.send import SendOptions
    from mmctl.client.send import send as run
    from mmctl.errors import UsageError

    output = Output(json_mode=json_out)
    if shm and inline:
        raise UsageError("--shm and --inline contradict each other")
    mode = "shm" if shm else "inline" if inline else transport.value
    if bool(media) == (request is not None):
        raise UsageError("give MEDIA files or --request FILE (one of the two)")
    if timeout is not None and timeout <= 0:
        raise UsageError("--timeout must be positive")
    if shm_min_bytes < 0:
        raise UsageError("--shm-min-bytes must not be negative")
    opts = SendOptions(
        target=resolve_target(target, tls=tls, ca_cert=ca_cert, headers=header),
        media=list(media or []),
        prompt=prompt,
        request_file=request,
        transport=mode,
        shm_min_bytes=shm_min_bytes,
        pixel_dtype=pixel_dtype,
        processing=processing.value,
        media_ref=media_ref.value,
        sampling=sampling(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=seed,
            stop=stop,
        ),
        stream=stream,
        timeout=timeout,
        request_id=request_id,
        model_dir=model_dir,
        bundle=bundle,
        refresh_bundle=refresh_bundle,
        family=family,
        params=overrides(
            fps=fps,
            num_frames=num_frames,
            min_frames=min_frames,
            max_frames=max_frames,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
        ),
        system=system,
        chat=chat,
        skip_checks=skip_checks,
        on_note=output.note,
    )
    if compare_processing:
        if request is not None:
            raise UsageError("--compare-processing needs MEDIA files, not --request")
        results = {}
        for mode_name in ("client", "worker"):
            opts.processing = mode_name
            opts.request_id = f"{request_id}-{mode_name}" if request_id else None
            results[mode_name] = run(opts)
        doc = {
            "client": results["client"].as_dict(),
            "worker": results["worker"].as_dict(),
            "same_answer": results["client"].answer == results["worker"].answer,
        }
        output.result(
            doc, human=lambda console: render_side_by_side(console, results, ("client", "worker"))
        )
        return
    streaming = not json_out and stream
    if streaming:
        opts.on_text = lambda text: (output.console.file.write(text), output.console.file.flush())
    with FrameProgress(output, enabled=not json_out) as on_frame:
        opts.on_frame = on_frame
        result = run(opts)
    if streaming:
        output.console.file.write("\n")
    output.result(
        result.as_dict(),
        human=lambda console: render_result(console, result, answer_shown=streaming),
    )


send.__doc__ = (send.__doc__ or "") + "\n" + EXAMPLES


TIMING_ROWS = (
    ("decode_s", "decode"),
    ("preprocess_s", "preprocess (overlapped)"),
    ("tokenize_s", "tokenize + layout"),
    ("handoff_s", "tensor hand-off"),
    ("ttft_s", "time to first token"),
    ("generation_s", "generation"),
    ("total_s", "total"),
)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:,.1f} ms"


def _bytes(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB" if n >= 2**20 else f"{n:,} B"


def render_result(console, result, answer_shown: bool = False) -> None:
    from rich.table import Table

    if not answer_shown:
        console.print(result.answer, markup=False)
    d = result.decisions
    console.print()
    for key in ("transport", "pixel_dtype", "processing"):
        if key in d:
            console.print(
                f"[bold]{key.replace('_', ' ')}[/] {d[key].value} — {d[key].reason}", markup=True
            )
    ran = [c["name"] for c in result.checks if c.get("ran")]
    skipped = [f"{c['name']} ({c.get('reason')})" for c in result.checks if not c.get("ran")]
    console.print(
        f"[bold]checks[/] ran: {', '.join(ran) or 'none'}"
        + (f"; not run: {', '.join(skipped)}" if skipped else "")
    )
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for key, label in TIMING_ROWS:
        if key in result.timings:
            table.add_row(label, _ms(result.timings[key]))
    console.print(table)
    rate = result.tokens_per_s
    b = result.transport_bytes
    console.print(
        f"{result.prompt_tokens} prompt + {result.completion_tokens} completion tokens"
        + (f", {rate:,.1f} tokens/s" if rate else "")
        + f"; finish {result.finish_reason}; moved {_bytes(b.get('shm', 0))} via shm, "
        f"{_bytes(b.get('inline', 0))} inline (request {_bytes(b.get('request', 0))})"
    )


def render_side_by_side(console, results: dict, names) -> None:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("")
    for name in names:
        table.add_column(name, justify="right")
    table.add_row("answer", *[results[n].answer for n in names])
    table.add_row("finish", *[results[n].finish_reason for n in names])
    for key, label in TIMING_ROWS:
        if any(key in results[n].timings for n in names):
            table.add_row(label, *[_ms(results[n].timings.get(key)) for n in names])
    table.add_row(
        "shm / inline",
        *[
            f"{_bytes(results[n].transport_bytes.get('shm', 0))} / {_bytes(results[n].transport_bytes.get('inline', 0))}"
            for n in names
        ],
    )
    table.add_row("transport", *[results[n].decisions["transport"].value for n in names])
    console.print(table)
