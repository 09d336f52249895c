"""The Qwen-VL families' vision parameters and token ids; a user's overrides;
the model files every family reads.

The interface a family implements is :class:`mmctl.models.family.Family`;
:class:`VisionParams` and :class:`TokenIds` are what the Qwen families
(:mod:`mmctl.models.qwen`) resolve into.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mmctl.errors import UsageError
from mmctl.media.probe import MediaKind


@dataclass(frozen=True)
class PixelBudget:
    """Pixel limits of a resize, in pixels (HF ``size`` {shortest,longest}_edge).

    For video the budget covers the whole clip: frames × height × width.
    """

    min_pixels: int
    max_pixels: int


@dataclass(frozen=True)
class VisionParams:
    """Everything preprocessing needs; defaults come from a :class:`Family`.

    Mirrors HF processor config keys: ``patch_size``, ``temporal_patch_size``,
    ``merge_size``, ``image_mean``, ``image_std``, ``rescale_factor``, ``fps``,
    ``min_frames``, ``max_frames``, ``size`` (video and image).
    """

    patch_size: int
    temporal_patch_size: int
    merge_size: int
    image_mean: tuple[float, float, float]
    image_std: tuple[float, float, float]
    rescale_factor: float
    video_budget: PixelBudget
    image_budget: PixelBudget
    fps: float = 2.0
    num_frames: int | None = None
    min_frames: int = 4
    max_frames: int = 768

    @property
    def factor(self) -> int:
        """Side lengths are rounded to multiples of this (patch × merge)."""
        return self.patch_size * self.merge_size

    @property
    def patch_dim(self) -> int:
        """Features per patch row: C × Tp × P × P."""
        return 3 * self.temporal_patch_size * self.patch_size * self.patch_size

    def tokens_for_grid(self, grid_thw: tuple[int, int, int]) -> int:
        """Pad tokens one item expands to: t·h·w / M²."""
        t, h, w = grid_thw
        return t * h * w // (self.merge_size * self.merge_size)

    def with_overrides(self, **changes: Any) -> VisionParams:
        """A copy with the non-None ``changes`` applied (flag overrides)."""
        video = dict(
            min_pixels=self.video_budget.min_pixels, max_pixels=self.video_budget.max_pixels
        )
        for key in ("min_pixels", "max_pixels"):
            if changes.get(key) is not None:
                video[key] = int(changes[key])
        rest = {
            k: v
            for k, v in changes.items()
            if v is not None
            and k not in ("min_pixels", "max_pixels", "image_min_pixels", "image_max_pixels")
        }
        image = dict(
            min_pixels=self.image_budget.min_pixels, max_pixels=self.image_budget.max_pixels
        )
        if changes.get("image_min_pixels") is not None:
            image["min_pixels"] = int(changes["image_min_pixels"])
        if changes.get("image_max_pixels") is not None:
            image["max_pixels"] = int(changes["image_max_pixels"])
        params = replace(
            self, video_budget=PixelBudget(**video), image_budget=PixelBudget(**image), **rest
        )
        params.validate()
        return params

    def overridden(self, overrides: VisionOverrides) -> VisionParams:
        """:meth:`with_overrides` with a user's values (the family interface)."""
        return self.with_overrides(**overrides.changes())

    def settings(self) -> dict[str, Any]:
        from mmctl.models.processor_config import settings

        return settings(self)

    def validate(self) -> None:
        for name in ("patch_size", "temporal_patch_size", "merge_size", "min_frames", "max_frames"):
            if getattr(self, name) < 1:
                raise UsageError(
                    f"{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}"
                )
        if self.min_frames > self.max_frames:
            raise UsageError(
                f"min-frames ({self.min_frames}) is larger than max-frames ({self.max_frames})"
            )
        if self.fps <= 0:
            raise UsageError(f"fps must be positive, got {self.fps}")
        if self.num_frames is not None and self.num_frames < 1:
            raise UsageError(f"num-frames must be at least 1, got {self.num_frames}")
        for budget in (self.video_budget, self.image_budget):
            if not 0 < budget.min_pixels <= budget.max_pixels:
                raise UsageError(
                    f"pixel budget needs 0 < min-pixels <= max-pixels, got "
                    f"{budget.min_pixels} and {budget.max_pixels}"
                )


@dataclass(frozen=True)
class VisionOverrides:
    """What a user changes of a model's sampling and pixel budget (``None`` keeps it).

    Checked on construction, before any file is read or worker contacted;
    whether the result fits the model's own values (``min_frames`` against
    its ``max_frames``) is checked again when they meet
    (:meth:`VisionParams.with_overrides`).
    """

    fps: float | None = None
    num_frames: int | None = None
    min_frames: int | None = None
    max_frames: int | None = None
    #: Video: the whole clip's budget (frames × height × width), in pixels.
    min_pixels: int | None = None
    max_pixels: int | None = None

    def __post_init__(self) -> None:
        if self.fps is not None and not self.fps > 0:
            raise UsageError(f"fps must be positive, got {self.fps}")
        for name in ("num_frames", "min_frames", "max_frames", "min_pixels", "max_pixels"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"{name.replace('_', '-')} must be at least 1, got {value}")
        for low, high in (("min_frames", "max_frames"), ("min_pixels", "max_pixels")):
            lo, hi = getattr(self, low), getattr(self, high)
            if lo is not None and hi is not None and lo > hi:
                raise UsageError(
                    f"{low.replace('_', '-')} ({lo}) is larger than {high.replace('_', '-')} ({hi})"
                )

    def given(self) -> list[str]:
        """The names of the values that are set."""
        return [k for k, v in vars(self).items() if v is not None]

    def changes(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass(frozen=True)
class TokenIds:
    """Qwen-VL's special token ids, mirroring ``config.json`` keys of the same names
    (a :class:`~mmctl.models.family.Tokens`)."""

    vision_start_token_id: int
    vision_end_token_id: int
    image_token_id: int
    video_token_id: int

    def placeholder(self, kind: MediaKind) -> int:
        return self.video_token_id if kind is MediaKind.VIDEO else self.image_token_id

    def embed(self, kind: MediaKind) -> int:
        return self.placeholder(kind)

    def markers(self) -> dict[int, str]:
        return {self.vision_start_token_id: "vision_start", self.vision_end_token_id: "vision_end"}

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass(frozen=True)
class ModelFiles:
    """The JSON configs that override a family's defaults (all optional)."""

    config: Mapping[str, Any] = field(default_factory=dict)
    preprocessor_config: Mapping[str, Any] = field(default_factory=dict)
    video_preprocessor_config: Mapping[str, Any] = field(default_factory=dict)
    #: transformers v5's combined file; its nested "image_processor" /
    #: "video_processor" win over the two files above.
    processor_config: Mapping[str, Any] = field(default_factory=dict)
