"""GLM-5-Next (``glm5_next``: GLM-5.3-Flash) as vLLM 0.33 processes it.

vLLM serves it with ``vllm/models/glm5next`` (``Glm5NextMultiModalProcessor``,
a ``Glm4vMultiModalProcessor``): transformers' ``Glm5NextProcessor`` makes the
tensors, called once with every item (its processor is not a
``Glm4vProcessor``), and vLLM expands the prompt itself with GLM-4.6V's prompt
updates (``_hf_processor_applies_updates`` is false). So the field table, the
prompt and the contract are GLM-4.1V/4.6V's (:mod:`mmctl.models.glm4v`); what
differs is the pixels and the frames. scripts/families/glm5_next.md has the
whole account, with the source lines.

Pixels: transformers' ``Glm5NextImageProcessor`` / ``Glm5NextVideoProcessor``
size a canvas in *tokens* (``min_image_tokens`` / ``max_image_tokens``, a token
being ``temporal_patch_size`` frames of ``factor²`` pixels, ``factor = patch ×
merge × patch_expand_factor``) with a binary search of their own
(:func:`smart_resize`), resize the frame into it without enlarging it
(:func:`content_size`: bicubic as torchvision does on uint8) and pad the rest
with zeros before rescaling; rows are Qwen2-VL's. vLLM caps the video budget
at 30000 tokens (``Glm5NextProcessingInfo.get_hf_processor``).

Frames: vLLM's ``Glm5NextVideoBackend`` (registered for
``Glm5NextVideoProcessor``) picks them (:func:`loader_indices`: 2 per second of
clip, a greedy walk at 4 per second re-spread with ``linspace``, at most
2048); the processor keeps them as they are unless that was every frame of the
clip, when it samples again with its own ``fps`` / ``max_frames`` /
``max_duration`` (:func:`processor_indices`). Each temporal patch is labelled
with the whole second of its first frame, written ``"3.0 seconds"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models import glm4v, kinds
from mmctl.models.family import Family
from mmctl.models.glm4v import GlmPrompt, GlmTokens, glm_tokens
from mmctl.models.qwen_vl.parts import QwenProcessor
from mmctl.models.qwen_vl.settings import PATCH14_CLIP, PatchSteps
from mmctl.models.settings import File, HFClass, setting
from mmctl.values.tokens import Tokens

IMAGE, VIDEO = File.IMAGE, File.VIDEO

_BUDGET = {"patch_expand_factor": 1, "min_image_tokens": 16}
#: transformers 5.20.2's classes (their class attributes).
IMAGE_CLASS = HFClass(
    "Glm5NextImageProcessor", {**PATCH14_CLIP, **_BUDGET, "max_image_tokens": 8000}
)
VIDEO_CLASS = HFClass(
    "Glm5NextVideoProcessor",
    {
        **PATCH14_CLIP,
        **_BUDGET,
        "max_image_tokens": 240000,
        "fps": 2,
        "max_frames": 2048,
        "max_duration": 0,
    },
)
#: ``Glm5NextProcessingInfo.get_hf_processor``: the video processor's
#: ``max_image_tokens`` is at most this, whatever the folder says.
VLLM_MAX_VIDEO_TOKENS = 30000
#: ``Glm5NextVideoBackend``'s defaults (``fps`` -1 from the loader's caller:
#: its own 2.0), which no model file changes.
LOADER_FPS, LOADER_MAX_FRAMES, LOADER_TPS = 2.0, 2048, 2
#: A budget's lower edge forces an enlargement: bounded as Qwen's ``shortest_edge``
#: (:data:`~mmctl.models.kinds.MAX_MIN_PIXELS`, in tokens of two 28² frames).
_MIN_TOKENS = kinds.Int(1, kinds.MAX_MIN_PIXELS // (2 * 28 * 28))
_MAX_TOKENS = kinds.Int(1, 2**31)


@dataclass(frozen=True)
class Glm5NextVision(PatchSteps):
    """Every setting that shapes a GLM-5-Next item's pixels, grid and tokens;
    defaults are GLM-5.3-Flash's published processor_config.json
    (tests/fixtures/families/glm5_next). The budgets are in tokens and count
    frames (an image is ``temporal_patch_size`` frames)."""

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (IMAGE_CLASS,)
    VIDEO_CLASSES: ClassVar[tuple[HFClass, ...]] = (VIDEO_CLASS,)
    PUBLISHED: ClassVar[Mapping[str, Any]] = {
        "patch_size": 14,
        "image_mean": kinds.CLIP_MEAN,
        "image_std": kinds.CLIP_STD,
    }
    #: GLM-4.1V/4.6V's (vLLM samples frames itself; sampling inputs no path reads),
    #: and ``size``: a placeholder both classes ignore (their budgets are the token keys).
    INERT: ClassVar[frozenset[str]] = glm4v.GlmVision.INERT | {"size"}

    image_min_tokens: int = setting(IMAGE, "min_image_tokens", 16, _MIN_TOKENS)
    image_max_tokens: int = setting(IMAGE, "max_image_tokens", 8000, _MAX_TOKENS)
    video_min_tokens: int = setting(VIDEO, "min_image_tokens", 16, _MIN_TOKENS)
    video_max_tokens: int = setting(VIDEO, "max_image_tokens", 240000, _MAX_TOKENS)
    patch_expand_factor: int = setting(
        VIDEO, "patch_expand_factor", 1, kinds.Int(1, 4), also_image=True
    )
    #: The processor's own sampling, run only when vLLM's loader decoded every frame.
    fps: float = setting(VIDEO, "fps", 2.0, kinds.Number(0, 1000))
    max_frames: int = setting(VIDEO, "max_frames", 2048, kinds.Int(1, 100_000))
    max_duration: float = setting(VIDEO, "max_duration", 0, kinds.Number(-math.inf, 10**7))

    @property
    def variant(self) -> str:
        """GLM's prompt: timestamps written ``"3.0 seconds"`` (not GLM-4.1V's)."""
        return "glm5_next"

    @property
    def factor(self) -> int:
        """Canvas sides are multiples of this (patch × merge × expand)."""
        return self.patch_size * self.merge_size * self.patch_expand_factor

    def budget(self, kind: MediaKind) -> tuple[int, int]:
        """(min, max) tokens of a ``kind`` item, as vLLM's processor has them."""
        if kind is MediaKind.IMAGE:
            return self.image_min_tokens, self.image_max_tokens
        return self.video_min_tokens, min(self.video_max_tokens, VLLM_MAX_VIDEO_TOKENS)

    def check(self) -> None:
        for kind in (MediaKind.IMAGE, MediaKind.VIDEO):
            low, high = self.budget(kind)
            if low > high:
                raise InputError(
                    f"model processor config: the {kind.value} budget needs "
                    f"min_image_tokens <= max_image_tokens, got {low} and {high}"
                )
        if self.factor > kinds.MAX_SIDE // 4:
            raise InputError(
                f"model processor config: patch_size x merge_size x patch_expand_factor is "
                f"{self.factor}; a canvas that large is no model's"
            )


