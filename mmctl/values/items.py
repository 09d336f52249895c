"""What one media item became: its tensors and facts (:class:`Preprocessed`),
the facts the prompt and its checks read (:class:`ItemFacts`), and how long it
took (:class:`Timings`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmctl.choices import PixelFormat
from mmctl.media.image import ImageInfo
from mmctl.media.probe import MediaKind
from mmctl.media.video import VideoInfo

#: ``allocate(shape, dtype) -> ndarray``: where the pixel tensor is written
#: (default ``np.empty``; ``mmctl send`` passes a shared-memory mapping so the
#: patchified pixels land in the file the worker reads, with no extra copy).
Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]
#: ``on_frame(done, total)``: a sampled frame was processed (progress bars).
FrameCallback = Callable[[int, int], None]


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.empty(shape, dtype=dtype)


@dataclass(frozen=True)
class ItemOptions:
    """How one item is preprocessed, beyond the family's settings."""

    #: Keep the resized frames (``Preprocessed.frames``, for previews).
    keep_frames: bool = False
    on_frame: FrameCallback | None = None
    #: Where the pixel tensor is written (the Qwen pipeline; a shm mapping in ``send``).
    allocate: Allocator = empty
    #: Refuse a video that decodes to fewer frames than its container says.
    strict: bool = False


#: No previews, no progress, a new array, the frames that decode.
DEFAULT_OPTIONS = ItemOptions()


@dataclass(frozen=True)
class ItemFacts:
    """What the prompt layout and its checks know of one item, whether it was
    preprocessed here or read back from a request's tensors."""

    kind: MediaKind
    #: Positions that receive embeddings (``im_token_id`` tokens in the span).
    tokens: int
    #: Qwen: the item's patch grid; ``None`` for families without one.
    grid_thw: tuple[int, int, int] | None = None
    #: Qwen3-VL video: one time per temporal patch (the prompt's timestamps).
    patch_times: tuple[float, ...] = ()
    #: What else the family's expansion reads (``image_size``, ``aspect_ratio``, ``frames``).
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Rows of the item's share of a *flat* pixel tensor (Qwen ``t·h·w``, Llama 4
    #: tiles): what the batch's sizes tensor must hold for it.
    rows: int | None = None

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind.value, "num_tokens": self.tokens}
        if self.grid_thw is not None:
            doc["grid_thw"] = list(self.grid_thw)
        doc.update({k: list(v) if isinstance(v, tuple) else v for k, v in self.extra.items()})
        return doc

    @property
    def grid(self) -> tuple[int, int, int]:
        """The patch grid (families with one only)."""
        if self.grid_thw is None:
            from mmctl.values.received import ContractError

            raise ContractError(f"this {self.kind.value} item has no patch grid")
        return self.grid_thw


@dataclass(frozen=True)
class Frames:
    """How a video item's embedding tokens divide into frames, in prompt order:
    ``count`` runs of ``tokens`` each, then ``after`` tokens that belong to no
    frame (OneVision's newline after the last one)."""

    count: int
    tokens: int
    after: int = 0


@dataclass(frozen=True)
class Timings:
    """One item's preprocessing as consecutive phases: ``total_s`` is their sum.

    ``overlapped_s``: resize + normalize + patchify work that ran *inside*
    ``decode_s`` (a video's frames are processed while the decoder works, on a
    second thread for large frames): reported beside the rows, never as one.
    """

    decode_s: float  # loading the image, or the video's decode loop (wall time)
    preprocess_s: float  # what runs after it: resize, normalize, patchify or tiles
    overlapped_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.decode_s + self.preprocess_s

    def as_dict(self) -> dict[str, Any]:
        """``timings_s`` (the rows and their total) and ``overlapped_s`` (beside them)."""
        return {
            "timings_s": {
                "decode_s": round(self.decode_s, 6),
                "preprocess_s": round(self.preprocess_s, 6),
                "total_s": round(self.total_s, 6),
            },
            "overlapped_s": {"preprocess_s": round(self.overlapped_s, 6)},
        }


@dataclass(frozen=True)
class Preprocessed:
    """What the model will receive for one media item (any family)."""

    kind: MediaKind
    family: str
    #: The family's vision settings that made it.
    params: Any
    pixel_format: PixelFormat
    #: This item's primary tensor as its HF processor returns it for one item
    #: (Qwen: ``[N, C*Tp*P*P]`` patch rows); bf16 as uint16 bit patterns.
    pixel_values: np.ndarray
    #: Qwen: the ``(t, h, w)`` patch grid; ``None`` for families without one.
    grid_thw: tuple[int, int, int] | None
    resized: tuple[int, int]  # (height, width)
    source: VideoInfo | ImageInfo
    frame_indices: np.ndarray  # int64; empty for images
    frame_times: tuple[float, ...]  # source time of each sampled frame, seconds
    patch_times: tuple[float, ...]  # one per temporal patch (the prompt's timestamps)
    num_tokens: int  # embedding positions in the prompt
    timings: Timings
    frames: tuple[np.ndarray, ...] = field(default=(), repr=False)  # kept for previews
    #: Per-video tensors the family adds (Qwen2.5-VL's ``second_per_grid_ts``), one row each.
    video_tensors: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: The model's resolved vision settings and their origins (``Model.vision_settings``),
    #: set by callers that loaded a model.
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: This item's row of each other tensor of its batch, by wire key (the
    #: family's field table: ``image_sizes``, ``aspect_ratios``, …).
    item_tensors: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: What the family's prompt expansion reads beyond the token count
    #: (:attr:`ItemFacts.extra`).
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Its share of a flat pixel tensor where that is not the grid's ``t·h·w``
    #: (Llama 4's tiles).
    flat_rows: int | None = None
    #: What a person should know beyond the source (the model's settings
    #: resolver's warnings, set by callers that loaded a model).
    notes: tuple[str, ...] = ()

    @property
    def facts(self) -> ItemFacts:
        return ItemFacts(
            self.kind,
            self.num_tokens,
            self.grid_thw,
            self.patch_times,
            self.extra,
            rows=int(np.prod(self.grid_thw)) if self.grid_thw is not None else self.flat_rows,
        )

    @property
    def grid_thw_array(self) -> np.ndarray:
        return np.asarray([self.grid_thw], dtype=np.int64)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What a person should know: of the source (a truncated video, …) and the notes."""
        return (*self.notes, *getattr(self.source, "warnings", ()))

    @property
    def sampled_fps(self) -> float | None:
        """Frames sampled per source second (differs from the target fps when clamped)."""
        if not isinstance(self.source, VideoInfo):
            return None
        return len(self.frame_indices) / self.source.total_frames * self.source.source_fps
