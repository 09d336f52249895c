"""Rescale/normalize, temporal padding and patchify, in numpy.

Layout (HF ``Qwen3VLVideoProcessor.patchify``, Qwen2-VL alike): rows ordered
(t, h/M, w/M, M, M), each row (C, Tp, P, P) channel-major, so one row is
``C*Tp*P*P`` values (1536 for P=16). Images are one temporal patch made of the
same frame repeated Tp times.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from mmctl.choices import PixelFormat


class PatchGeometry(Protocol):
    """What patchify reads of a family's settings (the Qwen families' ``QwenVision``)."""

    @property
    def patch_size(self) -> int: ...

    @property
    def temporal_patch_size(self) -> int: ...

    @property
    def merge_size(self) -> int: ...

    @property
    def rescale_factor(self) -> float: ...

    @property
    def image_mean(self) -> tuple[float, float, float]: ...

    @property
    def image_std(self) -> tuple[float, float, float]: ...


def grid_for(
    num_frames: int, height: int, width: int, params: PatchGeometry
) -> tuple[int, int, int]:
    """(grid_t, grid_h, grid_w) after padding ``num_frames`` to a multiple of Tp."""
    tp, p = params.temporal_patch_size, params.patch_size
    return (num_frames + (-num_frames % tp)) // tp, height // p, width // p


def normalization(params: PatchGeometry) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (mean, std) on the 0–255 scale, float32.

    HF fuses the rescale into mean and std in float32 —
    ``float32(mean) * float32(1 / rescale_factor)`` — then computes
    ``(x - mean) / std`` in float32; the same order gives bit-identical values.
    """
    scale = np.float32(1.0 / params.rescale_factor)
    mean = np.asarray(params.image_mean, dtype=np.float32) * scale
    std = np.asarray(params.image_std, dtype=np.float32) * scale
    return mean, std


def patchify_into(
    out: np.ndarray,
    frames: np.ndarray,
    params: PatchGeometry,
    fmt: PixelFormat,
    scratch: np.ndarray | None = None,
) -> None:
    """Write one temporal patch of frames into its rows of the pixel tensor.

    ``frames``: ``[Tp, H, W, 3]`` uint8, H and W multiples of P·M.
    ``out``: the ``[gh*gw, C*Tp*P*P]`` rows of this temporal patch, dtype per
    ``fmt``. ``scratch``: an optional float32 buffer of the same shape as
    ``out`` (bf16/fp16 paths) to avoid an allocation per patch.
    """
    tp, h, w, c = frames.shape
    p, m = params.patch_size, params.merge_size
    gh, gw = h // p, w // p
    blocks = frames.reshape(tp, gh // m, m, p, gw // m, m, p, c)
    # -> (h/M, w/M, M, M, C, Tp, P, P)
    ordered = blocks.transpose(1, 4, 2, 5, 7, 0, 3, 6)
    shape = (gh // m, gw // m, m, m, c, tp, p, p)
    if fmt is PixelFormat.UINT8:
        np.copyto(out.reshape(shape), ordered)
        return
    target = out if fmt is PixelFormat.FLOAT32 else scratch
    if target is None:
        target = np.empty(out.shape, dtype=np.float32)
    view = target.reshape(shape)
    np.copyto(view, ordered, casting="unsafe")
    mean, std = normalization(params)
    per_channel = target.reshape(-1, c, tp * p * p)
    per_channel -= mean[None, :, None]
    per_channel /= std[None, :, None]
    if fmt is PixelFormat.BFLOAT16:
        float32_to_bfloat16_bits(target, out=out)
    elif fmt is PixelFormat.FLOAT16:
        np.copyto(out, target, casting="same_kind")  # round-to-nearest-even, as torch


def float32_to_bfloat16_bits(values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of float32 ``values``, round-to-nearest-even,
    as torch's ``.to(torch.bfloat16)`` does (NaN stays NaN)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
    result = (rounded >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        result[nan] = 0x7FC0
    if out is None:
        return result
    np.copyto(out, result.reshape(out.shape))
    return out


def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """Widen bfloat16 bit patterns back to float32 (exact)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