@dataclass(frozen=True)
class Glm5NextTokens(GlmTokens):
    """GLM-5-Next's special ids (transformers' ``Glm5NextConfig`` defaults: the
    GLM-4.5 specials from 154820, ``<|image|>`` 34th)."""

    PUBLISHED: ClassVar[Mapping[str, Any]] = {
        "image_token_id": 154854,
        "video_token_id": 154855,
        "image_start_token_id": 154830,
        "image_end_token_id": 154831,
        "video_start_token_id": 154832,
        "video_end_token_id": 154833,
    }


def read_tokens(config: Mapping[str, Any], vocab: Any) -> Tokens:
    """The family's :class:`~mmctl.models.family.TokenReader` (GLM's, its own ids)."""
    return glm_tokens(config, vocab, Glm5NextTokens)


# ---- sizes ------------------------------------------------------------------------


def _align(value: float, factor: int) -> int:
    return math.ceil(value / factor) * factor


def smart_resize(
    num_frames: int, height: int, width: int, factor: int, temporal: int, low: int, high: int
) -> tuple[int, int]:
    """transformers' GLM-5-Next ``smart_resize``: the (h, w) canvas, multiples of
    ``factor``, for ``num_frames`` frames within ``low``..``high`` tokens (a token:
    ``temporal`` frames of ``factor²`` pixels). Python's float arithmetic and
    ``round`` (half to even), as there."""
    per_token = temporal * factor**2
    min_pixels, max_pixels = low * per_token, high * per_token
    frames = max(temporal, round(num_frames / temporal) * temporal)
    h, w = _align(height, factor), _align(width, factor)
    if frames * h * w < min_pixels:
        scale = math.sqrt(min_pixels / (num_frames * height * width))
        h = _align(max(1, math.ceil(height * scale)), factor)
        w = _align(max(1, math.ceil(width * scale)), factor)
    if frames * h * w <= max_pixels:
        return h, w
    if max_pixels < frames * factor**2:
        raise InputError(
            f"max_image_tokens={high} is too small: one aligned patch of {frames} frames needs "
            f"{frames * factor**2} pixels (transformers refuses it too)"
        )
    best = factor, factor
    lo, hi = 1, height
    while lo <= hi:  # the tallest content whose aligned canvas fits
        mid = (lo + hi) // 2
        candidate = _align(mid, factor), _align(max(1, math.floor(width * mid / height)), factor)
        if frames * candidate[0] * candidate[1] <= max_pixels:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


