"""`mmctl build`: a whole GenerateRequest (tensors inline) written to a file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmctl.choices import LayoutKind
from mmctl.cli._options import (
    AllowSpecialOpt,
    BundleOpt,
    CaCertOpt,
    ChatOpt,
    FamilyOpt,
    FpsOpt,
    HeaderOpt,
    JsonOpt,
    LayoutOpt,
    MaxFramesOpt,
    MaxPixelsOpt,
    MaxTokensOpt,
    MinFramesOpt,
    MinPixelsOpt,
    MmItemLimitsOpt,
    ModelDirOpt,
    NumFramesOpt,
    PixelDtypeOpt,
    PromptFileOpt,
    PromptOpt,
    RequestIdOpt,
    SeedOpt,
    StopOpt,
    StreamOpt,
    StrictOpt,
    SystemOpt,
    TemperatureOpt,
    TlsOpt,
    TopKOpt,
    TopPOpt,
    default_text,
)

if TYPE_CHECKING:
    from rich.console import Console

HELP = """Build a modality-tagged GenerateRequest with vLLM-exact prompt tokens; write it.

MEDIA: video and image files, in the order the prompt shows them. The
request (tensors inline) is written to --out as binary protobuf, for
`mmctl send --request` or any gRPC client (grpcurl, ghz).

The pixel type is the one decision a replayed file cannot take back: a
worker that normalizes on the device reads floats as raw pixels (and the
reverse), silently. Without --target the request is built for a default
vLLM worker (0.33: raw uint8 pixels for Qwen2.5-VL and Qwen3-VL); with
--target the worker is asked, as `send` asks it (pixel type, item limits,
encoder budget, layout checks). The summary (on stderr; stdout stays empty
unless --json) says which and why.

Examples:

\b
  mmctl build clip.mp4 -p "Which colours appear, in order?" -o request.pb
  mmctl build a.jpg b.png clip.mp4 -p "Compare them." -o mixed.pb --pixel-dtype bfloat16
  mmctl build clip.mp4 -o req.pb --json | jq '.request.batches[0].tensors'
  mmctl build clip.mp4 -o req.pb --target gpu1:50051   # for that worker
  mmctl send --request request.pb        # replay it against a worker

