"""What `mmctl preprocess` shows and saves: summary dict, npz, contact sheet."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from mmctl.media.probe import MediaKind
from mmctl.media.video import VideoInfo
from mmctl.values.items import Preprocessed


def summary(pre: Preprocessed) -> dict[str, Any]:
    """The ``--json`` document (stable keys; new keys may be added)."""
    rows = pre.pixel_values.shape[0]
    width = int(np.prod(pre.pixel_values.shape[1:]))
    source = asdict(pre.source)
    source.pop("warnings", None)  # top-level, for every command alike
    doc: dict[str, Any] = {
        "kind": pre.kind.value,
        "family": pre.family,
        "source": source,
        "warnings": list(pre.warnings),
        "resized": {"height": pre.resized[0], "width": pre.resized[1]},
        "grid_thw": list(pre.grid_thw) if pre.grid_thw is not None else None,
        "pixel_shape": list(pre.pixel_values.shape),
        "num_patches": rows,
        "patch_dim": width,
        "num_tokens": pre.num_tokens,
        "pixel_format": pre.pixel_format.value,
        "tensor_bytes": int(pre.pixel_values.nbytes),
        "bytes_by_format": {
            "float32": rows * width * 4,
            "bfloat16": rows * width * 2,
            "uint8": rows * width,
        },
        "params": _params(pre),
        **({"extra": dict(pre.extra)} if pre.extra else {}),
        "settings": dict(pre.settings),
        **pre.timings.as_dict(),
    }
    if pre.kind is MediaKind.VIDEO:
        doc["frames"] = {
            "indices": pre.frame_indices.tolist(),
            "times_s": [round(t, 6) for t in pre.frame_times],
            "patch_times_s": [round(t, 6) for t in pre.patch_times],
            "sampled_fps": pre.sampled_fps,
        }
        doc["video_tensors"] = {k: np.asarray(v).tolist() for k, v in pre.video_tensors.items()}
    return doc


def _params(pre: Preprocessed) -> dict[str, Any]:
    p = asdict(pre.params)
    for key, value in p.items():
        if isinstance(value, tuple):
            p[key] = list(value)
    return p


def save_npz(pre: Preprocessed, path: Path) -> Path:
    """pixel_values, grid_thw (or the family's other tensors), frame indices, timestamps
    and every parameter,
    as an ``.npz`` archive written to exactly ``path`` (whatever its suffix)."""
    import json

    from mmctl.fileio import write_atomic

    return write_atomic(path, lambda f: _savez(f, pre, json.dumps(summary(pre))))


def _savez(file: BinaryIO, pre: Preprocessed, summary_json: str) -> None:
    arrays: dict[str, np.ndarray] = {
        "pixel_values": pre.pixel_values,
        "pixel_format": np.asarray(pre.pixel_format.value),
        **({"grid_thw": pre.grid_thw_array} if pre.grid_thw is not None else {}),
        **{key: np.asarray(value) for key, value in pre.item_tensors.items()},
        "frame_indices": pre.frame_indices,
        "frame_times": np.asarray(pre.frame_times, dtype=np.float64),
        "patch_times": np.asarray(pre.patch_times, dtype=np.float64),
        "summary": np.asarray(summary_json),
        **pre.video_tensors,  # second_per_grid_ts for Qwen2.5-VL
    }
    # numpy types **kwds as bool (the allow_pickle keyword shares the signature).
    np.savez(file, **arrays)  # type: ignore[arg-type]


def contact_sheet(
    pre: Preprocessed, path: Path, *, thumb_width: int = 240, columns: int = 6
) -> Path:
    """A grid of the sampled (resized) frames, each labelled with its time."""
    from PIL import Image, ImageDraw

    frames = pre.frames
    if not frames:
        raise ValueError("contact_sheet needs Preprocessed.frames (keep_frames=True)")
    h, w = frames[0].shape[:2]
    thumb_height = max(1, round(h * thumb_width / w))
    label_h = 18
    cols = min(columns, len(frames))
    rows = -(-len(frames) // cols)
    sheet = Image.new("RGB", (cols * thumb_width, rows * (thumb_height + label_h)), (24, 24, 24))
    draw = ImageDraw.Draw(sheet)
    for i, frame in enumerate(frames):
        x, y = (i % cols) * thumb_width, (i // cols) * (thumb_height + label_h)
        thumb = Image.fromarray(frame).resize(
            (thumb_width, thumb_height), Image.Resampling.BILINEAR
        )
        sheet.paste(thumb, (x, y + label_h))
        if isinstance(pre.source, VideoInfo):
            label = f"#{int(pre.frame_indices[i])}  {pre.frame_times[i]:.2f}s"
        else:
            label = "image"
        draw.text((x + 4, y + 3), label, fill=(235, 235, 235))
    from mmctl.fileio import write_atomic

    return write_atomic(path, lambda f: sheet.save(f, format="PNG"))
