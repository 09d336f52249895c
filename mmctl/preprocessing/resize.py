"""Resize targets (``smart_resize``) and the resize itself (bicubic or bilinear).

Both targets mirror Hugging Face's functions of the same name exactly,
including their float arithmetic and Python's round-half-to-even, because a
one-pixel difference changes the grid and with it every prompt token.
"""

from __future__ import annotations

import functools
import importlib
import math
from types import ModuleType
from typing import Literal

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import dimensions


def _load_native() -> ModuleType | None:
    try:
        return importlib.import_module("mmctl.preprocessing._resample")
    except ImportError:  # installed without a C compiler: the numpy passes, same results
        return None


_native = _load_native()

#: HF refuses frames whose long side exceeds 200 × the short side.
MAX_ASPECT_RATIO = 200


def _check_aspect(height: int, width: int) -> None:
    if min(height, width) <= 0:
        raise InputError(f"frame has no pixels: {dimensions(width, height)}")
    ratio = max(height, width) / min(height, width)
    if ratio > MAX_ASPECT_RATIO:
        raise InputError(
            f"aspect ratio {ratio:.1f} of a {dimensions(width, height)} frame is over the model's limit of "
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


#: The antialiasing filters torch has uint8 passes for (``PILImageResampling``
#: BICUBIC = 3, BILINEAR = 2), by the name ``resize_rgb`` takes.
Filter = Literal["bicubic", "bilinear"]


def resize_rgb(
    frame: np.ndarray, height: int, width: int, *, filter: Filter = "bicubic"
) -> np.ndarray:
    """Bicubic (or bilinear) resize of an ``[H, W, 3]`` uint8 frame, bit for bit
    as HF's torchvision path (``F.resize(..., antialias=True)`` on uint8) does it.

    torchvision's uint8 antialiased bicubic is Pillow's algorithm run as two
    full passes, horizontal then vertical, with a uint8 image in between, but
    with int16 fixed-point weights where Pillow uses int32 ones: Pillow itself
    differs by up to 2 levels (seen shrinking a 2000x1300 image), so mmctl
    applies torch's weights itself — in the compiled passes of
    ``_resample.c`` (faster than Pillow), else in numpy (about 6x slower:
    198 vs 33 ms shrinking 2000x1300 to 994x644).

    ``filter="bilinear"`` (Llama 4's ``resample=2``) is the same int16 path with
    torch's triangle filter over a support of one source pixel per unit of
    scale (two taps when enlarging), where bicubic has two.
    """
    if filter not in _FILTERS:
        raise ValueError(f"unknown resize filter {filter!r}; one of {sorted(_FILTERS)}")
    if frame.shape[:2] == (height, width):
        return frame
    out = np.ascontiguousarray(frame)
    if out.shape[1] != width:
        out = _horizontal(out, width, filter)
    if out.shape[0] != height:
        out = _vertical(out, height, filter)
    return out


def native() -> bool:
    """Whether the compiled passes are built (else the numpy ones run)."""
    return _native is not None


def _horizontal(src: np.ndarray, n_out: int, filter: Filter) -> np.ndarray:
    rows, n_in, ch = src.shape
    first, count, q, bits = _int16_weights(n_in, n_out, filter)
    if _native is None:
        # Rows of the transposed image are columns: one gather per tap either way.
        out = _resample_rows(np.ascontiguousarray(src.transpose(1, 0, 2)), first, q, bits)
        return np.ascontiguousarray(out.transpose(1, 0, 2))
    dst = np.empty((rows, n_out, ch), dtype=np.uint8)
    _native.horizontal(src, dst, rows, n_in, n_out, ch, first, count, q, q.shape[1], bits)
    return dst


def _vertical(src: np.ndarray, n_out: int, filter: Filter) -> np.ndarray:
    n_in = src.shape[0]
    first, count, q, bits = _int16_weights(n_in, n_out, filter)
    if _native is None:
        return _resample_rows(src, first, q, bits)
    dst = np.empty((n_out, *src.shape[1:]), dtype=np.uint8)
    row_len = src.size // n_in
    _native.vertical(src, dst, n_in, n_out, row_len, first, count, q, q.shape[1], bits)
    return dst


def _cubic(x: np.ndarray, a: float = -0.5) -> np.ndarray:
    # The antialiasing kernels (Pillow, torch) use a = -0.5.
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def _triangle(x: np.ndarray) -> np.ndarray:
    # torch's HelperInterpLinear::aa_filter.
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


#: (filter function, half its interpolation size) — torch's ``interp_size / 2``:
#: 4 taps for cubic, 2 for linear, widened by the scale when shrinking.
_FILTERS = {"bicubic": (_cubic, 2.0), "bilinear": (_triangle, 1.0)}


@functools.lru_cache(maxsize=64)
def _int16_weights(
    n_in: int, n_out: int, filter: Filter = "bicubic"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(first source index, taps used, int weights [n_out, taps], precision bits)
    as torch computes them. Cached per process (every frame of a clip has the
    same sizes); the arrays are read-only."""
    kernel, half_size = _FILTERS[filter]
    scale = n_in / n_out
    support = half_size * scale if scale >= 1.0 else half_size
    inv = 1.0 / scale if scale >= 1.0 else 1.0
    centers = scale * (np.arange(n_out) + 0.5)
    first = np.maximum((centers - support + 0.5).astype(np.int64), 0)
    last = np.minimum((centers + support + 0.5).astype(np.int64), n_in)
    count = last - first
    taps = int(count.max())
    j = np.arange(taps)[None, :]
    w = kernel((j + first[:, None] - centers[:, None] + 0.5) * inv)
    w = np.where(j < count[:, None], w, 0.0)
    w /= w.sum(axis=1, keepdims=True)
    # As many fraction bits as keep the largest weight inside int16 (max 22).
    wmax = float(w.max())
    bits = 0
    while bits < 22 and int(0.5 + wmax * (1 << (bits + 1))) < (1 << 15):
        bits += 1
    scaled = w * (1 << bits)
    q = np.where(w < 0, np.trunc(scaled - 0.5), np.trunc(scaled + 0.5)).astype(np.int32)
    for array in (first, count, q):
        array.flags.writeable = False
    return first, count, q, bits


def _resample_rows(src: np.ndarray, first: np.ndarray, q: np.ndarray, bits: int) -> np.ndarray:
    """Resample axis 0 of a uint8 ``[n_in, …]`` array to ``len(first)`` rows (numpy)."""
    n_in, n_out = src.shape[0], len(first)
    flat = src.reshape(n_in, -1)
    acc = np.full((n_out, flat.shape[1]), 1 << (bits - 1), dtype=np.int32)
    tmp = np.empty_like(acc)
    for k in range(q.shape[1]):
        rows = np.minimum(first + k, n_in - 1)
        np.multiply(flat[rows], q[:, k, None], out=tmp, dtype=np.int32)
        acc += tmp
    np.right_shift(acc, bits, out=acc)
    np.clip(acc, 0, 255, out=acc)
    return acc.astype(np.uint8).reshape((n_out, *src.shape[1:]))
