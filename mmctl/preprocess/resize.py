"""Resize targets (``smart_resize``) and the bicubic resize itself.

Both targets mirror Hugging Face's functions of the same name exactly,
including their float arithmetic and Python's round-half-to-even, because a
one-pixel difference changes the grid and with it every prompt token.
"""

from __future__ import annotations

import math

import numpy as np

from mmctl.errors import InputError

#: HF refuses frames whose long side exceeds 200 × the short side.
MAX_ASPECT_RATIO = 200


def _check_aspect(height: int, width: int) -> None:
    if min(height, width) <= 0:
        raise InputError(f"frame has no pixels: {width}x{height}")
    ratio = max(height, width) / min(height, width)
    if ratio > MAX_ASPECT_RATIO:
        raise InputError(
            f"aspect ratio {ratio:.1f} of a {width}x{height} frame is over the model's limit of "
            f"{MAX_ASPECT_RATIO}"
        )


def smart_resize_image(
    height: int, width: int, *, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """(h, w) multiples of ``factor`` with ``min_pixels <= h*w <= max_pixels``.

    Per-frame budget (HF ``qwen2_vl`` ``smart_resize``): sides rounded to the
    nearest multiple of ``factor``, then scaled by √ratio down (floor) or up
    (ceil) when the area is out of budget; the aspect ratio kept as closely as
    that allows.
    """
    _check_aspect(height, width)
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def fit_budget(height: int, width: int, factor: int, budget) -> tuple[int, int]:
    """:func:`smart_resize_image` with a ``PixelBudget`` (per-frame families)."""
    return smart_resize_image(
        height, width, factor=factor, min_pixels=budget.min_pixels, max_pixels=budget.max_pixels
    )


def smart_resize_video(
    num_frames: int,
    height: int,
    width: int,
    *,
    factor: int,
    temporal_factor: int,
    min_pixels: int,
    max_pixels: int,
) -> tuple[int, int]:
    """(h, w) for a clip whose whole budget is frames × h × w (HF ``qwen3_vl``).

    Frames with a side under ``factor`` are first scaled up (int-truncated) so
    the short side reaches it. ``num_frames`` must be at least
    ``temporal_factor``: HF raises otherwise, and so do we.
    """
    if num_frames < temporal_factor:
        raise InputError(
            f"a video needs at least {temporal_factor} frames for one temporal patch, got {num_frames}",
            hint="send a single frame as an image instead",
        )
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    _check_aspect(height, width)
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def resize_rgb(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bicubic resize of an ``[H, W, 3]`` uint8 frame, as HF's torchvision path does.

    torchvision's uint8 antialiased bicubic is Pillow's algorithm run as two
    full passes, horizontal then vertical, with a uint8 image in between.
    Pillow's own one-call resize mixes the passes differently and is off by
    up to ~10 levels next to sharp edges when an axis is enlarged; two
    single-axis Pillow resizes in torchvision's order match it exactly on
    every fixture (tests/compat/test_hf_preprocess_parity.py). Pillow
    releases the GIL while resizing.
    """
    src_h, src_w = frame.shape[:2]
    if (src_h, src_w) == (height, width):
        return frame
    from PIL import Image

    image = Image.fromarray(frame)
    if src_w != width:
        image = image.resize((width, src_h), Image.Resampling.BICUBIC)
    if src_h != height:
        image = image.resize((width, height), Image.Resampling.BICUBIC)
    return np.asarray(image)
