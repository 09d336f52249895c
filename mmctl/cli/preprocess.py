"""`mmctl preprocess`: show (and save) what the model will receive for a media file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmctl.cli._options import (
    BundleOpt,
    FamilyOpt,
    FpsOpt,
    JsonOpt,
    MaxFramesOpt,
    MaxPixelsOpt,
    MinFramesOpt,
    MinPixelsOpt,
    ModelDirOpt,
    NumFramesOpt,
    PixelDtypeOpt,
    StrictOpt,
)

if TYPE_CHECKING:
    from rich.console import Console

HELP = """Preprocess a video or image exactly as the model's processor would; show it.

MEDIA: one video or image file. Prints what the model will receive: the
sampled frames and their times, the resized size, grid_thw, patches and
prompt tokens, the tensor's size in each pixel dtype, and timings.

Examples:

\b
  mmctl preprocess clip.mp4
  mmctl preprocess clip.mp4 --fps 1 --max-pixels 4000000 --json
  mmctl preprocess clip.mp4 --pixel-dtype uint8 --out clip.npz --preview sheet.png
  mmctl preprocess photo.jpg --family qwen2.5-vl

Exit codes: 0 done; 2 usage; 3 bad input (missing, unreadable or undecodable
media; a truncated video with --strict; an unwritable --out or --preview).
"""


def preprocess(
    media: Annotated[Path, typer.Argument(metavar="MEDIA", hidden=True, show_default=False)],
    pixel_dtype: PixelDtypeOpt = None,
    family: FamilyOpt = None,
    model_dir: ModelDirOpt = None,
    bundle: BundleOpt = None,
    fps: FpsOpt = None,
    num_frames: NumFramesOpt = None,
    min_frames: MinFramesOpt = None,
    max_frames: MaxFramesOpt = None,
    min_pixels: MinPixelsOpt = None,
    max_pixels: MaxPixelsOpt = None,
    strict: StrictOpt = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="Save pixel_values, grid, frames and parameters as an .npz archive, to "
            "exactly FILE.",
            show_default=False,
        ),
    ] = None,
    preview: Annotated[
        Path | None,
        typer.Option(
            "--preview",
            metavar="FILE",
            help="Write a PNG contact sheet of the sampled frames.",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli._output import Output
    from mmctl.offline import preprocess as run
    from mmctl.preprocessing.report import contact_sheet, save_npz, summary

    output = Output(json_mode=json_out, schema="preprocess")
    with output.frames() as on_frame:
        pre = run(
            media,
            pixel_dtype=pixel_dtype,
            family=family,
            model_dir=model_dir,
            bundle=bundle,
            strict=strict,
            keep_frames=preview is not None,
            on_frame=on_frame,
            fps=fps,
            num_frames=num_frames,
            min_frames=min_frames,
            max_frames=max_frames,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
        )
    for warning in pre.warnings:
        output.warn(warning)
    doc = summary(pre)
    if out is not None:
        doc["saved"] = str(save_npz(pre, out))
    if preview is not None:
        doc["preview"] = str(contact_sheet(pre, preview))
    output.result(doc, human=lambda console: _render(console, doc))


preprocess.__doc__ = HELP


def _render(console: Console, doc: dict[str, Any]) -> None:
    from mmctl.cli._render import kv_table, vision_rows
    from mmctl.media.probe import dimensions

    src = doc["source"]
    table = kv_table()
    if doc["kind"] == "video":
        table.add_row(
            "source",
            f"{src['path']}  {src['container']}/{src['codec']}  {dimensions(src['width'], src['height'])}"
            + (f"  rotated {src['rotation']}°" if src["rotation"] else ""),
        )
        table.add_row(
            "",
            f"{src['duration_s']:.2f} s at {src['source_fps']:.3f} fps ({src['fps_source']}), "
            f"{src['total_frames']} frames, counted from {src['frame_count_source']}",
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
            f"{src['path']}  {src['format']} {src['mode']}  {dimensions(src['width'], src['height'])}",
        )
    table.add_row("family", doc["family"])
    if doc["settings"]:
        table.add_row("model", str(doc["settings"]["model"]))
        vision_rows(table, {k: v for k, v in doc["settings"].items() if k != "model"})
    if doc.get("video_tensors"):
        for key, values in doc["video_tensors"].items():
            table.add_row(key, ", ".join(f"{x:.6g}" for x in values))
    table.add_row("resized", dimensions(doc["resized"]["width"], doc["resized"]["height"]))
    if doc["grid_thw"] is not None:
        table.add_row("grid_thw", str(doc["grid_thw"]))
        table.add_row("patches", f"{doc['num_patches']} x {doc['patch_dim']}")
    else:
        table.add_row("pixels", " x ".join(str(n) for n in doc["pixel_shape"]))
    table.add_row("tokens", f"{doc['num_tokens']} embedding tokens in the prompt")
    sizes = doc["bytes_by_format"]
    table.add_row(
        "tensor",
        f"{doc['pixel_format']}: {_mib(doc['tensor_bytes'])}  "
        f"(float32 {_mib(sizes['float32'])}, bf16 {_mib(sizes['bfloat16'])}, uint8 {_mib(sizes['uint8'])})",
    )
    # Rounded once, the rows as shown: the total is their sum, as printed.
    t = {k: round(v * 1000, 1) for k, v in doc["timings_s"].items()}
    timing = (
        f"total {t['decode_s'] + t['preprocess_s']:.1f} ms = decode {t['decode_s']:.1f} ms "
        f"+ resize + normalize {t['preprocess_s']:.1f} ms"
    )
    overlapped = doc["overlapped_s"]["preprocess_s"] * 1000
    if overlapped:
        # A video's frames are resized while the decoder works (on a second
        # thread for large frames): that work is inside the decode row.
        timing += f" (resize + normalize {overlapped:.1f} ms overlapped inside decode)"
    table.add_row("time", timing)
    for key in ("saved", "preview"):
        if key in doc:
            table.add_row(key, doc[key])
    console.print(table)


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"
