"""Qwen3-VL (and Qwen3-VL-MoE): the primary family.

Defaults mirror the published checkpoints' processor configs, not the bare
class defaults of HF's ``Qwen3VLVideoProcessor`` (which are far smaller).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmctl.choices import PixelFormat
from mmctl.media.probe import MediaKind
from mmctl.models.base import PixelBudget, TokenIds, VisionParams
from mmctl.models.fields import FieldLayout, WireField, qwen_fields
from mmctl.models.processor_config import QWEN2VL_IMAGE, QWEN3VL_VIDEO, ProcessorClass
from mmctl.models.qwen import QwenFamily
from mmctl.preprocessing.resize import fit_budget, smart_resize_video

PARAMS = VisionParams(
    patch_size=16,  # vision_config.patch_size
    temporal_patch_size=2,  # vision_config.temporal_patch_size
    merge_size=2,  # vision_config.spatial_merge_size
    image_mean=(0.5, 0.5, 0.5),
    image_std=(0.5, 0.5, 0.5),
    rescale_factor=1 / 255,
    # video_preprocessor_config.json "size": frames × h × w of the whole clip
    video_budget=PixelBudget(min_pixels=4096, max_pixels=25165824),
    # preprocessor_config.json "size": h × w of one image
    image_budget=PixelBudget(min_pixels=65536, max_pixels=16777216),
    fps=2.0,
    min_frames=4,
    max_frames=768,
)

TOKEN_IDS = TokenIds(
    vision_start_token_id=151652,  # <|vision_start|>
    vision_end_token_id=151653,  # <|vision_end|>
    image_token_id=151655,  # <|image_pad|>
    video_token_id=151656,  # <|video_pad|>
)

MODEL_TYPES = ("qwen3_vl", "qwen3_vl_moe")

#: vLLM's Qwen3-VL field config (``Qwen3VLMultiModalProcessor._get_mm_fields_config``):
#: video adds ``timestamps``, batched and kept on the CPU — one row per video, one
#: time per temporal patch, which vLLM's own processing passes on and the model
#: reads when video pruning is on (``timestamps[video]``). A dense row per item
#: needs the batch's videos to share t; where they do not it is left out (the
#: model only asserts it under pruning, which mmctl does not lay out).
FIELDS = {
    MediaKind.IMAGE: qwen_fields(MediaKind.IMAGE),
    MediaKind.VIDEO: qwen_fields(
        MediaKind.VIDEO,
        (
            WireField(
                "timestamps",
                FieldLayout.BATCHED,
                "timestamps",
                "float32",
                ("t",),
                "[items, t] seconds of each temporal patch (the prompt's times)",
                keep_on_cpu=True,
                optional=True,
            ),
        ),
    ),
}


@dataclass(frozen=True)
class Qwen3VL(QwenFamily):
    name: str = "qwen3-vl"
    aliases: tuple[str, ...] = ("qwen3-vl-moe",)
    model_types: tuple[str, ...] = MODEL_TYPES
    params: VisionParams = PARAMS
    token_ids: TokenIds = TOKEN_IDS
    #: The prompt states each temporal patch's time ("<1.5 seconds>").
    timestamps_in_prompt: bool = True
    per_frame_markers: bool = True
    #: vLLM 0.33 normalizes this family's pixels on the device by default.
    worker_pixels: PixelFormat = PixelFormat.UINT8
    image_processor: ProcessorClass = QWEN2VL_IMAGE
    video_processor: ProcessorClass = QWEN3VL_VIDEO
    default_system: str | None = None

    def matches(self, config: Mapping[str, Any]) -> bool:
        if config.get("model_type") in MODEL_TYPES:
            return True
        return any(str(a).startswith("Qwen3VL") for a in config.get("architectures") or ())

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        return FIELDS[kind]

    def sample_indices(
        self, total_frames: int, source_fps: float, params: VisionParams
    ) -> np.ndarray:
        """HF ``Qwen3VLVideoProcessor.sample_frames``: numpy linspace, rounded.

        ``n = int(total / source_fps * fps)`` clamped to [min_frames,
        max_frames] and to ``total``; or ``num_frames`` when given.
        ``np.round`` rounds halves to even, exactly like HF.
        """
        if params.num_frames is not None:
            n = min(params.num_frames, total_frames)
        else:
            n = int(total_frames / source_fps * params.fps)
            n = min(max(n, params.min_frames), params.max_frames, total_frames)
        return np.linspace(0, total_frames - 1, n).round().astype(np.int64)

    def video_frame_times(
        self, indices: np.ndarray, source_fps: float, params: VisionParams
    ) -> list[float]:
        """Mean source time of the first and last frame of each temporal patch.

        HF ``Qwen3VLProcessor._calculate_timestamps``: the index list is padded
        with its last entry to a multiple of Tp, times are ``index / fps``.
        """
        tp = params.temporal_patch_size
        idx = [int(i) for i in indices]
        idx += [idx[-1]] * (-len(idx) % tp)
        times = [i / source_fps for i in idx]
        return [(times[i] + times[i + tp - 1]) / 2 for i in range(0, len(times), tp)]

    def video_size(
        self, num_frames: int, height: int, width: int, params: VisionParams
    ) -> tuple[int, int]:
        return smart_resize_video(
            num_frames,
            height,
            width,
            factor=params.factor,
            temporal_factor=params.temporal_patch_size,
            min_pixels=params.video_budget.min_pixels,
            max_pixels=params.video_budget.max_pixels,
        )

    def image_size(self, height: int, width: int, params: VisionParams) -> tuple[int, int]:
        return fit_budget(height, width, params.factor, params.image_budget)

    def frame_label(self, seconds: float) -> str:
        # vLLM and HF format with Python's .1f (round-half-even on the binary value).
        return f"<{seconds:.1f} seconds>"

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, params: VisionParams
    ) -> dict[str, np.ndarray]:
        times = self.video_frame_times(indices, source_fps, params)
        return {"timestamps": np.asarray(times, dtype=np.float32)}


SPEC = Qwen3VL()
