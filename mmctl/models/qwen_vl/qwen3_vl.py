"""Qwen3-VL (and Qwen3-VL-MoE): the primary family.

Defaults mirror the published checkpoints' processor configs, not the bare
class defaults of HF's ``Qwen3VLVideoProcessor`` (which are far smaller).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmctl.choices import PruningMethod
from mmctl.media.probe import MediaKind
from mmctl.models.qwen_vl.parts import qwen_family
from mmctl.models.qwen_vl.settings import QwenVision, video_budget
from mmctl.preprocessing.resize import smart_resize_image
from mmctl.values.fields import FieldLayout, WireField

#: vLLM's Qwen3-VL field config (``Qwen3VLMultiModalProcessor._get_mm_fields_config``):
#: video adds ``timestamps``, batched and kept on the CPU — one row per video, one
#: time per temporal patch, which vLLM's own processing passes on and the model
#: reads when video pruning is on (``timestamps[video]``: it re-tokenizes the
#: frames' times to embed the span's text). A dense row per item needs the
#: batch's videos to share t; where they do not it is left out, and under
#: pruning such a request is refused (the model asserts the tensor).
TIMESTAMPS = WireField(
    "timestamps",
    FieldLayout.BATCHED,
    "timestamps",
    "float32",
    ("t",),
    "[items, t] seconds of each temporal patch (the prompt's times)",
    keep_on_cpu=True,
    optional=True,
)


#: What vLLM's Qwen3-VL model prunes with (and Qwen3.5's, its subclass).
PRUNING_METHODS = (PruningMethod.EVS, PruningMethod.VIDCOM2)


@dataclass(frozen=True)
class Qwen3VLVariant:
    """What Qwen3-VL does its own way (:class:`~mmctl.models.qwen_vl.variant.QwenVariant`)."""

    name: str = "qwen3-vl"
    #: The prompt states each temporal patch's time ("<1.5 seconds>").
    per_frame_markers: bool = True

    def sample_indices(
        self, total_frames: int, source_fps: float, vision: QwenVision
    ) -> np.ndarray:
        """HF ``Qwen3VLVideoProcessor.sample_frames``: numpy linspace, rounded.

        ``n = int(total / source_fps * fps)`` clamped to [min_frames,
        max_frames] and to ``total``; or ``num_frames`` when given.
        ``np.round`` rounds halves to even, exactly like HF.
        """
        if vision.num_frames is not None:
            n = min(vision.num_frames, total_frames)
        else:
            n = int(total_frames / source_fps * vision.fps)
            n = min(max(n, vision.min_frames), vision.max_frames, total_frames)
        return np.linspace(0, total_frames - 1, n).round().astype(np.int64)

    def video_frame_times(
        self, indices: np.ndarray, source_fps: float, vision: QwenVision
    ) -> list[float]:
        """Mean source time of the first and last frame of each temporal patch.

        HF ``Qwen3VLProcessor._calculate_timestamps``: the index list is padded
        with its last entry to a multiple of Tp, times are ``index / fps``.
        """
        tp = vision.temporal_patch_size
        idx = [int(i) for i in indices]
        idx += [idx[-1]] * (-len(idx) % tp)
        times = [i / source_fps for i in idx]
        return [(times[i] + times[i + tp - 1]) / 2 for i in range(0, len(times), tp)]

    def video_size(
        self, num_frames: int, height: int, width: int, vision: QwenVision
    ) -> tuple[int, int]:
        return vision.frames_size(num_frames, height, width, *video_budget(vision, num_frames))

    def content_size(
        self, kind: MediaKind, canvas: tuple[int, int], num_frames: int, height: int, width: int,
        vision: QwenVision,
    ) -> tuple[int, int]:  # fmt: skip
        return canvas  # resized to fill it

    def image_size(self, height: int, width: int, vision: QwenVision) -> tuple[int, int]:
        return smart_resize_image(
            height,
            width,
            factor=vision.factor,
            min_pixels=vision.image_min_pixels,
            max_pixels=vision.image_max_pixels,
        )

    def frame_label(self, seconds: float) -> str:
        # vLLM and HF format with Python's .1f (round-half-even on the binary value).
        return f"<{seconds:.1f} seconds>"

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, vision: QwenVision
    ) -> dict[str, np.ndarray]:
        times = self.video_frame_times(indices, source_fps, vision)
        return {"timestamps": np.asarray(times, dtype=np.float32)}


VARIANT = Qwen3VLVariant()
FAMILY = qwen_family(
    VARIANT,
    QwenVision,
    TIMESTAMPS,
    aliases=("qwen3-vl-moe",),
    model_types=("qwen3_vl", "qwen3_vl_moe"),
    architectures=("Qwen3VL",),
    # vLLM's Qwen3VLForConditionalGeneration (and its MoE subclass):
    # supported_video_pruning_methods = ("evs", "vidcom2").
    video_pruning=tuple((t, PRUNING_METHODS) for t in ("qwen3_vl", "qwen3_vl_moe")),
)