def canvas_size(
    kind: MediaKind, num_frames: int, height: int, width: int, s: Glm5NextVision
) -> tuple[int, int]:
    """(h, w) of the canvas a ``kind`` item's frames go into (an image is
    ``temporal_patch_size`` frames)."""
    low, high = s.budget(kind)
    tp = s.temporal_patch_size
    frames = tp if kind is MediaKind.IMAGE else num_frames
    return smart_resize(frames, height, width, s.factor, tp, low, high)


def content_size(
    kind: MediaKind,
    canvas: tuple[int, int],
    num_frames: int,
    height: int,
    width: int,
    s: Glm5NextVision,
) -> tuple[int, int]:
    """The processors' ``resize``: the frame scaled to fit the canvas, never
    enlarged unless the item is under the minimum budget; the rest is padding."""
    low, _ = s.budget(kind)
    per_token = s.temporal_patch_size * s.factor**2
    scale = min(canvas[0] / height, canvas[1] / width)
    if num_frames * height * width >= per_token * low:
        scale = min(1.0, scale)
    return (
        max(1, min(canvas[0], math.floor(height * scale))),
        max(1, min(canvas[1], math.floor(width * scale))),
    )


# ---- frame choice -----------------------------------------------------------------


def _unique_even(indices: Sequence[int]) -> list[int]:
    kept = list(dict.fromkeys(int(i) for i in indices))
    return kept + kept[-1:] if len(kept) % 2 else kept


def _linspace(start: int, end: int, count: int) -> list[int]:
    return [int(i) for i in np.linspace(start, end, count, dtype=int)]


def _walk(total: int, fps: float, step: float, max_second: int) -> list[int]:
    """The greedy walk both samplers share: each frame whose time reaches the next
    mark, the mark advancing by ``step``, until it passes ``max_second``."""
    chosen: list[int] = []
    current, per_frame = 0.0, 1 / fps
    for index in range(total):
        if index * per_frame >= current:
            current += step
            chosen.append(index)
            if current >= max_second:
                break
    return chosen


def _respread(chosen: list[int], extract: int, total: int) -> list[int]:
    if len(chosen) < extract:
        start, end = (chosen[0], chosen[-1]) if chosen else (0, max(total - 1, 0))
        return _linspace(start, end, extract)
    if len(chosen) > extract:
        return _linspace(0, total - 1, extract)
    return chosen


