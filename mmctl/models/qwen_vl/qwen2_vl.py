"""Qwen2-VL and Qwen2.5-VL: patch 14, CLIP mean/std, per-frame budgets.

Differences from Qwen3-VL that live only here: no timestamps in the prompt
(the model gets ``second_per_grid_ts`` = Tp / sampled fps instead), frames
sampled with ``torch.arange`` semantics and a multiple-of-Tp count, and a
pixel budget per frame rather than per clip.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mmctl.choices import PruningMethod
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models import kinds
from mmctl.models.qwen_vl.parts import qwen_family
from mmctl.models.qwen_vl.settings import QWEN2VL_IMAGE, QWEN2VL_VIDEO, QwenVision
from mmctl.models.settings import HFClass
from mmctl.preprocessing.resize import smart_resize_image
from mmctl.values.fields import FieldLayout, WireField


@dataclass(frozen=True)
class Qwen2VLVision(QwenVision):
    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (QWEN2VL_IMAGE,)
    VIDEO_CLASSES: ClassVar[tuple[HFClass, ...]] = (QWEN2VL_VIDEO,)
    #: The Qwen2.5-VL checkpoints' preprocessor_config.json (they ship no video
    #: file, so transformers builds the video processor from it too: the video
    #: budget is per frame).
    PUBLISHED: ClassVar[Mapping[str, Any]] = {
        "patch_size": 14,
        "image_mean": kinds.CLIP_MEAN,
        "image_std": kinds.CLIP_STD,
        "video_min_pixels": 3136,
        "video_max_pixels": 12845056,
        "image_min_pixels": 3136,
        "image_max_pixels": 12845056,
    }


#: vLLM's Qwen2.5-VL field config: video adds ``second_per_grid_ts``, batched.
SECOND_PER_GRID_TS = WireField(
    "second_per_grid_ts",
    FieldLayout.BATCHED,
    "second_per_grid_ts",
    "float32",
    (),
    "[items] seconds per temporal patch, Tp / sampled fps",
)


#: Floats per ``Vectorized<float>`` in the kernel torch runs for ``arange`` on x86: 8 (the
#: AVX2 width). Checked on torch 2.13 CPU reporting AVX512: 8 matches torch bit for bit on
#: 4,000 random ranges, 16 does not (arange has no AVX-512 kernel of its own).
_TORCH_VEC = 8


def torch_arange_float32(end: int, step: float) -> np.ndarray:
    """``torch.arange(0, end, step)`` for a float ``step`` (a float32 tensor) on CPU, bit
    for bit: the length is ``ceil(end / step)`` in double; the kernel fills the tensor in
    blocks of two vectors of 8, each vector from its first index ``b`` as
    ``float(float(b * step) + k * step)`` (the base rounded to float32 first, the offset
    added in double), and the remainder past the last whole block one by one as
    ``float(i * step)``. On long clips the block form differs from ``float(i * step)`` by
    one float32 ulp, which ``.int()`` can turn into a different frame."""
    count = math.ceil(end / step)
    i = np.arange(count, dtype=np.int64)
    blocked = count - count % (2 * _TORCH_VEC)
    base = np.where(i < blocked, i - i % _TORCH_VEC, i)
    base_value = (base * step).astype(np.float32).astype(np.float64)
    return (base_value + (i - base) * step).astype(np.float32)


@dataclass(frozen=True)
class Qwen2VLVariant:
    """What Qwen2-VL / Qwen2.5-VL do their own way."""

    name: str = "qwen2.5-vl"
    #: One flat run of pads per video: the time reaches the model as second_per_grid_ts.
    per_frame_markers: bool = False

    def sample_indices(
        self, total_frames: int, source_fps: float, vision: QwenVision
    ) -> np.ndarray:
        """HF ``Qwen2VLVideoProcessor.sample_frames`` with fps sampling, as vLLM's
        ``Qwen2VLVideoBackend`` (the loader registered for ``Qwen2VLVideoProcessor``:
        Qwen2-VL, Qwen2.5-VL, Qwen3-Omni) runs it.

        The count is floored to a multiple of Tp; indices follow
        ``torch.arange(0, total, total / n).int()`` (:func:`torch_arange_float32`),
        truncated. That float32 step can end on ``total`` itself (153 frames at
        10 fps: …, 147, 153); vLLM clamps it to the last frame (152), where HF's
        own sampling would index past the clip.
        """
        tp = vision.temporal_patch_size
        if vision.num_frames is not None:
            n = round(vision.num_frames / tp) * tp
        else:
            max_frames = math.floor(min(vision.max_frames, total_frames) / tp) * tp
            wanted = total_frames / source_fps * vision.fps
            n = math.floor(min(max(wanted, vision.min_frames), max_frames, total_frames) / tp) * tp
        if n < tp or n > total_frames:
            raise InputError(
                f"cannot sample {n} frames out of {total_frames} (need a multiple of {tp}, "
                f"at least {tp})"
            )
        picked = torch_arange_float32(total_frames, total_frames / n).astype(np.int64)
        return np.minimum(picked, total_frames - 1)

    def video_frame_times(
        self, indices: np.ndarray, source_fps: float, vision: QwenVision
    ) -> list[float]:
        """Start time of each temporal patch (not part of the prompt)."""
        tp = vision.temporal_patch_size
        return [int(indices[i]) / source_fps for i in range(0, len(indices), tp)]

    def second_per_grid_ts(
        self, indices: np.ndarray, total_frames: int, source_fps: float, vision: QwenVision
    ) -> float:
        """Tp / sampled fps, what Qwen2.5-VL's processor passes the model."""
        sampled_fps = len(indices) / total_frames * source_fps
        return vision.temporal_patch_size / sampled_fps

    def video_size(
        self, num_frames: int, height: int, width: int, vision: QwenVision
    ) -> tuple[int, int]:
        """Each frame on its own budget (per frame, unlike Qwen3-VL's per clip)."""
        low, high = vision.video_min_pixels, vision.video_max_pixels
        return smart_resize_image(
            height, width, factor=vision.factor, min_pixels=low, max_pixels=high
        )

    def content_size(
        self, kind: MediaKind, canvas: tuple[int, int], num_frames: int, height: int, width: int,
        vision: QwenVision,
    ) -> tuple[int, int]:  # fmt: skip
        return canvas  # resized to fill it

    def image_size(self, height: int, width: int, vision: QwenVision) -> tuple[int, int]:
        low, high = vision.image_min_pixels, vision.image_max_pixels
        return smart_resize_image(
            height, width, factor=vision.factor, min_pixels=low, max_pixels=high
        )

    def frame_label(self, seconds: float) -> str:
        return ""  # no per-frame blocks

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, vision: QwenVision
    ) -> dict[str, np.ndarray]:
        # vLLM's Qwen2.5-VL field config: second_per_grid_ts, batched per video.
        value = self.second_per_grid_ts(indices, total_frames, source_fps, vision)
        return {"second_per_grid_ts": np.asarray([value], dtype=np.float32)}


VARIANT = Qwen2VLVariant()
FAMILY = qwen_family(
    VARIANT,
    Qwen2VLVision,
    SECOND_PER_GRID_TS,
    aliases=("qwen2-vl",),
    model_types=("qwen2_vl", "qwen2_5_vl"),
    architectures=("Qwen2VL", "Qwen2_5_VL"),
    default_system="You are a helpful assistant.",
    # vLLM's Qwen2.5-VL model prunes with EVS only (the interface's default
    # supported_video_pruning_methods); its Qwen2-VL model does not prune.
    video_pruning=(("qwen2_5_vl", (PruningMethod.EVS,)),),
)
