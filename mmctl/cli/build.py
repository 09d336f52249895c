"""`mmctl build`: a whole GenerateRequest (tensors inline) written to a file."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from mmctl.cli._options import (
    BundleOpt,
    ChatOpt,
    FamilyOpt,
    FpsOpt,
    JsonOpt,
    LimitOpt,
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
    TemperatureOpt,
    TopKOpt,
    TopPOpt,
)

EXAMPLES = """
Examples:

  mmctl build clip.mp4 -p "Which colours appear, in order?" -o request.pb

  mmctl build a.jpg b.png clip.mp4 -p "Compare them." -o mixed.pb --pixel-dtype bfloat16

  mmctl build clip.mp4 -p "Describe." -o req.pb --json | jq '.request.batches[0].tensors'

  mmctl send --request request.pb        # replay it against a worker

Exit codes: 0 written, 2 usage, 3 bad input, 6 the layout fails the mrope walk
(nothing is written).
"""


class LayoutChoice(StrEnum):
    vllm = "vllm"
    hf_legacy = "hf-legacy"
    smg = "smg"


def build(
    media: Annotated[
        list[Path],
        typer.Argument(help="Video and image files, in prompt order.", show_default=False),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Where to write the request (binary protobuf).")
    ],
    prompt: PromptOpt = "",
    pixel_dtype: PixelDtypeOpt = None,
    layout: Annotated[
        LayoutChoice,
        typer.Option("--layout", help="Token layout (only vllm is what a vLLM worker expects)."),
    ] = LayoutChoice.vllm,
    max_tokens: MaxTokensOpt = 128,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    top_k: TopKOpt = None,
    seed: SeedOpt = None,
    stop: StopOpt = None,
    stream: StreamOpt = True,
    request_id: RequestIdOpt = None,
    limit_mm: LimitOpt = None,
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
    force: Annotated[
        bool, typer.Option("--force", help="Write even when the mrope walk fails.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Build a modality-tagged GenerateRequest with vLLM-exact prompt tokens."""
    from mmctl.cli._model import load_from_options, overrides, pixel_format, sampling
    from mmctl.cli._output import Output
    from mmctl.errors import CheckFailed, InputError
    from mmctl.prompt.layout import LayoutKind
    from mmctl.request.compose import compose
    from mmctl.request.limits import parse_item_limits
    from mmctl.request.view import summary

    output = Output(json_mode=json_out)
    fmt = pixel_format(pixel_dtype)
    params = sampling(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        stop=stop,
    )
    limits = parse_item_limits(limit_mm) if limit_mm else None
    model = load_from_options(
        model_dir=model_dir,
        bundle=bundle,
        family=family,
        params=overrides(
            fps=fps,
            num_frames=num_frames,
            min_frames=min_frames,
            max_frames=max_frames,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
        ),
    )
    composed = compose(
        media,
        prompt,
        model,
        pixel_format=fmt,
        layout_kind=LayoutKind(layout.value),
        system=system,
        chat=chat,
        sampling=params,
        stream=stream,
        request_id=request_id,
        item_limits=limits,
    )
    if not composed.check.ok and not force:
        raise CheckFailed(
            f"mrope walk failed: {composed.check.reason}", hint="--force writes it anyway"
        )
    req = composed.plan.to_proto()
    data = req.SerializeToString()
    try:
        tmp = out.with_name(out.name + ".part")
        tmp.write_bytes(data)
        tmp.replace(out)
    except OSError as err:
        raise InputError(f"cannot write {out}: {err.strerror or err}") from None
    doc = {
        "out": str(out),
        "bytes": len(data),
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
        "request": summary(req),
    }
    output.result(doc, human=lambda console: _render(console, doc))


build.__doc__ = (build.__doc__ or "") + "\n" + EXAMPLES


def _render(console, doc: dict) -> None:
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
