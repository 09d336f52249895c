"""Synthetic video items of a given pixel-tensor size, valid for the model.

``mmctl bench --sizes 1MB,100MB`` measures transports at payload sizes no
clip on disk has to match. An item is a real :class:`Preprocessed` video:
solid frames, red and blue by temporal patch, patchified by the same code
as a decoded clip (so the stub worker answers "red, blue, …" and every
check a worker runs passes), with the grid chosen so the pixel tensor has
the asked byte count to within one grid row of patches.

A size is one request. A worker takes at most ``mm_encoder_budget`` feature
tokens per item and ``mm_item_limits`` videos per request, so a size larger
than one item may carry becomes several equal videos, each within the budget
(:func:`synthetic_items`); a size no request can carry is refused before the
run, naming the largest that fits.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from mmctl.choices import PixelFormat
from mmctl.errors import CheckFailed, UsageError
from mmctl.media.probe import MediaKind
from mmctl.media.synth import COLORS
from mmctl.media.video import VideoInfo
from mmctl.models.family import Family
from mmctl.models.qwen_vl.parts import QwenProcessor
from mmctl.models.qwen_vl.settings import QwenVision
from mmctl.preprocessing.pixels import patchify_into
from mmctl.request.build import MediaItem
from mmctl.request.hashing import item_hash
from mmctl.values.items import Preprocessed, Timings

#: Synthetic frames are sampled at this rate (any value works; 2 is Qwen's default fps).
FPS = 2.0
#: Widest frame, in patches: larger tensors get more frames, not wider ones.
MAX_SIDE = 32
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20,
          "GIB": 2**30}  # fmt: skip


def parse_size(text: str) -> int:
    """``"100MB"`` → 100_000_000 (KB/MB/GB decimal, KiB/MiB/GiB binary)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else ""
    if not match or unit not in _UNITS:
        raise UsageError(f"--sizes: {text!r} is not a size like 512KB, 16MB or 1GiB")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise UsageError(f"--sizes: {text!r} must be more than zero bytes")
    return size


def grid_for_bytes(nbytes: int, params: QwenVision, fmt: PixelFormat) -> tuple[int, int, int]:
    """(t, h, w) in patches whose pixel tensor is closest to ``nbytes``.

    h and w are multiples of the merge size; small sizes get one temporal
    patch and a small frame, large ones frames of up to ``MAX_SIDE`` patches.
    """
    m = params.merge_size
    row = params.patch_dim * fmt.numpy_dtype.itemsize
    rows = max(m * m, nbytes / row)
    t = max(1, math.ceil(rows / (MAX_SIDE * MAX_SIDE)))
    per_t = rows / t
    # The (h, w) of mergeable sides closest to per_t rows; the squarest of equals.
    candidates = [
        (h, w)
        for h in range(m, MAX_SIDE + 1, m)
        for w in {max(m, math.floor(per_t / h / m) * m), max(m, math.ceil(per_t / h / m) * m)}
    ]
    h, w = min(candidates, key=lambda hw: (abs(hw[0] * hw[1] - per_t), abs(hw[0] - hw[1])))
    return t, h, w


def synthetic_items(
    nbytes: int,
    spec: Family,
    params: Any,
    fmt: PixelFormat,
    *,
    encoder_budget: int = 0,
    max_videos: int | None = None,
    label: str | None = None,
) -> list[MediaItem]:
    """Videos whose pixel tensors hold about ``nbytes`` together: the fewest
    whose grids each fit ``encoder_budget`` feature tokens (0: no budget),
    at most ``max_videos`` of them (a worker's video limit; None: none)."""
    _, vision = _qwen(spec, params)
    count = 1
    while True:
        if max_videos is not None and count > max_videos:
            raise _too_large(nbytes, vision, fmt, encoder_budget, max_videos, label)
        share = math.ceil(nbytes / count)
        if (
            not encoder_budget
            or vision.tokens_for_grid(grid_for_bytes(share, vision, fmt)) <= encoder_budget
        ):
            return [synthetic_item(share, spec, params, fmt) for _ in range(count)]
        count += 1


def _too_large(
    nbytes: int,
    params: QwenVision,
    fmt: PixelFormat,
    budget: int,
    videos: int,
    label: str | None,
) -> CheckFailed:
    rows = budget * params.merge_size * params.merge_size
    most = videos * rows * params.patch_dim * fmt.numpy_dtype.itemsize
    return CheckFailed(
        f"--sizes {label or nbytes}: more {fmt.value} pixels than one request to this worker "
        f"may carry: at most {videos} video(s) (mm_item_limits) of {budget:,} feature tokens "
        f"each (mm_encoder_budget), {most / 1e6:,.0f} MB",
        hint=f"--sizes {math.floor(most / 1e6)}MB or less",
    )


def _qwen(spec: Family, params: Any) -> tuple[QwenProcessor, QwenVision]:
    processor = spec.processor
    if not isinstance(processor, QwenProcessor) or not isinstance(params, QwenVision):
        raise UsageError(
            f"--sizes makes synthetic Qwen-VL videos; this worker serves {spec.name}",
            hint="give media files (or a dataset) instead",
        )
    return processor, params


def synthetic_item(nbytes: int, spec: Family, params: Any, fmt: PixelFormat) -> MediaItem:
    """A video item whose pixel tensor holds about ``nbytes`` (see :func:`grid_for_bytes`)."""
    processor, params = _qwen(spec, params)
    t, gh, gw = grid_for_bytes(nbytes, params, fmt)
    tp, p = params.temporal_patch_size, params.patch_size
    frames = t * tp
    height, width = gh * p, gw * p
    rows_per_t = gh * gw
    out = np.empty((t * rows_per_t, params.patch_dim), dtype=fmt.numpy_dtype)
    for k in range(t):
        colour = COLORS["red" if k % 2 == 0 else "blue"]
        block = np.broadcast_to(np.asarray(colour, dtype=np.uint8), (tp, height, width, 3))
        patchify_into(out[k * rows_per_t : (k + 1) * rows_per_t], block, params, fmt)
    indices = np.arange(frames, dtype=np.int64)
    times = tuple(float(i) / FPS for i in indices)
    patch_times = tuple(processor.variant.video_frame_times(indices, FPS, params))
    label = f"synthetic:{out.nbytes}B"
    source = VideoInfo(
        path=label,
        container="synthetic",
        codec="none",
        width=width,
        height=height,
        rotation=0,
        source_fps=FPS,
        fps_source="synthetic",
        duration_s=frames / FPS,
        header_frames=frames,
        total_frames=frames,
        frame_count_source="synthetic",
    )
    pre = Preprocessed(
        kind=MediaKind.VIDEO,
        family=spec.name,
        params=params,
        pixel_format=fmt,
        pixel_values=out,
        grid_thw=(t, gh, gw),
        resized=(height, width),
        source=source,
        frame_indices=indices,
        frame_times=times,
        patch_times=patch_times,
        num_tokens=params.tokens_for_grid((t, gh, gw)),
        timings=Timings(0.0, 0.0),
        video_tensors=processor.variant.video_tensors(indices, frames, FPS, params),
    )
    return MediaItem(label, pre, item_hash(pre, label.encode()))