Exit codes: 0 written; 2 usage; 3 bad input (or a truncated video with
--strict); 4 refused by --target's worker; 5 --target unavailable; 6 the
layout fails the mrope walk or a check against --target's worker (nothing
is written).
"""


def build(
    media: Annotated[list[Path], typer.Argument(metavar="MEDIA", hidden=True, show_default=False)],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", metavar="FILE", help="Where to write the request (binary protobuf)."
        ),
    ],
    prompt: PromptOpt = None,
    prompt_file: PromptFileOpt = None,
    allow_special_tokens: AllowSpecialOpt = False,
    pixel_dtype: PixelDtypeOpt = None,
    layout: LayoutOpt = LayoutKind.VLLM,
    max_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    top_k: TopKOpt = None,
    seed: SeedOpt = None,
    stop: StopOpt = None,
    stream: StreamOpt = None,
    request_id: RequestIdOpt = None,
    mm_item_limits: MmItemLimitsOpt = None,
    system: SystemOpt = None,
    chat: ChatOpt = None,
    strict: StrictOpt = False,
    model_dir: ModelDirOpt = None,
    bundle: BundleOpt = None,
    family: FamilyOpt = None,
    fps: FpsOpt = None,
    num_frames: NumFramesOpt = None,
    min_frames: MinFramesOpt = None,
    max_frames: MaxFramesOpt = None,
    min_pixels: MinPixelsOpt = None,
    max_pixels: MaxPixelsOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Write the request even when the mrope walk fails.")
    ] = False,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            "-t",
            metavar="HOST:PORT",
            help="Build for this worker: ask it what it expects, as send does."
            + default_text("none: a default vLLM worker"),
            show_default=False,
        ),
    ] = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    header: HeaderOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli import _inputs
    from mmctl.cli._output import Output
    from mmctl.client.negotiate import choose_pixels
    from mmctl.errors import CheckFailed, UsageError
    from mmctl.media.probe import check_readable
    from mmctl.models.settings import VisionOverrides
    from mmctl.offline import model_for
    from mmctl.request.compose import compose
    from mmctl.request.view import summary, write_request

    output = Output(json_mode=json_out)
    output.status("loading the model files and the tokenizer…")
    text = _inputs.prompt_text(prompt, prompt_file)
    params = _inputs.sampling(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        stop=stop,
    )
    limits = _inputs.item_limits(mm_item_limits)
    overrides = VisionOverrides(
        fps=fps,
        num_frames=num_frames,
        min_frames=min_frames,
        max_frames=max_frames,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
    )
    for path in media:
        check_readable(path)
    if target is not None:
        if force:
            raise UsageError("--force writes a request the checks refuse; not with --target")
        doc = _for_worker(
            target,
            media,
            out,
            model_dir=model_dir,
            bundle=bundle,
            family=family,
            tls=ca_cert or tls,
            headers=header,
            options={
                "prompt": text,
                "pixel_dtype": pixel_dtype,
                "sampling": params,
                "stream": stream,
                "request_id": request_id,
                "system": system,
                "chat": chat,
                "allow_special_tokens": allow_special_tokens,
                "strict": strict,
                "vision": overrides,
            },
            layout=layout,
            limits=limits,
        )
        output.written(doc, lambda console: _render_for_worker(console, doc))
        return
    model = model_for(model_dir=model_dir, bundle=bundle, family=family, vision=overrides)
    pixels = choose_pixels(None, pixel_dtype, family=model.spec)
    composed = compose(
        media,
        text,
        model,
        pixel_format=pixels.format,
        layout_kind=layout,
        system=system,
        chat=chat is not False,
        allow_special_tokens=allow_special_tokens,
        sampling=params,
        stream=stream is not False,
        request_id=request_id,
        item_limits=limits,
        strict=strict,
    )
    for warning in composed.warnings:
        output.warn(warning)
    if not composed.check.ok and not force:
        raise CheckFailed(
            model.spec.check_failed(composed.check.reason), hint="--force writes it anyway"
        )
    req = composed.plan.to_proto()
    doc = {
        "out": str(out),
        "bytes": write_request(req, out),
        "model": {"source": model.source.label, "family": model.spec.name},
        "target": None,
        "decisions": {"pixel_dtype": pixels.decision.as_dict()},
        "prompt_format": composed.rendered.how,
        "layout": composed.layout.kind.value,
        "check": composed.check.as_dict(),
        "items": [
            {"path": it.path, **it.pre.facts.as_dict(), "content_hash": it.content_hash}
            for it in composed.items
        ],
        "timings_s": {k: round(v, 6) for k, v in composed.timings.items()},
        "warnings": composed.warnings,
        "request": summary(req),
    }
    output.written(doc, lambda console: _render(console, doc))


build.__doc__ = HELP


def _for_worker(
    target: str,
    media: list[Path],
    out: Path,
    *,
    model_dir: Path | None,
    bundle: Path | None,
    family: str | None,
    tls: bool | Path,
    headers: list[str] | None,
    options: dict[str, Any],
    layout: LayoutKind,
    limits: dict[str, int] | None,
) -> dict[str, Any]:
    """The request ``send`` would send to ``target``, written to ``out``."""
    from mmctl.client.client import Client
    from mmctl.errors import UsageError
    from mmctl.request.view import summary

    if layout is not LayoutKind.VLLM or limits:
        raise UsageError(
            "--layout and --mm-item-limits describe an offline build; not with --target"
        )
    with Client(
        target, headers=headers, tls=tls, model_dir=model_dir, bundle=bundle, family=family
    ) as client:
        built = client.build(media, **options)
    run = built.run
    return {
        "out": str(out),
        "bytes": built.write(out),
        "target": target,
        "decisions": {k: d.as_dict() for k, d in run.decisions.items()},
        "checks": [c.as_dict() for c in run.checks],
        "items": run.items,
        "warnings": run.warnings,
        "request": summary(built.request),
    }


def _render_for_worker(console: Console, doc: dict[str, Any]) -> None:
    req = doc["request"]
    console.print(
        f"[bold]wrote[/] {doc['out']}  ({doc['bytes']:,} bytes)  request_id {req['request_id']}  "
        f"for {doc['target']}"
    )
    for name, decision in doc["decisions"].items():
        console.print(
            f"[bold]{name}[/] {decision['value']}  ({decision['reason']})", highlight=False
        )
    console.print(f"[bold]prompt[/] {req['num_input_ids']} tokens")
    _render_batches(console, req)


def _render(console: Console, doc: dict[str, Any]) -> None:
    req = doc["request"]
    console.print(
        f"[bold]wrote[/] {doc['out']}  ({doc['bytes']:,} bytes)  request_id {req['request_id']}"
    )
    decided = doc["decisions"]["pixel_dtype"]
    console.print(
        f"[bold]pixel dtype[/] {decided['value']}  ({decided['reason']})", highlight=False
    )
    console.print(
        f"[bold]prompt[/] {req['num_input_ids']} tokens, {doc['prompt_format']}; layout {doc['layout']}, "
        f"mrope walk {'pass' if doc['check']['ok'] else 'FAIL: ' + doc['check']['reason']}"
    )
    _render_batches(console, req)


def _render_batches(console: Console, req: dict[str, Any]) -> None:
    from rich.table import Table

    for n, batch in enumerate(req["batches"]):
        where = "mm_inputs" if n == 0 else f"extra_mm_inputs[{n - 1}]"
        spans = ", ".join(
            f"[{p['offset']}, {p['offset'] + p['length']})" for p in batch["mm_placeholders"]
        )
        console.print(
            f"[bold]{where}[/] {batch['modality']}  im_token_id {batch['im_token_id']}  spans {spans}"
        )
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        for col in ("tensor", "shape", "dtype", "bytes", "sha256"):
            table.add_column(col)
        for key, t in batch["tensors"].items():
            table.add_row(
                key, str(t["shape"]), t["dtype"], f"{t['bytes']:,}", t.get("sha256", "")[:16]
            )
        console.print(table)
        console.print(
            f"  batched {batch['batched_keys']}  flat {batch['flat_keys']}  cpu {batch['keep_on_cpu_keys']}"
        )
