"""`mmctl build`: a whole GenerateRequest (tensors inline) written to a file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmctl.choices import LayoutKind
from mmctl.cli._options import (
    AllowSpecialOpt,
    BundleOpt,
    ChatOpt,
    FamilyOpt,
    FpsOpt,
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
    TopKOpt,
    TopPOpt,
)

if TYPE_CHECKING:
    from rich.console import Console

HELP = """Build a modality-tagged GenerateRequest with vLLM-exact prompt tokens; write it.

MEDIA: video and image files, in the order the prompt shows them. The
request (tensors inline) is written to --out as binary protobuf, for
`mmctl send --request` or any gRPC client (grpcurl, ghz).

Examples:

\b
  mmctl build clip.mp4 -p "Which colours appear, in order?" -o request.pb
  mmctl build a.jpg b.png clip.mp4 -p "Compare them." -o mixed.pb --pixel-dtype bfloat16
  mmctl build clip.mp4 -o req.pb --json | jq '.request.batches[0].tensors'
  mmctl send --request request.pb        # replay it against a worker

Exit codes: 0 written; 2 usage; 3 bad input (or a truncated video with
--strict); 6 the layout fails the mrope walk (nothing is written).
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
    json_out: JsonOpt = False,
) -> None:
    from mmctl.choices import DEFAULT_PROMPT, PixelFormat
    from mmctl.cli import _inputs
    from mmctl.cli._output import Output
    from mmctl.errors import CheckFailed
    from mmctl.media.probe import check_readable
    from mmctl.models.base import VisionOverrides
    from mmctl.offline import model_for
    from mmctl.request.compose import compose
    from mmctl.request.view import summary, write_request

    output = Output(json_mode=json_out)
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
    model = model_for(model_dir=model_dir, bundle=bundle, family=family, vision=overrides)
    composed = compose(
        media,
        DEFAULT_PROMPT if text is None else text,
        model,
        pixel_format=pixel_dtype or PixelFormat.FLOAT32,
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
            f"mrope walk failed: {composed.check.reason}", hint="--force writes it anyway"
        )
    req = composed.plan.to_proto()
    doc = {
        "out": str(out),
        "bytes": write_request(req, out),
        "model": {"source": model.source.label, "family": model.spec.name},
        "prompt_format": composed.rendered.how,
        "layout": composed.layout.kind.value,
        "check": composed.check.as_dict(),
        "items": [
            {
                "path": it.path,
                "kind": it.kind.value,
                "grid_thw": list(it.pre.grid_thw),
                "num_tokens": it.pre.num_tokens,
                "content_hash": it.content_hash,
            }
            for it in composed.items
        ],
        "timings_s": {k: round(v, 6) for k, v in composed.timings.items()},
        "warnings": composed.warnings,
        "request": summary(req),
    }
    output.result(doc, human=lambda console: _render(console, doc))


build.__doc__ = HELP


def _render(console: Console, doc: dict[str, Any]) -> None:
    from rich.table import Table

    req = doc["request"]
    console.print(
        f"[bold]wrote[/] {doc['out']}  ({doc['bytes']:,} bytes)  request_id {req['request_id']}"
    )
    console.print(
        f"[bold]prompt[/] {req['num_input_ids']} tokens, {doc['prompt_format']}; layout {doc['layout']}, "
        f"mrope walk {'pass' if doc['check']['ok'] else 'FAIL: ' + doc['check']['reason']}"
    )
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
