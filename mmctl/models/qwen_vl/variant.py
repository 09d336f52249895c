"""What differs between the patchified families: how frames are sampled and
sized, what a video's prompt says of its frames, and the per-video tensors.

:class:`PatchVariant` is what :mod:`.pipeline` reads of a family whose items
are Qwen-style patch rows with a ``(t, h, w)`` grid (the Qwen-VL families, and
GLM-4.1V / GLM-4.6V, each with its own
:class:`~mmctl.models.qwen_vl.settings.PatchSteps` settings class);
:class:`QwenVariant` adds what the Qwen-VL prompt layout reads. Each family module (:mod:`.qwen3_vl`,
:mod:`.qwen2_vl`, :mod:`mmctl.models.glm4v`) gives one."""

from __future__ import annotations

from typing import Protocol, TypeVar

import numpy as np

from mmctl.media.probe import MediaKind
from mmctl.models.qwen_vl.settings import PatchSteps, QwenVision

S = TypeVar("S", bound=PatchSteps, contravariant=True)


class PatchVariant(Protocol[S]):
    @property
    def name(self) -> str:
        """The family's name (``Preprocessed.family``)."""
        ...

    def sample_indices(self, total_frames: int, source_fps: float, vision: S) -> np.ndarray:
        """The frames the HF video processor works on, as vLLM drives it, in order
        (an index may repeat: GLM pads an odd count with its last frame)."""
        ...

    def video_frame_times(self, indices: np.ndarray, source_fps: float, vision: S) -> list[float]:
        """One time per temporal patch, seconds."""
        ...

    def video_size(self, num_frames: int, height: int, width: int, vision: S) -> tuple[int, int]:
        """(h, w) every sampled frame is resized to."""
        ...

    def image_size(self, height: int, width: int, vision: S) -> tuple[int, int]: ...

    def content_size(
        self, kind: MediaKind, canvas: tuple[int, int], num_frames: int, height: int, width: int,
        vision: S,
    ) -> tuple[int, int]:  # fmt: skip
        """(h, w) a ``height`` x ``width`` frame of a ``kind`` item of ``num_frames``
        frames is resized to inside its ``canvas`` (``image_size`` / ``video_size``);
        the rest of the canvas is zero (GLM-5-Next pads). The canvas itself where
        the processor resizes to it."""
        ...

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, vision: S
    ) -> dict[str, np.ndarray]:
        """The family's per-video tensors (``timestamps``, ``second_per_grid_ts``), one row."""
        ...


class QwenVariant(PatchVariant[QwenVision], Protocol):
    @property
    def per_frame_markers(self) -> bool:
        """Whether a video's span is one block per temporal patch (Qwen3-VL:
        ``<t seconds><|vision_start|>pads<|vision_end|>``), or one run of pads."""
        ...

    def frame_label(self, seconds: float) -> str:
        """The text before a temporal patch's block (``per_frame_markers`` only)."""
        ...
