"""What differs between the Qwen-VL families: how frames are sampled and
sized, what a video's prompt says of its frames, and the per-video tensors.
Each family module (:mod:`.qwen3_vl`, :mod:`.qwen2_vl`) gives one; the
pipeline, the layout and the shared parts read only this."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from mmctl.models.qwen_vl.settings import QwenVision


class QwenVariant(Protocol):
    @property
    def name(self) -> str:
        """The family's name (``Preprocessed.family``)."""
        ...

    @property
    def per_frame_markers(self) -> bool:
        """Whether a video's span is one block per temporal patch (Qwen3-VL:
        ``<t seconds><|vision_start|>pads<|vision_end|>``), or one run of pads."""
        ...

    def sample_indices(
        self, total_frames: int, source_fps: float, vision: QwenVision
    ) -> np.ndarray:
        """The frames the HF video processor samples, as vLLM drives it."""
        ...

    def video_frame_times(
        self, indices: np.ndarray, source_fps: float, vision: QwenVision
    ) -> list[float]:
        """One time per temporal patch, seconds."""
        ...

    def video_size(
        self, num_frames: int, height: int, width: int, vision: QwenVision
    ) -> tuple[int, int]:
        """(h, w) every sampled frame is resized to."""
        ...

    def image_size(self, height: int, width: int, vision: QwenVision) -> tuple[int, int]: ...

    def frame_label(self, seconds: float) -> str:
        """The text before a temporal patch's block (``per_frame_markers`` only)."""
        ...

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, vision: QwenVision
    ) -> dict[str, np.ndarray]:
        """The family's per-video tensors (``timestamps``, ``second_per_grid_ts``), one row."""
        ...
