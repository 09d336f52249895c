"""Gemma 4 (``gemma4``): images and video as vLLM 0.33 processes them.

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

The family is built from the tile families' parts (:mod:`mmctl.models.tiled`):
the processor with this module's items (an image's patch rows and positions, a
video's frames one after another), vLLM's replacement per placeholder, the
field table (images batched; frames flat by ``video_frame_counts``; float
pixels: vLLM has no device normalization for Gemma 4), and the worker's
reading, which counts each item's tokens from its positions as vLLM's pooler
does. The frame times do not travel, so a request read back is checked by
its spans' structure (:func:`span_problem`). scripts/families/gemma4.md has
the whole account, with the source lines.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mmctl.checkpoint.files import ModelFiles
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind, dimensions
from mmctl.models import kinds, tiled
from mmctl.models.family import Family, ModelView
from mmctl.models.settings import REQUIRED, File, HFClass, Settings, check_vocab, setting
from mmctl.preprocessing.resize import resize_rgb
from mmctl.preprocessing.tiles import check_rgb, normalized
from mmctl.values.fields import PIXELS, ROWS, FieldLayout, WireField
from mmctl.values.items import Frames, ItemFacts
from mmctl.values.received import ContractError, Received

NAME = "gemma4"
IMAGE, CONFIG = File.IMAGE, File.CONFIG

#: The soft-token budgets the processor and vLLM accept (``_SUPPORTED_SOFT_TOKENS``).
SUPPORTED_SOFT_TOKENS = (70, 140, 280, 560, 1120)
#: gemma4_mm.py ``_VIDEO_MAX_SOFT_TOKENS``: every video frame's budget, whatever the
#: folder's configs say (vLLM passes ``max_soft_tokens=70`` for frames).
VIDEO_SOFT_TOKENS = 70
#: gemma4_mm.py ``metadata.get("fps") or 24``: the rate assumed when the loader has none.
FALLBACK_FPS = 24.0
#: The channels of a patch (RGB).
CHANNELS = 3

_SOFT = kinds.OneOf(SUPPORTED_SOFT_TOKENS, f"one of {', '.join(map(str, SUPPORTED_SOFT_TOKENS))}")
#: transformers 5.20.2 ``Gemma4ImageProcessor``'s class attributes, as file values.
IMAGE_CLASS = HFClass(
    "Gemma4ImageProcessor",
    {
        "resample": kinds.BICUBIC,
        "image_mean": [0.0, 0.0, 0.0],
        "image_std": [1.0, 1.0, 1.0],
        "do_resize": True,
        "do_rescale": True,
        "rescale_factor": kinds.RESCALE,
        "do_normalize": False,
        "patch_size": 16,
        "max_soft_tokens": 280,
        "pooling_kernel_size": 3,
    },
)
#: ``Gemma4Config`` / ``Gemma4VisionConfig`` defaults (5.20.2). The vision config
#: class has no ``default_output_length``: vLLM reads it as the checkpoint writes it.
CONFIG_CLASS = HFClass(
    "Gemma4Config",
    {
        "image_token_id": 258880,
        "video_token_id": 258884,
        "boi_token_id": 255999,
        "eoi_token_id": 258882,
        "vision_config": {
            "patch_size": 16,
            "pooling_kernel_size": 3,
            "position_embedding_size": 10240,
        },
    },
)


@dataclass(frozen=True)
class Gemma4Vision(Settings):
    """Every setting that shapes a Gemma 4 item's pixels and token count; the
    defaults are google/gemma-4-31B-it's published files (every Gemma 4
    checkpoint has the same processor values).

    The pixels are ``processor_config.json``'s ``image_processor`` for images
    *and* video frames: vLLM never calls HF's video processor, so the
    ``video_processor`` section is not read (no setting of it can change what
    vLLM makes). vLLM counts an image's tokens with ``config.json``'s
    ``vision_config`` (:meth:`check`: the two must describe one budget).
    """

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (IMAGE_CLASS,)
    CONFIG_CLASS: ClassVar[HFClass | None] = CONFIG_CLASS
    #: ``image_seq_length``: the processor's text-side count, which neither the
    #: image processor nor vLLM reads (vLLM counts by ``default_output_length``);
    #: ``size`` / ``default_to_square``: the class sets no size and resizes by
    #: the patch budget, so its ``_preprocess`` never reads them.
    INERT: ClassVar[frozenset[str]] = frozenset({"image_seq_length", "size", "default_to_square"})
    #: A server's ``--media-io-kwargs '{"video": {"num_frames": N, "fps": F}}'``.
    OVERRIDABLE: ClassVar[tuple[str, ...]] = ("num_frames", "sample_fps")
    FLAG_NAMES: ClassVar[Mapping[str, str]] = {"fps": "sample_fps"}

    image_processor_type: str = setting(
        IMAGE, "image_processor_type", IMAGE_CLASS.name, kinds.OneOf((IMAGE_CLASS.name,))
    )
    patch_size: int = setting(IMAGE, "patch_size", 16, kinds.Int(1, 256))
    pooling_kernel_size: int = setting(IMAGE, "pooling_kernel_size", 3, kinds.Int(1, 16))
    #: The images' pixel budget, in soft tokens (``mm_processor_kwargs.max_soft_tokens``
    #: changes it and :attr:`default_output_length` together on a server).
    max_soft_tokens: int = setting(IMAGE, "max_soft_tokens", 280, _SOFT)
    resample: int = setting(
        IMAGE, "resample", kinds.BICUBIC, kinds.OneOf((kinds.BICUBIC,), "bicubic (3) only")
    )
    do_resize: bool = setting(IMAGE, "do_resize", True, kinds.Flag())
    do_rescale: bool = setting(IMAGE, "do_rescale", True, kinds.Flag())
    rescale_factor: float = setting(IMAGE, "rescale_factor", kinds.RESCALE, kinds.Number(0, 1))
    do_normalize: bool = setting(IMAGE, "do_normalize", False, kinds.Flag())
    image_mean: tuple[float, float, float] = setting(
        IMAGE, "image_mean", (0.0, 0.0, 0.0), kinds.Triple()
    )
    image_std: tuple[float, float, float] = setting(
        IMAGE, "image_std", (1.0, 1.0, 1.0), kinds.Triple(std=True)
    )
    #: vLLM's image token count budget (``_compute_num_soft_tokens``).
    default_output_length: int = setting(
        CONFIG,
        "vision_config.default_output_length",
        280,
        kinds.Int(1, max(SUPPORTED_SOFT_TOKENS)),
        default=REQUIRED,
    )
    vision_patch_size: int = setting(CONFIG, "vision_config.patch_size", 16, kinds.Int(1, 256))
    vision_pooling_kernel_size: int = setting(
        CONFIG, "vision_config.pooling_kernel_size", 3, kinds.Int(1, 16)
    )
    #: Patch positions index a table of this many (the patch embedder's).
    position_embedding_size: int = setting(
        CONFIG, "vision_config.position_embedding_size", 10240, kinds.Int(1, 10**6)
    )
    #: Frames vLLM's loader keeps (``VideoMediaIO(num_frames=32)``; mmctl's ``--num-frames``).
    num_frames: int = tiled.LOADER_FRAMES
    #: The loader's target rate (``-1``: none; mmctl's ``--fps``).
    sample_fps: float = -1.0

    @property
    def patch_values(self) -> int:
        """Values per patch: ``patch_size**2 * 3`` (768)."""
        return self.patch_size * self.patch_size * CHANNELS

    def max_patches(self, max_soft_tokens: int) -> int:
        """Patches an item is padded to: ``max_soft_tokens * pooling_kernel_size**2``."""
        return max_soft_tokens * self.pooling_kernel_size**2

    def check(self) -> None:
        where = 'processor_config.json "image_processor"'
        for key, image, config in (
            ("patch_size", self.patch_size, self.vision_patch_size),
            ("pooling_kernel_size", self.pooling_kernel_size, self.vision_pooling_kernel_size),
            ("max_soft_tokens", self.max_soft_tokens, self.default_output_length),
        ):
            if image != config:
                other = "default_output_length" if key == "max_soft_tokens" else key
                raise InputError(
                    f"{where} {key} is {image} but config.json's vision_config.{other} is "
                    f"{config}: vLLM would count an image's tokens by one and encode it by "
                    "the other, and fail the request",
                    hint="give both one value (a server's --mm-processor-kwargs "
                    "max_soft_tokens sets the budget for both)",
                )
        pixels = self.max_patches(self.max_soft_tokens) * self.patch_size**2
        if pixels > kinds.MAX_MIN_PIXELS:
            raise InputError(
                f"{where}: a budget of {self.max_soft_tokens} soft tokens of "
                f"{self.pooling_kernel_size**2} patches of "
                f"{self.patch_size} px is {pixels:,} pixels per image, more than "
                f"{kinds.MAX_MIN_PIXELS:,}"
            )
        side = self.max_soft_tokens * self.pooling_kernel_size
        if side > self.position_embedding_size:
            raise InputError(
                f"{where}: an image may be {side} patches long, more than config.json's "
                f"vision_config.position_embedding_size ({self.position_embedding_size})"
            )


def _token(key: str, published: int) -> Any:
    return setting(CONFIG, key, published, kinds.TokenId())


@dataclass(frozen=True)
class Gemma4Tokens(Settings):
    """Gemma 4's special ids, mirroring config.json keys of the same names (a
    :class:`~mmctl.values.tokens.Tokens`). Each batch embeds at its own
    placeholder; ``<|image>`` / ``<image|>`` wrap every image and every frame."""

    CONFIG_CLASS: ClassVar[HFClass | None] = CONFIG_CLASS

    image_token_id: int = _token("image_token_id", 258880)  # <|image|>
    video_token_id: int = _token("video_token_id", 258884)  # <|video|>
    boi_token_id: int = _token("boi_token_id", 255999)  # <|image>
    eoi_token_id: int = _token("eoi_token_id", 258882)  # <image|>

    def placeholder(self, kind: MediaKind) -> int:
        return {MediaKind.IMAGE: self.image_token_id, MediaKind.VIDEO: self.video_token_id}[kind]

    def embed(self, kind: MediaKind) -> int:
        return self.placeholder(kind)

    def markers(self) -> dict[int, str]:
        # Every image and frame opens and closes as Qwen's vision_start/end do.
        return {self.boi_token_id: "vision_start", self.eoi_token_id: "vision_end"}

    def specials(self) -> frozenset[int]:
        """The ids a span's timestamp text cannot hold."""
        return frozenset(vars(self).values())

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


