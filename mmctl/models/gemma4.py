"""Gemma 4: images and video as vLLM 0.33 processes them, as pure numpy functions.

vLLM 0.33's ``Gemma4MultiModalProcessor`` (``model_executor/models/gemma4_mm.py``)
runs transformers 5.20's ``Gemma4ImageProcessor`` (torchvision backend,
``models/gemma4/image_processing_gemma4.py``) for images *and* for video: it
never calls HF's video processor. Per image or frame, bit for bit:

1. the target size (:func:`target_size`): the largest one keeping the aspect
   ratio whose sides are multiples of ``pooling_kernel_size * patch_size`` (48)
   within ``max_soft_tokens * pooling_kernel_size**2`` patches;
2. a uint8 antialiased bicubic resize to it (skipped when the size is already
   right), ``rescale_factor`` applied in float32, no normalisation on the
   published settings (``do_normalize`` false: the encoder scales itself);
3. cut into 16x16 patches in reading order, each patch's values in
   ``[row][column][channel]`` order (768 per patch), zero-padded to the budget's
   patch count; ``pixel_position_ids`` holds each patch's ``(x, y)``, ``-1`` for
   padding. So an image is always ``[max_patches, 768]``: 2520 patches for
   images (280 soft tokens), 630 for a video frame (70, vLLM's fixed video budget).

The prompt (vLLM's ``_get_prompt_updates``): the chat template writes one
``<|image|>`` per image and one ``<|video|>`` per video. An image becomes
``<|image>`` + N x ``<|image|>`` + ``<image|>``, N from vLLM's own count
(:func:`soft_tokens`, clamped to the budget). A video becomes, per frame, its
timestamp text (``"mm:ss "``, later frames ``" mm:ss "``, each tokenized on its
own), ``<|image>``, N x ``<|video|>``, ``<image|>``. Embeddings go to the
``<|image|>`` / ``<|video|>`` tokens only (``PromptUpdateDetails.select_token_id``):
the placeholder span holds the markers and timestamps too.

Frames are vLLM's default loader's (``VideoBackend``: 32 spread evenly, truncated
``linspace``); a frame's time is its source index over the source frame rate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import dimensions
from mmctl.preprocessing.resize import resize_rgb
from mmctl.preprocessing.tiles import check_rgb, rescale_normalize

#: The soft-token budgets the processor and vLLM accept (``_SUPPORTED_SOFT_TOKENS``).
SUPPORTED_SOFT_TOKENS = (70, 140, 280, 560, 1120)
#: gemma4_mm.py ``_VIDEO_MAX_SOFT_TOKENS``: every video frame's budget, whatever the
#: folder's configs say (vLLM passes ``max_soft_tokens=70`` for frames).
VIDEO_SOFT_TOKENS = 70
#: ``vllm/multimodal/media/video.py`` ``VideoMediaIO(num_frames=32)``.
VIDEO_NUM_FRAMES = 32
#: gemma4_mm.py ``metadata.get("fps") or 24``: the rate assumed when the loader has none.
FALLBACK_FPS = 24.0
#: The channels of a patch (RGB).
CHANNELS = 3


@dataclass(frozen=True)
class Settings:
    """The published values of google/gemma-4-31B-it (every Gemma 4 checkpoint has
    them). Pixel settings are ``processor_config.json``'s ``image_processor`` (vLLM
    runs it on video frames too; the ``video_processor`` section is not read);
    the token ids are ``config.json``'s."""

    #: image_processor.patch_size (= vision_config.patch_size)
    patch_size: int = 16
    #: image_processor.pooling_kernel_size (= vision_config.pooling_kernel_size)
    pooling_kernel_size: int = 3
    #: image_processor.max_soft_tokens: the images' pixel budget.
    max_soft_tokens: int = 280
    #: vision_config.default_output_length: the budget of vLLM's image token count
    #: (``mm_processor_kwargs.max_soft_tokens`` overrides both on a server).
    default_output_length: int = 280
    #: image_processor.do_resize
    do_resize: bool = True
    #: image_processor.do_rescale
    do_rescale: bool = True
    #: image_processor.rescale_factor
    rescale_factor: float = 0.00392156862745098
    #: image_processor.do_normalize
    do_normalize: bool = False
    #: image_processor.image_mean
    image_mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: image_processor.image_std
    image_std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    #: Frames vLLM's loader keeps (``VideoMediaIO(num_frames=32)``; a server's
    #: ``--media-io-kwargs '{"video": {"num_frames": N}}'``).
    num_frames: int = VIDEO_NUM_FRAMES
    #: The loader's target rate (``media_io_kwargs`` ``fps``; -1: none).
    sample_fps: float = -1.0
    #: config.json image_token_id (``<|image|>``)
    image_token_id: int = 258880
    #: config.json video_token_id (``<|video|>``)
    video_token_id: int = 258884
    #: config.json boi_token_id (``<|image>``, also before each video frame)
    boi_token_id: int = 255999
    #: config.json eoi_token_id (``<image|>``)
    eoi_token_id: int = 258882

    @property
    def patch_values(self) -> int:
        """Values per patch: ``patch_size**2 * 3`` (768)."""
        return self.patch_size * self.patch_size * CHANNELS

    def max_patches(self, max_soft_tokens: int) -> int:
        """Patches an item is padded to: ``max_soft_tokens * pooling_kernel_size**2``."""
        return max_soft_tokens * self.pooling_kernel_size**2


