"""GLM-4.1V and GLM-4.6V as vLLM 0.33 processes them, as pure functions (numpy only).

vLLM serves both with one model class (``glm4_1v.py``, model types ``glm4v`` and
``glm4v_moe``) and tells them apart by the folder's *processor class*, not its
model type: ``Glm4vProcessor`` (GLM-4.1V) or ``Glm46VProcessor`` (GLM-4.6V,
GLM-4.6V-Flash). The two differ only in video: the frame loader vLLM registers
for the video processor (:func:`loader_indices`) and the timestamp text
(:func:`timestamp_text`). scripts/families/glm4v.md has the whole account.

Images and video frames are resized to multiples of ``patch_size * merge_size``
(28) within a pixel budget that counts frames too (an image is two frames),
bicubic as torchvision does on uint8, and patchified Qwen-style: rows ordered
``(t, h/2, w/2, 2, 2)``, each ``3 * 2 * 14 * 14`` values, an image repeated over
the temporal patch, an odd frame count padded with its last frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.models.base import PixelBudget, VisionParams
from mmctl.preprocessing import pixels, resize

Variant = Literal["glm4v", "glm46v"]

#: ``processor_class`` (processor/preprocessor/tokenizer config) -> variant: what
#: vLLM's ``Glm4vMultiModalProcessor`` branches on (``isinstance(.., Glm4vProcessor)``).
PROCESSOR_VARIANTS: dict[str, Variant] = {"Glm4vProcessor": "glm4v", "Glm46VProcessor": "glm46v"}

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class Glm4vSettings:
    """The values GLM processing reads, published GLM-4.1V-9B-Thinking defaults."""

    variant: Variant = "glm4v"  # processor_class: Glm4vProcessor / Glm46VProcessor
    patch_size: int = 14  # preprocessor_config.json patch_size (= vision_config.patch_size)
    temporal_patch_size: int = 2  # temporal_patch_size
    merge_size: int = 2  # merge_size (= vision_config.spatial_merge_size)
    image_mean: tuple[float, float, float] = OPENAI_CLIP_MEAN  # image_mean
    image_std: tuple[float, float, float] = OPENAI_CLIP_STD  # image_std
    rescale_factor: float = 1 / 255  # rescale_factor
    image_min_pixels: int = 112 * 112  # preprocessor_config.json size.shortest_edge
    image_max_pixels: int = 28 * 28 * 2 * 6144  # size.longest_edge (frames x h x w)
    video_min_pixels: int = 112 * 112  # video_preprocessor_config.json size.shortest_edge
    video_max_pixels: int = 28 * 28 * 2 * 30000  # size.longest_edge (frames x h x w)
    fps: float = 2.0  # video processor fps (GLM-4.1V's resampling and timestamps)
    max_duration: int = 300  # video processor max_duration (GLM-4.1V)
    image_token_id: int = 151343  # config.json image_token_id (<|image|>)
    video_token_id: int = 151344  # video_token_id (<|video|>)
    image_start_token_id: int = 151339  # image_start_token_id (<|begin_of_image|>)
    image_end_token_id: int = 151340  # image_end_token_id (<|end_of_image|>)
    video_start_token_id: int = 151341  # video_start_token_id (<|begin_of_video|>)
    video_end_token_id: int = 151342  # video_end_token_id (<|end_of_video|>)

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    @property
    def merge_length(self) -> int:
        return self.merge_size * self.merge_size


#: GLM-4.1V-9B-Thinking (glm4v, Glm4vProcessor).
GLM41V = Glm4vSettings()
#: GLM-4.6V (glm4v_moe, Glm46VProcessor): GLM-4.5's tokenizer puts <|image|>/<|video|> later.
GLM46V = Glm4vSettings(variant="glm46v", image_token_id=151363, video_token_id=151364)

# ---- sizes and pixels ----


def image_size(height: int, width: int, s: Glm4vSettings) -> tuple[int, int]:
    """(h, w) an image is resized to: HF's GLM ``smart_resize`` with two frames
    (``num_frames=temporal_patch_size``), the image budget."""
    return resize.smart_resize_video(
        s.temporal_patch_size,
        height,
        width,
        factor=s.factor,
        temporal_factor=s.temporal_patch_size,
        min_pixels=s.image_min_pixels,
        max_pixels=s.image_max_pixels,
    )


def video_size(num_frames: int, height: int, width: int, s: Glm4vSettings) -> tuple[int, int]:
    """(h, w) every frame of a clip of ``num_frames`` kept frames is resized to."""
    return resize.smart_resize_video(
        num_frames,
        height,
        width,
        factor=s.factor,
        temporal_factor=s.temporal_patch_size,
        min_pixels=s.video_min_pixels,
        max_pixels=s.video_max_pixels,
    )


def vision_params(s: Glm4vSettings) -> VisionParams:
    """The settings as :mod:`mmctl.preprocessing.pixels` takes them."""
    return VisionParams(
        patch_size=s.patch_size,
        temporal_patch_size=s.temporal_patch_size,
        merge_size=s.merge_size,
        image_mean=s.image_mean,
        image_std=s.image_std,
        rescale_factor=s.rescale_factor,
        video_budget=PixelBudget(s.video_min_pixels, s.video_max_pixels),
        image_budget=PixelBudget(s.image_min_pixels, s.image_max_pixels),
        fps=s.fps,
    )


def _patchify(
    frames: np.ndarray, s: Glm4vSettings, fmt: PixelFormat
) -> tuple[np.ndarray, tuple[int, int, int]]:
    """``[T, h, w, 3]`` resized uint8 frames (T a multiple of Tp) -> rows and grid."""
    params = vision_params(s)
    t, h, w = pixels.grid_for(len(frames), frames.shape[1], frames.shape[2], params)
    rows = h * w
    out = np.empty((t * rows, params.patch_dim), dtype=fmt.numpy_dtype)
    tp = s.temporal_patch_size
    for k in range(t):
        pixels.patchify_into(
            out[k * rows : (k + 1) * rows], frames[k * tp : (k + 1) * tp], params, fmt
        )
    return out, (t, h, w)


def image_pixels(
    rgb: np.ndarray, s: Glm4vSettings, fmt: PixelFormat = PixelFormat.FLOAT32
) -> tuple[np.ndarray, tuple[int, int, int]]:
    """One ``[H, W, 3]`` uint8 image (loaded as vLLM loads it) -> its ``pixel_values``
    rows ``[h*w/196, 1176]`` and ``image_grid_thw`` ``(1, h/14, w/14)``."""
    h, w = image_size(rgb.shape[0], rgb.shape[1], s)
    frame = resize.resize_rgb(rgb, h, w)
    return _patchify(np.repeat(frame[None], s.temporal_patch_size, axis=0), s, fmt)


def video_pixels(
    frames: np.ndarray, s: Glm4vSettings, fmt: PixelFormat = PixelFormat.FLOAT32
) -> tuple[np.ndarray, tuple[int, int, int]]:
    """The frames the processor keeps (``[T, H, W, 3]`` uint8, see :func:`sample_indices`)
    -> ``pixel_values_videos`` rows and ``video_grid_thw`` ``(ceil(T/2), h/14, w/14)``."""
    if len(frames) < s.temporal_patch_size:
        raise InputError(
            f"GLM needs at least {s.temporal_patch_size} frames of a video, got {len(frames)}",
            hint="send a clip of at least 1 s, or the frame as an image",
        )
    h, w = video_size(len(frames), frames.shape[1], frames.shape[2], s)
    pad = -len(frames) % s.temporal_patch_size
    resized = np.stack([resize.resize_rgb(f, h, w) for f in frames])
    if pad:  # HF's patchify repeats the last frame (after the resize)
        resized = np.concatenate([resized, np.repeat(resized[-1:], pad, axis=0)])
    return _patchify(resized, s, fmt)


# ---- frame choice ----


@dataclass(frozen=True)
class SampledFrames:
    """What the processor works on for one clip."""

    #: Indices into the decoded clip, in order, as the processor keeps them (a last
    #: index may repeat: the even padding of a resampled list).
    indices: tuple[int, ...]
    #: Whole second of each temporal patch (every second kept frame), for the prompt.
    seconds: tuple[int, ...]
    #: Whether vLLM let the processor resample (its loader decoded every frame).
    resampled: bool


def _unique(indices: Sequence[int]) -> list[int]:
    seen: set[int] = set()
    out = []
    for i in indices:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def _even(indices: list[int]) -> list[int]:
    return indices + indices[-1:] if len(indices) % 2 else indices


def _glm41v_indices(total: int, fps: float, duration: float, rate: float, max_s: int) -> list[int]:
    """``DynamicVideoBackend`` / ``Glm4vVideoProcessor.sample_frames`` (before de-dup)."""
    last = total - 1
    if duration <= max_s:
        return [min(last, math.ceil(i * fps / rate)) for i in range(math.floor(duration * rate))]
    samples = int(max_s * rate)
    if samples >= total:
        return list(range(total))
    seconds = np.linspace(0, duration, samples, endpoint=True)
    return [min(last, math.ceil(float(t) * fps)) for t in seconds]


#: GLM-4.6V's dynamic rate: (longest clip in s, frames per second).
GLM46V_RATES = ((30, 3.0), (300, 1.0), (2400, 0.5))
GLM46V_MAX_FRAMES = 640
GLM46V_MAX_DURATION = 2400


def _glm46v_indices(total: int, fps: float, duration: float, tps: int) -> list[int]:
    """``GLM46VVideoBackend`` / ``Glm46VVideoProcessor.sample_frames``, even, de-duplicated."""
    effective = min(duration, GLM46V_MAX_DURATION)
    rate = next((r for limit, r in GLM46V_RATES if effective <= limit), GLM46V_RATES[-1][1])
    extract = min(int(effective * rate * tps), GLM46V_MAX_FRAMES)
    per_frame = 1 / fps
    max_second = int(duration)
    chosen: list[int]
    if total < extract:
        chosen = np.linspace(0, total - 1, extract, dtype=int).tolist()
    else:
        chosen, current, step = [], 0.0, 1 / (tps * rate)
        for index in range(total):
            if index * per_frame >= current:
                current += step
                chosen.append(index)
                if current >= max_second:
                    break
    if len(chosen) < extract:
        start, end = (chosen[0], chosen[-1]) if chosen else (0, max(total - 1, 0))
        chosen = np.linspace(start, end, extract, dtype=int).tolist()
    elif len(chosen) > extract:
        chosen = np.linspace(0, total - 1, extract, dtype=int).tolist()
    return _even(_unique(chosen))


def loader_indices(total: int, fps: float, s: Glm4vSettings) -> list[int]:
    """The frames vLLM's GLM loader decodes, ascending, each once (its ``read_frames``
    reads a set). ``total`` and ``fps`` as OpenCV reports them; vLLM's duration is
    ``total / fps``. GLM-4.1V's loader (``opencv_dynamic``) samples at 2 fps up to
    300 s (its own defaults, not the processor's); GLM-4.6V's (``glm46v``) by clip
    length with a temporal patch of 2."""
    if total < 1 or fps <= 0:
        raise InputError(f"a video needs frames and a frame rate, got {total} at {fps} fps")
    duration = total / fps
    if s.variant == "glm4v":
        return sorted(set(_glm41v_indices(total, fps, duration, 2.0, 300)))
    return sorted(set(_glm46v_indices(total, fps, duration, 2)))


def sample_indices(total: int, fps: float, s: Glm4vSettings) -> SampledFrames:
    """The frames the processor keeps and the seconds written in the prompt.

    vLLM hands the processor the loader's frames with ``do_sample_frames`` true only
    when the loader decoded every frame; the processor then samples again with its
    own settings (``fps``, ``max_duration``, ``temporal_patch_size``). A clip under
    1 s leaves one frame, which the processor refuses (vLLM does too).
    """
    decoded = loader_indices(total, fps, s)
    resampled = len(decoded) == total
    duration = total / fps
    if not resampled:
        kept = decoded
    elif s.variant == "glm4v" and duration <= s.max_duration:
        n = max(math.floor(duration * s.fps), 1)  # HF samples at least one frame
        kept = _even(_unique([min(total - 1, math.ceil(i * fps / s.fps)) for i in range(n)]))
    elif s.variant == "glm4v":
        kept = _even(_unique(_glm41v_indices(total, fps, duration, s.fps, s.max_duration)))
    else:
        kept = _glm46v_indices(total, fps, duration, s.temporal_patch_size)
    if len(kept) < s.temporal_patch_size:
        raise InputError(
            f"vLLM keeps {len(kept)} frame(s) of this {duration:.2f} s clip and GLM needs "
            f"{s.temporal_patch_size}",
            hint="send a clip of at least 1 s, or the frame as an image",
        )
    seconds = [int(i / fps) for i in _even(_unique(kept))][::2]
    return SampledFrames(tuple(kept), tuple(seconds), resampled)


# ---- prompt ----


def timestamp_text(second: int, s: Glm4vSettings) -> str:
    """The text after each frame, tokenized on its own: ``"3"`` (GLM-4.1V) or
    ``"3.0 seconds"`` (GLM-4.6V; vLLM writes whole seconds, HF the exact time)."""
    return str(second) if s.variant == "glm4v" else f"{second:.1f} seconds"


def image_target(s: Glm4vSettings) -> list[int]:
    """What vLLM replaces per image in the tokenized prompt: ``<|image|>``."""
    return [s.image_token_id]


def video_target(s: Glm4vSettings) -> list[int]:
    """What vLLM replaces per video: ``<|begin_of_video|><|video|><|end_of_video|>``."""
    return [s.video_start_token_id, s.video_token_id, s.video_end_token_id]


def image_replacement(grid: tuple[int, int, int], s: Glm4vSettings) -> list[int]:
    """``t*h*w/4`` x ``<|image|>`` (every one an embedding position)."""
    t, h, w = grid
    return [s.image_token_id] * (t * h * w // s.merge_length)


def video_replacement(
    grid: tuple[int, int, int],
    seconds: Sequence[int],
    encode: Callable[[str], list[int]],
    s: Glm4vSettings,
) -> list[int]:
    """``_construct_video_placeholder``: ``<|begin_of_video|>``, then per temporal patch
    ``<|begin_of_image|>`` + ``h*w/4`` x ``<|image|>`` + ``<|end_of_image|>`` + the
    tokens of its timestamp (``encode``: the folder's tokenizer, no special tokens),
    then ``<|end_of_video|>``. Only the ``<|image|>`` ids take embeddings."""
    t, h, w = grid
    if len(seconds) != t:
        raise ValueError(f"{len(seconds)} timestamps for {t} temporal patches")
    per_frame = h * w // s.merge_length
    out = [s.video_start_token_id]
    for second in seconds:
        out.append(s.image_start_token_id)
        out += [s.image_token_id] * per_frame
        out.append(s.image_end_token_id)
        out += encode(timestamp_text(second, s))
    out.append(s.video_end_token_id)
    return out


def embed_mask(replacement: Sequence[int], s: Glm4vSettings) -> np.ndarray:
    """Which positions of a replacement receive embeddings: its ``<|image|>`` ids
    (smg-grpc-servicer derives the same from ``im_token_id``)."""
    return np.asarray(replacement, dtype=np.int64) == s.image_token_id
