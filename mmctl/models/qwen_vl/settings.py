"""The Qwen-VL families' processor settings and special token ids, declared.

One :class:`QwenVision` holds both processors' settings: the image and the
video processor must agree on the patch geometry and the normalization
(mmctl keeps one value for both), while each has its own pixel budget
(``size``: ``shortest_edge`` / ``longest_edge``, in pixels; for Qwen3-VL video
the whole clip's, frames × height × width). The Qwen2-VL classes let
top-level ``min_pixels`` / ``max_pixels`` replace those edges; Qwen3-VL's
video class does not. Where a folder has no processor file at all, the
published checkpoint's values apply (the family's ``PUBLISHED``), not the
classes' own (far smaller) defaults.

``cap_pixels_per_frame`` and ``max_video_tokens`` (transformers 5.16's
``Qwen3VLVideoProcessor``): with the cap on, the clip's budget becomes
``max(min(max_video_tokens·factor², longest_edge // frames),
int(shortest_edge·1.05))`` per frame — a folder that sets it gets it applied
by vLLM's processor, so mmctl applies it too (:func:`video_budget`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from mmctl.checkpoint.files import ModelFiles
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models import kinds
from mmctl.models.settings import File, HFClass, Settings, setting

VIDEO, IMAGE, CONFIG = File.VIDEO, File.IMAGE, File.CONFIG

#: The pixel steps and patch geometry every Qwen-style processor class has
#: (Qwen-VL's, GLM's), as transformers' class attributes.
PATCH_STEPS = {
    "do_resize": True,
    "resample": kinds.BICUBIC,
    "do_rescale": True,
    "rescale_factor": kinds.RESCALE,
    "do_normalize": True,
    "temporal_patch_size": 2,
    "merge_size": 2,
}
#: Patch 14 and CLIP mean/std: the Qwen2-VL classes' (and GLM's).
PATCH14_CLIP = {
    **PATCH_STEPS,
    "patch_size": 14,
    "image_mean": kinds.CLIP_MEAN,
    "image_std": kinds.CLIP_STD,
}
_COMMON = {**PATCH_STEPS, "min_frames": 4, "max_frames": 768}
#: The Qwen2-VL classes, with min/max_pixels that replace the size edges
#: (Qwen3-VL's video class has no such keys).
_QWEN2 = {**PATCH14_CLIP, "min_frames": 4, "max_frames": 768}
_MIN_MAX = {"size.shortest_edge": "min_pixels", "size.longest_edge": "max_pixels"}


def _size(low: int, high: int) -> dict[str, dict[str, int]]:
    return {"size": {"shortest_edge": low, "longest_edge": high}}


QWEN2VL_IMAGE = HFClass(
    "Qwen2VLImageProcessor", {**_QWEN2, **_size(56 * 56, 28 * 28 * 1280)}, _MIN_MAX
)
QWEN2VL_VIDEO = HFClass(
    "Qwen2VLVideoProcessor", {**_QWEN2, **_size(128 * 28 * 28, 28 * 28 * 768)}, _MIN_MAX
)
QWEN3VL_VIDEO = HFClass(
    "Qwen3VLVideoProcessor",
    {
        **_COMMON,
        **_size(128 * 32 * 32, 32 * 32 * 768),
        "patch_size": 16,
        "image_mean": kinds.HALF,
        "image_std": kinds.HALF,
        "fps": 2,
        # None in the class, which transformers 5.20 reads as off (with a warning).
        "cap_pixels_per_frame": False,
        "max_video_tokens": 768,
    },
)

_FRAMES = kinds.Int(1, 100_000)
#: A budget's upper edge only caps a resize; any positive int is a cap.
_CAP = kinds.Int(1, 2**40)


@dataclass(frozen=True)
class PatchSteps(Settings):
    """The patch geometry and the pixel steps of every Qwen-style processor
    (Qwen-VL's, GLM's): what makes patch rows with a ``(t, h, w)`` grid, whatever
    the budget that sizes the frames. The image and the video processor must
    agree on them (mmctl keeps one value for both)."""

    # vision_config.patch_size etc. in config.json describe the same tower;
    # the processor files are what vLLM's processor reads.
    patch_size: int = setting(VIDEO, "patch_size", 16, kinds.Int(1, 256), also_image=True)
    temporal_patch_size: int = setting(
        VIDEO, "temporal_patch_size", 2, kinds.Int(1, 16), also_image=True
    )
    merge_size: int = setting(VIDEO, "merge_size", 2, kinds.Int(1, 16), also_image=True)
    image_mean: tuple[float, float, float] = setting(
        VIDEO, "image_mean", kinds.HALF, kinds.Triple(), also_image=True
    )
    image_std: tuple[float, float, float] = setting(
        VIDEO, "image_std", kinds.HALF, kinds.Triple(std=True), also_image=True
    )
    rescale_factor: float = setting(
        VIDEO, "rescale_factor", kinds.RESCALE, kinds.Number(0, 1), also_image=True
    )
    do_resize: bool = setting(VIDEO, "do_resize", True, kinds.Flag(only=True), also_image=True)
    resample: int = setting(
        VIDEO,
        "resample",
        kinds.BICUBIC,
        kinds.OneOf((kinds.BICUBIC,), "bicubic (3) only"),
        also_image=True,
    )
    do_rescale: bool = setting(VIDEO, "do_rescale", True, kinds.Flag(only=True), also_image=True)
    do_normalize: bool = setting(
        VIDEO, "do_normalize", True, kinds.Flag(only=True), also_image=True
    )

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


@dataclass(frozen=True)
class PixelBudgets(Settings):
    """The two pixel budgets of the Qwen-VL and GLM-4.1V/4.6V processors
    (``size``: ``shortest_edge`` / ``longest_edge``, in pixels). A base of
    :class:`PatchVision` before :class:`PatchSteps`, so its fields come first
    (``info`` lists each file's settings in field order)."""

    video_min_pixels: int = setting(
        VIDEO, "size.shortest_edge", 4096, kinds.Int(1, kinds.MAX_MIN_PIXELS)
    )
    video_max_pixels: int = setting(VIDEO, "size.longest_edge", 25165824, _CAP)
    image_min_pixels: int = setting(
        IMAGE, "size.shortest_edge", 65536, kinds.Int(1, kinds.MAX_MIN_PIXELS)
    )
    image_max_pixels: int = setting(IMAGE, "size.longest_edge", 16777216, _CAP)


@dataclass(frozen=True)
class PatchVision(PatchSteps, PixelBudgets):
    """The patch steps with the two budgets of the Qwen-VL and GLM-4.1V/4.6V
    processors (``size``: ``shortest_edge`` / ``longest_edge``, in pixels).
    Defaults: Qwen3-VL's published values; a family's ``PUBLISHED`` differs."""

    #: ``--min-pixels`` / ``--max-pixels`` name the video budget.
    FLAG_NAMES: ClassVar[Mapping[str, str]] = {
        "min_pixels": "video_min_pixels",
        "max_pixels": "video_max_pixels",
    }

    def frames_size(
        self, num_frames: int, height: int, width: int, low: int, high: int
    ) -> tuple[int, int]:
        """(h, w) for ``num_frames`` frames of ``height`` x ``width`` in a budget
        that counts the frames too (Qwen3-VL's video ``smart_resize``, GLM's)."""
        from mmctl.preprocessing.resize import smart_resize_video

        return smart_resize_video(
            num_frames,
            height,
            width,
            factor=self.factor,
            temporal_factor=self.temporal_patch_size,
            min_pixels=low,
            max_pixels=high,
        )

    def check(self) -> None:
        for problem in self._problems():
            raise InputError(f"model processor config: {problem}")

    def check_overrides(self) -> None:
        for problem in self._problems():
            raise UsageError(problem)

    def _problems(self) -> list[str]:
        return [
            f"{what} pixel budget needs min-pixels <= max-pixels, got {low} and {high}"
            for what, low, high in (
                ("video", self.video_min_pixels, self.video_max_pixels),
                ("image", self.image_min_pixels, self.image_max_pixels),
            )
            if low > high
        ]


@dataclass(frozen=True)
class QwenVision(PatchVision):
    """Every setting that shapes a Qwen-VL item's pixels, grid and tokens."""

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (QWEN2VL_IMAGE,)
    VIDEO_CLASSES: ClassVar[tuple[HFClass, ...]] = (QWEN3VL_VIDEO,)
    OVERRIDABLE: ClassVar[tuple[str, ...]] = (
        "fps",
        "num_frames",
        "min_frames",
        "max_frames",
        "video_min_pixels",
        "video_max_pixels",
    )
    #: Keys that cannot change vLLM's tensors: vLLM samples frames itself and
    #: hands the processor the sampled ones (``do_sample_frames`` off, its own
    #: metadata); ``max_image_size`` / ``max_duration`` / ``num_frames`` are
    #: the class's sampling inputs that vLLM's loader replaces.
    INERT: ClassVar[frozenset[str]] = frozenset(
        {"do_sample_frames", "return_metadata", "video_metadata", "max_image_size", "max_duration"}
    )

    #: None in a class (Qwen2-VL's video processor samples no frames by itself): 2.
    fps: float = setting(VIDEO, "fps", 2.0, kinds.Number(0, 1000))
    min_frames: int = setting(VIDEO, "min_frames", 4, _FRAMES)
    max_frames: int = setting(VIDEO, "max_frames", 768, _FRAMES)
    #: A user's ``--num-frames`` (sample exactly so many); no processor file sets it.
    num_frames: int | None = None
    cap_pixels_per_frame: bool = setting(
        VIDEO, "cap_pixels_per_frame", False, kinds.Flag(), only_for=(QWEN3VL_VIDEO.name,)
    )
    max_video_tokens: int = setting(
        VIDEO, "max_video_tokens", 768, kinds.Int(1, 1_000_000), only_for=(QWEN3VL_VIDEO.name,)
    )

    def _problems(self) -> list[str]:
        out = []
        if self.min_frames > self.max_frames:
            out.append(
                f"min-frames ({self.min_frames}) is larger than max-frames ({self.max_frames})"
            )
        return [*out, *super()._problems()]


def video_budget(vision: QwenVision, num_frames: int) -> tuple[int, int]:
    """(min, max) pixels of a clip of ``num_frames`` sampled frames, with
    transformers' per-frame cap when the folder turns it on."""
    low, high = vision.video_min_pixels, vision.video_max_pixels
    if vision.cap_pixels_per_frame:
        cap = vision.max_video_tokens * vision.factor * vision.factor
        per_frame = max(min(cap, high // num_frames), int(low * 1.05))
        high = per_frame * num_frames
    return low, high


TOKEN_KEYS = ("vision_start_token_id", "vision_end_token_id", "image_token_id", "video_token_id")


def _token(key: str, published: int) -> Any:
    return setting(CONFIG, key, published, kinds.TokenId(), aliases=(f"text_config.{key}",))


@dataclass(frozen=True)
class TokenIds(Settings):
    """Qwen-VL's special token ids, mirroring ``config.json`` keys of the same
    names (top level, or ``text_config``); a :class:`~mmctl.values.tokens.Tokens`."""

    vision_start_token_id: int = _token("vision_start_token_id", 151652)  # <|vision_start|>
    vision_end_token_id: int = _token("vision_end_token_id", 151653)  # <|vision_end|>
    image_token_id: int = _token("image_token_id", 151655)  # <|image_pad|>
    video_token_id: int = _token("video_token_id", 151656)  # <|video_pad|>

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TokenIds:
        """The ids of ``config.json`` (all four, or the published ones without a
        config.json). Naming some but not all is an error: guessing the rest
        would silently build a prompt the model cannot read."""
        if config:
            scopes = [config, config.get("text_config") or {}]
            missing = [k for k in TOKEN_KEYS if not any(k in s for s in scopes)]
            if missing:
                raise InputError(
                    f"config.json lacks {', '.join(missing)}",
                    hint="pass --family to use the family's published ids only if you are sure "
                    "they match",
                )
        resolved = cls.resolve(ModelFiles(config=config), "Qwen-VL")
        ids: TokenIds = resolved.settings
        return ids

    def placeholder(self, kind: MediaKind) -> int:
        return self.video_token_id if kind is MediaKind.VIDEO else self.image_token_id

    def embed(self, kind: MediaKind) -> int:
        return self.placeholder(kind)

    def markers(self) -> dict[int, str]:
        return {self.vision_start_token_id: "vision_start", self.vision_end_token_id: "vision_end"}

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))