@dataclass(frozen=True)
class Pixels:
    """One image's or frame's encoder input, as vLLM holds it per item."""

    #: float32 ``[max_patches, patch_size**2 * 3]``, zero rows after the real patches.
    pixel_values: np.ndarray
    #: int64 ``[max_patches, 2]``: ``(x, y)`` of each patch, ``(-1, -1)`` for padding.
    pixel_position_ids: np.ndarray
    #: Soft tokens the encoder yields: real patches over ``pooling_kernel_size**2``.
    soft_tokens: int


def target_size(
    height: int, width: int, *, patch_size: int, pooling_kernel_size: int, max_soft_tokens: int
) -> tuple[int, int]:
    """(h, w) an image is resized to: transformers' ``get_aspect_ratio_preserving_size``.

    Both sides are floored to multiples of ``pooling_kernel_size * patch_size``
    after scaling the area to the patch budget. A side that floors to nothing
    becomes one multiple and the other side the aspect ratio's whole multiples,
    capped (only extreme aspect ratios, over about 1:280, reach that).
    """
    if height <= 0 or width <= 0:
        raise InputError(f"image has no pixels: {dimensions(width, height)}")
    max_patches = max_soft_tokens * pooling_kernel_size**2
    target_px = max_patches * patch_size**2
    factor = math.sqrt(target_px / (height * width))
    side = pooling_kernel_size * patch_size
    target_h = math.floor(factor * height / side) * side
    target_w = math.floor(factor * width / side) * side
    if target_h == 0 and target_w == 0:
        raise InputError(
            f"a {dimensions(width, height)} image cannot be resized to a multiple of {side}"
        )
    max_side = (max_patches // pooling_kernel_size**2) * side
    if target_h == 0:
        target_h, target_w = side, min(math.floor(width / height) * side, max_side)
    elif target_w == 0:
        target_w, target_h = side, min(math.floor(height / width) * side, max_side)
    if target_h * target_w > target_px:
        raise InputError(
            f"a {dimensions(width, height)} image resized to {dimensions(target_w, target_h)} "
            f"exceeds the budget of "
            f"{max_patches} patches"
        )
    return target_h, target_w


def soft_tokens(height: int, width: int, settings: Settings, max_soft_tokens: int) -> int:
    """vLLM's token count for an image or frame (``_compute_num_soft_tokens``): each
    side scaled and floored to a multiple of 48 (at least one), clamped to the budget.
    It is the prompt's count; the encoder's (:attr:`Pixels.soft_tokens`) must equal it."""
    patch, pool = settings.patch_size, settings.pooling_kernel_size
    unit = patch * pool
    scale = math.sqrt(settings.max_patches(max_soft_tokens) / ((height / patch) * (width / patch)))
    target_h = max(unit, math.floor(height * scale / unit) * unit)
    target_w = max(unit, math.floor(width * scale / unit) * unit)
    patches = (target_h // patch) * (target_w // patch)
    return min(patches // pool**2, max_soft_tokens)


def image_pixels(rgb: np.ndarray, settings: Settings, max_soft_tokens: int | None = None) -> Pixels:
    """An ``[H, W, 3]`` uint8 image as the processor encodes it (``max_soft_tokens``:
    the budget, by default the settings' image budget)."""
    check_rgb(rgb)
    budget = settings.max_soft_tokens if max_soft_tokens is None else max_soft_tokens
    patch = settings.patch_size
    height, width = rgb.shape[:2]
    if settings.do_resize:
        height, width = target_size(
            height,
            width,
            patch_size=patch,
            pooling_kernel_size=settings.pooling_kernel_size,
            max_soft_tokens=budget,
        )
        rgb = resize_rgb(rgb, height, width)
    if height % patch or width % patch:  # do_resize off: HF's reshape refuses it too
        raise InputError(
            f"a {dimensions(width, height)} image is not a whole number of {patch}-px patches"
        )
    rows, cols = height // patch, width // patch
    count = rows * cols
    max_patches = settings.max_patches(budget)
    if count > max_patches:
        raise InputError(
            f"a {dimensions(width, height)} image has {count} patches, over the budget of "
            f"{max_patches}"
        )
    # Patch-major, then [row][column][channel] inside a patch (HF's permute(1, 3, 2, 4, 0)).
    cut = rgb.reshape(rows, patch, cols, patch, CHANNELS)
    codes = cut.transpose(0, 2, 1, 3, 4).reshape(count, settings.patch_values)
    pixel_values = np.zeros((max_patches, settings.patch_values), dtype=np.float32)
    table = _value_table(settings)
    channel = np.tile(np.arange(CHANNELS), patch * patch)
    pixel_values[:count] = table[channel[None, :], codes]
    positions = np.full((max_patches, 2), -1, dtype=np.int64)
    index = np.arange(count, dtype=np.int64)
    positions[:count, 0] = index % cols
    positions[:count, 1] = index // cols
    return Pixels(pixel_values, positions, count // settings.pooling_kernel_size**2)


@functools.lru_cache(maxsize=8)
def _value_table(settings: Settings) -> np.ndarray:
    """float32 ``[3, 256]``: each channel's value for each byte, by HF's own arithmetic
    (:func:`mmctl.preprocessing.tiles.rescale_normalize` on all 256 bytes)."""
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[:, None, None], CHANNELS, axis=2)
    chw = rescale_normalize(
        ramp,
        do_rescale=settings.do_rescale,
        rescale_factor=settings.rescale_factor,
        do_normalize=settings.do_normalize,
        mean=settings.image_mean,
        std=settings.image_std,
    )
    table = np.ascontiguousarray(chw[:, :, 0])
    table.flags.writeable = False
    return table


def video_pixels(frames: np.ndarray, settings: Settings) -> list[Pixels]:
    """A video's ``[F, H, W, 3]`` uint8 frames, each as an image at the video budget."""
    if frames.ndim != 4 or len(frames) == 0:
        raise InputError(f"expected [frames, H, W, 3] uint8 frames, got {frames.shape}")
    return [image_pixels(frame, settings, VIDEO_SOFT_TOKENS) for frame in frames]


def sample_indices(total_frames: int, source_fps: float, settings: Settings) -> np.ndarray:
    """int64 indices vLLM's default loader keeps (``VideoBackend.compute_frames_index_to_sample``):
    ``min(num_frames, total)`` frames — fewer when ``sample_fps`` asks for
    ``floor(duration * sample_fps)`` — at least one; every frame when that is all of
    them, else ``np.linspace(0, total - 1, n, dtype=int)`` (truncated)."""
    if total_frames <= 0:
        raise InputError(f"a video with {total_frames} frames has nothing to sample")
    count = total_frames
    if settings.num_frames > 0:
        count = min(settings.num_frames, total_frames)
    if settings.sample_fps > 0:
        duration = total_frames / source_fps if source_fps > 0 else 0.0
        count = min(count, math.floor(duration * settings.sample_fps))
    count = max(1, count)
    if count == total_frames:
        return np.arange(total_frames, dtype=np.int64)
    return np.linspace(0, total_frames - 1, count, dtype=int).astype(np.int64)


def timestamps(indices: Sequence[int], source_fps: float) -> list[float]:
    """Seconds of each sampled frame: its source index over the source rate (24 when
    the rate is unknown), in float64 as vLLM divides."""
    rate = source_fps or FALLBACK_FPS
    return [int(i) / rate for i in indices]


def timestamp_text(seconds: float) -> str:
    """``mm:ss`` with both parts truncated (``get_video_repl``)."""
    return f"{int(seconds // 60):02d}:{int(seconds % 60):02d}"


def image_token_ids(height: int, width: int, settings: Settings) -> list[int]:
    """What one image's ``<|image|>`` becomes (``get_image_repl``), its size as loaded."""
    count = soft_tokens(height, width, settings, settings.default_output_length)
    return [settings.boi_token_id, *[settings.image_token_id] * count, settings.eoi_token_id]


def video_token_ids(
    seconds: Sequence[float],
    per_frame: Sequence[int],
    settings: Settings,
    encode: Callable[[str], Sequence[int]],
) -> list[int]:
    """What one video's ``<|video|>`` becomes (``get_video_repl``): per frame
    ``encode("mm:ss ")`` (``" mm:ss "`` after the first), ``<|image>``, the frame's
    soft tokens as ``<|video|>``, ``<image|>``. ``encode`` is the tokenizer without
    special tokens."""
    if len(seconds) != len(per_frame):
        raise ValueError(f"{len(seconds)} timestamps for {len(per_frame)} frames")
    out: list[int] = []
    for i, (stamp, count) in enumerate(zip(seconds, per_frame, strict=True)):
        text = timestamp_text(stamp)
        out += encode(f" {text} " if i else f"{text} ")
        out += [settings.boi_token_id, *[settings.video_token_id] * count, settings.eoi_token_id]
    return out


def frame_soft_tokens(height: int, width: int, settings: Settings) -> int:
    """vLLM's token count for one video frame of this size (the video budget)."""
    return soft_tokens(height, width, settings, VIDEO_SOFT_TOKENS)