#: The ids vLLM takes from the tokenizer (the HF processor's ``image_token_id`` /
#: ``video_token_id``): :func:`~mmctl.models.settings.check_vocab`.
VOCAB = {"image_token_id": "<|image|>", "video_token_id": "<|video|>"}


def gemma4_tokens(config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> Gemma4Tokens:
    """The family's :class:`~mmctl.models.family.TokenReader`: config.json's ids
    (the class's where it has none), the placeholders checked against the tokenizer."""
    ids: Gemma4Tokens = Gemma4Tokens.resolve(ModelFiles(config=config), NAME).settings
    check_vocab(ids, VOCAB, vocab)
    return ids


@dataclass(frozen=True)
class Pixels:
    """One image's or frame's encoder input, as vLLM holds it per item."""

    #: float32 ``[max_patches, patch_size**2 * 3]``, zero rows after the real patches.
    pixel_values: np.ndarray
    #: int64 ``[max_patches, 2]``: ``(x, y)`` of each patch, ``(-1, -1)`` for padding.
    pixel_position_ids: np.ndarray
    #: Soft tokens the encoder yields: real patches over ``pooling_kernel_size**2``.
    soft_tokens: int
    #: (height, width) it was resized to (its real patches' extent).
    size: tuple[int, int]


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


def soft_tokens(height: int, width: int, s: Gemma4Vision, max_soft_tokens: int) -> int:
    """vLLM's token count for an image or frame (``_compute_num_soft_tokens``): each
    side scaled and floored to a multiple of 48 (at least one), clamped to the budget.
    It is the prompt's count; the encoder's (:attr:`Pixels.soft_tokens`) must equal it."""
    patch, pool = s.vision_patch_size, s.vision_pooling_kernel_size
    unit = patch * pool
    scale = math.sqrt(max_soft_tokens * pool**2 / ((height / patch) * (width / patch)))
    target_h = max(unit, math.floor(height * scale / unit) * unit)
    target_w = max(unit, math.floor(width * scale / unit) * unit)
    patches = (target_h // patch) * (target_w // patch)
    return min(patches // pool**2, max_soft_tokens)


def image_pixels(rgb: np.ndarray, s: Gemma4Vision, max_soft_tokens: int | None = None) -> Pixels:
    """An ``[H, W, 3]`` uint8 image as the processor encodes it (``max_soft_tokens``:
    the budget, by default the settings' image budget)."""
    check_rgb(rgb)
    budget = s.max_soft_tokens if max_soft_tokens is None else max_soft_tokens
    patch = s.patch_size
    height, width = rgb.shape[:2]
    if s.do_resize:
        height, width = target_size(
            height,
            width,
            patch_size=patch,
            pooling_kernel_size=s.pooling_kernel_size,
            max_soft_tokens=budget,
        )
        rgb = resize_rgb(rgb, height, width)
    if height % patch or width % patch:  # do_resize off: HF's reshape refuses it too
        raise InputError(
            f"a {dimensions(width, height)} image is not a whole number of {patch}-px patches"
        )
    rows, cols = height // patch, width // patch
    count = rows * cols
    max_patches = s.max_patches(budget)
    if count > max_patches:
        raise InputError(
            f"a {dimensions(width, height)} image has {count} patches, over the budget of "
            f"{max_patches}"
        )
    # Patch-major, then [row][column][channel] inside a patch (HF's permute(1, 3, 2, 4, 0)).
    cut = rgb.reshape(rows, patch, cols, patch, CHANNELS)
    codes = cut.transpose(0, 2, 1, 3, 4).reshape(count, s.patch_values)
    pixel_values = np.zeros((max_patches, s.patch_values), dtype=np.float32)
    table = _value_table(s)
    channel = np.tile(np.arange(CHANNELS), patch * patch)
    pixel_values[:count] = table[channel[None, :], codes]
    positions = np.full((max_patches, 2), -1, dtype=np.int64)
    index = np.arange(count, dtype=np.int64)
    positions[:count, 0] = index % cols
    positions[:count, 1] = index // cols
    return Pixels(pixel_values, positions, count // s.pooling_kernel_size**2, (height, width))


@functools.lru_cache(maxsize=8)
def _value_table(s: Gemma4Vision) -> np.ndarray:
    """float32 ``[3, 256]``: each channel's value for each byte, by HF's own arithmetic
    (:func:`mmctl.preprocessing.tiles.normalized` on all 256 bytes)."""
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[:, None, None], CHANNELS, axis=2)
    chw = normalized(ramp, s)
    table = np.ascontiguousarray(chw[:, :, 0])
    table.flags.writeable = False
    return table


def video_pixels(frames: np.ndarray, s: Gemma4Vision) -> list[Pixels]:
    """A video's ``[F, H, W, 3]`` uint8 frames, each as an image at the video budget."""
    if frames.ndim != 4 or len(frames) == 0:
        raise InputError(f"expected [frames, H, W, 3] uint8 frames, got {frames.shape}")
    return [image_pixels(frame, s, VIDEO_SOFT_TOKENS) for frame in frames]


def sample_indices(total_frames: int, source_fps: float, s: Gemma4Vision) -> np.ndarray:
    """The frames vLLM's default loader keeps (no loader is registered for
    Gemma 4's video processor): :func:`mmctl.models.tiled.loader_indices` with
    the settings' frame count and target rate."""
    return tiled.loader_indices(total_frames, source_fps, s.num_frames, s.sample_fps)


def timestamps(indices: Sequence[int], source_fps: float) -> list[float]:
    """Seconds of each sampled frame: its source index over the source rate (24 when
    the rate is unknown), in float64 as vLLM divides."""
    rate = source_fps or FALLBACK_FPS
    return [int(i) / rate for i in indices]


def timestamp_text(seconds: float) -> str:
    """``mm:ss`` with both parts truncated (``get_video_repl``)."""
    return f"{int(seconds // 60):02d}:{int(seconds % 60):02d}"


def timestamp_prefix(frame: int, seconds: float) -> str:
    """What precedes frame ``frame`` (0-based) of a video: ``"mm:ss "``, with a
    leading space after the first frame; tokenized on its own."""
    text = timestamp_text(seconds)
    return f" {text} " if frame else f"{text} "


def image_token_ids(count: int, ids: Gemma4Tokens) -> list[int]:
    """What one image's ``<|image|>`` becomes (``get_image_repl``): ``count`` soft
    tokens between ``<|image>`` and ``<image|>``."""
    return [ids.boi_token_id, *[ids.image_token_id] * count, ids.eoi_token_id]


def video_token_ids(
    seconds: Sequence[float],
    per_frame: Sequence[int],
    ids: Gemma4Tokens,
    encode: Callable[[str], Sequence[int]],
) -> list[int]:
    """What one video's ``<|video|>`` becomes (``get_video_repl``): per frame
    ``encode("mm:ss ")`` (``" mm:ss "`` after the first), ``<|image>``, the frame's
    soft tokens as ``<|video|>``, ``<image|>``. ``encode`` is the tokenizer without
    special tokens."""
    if len(seconds) != len(per_frame):
        raise InputError(f"{len(seconds)} timestamps for {len(per_frame)} frames")
    out: list[int] = []
    for i, (stamp, count) in enumerate(zip(seconds, per_frame, strict=True)):
        out += encode(timestamp_prefix(i, stamp))
        out += [ids.boi_token_id, *[ids.video_token_id] * count, ids.eoi_token_id]
    return out


def frame_soft_tokens(height: int, width: int, s: Gemma4Vision) -> int:
    """vLLM's token count for one video frame of this size (the video budget)."""
    return soft_tokens(height, width, s, VIDEO_SOFT_TOKENS)


def pooled_tokens(positions: np.ndarray, s: Gemma4Vision) -> int:
    """The soft tokens vLLM's vision pooler yields for one item's ``[np, 2]``
    positions (``Gemma4VisionPooler._avg_pool_by_positions``): padding is clamped
    to ``(0, 0)``; each patch falls in the kernel cell ``x // k + (max_x // k) *
    (y // k)`` of ``np / k**2``; the occupied cells are the tokens."""
    pool = s.pooling_kernel_size
    length = len(positions) // pool**2
    if len(positions) % pool**2 or not length:
        raise ContractError(
            f"holds {len(positions)} patches per item, not a whole number of "
            f"pooling cells of {pool**2} patches; vLLM's pooler refuses it"
        )
    if positions.max(initial=-1) >= s.position_embedding_size or positions.min(initial=-1) < -1:
        raise ContractError(
            f"holds a position outside -1 .. {s.position_embedding_size - 1} (the patch "
            "embedder's table)"
        )
    clamped = np.maximum(positions, 0)
    max_x = int(clamped[:, 0].max()) + 1
    cells = clamped[:, 0] // pool + (max_x // pool) * (clamped[:, 1] // pool)
    if int(cells.max()) >= length:
        raise ContractError(
            f"places a patch in pooling cell {int(cells.max())} of {length}; vLLM's pooler "
            "fails on it (one_hot)"
        )
    return len(np.unique(cells))


# ---- the family's parts -----------------------------------------------------------


def _parts(model: ModelView) -> tuple[Gemma4Vision, Gemma4Tokens]:
    s, ids = model.params, model.token_ids
    assert isinstance(s, Gemma4Vision) and isinstance(ids, Gemma4Tokens), "a Gemma 4 model"
    return s, ids


def _counts_agree(prompt: int, encoder: int, what: str) -> None:
    if prompt != encoder:
        raise InputError(
            f"vLLM counts {prompt} soft tokens for {what} and its encoder yields {encoder}; "
            "vLLM would fail the request",
            hint="the model folder's image_processor settings (do_resize) disagree with "
            "vLLM's count",
        )


def image_item(rgb: np.ndarray, s: Gemma4Vision) -> tiled.Item:
    """One image: its padded patch rows, their positions, vLLM's token count."""
    height, width = rgb.shape[:2]
    pixels = image_pixels(rgb, s)
    count = soft_tokens(height, width, s, s.default_output_length)
    _counts_agree(count, pixels.soft_tokens, f"a {dimensions(width, height)} image")
    return tiled.Item(
        pixels.pixel_values,
        count,
        {"pixel_position_ids": pixels.pixel_position_ids},
        resized=pixels.size,
    )


def video_item(frames: np.ndarray, s: Gemma4Vision) -> tiled.Item:
    """One video: every kept frame as an image at the video budget, one after another."""
    done = video_pixels(frames, s)
    height, width = frames.shape[1:3]
    count = frame_soft_tokens(height, width, s)
    for pixels in done:
        _counts_agree(count, pixels.soft_tokens, f"a {dimensions(width, height)} frame")
    return tiled.Item(
        np.stack([p.pixel_values for p in done]),
        count * len(done),
        {"pixel_position_ids_videos": np.stack([p.pixel_position_ids for p in done])},
        extra={"frames": len(done), "frame_tokens": (count,) * len(done)},
        rows=len(done),
        resized=done[0].size,
    )


def replacement(item: ItemFacts, model: ModelView) -> list[int]:
    """vLLM's replacement of the item's placeholder (its whole span)."""
    _, ids = _parts(model)
    if item.kind is MediaKind.IMAGE:
        return image_token_ids(item.tokens, ids)
    per_frame = item.extra.get("frame_tokens", ())
    if len(item.patch_times) != len(per_frame):
        raise InputError(
            f"this video item has {len(item.patch_times)} frame times for {len(per_frame)} "
            "frames; Gemma 4's prompt writes each frame's time"
        )
    return video_token_ids(item.patch_times, per_frame, ids, model.tokenizer.encode_cached)


#: A frame's time as :func:`timestamp_prefix` writes it: first frame, later frames.
_STAMP = {False: re.compile(r"\d{2,}:[0-5]\d "), True: re.compile(r" \d{2,}:[0-5]\d ")}


def span_problem(got: np.ndarray, item: ItemFacts, model: ModelView) -> str | None:
    """What in one item's span vLLM's model would not read as its item, or ``None``.

    An image: ``<|image>``, its soft tokens, ``<image|>``. A video, per frame: its
    timestamp's text, ``<|image>``, the frame's soft tokens as ``<|video|>``,
    ``<image|>`` — the text exactly vLLM's where the frame times are known (a
    request mmctl built), a time in vLLM's form, tokenized as vLLM does, where
    they are not (one read back: the times do not travel)."""
    _, ids = _parts(model)
    span = got.tolist()
    if item.kind is MediaKind.IMAGE:
        if span == image_token_ids(item.tokens, ids):
            return None
        held = span.count(ids.image_token_id)
        return (
            f"its span of {len(span)} tokens holds {held} <|image|>; the image needs "
            f"<|image>, {item.tokens} <|image|>, <image|>"
        )
    per_frame = list(item.extra.get("frame_tokens", ()))
    known = len(item.patch_times) == len(per_frame)
    specials = ids.specials()
    total, pos = len(per_frame), 0
    for frame, count in enumerate(per_frame):
        n = frame + 1
        start = pos
        while pos < len(span) and span[pos] not in specials:
            pos += 1
        text = span[start:pos]
        if known:
            prefix = timestamp_prefix(frame, item.patch_times[frame])
            want = list(model.tokenizer.encode_cached(prefix))
            if text != want:
                return f"frame {n} of {total} is not led by its time {prefix.strip()!r} (token {start})"
        else:
            shown = model.tokenizer.decode(text)
            canonical = list(model.tokenizer.encode_cached(shown)) == text
            if not canonical or not _STAMP[bool(frame)].fullmatch(shown):
                form = " mm:ss " if frame else "mm:ss "
                return (
                    f"frame {n} of {total} is led by {shown!r}, not a time as vLLM writes "
                    f"it ({form!r}, tokenized alone) (token {start})"
                )
        if pos >= len(span) or span[pos] != ids.boi_token_id:
            return f"frame {n} of {total} does not open with <|image> (token {pos})"
        run = pos + 1
        while run < len(span) and span[run] == ids.video_token_id:
            run += 1
        if run - pos - 1 != count:
            return (
                f"frame {n} of {total} holds a run of {run - pos - 1} <|video|>; it needs {count}"
            )
        if run >= len(span) or span[run] != ids.eoi_token_id:
            return f"frame {n} of {total} does not close with <image|> (token {run})"
        pos = run + 1
    if pos != len(span):
        return f"after {total} frames the span holds {len(span) - pos} more tokens (token {pos})"
    return None


def frames(item: ItemFacts, model: ModelView) -> Frames | None:
    """A video's ``<|video|>`` runs, one per frame (each between ``<|image>`` and
    ``<image|>``); ``None`` for an image, or frames of different counts."""
    if item.kind is not MediaKind.VIDEO:
        return None
    per_frame = set(item.extra.get("frame_tokens", ()))
    if len(per_frame) != 1:
        return None
    return Frames(int(item.extra["frames"]), per_frame.pop())


def chat_format(body: str, system: str | None) -> str:
    """What the Gemma 4 (31B/26B) template writes for one user turn: ``body``'s
    placeholders each on a line of their own (``placeholder_text``), thinking off."""
    turns = ["<bos>"]
    if system:
        turns.append(f"<|turn>system\n{system.strip()}<turn|>\n")
    turns.append(
        f"<|turn>user\n{body.strip(' ')}<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"
    )
    return "".join(turns)


# ---- the wire and the worker's reading --------------------------------------------

#: vLLM's ``Gemma4MultiModalProcessor._get_mm_fields_config``: images batched,
#: their positions beside them (HF's ``image_position_ids`` renamed); every
#: video's frames flat, split by ``video_frame_counts`` (batched, on the CPU).
#: ``video_timestamps`` / ``video_num_soft_tokens`` feed only vLLM's own prompt
#: updates: they do not travel.
FIELDS = {
    MediaKind.IMAGE: (
        WireField(
            "pixel_values",
            FieldLayout.BATCHED,
            PIXELS,
            PIXELS,
            ("np", "P"),
            "[images, np, patch_size²·3] patch rows (channels last), zero rows after the "
            "real patches; np = max_soft_tokens·pooling_kernel_size²",
        ),
        WireField(
            "pixel_position_ids",
            FieldLayout.BATCHED,
            "positions",
            "int64",
            ("np", 2),
            "[images, np, 2] (x, y) of each patch, (-1, -1) for padding",
        ),
    ),
    MediaKind.VIDEO: (
        WireField(
            "pixel_values",
            FieldLayout.FLAT,
            PIXELS,
            PIXELS,
            ("np", "P"),
            "[Σ frames, np, P] every video's frames as images at 70 soft tokens "
            "(pixel_values_videos at the worker)",
            sizes="video_frame_counts",
        ),
        WireField(
            "pixel_position_ids_videos",
            FieldLayout.FLAT,
            "positions",
            "int64",
            ("np", 2),
            "[Σ frames, np, 2] (x, y) of each frame's patches, (-1, -1) for padding",
            sizes="video_frame_counts",
        ),
        WireField(
            "video_frame_counts",
            FieldLayout.BATCHED,
            ROWS,
            "int64",
            (),
            "[videos] frames per video (the flat sizes)",
            keep_on_cpu=True,
        ),
    ),
}


def _positions(batch: Received, key: str, rows: int, width: int) -> np.ndarray:
    """A batch's positions tensor, checked against its pixels: ``[rows, np, 2]`` integers."""
    found = batch.tensors.get(key)
    if found is None:
        raise ContractError(f"carries no {key} tensor")
    array = np.asarray(found)
    if array.shape != (rows, width, 2) or array.dtype.kind not in "iu":
        raise ContractError(
            f"is {array.dtype} {list(array.shape)}; its pixels need integer "
            f"[{rows}, {width}, 2] (x, y) positions",
            key,
        )
    return array


def received_items(batch: Received, model: ModelView) -> list[ItemFacts]:
    """The items, their token counts from the positions as vLLM's pooler counts them."""
    from mmctl.modality import pixel_key

    s, _ = _parts(model)
    pixels = batch.tensors.get(pixel_key(batch.kind))
    if pixels is None or pixels.ndim != 3:
        shape = "none" if pixels is None else list(pixels.shape)
        raise ContractError(
            f"carries pixels of shape {shape}; Gemma 4's are [items or frames, patches, values]"
        )
    width = int(pixels.shape[1])
    if batch.kind is MediaKind.IMAGE:
        positions = _positions(batch, "pixel_position_ids", batch.count, width)
        try:
            return [ItemFacts(batch.kind, pooled_tokens(p, s)) for p in positions]
        except ContractError as err:
            raise ContractError(err.message, "pixel_position_ids") from None
    counts = batch.tensors.get("video_frame_counts")
    if counts is None:
        raise ContractError("carries no video_frame_counts tensor")
    per_video = np.asarray(counts).reshape(-1).astype(np.int64).tolist()
    if len(per_video) != batch.count or min(per_video, default=1) < 1:
        raise ContractError(
            f"holds {per_video}; {batch.count} video(s) need one frame count of at least 1 each",
            "video_frame_counts",
        )
    positions = _positions(batch, "pixel_position_ids_videos", sum(per_video), width)
    out, start = [], 0
    for frames_in in per_video:
        try:
            per_frame = tuple(pooled_tokens(p, s) for p in positions[start : start + frames_in])
        except ContractError as err:
            raise ContractError(err.message, "pixel_position_ids_videos") from None
        extra = {"frames": frames_in, "frame_tokens": per_frame}
        out.append(ItemFacts(batch.kind, sum(per_frame), extra=extra, rows=frames_in))
        start += frames_in
    return out


def expected_pixels(
    kind: MediaKind, items: Sequence[ItemFacts], model: ModelView
) -> tuple[int | str, ...]:
    """vLLM's TensorSchema: ``(bn, np, pp)``, ``pp`` the patch embedder's input."""
    s, _ = _parts(model)
    rows = len(items) if kind is MediaKind.IMAGE else sum(int(it.rows or 0) for it in items)
    return (rows, "np", s.patch_values)


@dataclass(frozen=True)
class Gemma4Contract(tiled.TileContract):
    """The tile families' reading, with Gemma 4's colours: the real patch rows
    (channels last) of each image, or of each frame."""

    def unit_means(
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts], model: ModelView
    ) -> list[list[np.ndarray]]:
        s, _ = _parts(model)
        cell = s.pooling_kernel_size**2
        out: list[list[np.ndarray]] = []
        start = 0
        for n, item in enumerate(items):
            if kind is MediaKind.IMAGE:
                units = [(pixels[n], item.tokens)]
            else:
                count = int(item.rows or 0)
                units = list(
                    zip(pixels[start : start + count], item.extra["frame_tokens"], strict=True)
                )
                start += count
            out.append([_sampled(rows[: max(1, tokens * cell)]) for rows, tokens in units])
        return out


def _sampled(rows: np.ndarray) -> np.ndarray:
    """Patch rows' pixels on a stride, as ``[k, 3]`` RGB rows."""
    return np.asarray(rows).reshape(-1, CHANNELS)[:: tiled.COLOUR_STRIDE]


FAMILY = Family(
    name=NAME,
    aliases=("gemma-4",),
    model_types=("gemma4",),
    settings=Gemma4Vision,
    tokens=gemma4_tokens,
    modalities=(MediaKind.IMAGE, MediaKind.VIDEO),
    processor=tiled.TileProcessor(
        NAME,
        image_item,
        video_item,
        sample_indices,
        lambda indices, fps: timestamps(indices.tolist(), fps),
    ),
    prompt=tiled.RunPrompt(
        NAME,
        replacement,
        media_words=("<|image|>", "<|video|>"),
        chat=chat_format,
        frame_runs=frames,
        wrap="\n\n{}\n\n",
        span_problem=span_problem,
    ),
    wire=tiled.TileWire(FIELDS, {MediaKind.VIDEO: tiled.concatenate}),
    contract=Gemma4Contract(NAME, received_items, expected_pixels),
)