def loader_indices(total: int, fps: float) -> list[int]:
    """``Glm5NextVideoBackend``: the frames vLLM decodes, ascending, each once
    (its ``read_frames`` reads a set). Duration is OpenCV's ``total / fps``."""
    duration = total / fps
    extract = min(int(duration * LOADER_FPS), LOADER_MAX_FRAMES)
    if total < extract:
        chosen = [math.floor(i * total / extract) for i in range(extract)]
    else:
        chosen = _walk(total, fps, 1 / (LOADER_TPS * LOADER_FPS), int(duration))
    return sorted(set(_respread(chosen, extract, total)))


def processor_indices(total: int, fps: float, s: Glm5NextVision) -> list[int]:
    """``Glm5NextVideoProcessor.sample_frames`` on a clip of ``total`` frames
    (de-duplicated, an odd count evened with its last frame)."""
    duration = total / fps
    max_second = int(duration)
    if s.max_duration > 0:
        duration = min(duration, s.max_duration)
    extract = min(int(duration * s.fps), s.max_frames)
    if total < extract:
        chosen = _linspace(0, total - 1, extract)
    else:
        chosen = _walk(total, fps, 1 / s.fps, max_second)
    return _unique_even(_respread(chosen, extract, total))


def sample_indices(total: int, fps: float, s: Glm5NextVision) -> list[int]:
    """The frames the processor works on, in order (the last may repeat)."""
    if total < 1 or fps <= 0:
        raise InputError(f"a video needs frames and a frame rate, got {total} at {fps} fps")
    decoded = loader_indices(total, fps)
    kept = processor_indices(total, fps, s) if len(decoded) == total else decoded
    if not kept:
        raise InputError(
            f"vLLM's GLM-5-Next frame sampler keeps no frame of this {total / fps:.2f} s clip",
            hint="send a clip of at least 0.5 s, or the frame as an image",
        )
    return kept


def patch_seconds(indices: Sequence[int], fps: float, s: Glm5NextVision) -> list[int]:
    """``Glm5NextProcessingInfo._get_video_second_idx_glm46v``: the whole second of
    each temporal patch's first frame."""
    tp, last = s.temporal_patch_size, len(indices) - 1
    patches = -(-len(indices) // tp)
    return [int(indices[min(i * tp, last)] / fps) for i in range(max(patches, 1))]


@dataclass(frozen=True)
class Glm5NextVariant:
    """What the Qwen-VL pipeline reads of GLM-5-Next (a
    :class:`~mmctl.models.qwen_vl.variant.PatchVariant` of :class:`Glm5NextVision`)."""

    name: str = "glm5-next"

    def sample_indices(
        self, total_frames: int, source_fps: float, vision: Glm5NextVision
    ) -> np.ndarray:
        return np.asarray(sample_indices(total_frames, source_fps, vision), dtype=np.int64)

    def video_frame_times(
        self, indices: np.ndarray, source_fps: float, vision: Glm5NextVision
    ) -> list[float]:
        return [float(s) for s in patch_seconds(indices.tolist(), source_fps, vision)]

    def video_size(
        self, num_frames: int, height: int, width: int, vision: Glm5NextVision
    ) -> tuple[int, int]:
        return canvas_size(MediaKind.VIDEO, num_frames, height, width, vision)

    def image_size(self, height: int, width: int, vision: Glm5NextVision) -> tuple[int, int]:
        return canvas_size(MediaKind.IMAGE, vision.temporal_patch_size, height, width, vision)

    def content_size(
        self, kind: MediaKind, canvas: tuple[int, int], num_frames: int, height: int, width: int,
        vision: Glm5NextVision,
    ) -> tuple[int, int]:  # fmt: skip
        return content_size(kind, canvas, num_frames, height, width, vision)

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, vision: Glm5NextVision
    ) -> dict[str, np.ndarray]:
        return {}


VARIANT = Glm5NextVariant()
FAMILY = Family(
    name=VARIANT.name,
    aliases=("glm5_next", "glm-5.3-flash"),
    model_types=("glm5_next",),
    modalities=(MediaKind.IMAGE, MediaKind.VIDEO),
    settings=Glm5NextVision,
    tokens=read_tokens,
    processor=QwenProcessor(VARIANT),
    prompt=GlmPrompt(),
    wire=glm4v.WIRE,
    contract=glm4v.FAMILY.contract,
)
