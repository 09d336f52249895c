"""`mmctl preprocess`: show (and save) what the model will receive for a media file."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from mmctl.cli._options import (
    FamilyOpt,
    FpsOpt,
    JsonOpt,
    MaxFramesOpt,
    MaxPixelsOpt,
    MinFramesOpt,
    MinPixelsOpt,
    ModelDirOpt,
    NumFramesOpt,
)

EXAMPLES = """
Examples:

  mmctl preprocess clip.mp4

  mmctl preprocess clip.mp4 --fps 1 --max-pixels 4000000 --json

  mmctl preprocess clip.mp4 --pixel-format uint8 --out clip.npz --preview sheet.png

  mmctl preprocess photo.jpg --family qwen2.5-vl
"""


class PixelFormatChoice(StrEnum):
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"
    uint8 = "uint8"


def preprocess(
    media: Annotated[Path, typer.Argument(help="Video or image file.", show_default=False)],
    pixel_format: Annotated[
        PixelFormatChoice,
        typer.Option(
            "--pixel-format",
            help="float32/bfloat16/float16: normalized; uint8: raw resized pixels (device-normalizing workers).",
        ),
    ] = PixelFormatChoice.float32,
    family: FamilyOpt = None,
    model_dir: ModelDirOpt = None,
    fps: FpsOpt = None,
    num_frames: NumFramesOpt = None,
    min_frames: MinFramesOpt = None,
    max_frames: MaxFramesOpt = None,
    min_pixels: MinPixelsOpt = None,
    max_pixels: MaxPixelsOpt = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Save pixel_values, grid, frames and parameters (.npz)."),
    ] = None,
    preview: Annotated[
        Path | None,
        typer.Option("--preview", help="Write a contact sheet of the sampled frames (.png)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Preprocess a video or image exactly as the model's processor would."""
    from mmctl.cli._model import overrides
    from mmctl.cli._output import Output
    from mmctl.cli._progress import FrameProgress
    from mmctl.models.base import params_from_configs
    from mmctl.models.files import load_model_files
    from mmctl.models.registry import resolve
    from mmctl.preprocess.pipeline import preprocess as run
    from mmctl.preprocess.pixels import PixelFormat
    from mmctl.preprocess.report import contact_sheet, save_npz, summary

    output = Output(json_mode=json_out)
    files = load_model_files(model_dir) if model_dir else None
    spec = resolve(family, files.config if files else None)
    params = params_from_configs(spec.params, files) if files else spec.params
    params = params.with_overrides(
        **overrides(
            fps=fps,
            num_frames=num_frames,
            min_frames=min_frames,
            max_frames=max_frames,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
        )
    )
    with FrameProgress(output, enabled=not json_out) as on_frame:
        pre = run(
            media,
            spec,
            params,
            PixelFormat(pixel_format.value),
            keep_frames=preview is not None,
            on_frame=on_frame,
        )
    doc = summary(pre)
    if out is not None:
        doc["saved"] = str(save_npz(pre, out))
    if preview is not None:
        doc["preview"] = str(contact_sheet(pre, preview))
    output.result(doc, human=lambda console: _render(console, doc))


preprocess.__doc__ = (preprocess.__doc__ or "") + "\n" + EXAMPLES


def _render(console, doc: dict) -> None:
    from rich.table import Table

    src = doc["source"]
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    if doc["kind"] == "video":
        table.add_row(
            "source",
            f"{src['path']}  {src['container']}/{src['codec']}  {src['width']}x{src['height']}"
            + (f"  rotated {src['rotation']}°" if src["rotation"] else ""),
        )
        table.add_row(
            "",
            f"{src['duration_s']:.2f} s at {src['source_fps']:.3f} fps ({src['fps_source']}), "
            f"{src['total_frames']} frames decoded (count from {src['frame_count_source']})",
        )
        frames = doc["frames"]
        shown = ", ".join(
            f"{i}@{t:.2f}s"
            for i, t in zip(frames["indices"][:12], frames["times_s"][:12], strict=False)
        )
        more = f" … (+{len(frames['indices']) - 12})" if len(frames["indices"]) > 12 else ""
        table.add_row(
            "sampled",
            f"{len(frames['indices'])} frames ({frames['sampled_fps']:.3f} fps): {shown}{more}",
        )
    else:
        table.add_row(
            "source",
            f"{src['path']}  {src['format']} {src['mode']}  {src['width']}x{src['height']}",
        )
    table.add_row("family", doc["family"])
    table.add_row("resized", f"{doc['resized']['width']}x{doc['resized']['height']}")
    table.add_row("grid_thw", str(doc["grid_thw"]))
    table.add_row("patches", f"{doc['num_patches']} x {doc['patch_dim']}")
    table.add_row("tokens", f"{doc['num_tokens']} pad tokens in the prompt")
    sizes = doc["bytes_by_format"]
    table.add_row(
        "tensor",
        f"{doc['pixel_format']}: {_mib(doc['tensor_bytes'])}  "
        f"(float32 {_mib(sizes['float32'])}, bf16 {_mib(sizes['bfloat16'])}, uint8 {_mib(sizes['uint8'])})",
    )
    t = doc["timings_s"]
    table.add_row(
        "time",
        f"decode {t['decode_s'] * 1000:.0f} ms, preprocess {t['preprocess_s'] * 1000:.0f} ms (overlapped), "
        f"total {t['total_s'] * 1000:.0f} ms",
    )
    for key in ("saved", "preview"):
        if key in doc:
            table.add_row(key, doc[key])
    console.print(table)


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"
