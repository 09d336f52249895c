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
from typing import Any

import numpy as np

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.base import PixelBudget, TokenIds, VisionParams
from mmctl.models.fields import FieldLayout, WireField, qwen_fields
from mmctl.models.processor_config import (
    CLIP_MEAN,
    CLIP_STD,
    QWEN2VL_IMAGE,
    QWEN2VL_VIDEO,
    ProcessorClass,
)
from mmctl.models.qwen import QwenFamily
from mmctl.preprocessing.resize import fit_budget

PARAMS = VisionParams(
    patch_size=14,
    temporal_patch_size=2,
    merge_size=2,
    image_mean=CLIP_MEAN,
    image_std=CLIP_STD,
    rescale_factor=1 / 255,
    # Per frame. The checkpoints ship no video file, so transformers builds the
    # video processor from preprocessor_config.json: its min/max_pixels.
    video_budget=PixelBudget(min_pixels=3136, max_pixels=12845056),
    # Qwen2.5-VL checkpoints' preprocessor_config.json min/max_pixels
    image_budget=PixelBudget(min_pixels=3136, max_pixels=12845056),
    fps=2.0,
    min_frames=4,
    max_frames=768,
)

TOKEN_IDS = TokenIds(
    vision_start_token_id=151652,
    vision_end_token_id=151653,
    image_token_id=151655,
    video_token_id=151656,
)

MODEL_TYPES = ("qwen2_vl", "qwen2_5_vl")

#: vLLM's Qwen2.5-VL field config: video adds ``second_per_grid_ts``, batched.
FIELDS = {
    MediaKind.IMAGE: qwen_fields(MediaKind.IMAGE),
    MediaKind.VIDEO: qwen_fields(
        MediaKind.VIDEO,
        (
            WireField(
                "second_per_grid_ts",
                FieldLayout.BATCHED,
                "second_per_grid_ts",
                "float32",
                (),
                "[items] seconds per temporal patch, Tp / sampled fps",
            ),
        ),
    ),
}


@dataclass(frozen=True)
class Qwen2VL(QwenFamily):
    name: str = "qwen2.5-vl"
    aliases: tuple[str, ...] = ("qwen2-vl",)
    model_types: tuple[str, ...] = MODEL_TYPES
    params: VisionParams = PARAMS
    token_ids: TokenIds = TOKEN_IDS
    timestamps_in_prompt: bool = False
    per_frame_markers: bool = False
    #: vLLM 0.33 normalizes this family's pixels on the device by default.
    worker_pixels: PixelFormat = PixelFormat.UINT8
    image_processor: ProcessorClass = QWEN2VL_IMAGE
    video_processor: ProcessorClass = QWEN2VL_VIDEO
    default_system: str | None = "You are a helpful assistant."

    def matches(self, config: Mapping[str, Any]) -> bool:
        if config.get("model_type") in MODEL_TYPES:
            return True
        return any(
            str(a).startswith(("Qwen2VL", "Qwen2_5_VL")) for a in config.get("architectures") or ()
        )

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        return FIELDS[kind]

    def sample_indices(
        self, total_frames: int, source_fps: float, params: VisionParams
    ) -> np.ndarray:
        """HF ``Qwen2VLVideoProcessor.sample_frames`` with fps sampling.

        The count is floored to a multiple of Tp; indices follow
        ``torch.arange(0, total, total / n).int()``: a float32 range computed
        in double, truncated.
        """
        tp = params.temporal_patch_size
        if params.num_frames is not None:
            n = round(params.num_frames / tp) * tp
        else:
            max_frames = math.floor(min(params.max_frames, total_frames) / tp) * tp
            wanted = total_frames / source_fps * params.fps
            n = math.floor(min(max(wanted, params.min_frames), max_frames, total_frames) / tp) * tp
        if n < tp or n > total_frames:
            raise InputError(
                f"cannot sample {n} frames out of {total_frames} (need a multiple of {tp}, at least {tp})"
            )
        step = total_frames / n
        count = math.ceil(total_frames / step)
        return (np.arange(count, dtype=np.float64) * step).astype(np.float32).astype(np.int64)

    def video_frame_times(
        self, indices: np.ndarray, source_fps: float, params: VisionParams
    ) -> list[float]:
        """Start time of each temporal patch (not part of the prompt)."""
        tp = params.temporal_patch_size
        return [int(indices[i]) / source_fps for i in range(0, len(indices), tp)]

    def second_per_grid_ts(
        self,
        indices: np.ndarray,
        total_frames: int,
        source_fps: float,
        params: VisionParams | None = None,
    ) -> float:
        """Tp / sampled fps, what Qwen2.5-VL's processor passes the model."""
        sampled_fps = len(indices) / total_frames * source_fps
        return (params or self.params).temporal_patch_size / sampled_fps

    def video_size(
        self, num_frames: int, height: int, width: int, params: VisionParams
    ) -> tuple[int, int]:
        return fit_budget(height, width, params.factor, params.video_budget)

    def image_size(self, height: int, width: int, params: VisionParams) -> tuple[int, int]:
        return fit_budget(height, width, params.factor, params.image_budget)

    def frame_label(self, seconds: float) -> str:
        return ""  # no per-frame blocks: the time reaches the model as second_per_grid_ts

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, params: VisionParams
    ) -> dict[str, np.ndarray]:
        # vLLM's Qwen2.5-VL field config: second_per_grid_ts, batched per video.
        value = self.second_per_grid_ts(indices, total_frames, source_fps, params)
        return {"second_per_grid_ts": np.asarray([value], dtype=np.float32)}


SPEC = Qwen2VL()
