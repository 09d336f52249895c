"""LLaVA-OneVision (``llava_onevision``; ``llava-hf/llava-onevision-qwen2-7b-ov-hf``):
anyres image pixels, video frames, and their tokens.

Images (transformers 5.20.2 ``LlavaOnevisionImageProcessor``, torchvision
backend): LLaVA-NeXT's anyres steps (:func:`mmctl.models.llava_next.image_pixels`)
over 36 pinpoints ``[384*i, 384*j]``, tiles 384x384, the base image resized
to 384x384 first, no centre crop, mean/std 0.5; the patch axis zero-padded
across the images of one call. vLLM passes a request's images as one flat
list, so every image is "single" (``batch_num_images`` all 1) and patched;
the processor's multi-image branch (pad to square, no tiles) never runs
under vLLM and is not implemented.

Videos (``LlavaOnevisionVideoProcessor``): each sampled frame resized to
384x384 (uint8 bicubic), rescale + normalise — ``float32 [F, 3, 384, 384]``;
vLLM calls the processor once per video, so videos are never padded to each
other. Frames are sampled as vLLM 0.33's default (OpenCV) loader does
(:func:`sample_indices`, ``vllm/multimodal/video.py``
``VideoBackend.compute_frames_index_to_sample`` with
``VideoMediaIO(num_frames=32)``, ``fps=-1``).

Tokens (vLLM 0.33 ``llava_onevision.py``): images as LLaVA-NeXT with a SigLIP
tower (``base = 27**2 = 729``, "full") and ``_get_num_unpadded_features``'s
anyres_max_9 rule: after unpadding, ``ratio = sqrt(cur_h*cur_w / (9 * 27**2))``;
above 1.1 the grid shrinks to ``int(cur_h // ratio) x int(cur_w // ratio)``.
vLLM hard-codes the 9 where HF reads ``vision_aspect_ratio``, so any other
setting is refused. Videos: ``ceil(27 / spatial_pool_stride) ** 2`` per frame
+ 1 newline (``get_num_video_tokens``) — 196 * F + 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models import kinds, llava_next, tiled
from mmctl.models.family import Family, ModelView
from mmctl.models.llava_next import (
    Anyres,
    anyres_expected,
    anyres_fields,
    anyres_image_item,
    anyres_received,
)
from mmctl.models.settings import File, HFClass, setting
from mmctl.preprocessing import tiles
from mmctl.preprocessing.tiles import Size
from mmctl.values.fields import PIXELS, FieldLayout, WireField
from mmctl.values.items import Frames, ItemFacts
from mmctl.values.received import ContractError, Received

VIDEO, PROCESSOR, CONFIG = File.VIDEO, File.PROCESSOR, File.CONFIG
#: The published ``size``.
SIZE = Size(height=384, width=384)
#: ``LlavaOnevisionImageProcessor.image_grid_pinpoints``: [384*i, 384*j], i, j in 1..6.
DEFAULT_PINPOINTS = tuple((384 * i, 384 * j) for i in range(1, 7) for j in range(1, 7))
#: The only ``vision_aspect_ratio`` vLLM implements (it hard-codes the 9).
ASPECT_RATIO = "anyres_max_9"
MAX_NUM_PATCHES = 9
#: ``_get_num_unpadded_features``: the grid is shrunk only above this ratio.
SHRINK_ABOVE = 1.1
#: ``vllm/multimodal/media/video.py`` ``VideoMediaIO(num_frames=32)``.
NUM_FRAMES = tiled.LOADER_FRAMES

_STEPS = {**tiled.square_steps(384), "do_center_crop": False}
IMAGE_CLASS = HFClass(
    "LlavaOnevisionImageProcessor",
    {**_STEPS, "do_pad": True, "image_grid_pinpoints": DEFAULT_PINPOINTS},
)
VIDEO_CLASS = HFClass("LlavaOnevisionVideoProcessor", _STEPS)
_ASPECT = kinds.OneOf((ASPECT_RATIO,), f"only {ASPECT_RATIO!r} (vLLM hard-codes its 9)")


@dataclass(frozen=True)
class Vision(Anyres):
    """Every setting that shapes LLaVA-OneVision's pixels and tokens; defaults
    are ``llava-hf/llava-onevision-qwen2-7b-ov-hf``'s published values.

    The tile side is the crop height whenever ``crop_size`` is set (HF's
    ``_preprocess``), with or without ``do_center_crop``; a video frame is
    cropped only with its processor's ``do_center_crop``.
    """

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (IMAGE_CLASS,)
    VIDEO_CLASSES: ClassVar[tuple[HFClass, ...]] = (VIDEO_CLASS,)
    CONFIG_CLASS: ClassVar[HFClass | None] = HFClass(
        "LlavaOnevisionConfig",
        {
            "image_token_index": 151646,
            "video_token_index": 151647,
            "vision_feature_select_strategy": "full",
            "vision_aspect_ratio": ASPECT_RATIO,
            "image_grid_pinpoints": DEFAULT_PINPOINTS,
        },
    )
    OVERRIDABLE: ClassVar[tuple[str, ...]] = ("num_frames",)
    PUBLISHED: ClassVar[Mapping[str, Any]] = {
        "image_processor_type": IMAGE_CLASS.name,
        "size": SIZE,
        "do_center_crop": False,
        "crop_size": None,
        "image_mean": kinds.HALF,
        "image_std": kinds.HALF,
        "do_pad": True,
        "image_grid_pinpoints": DEFAULT_PINPOINTS,
        "model_pinpoints": DEFAULT_PINPOINTS,
        "image_size": 384,
        "vision_model_type": "siglip_vision_model",
        "image_token_index": 151646,
        "vision_feature_select_strategy": "full",
    }

    video_do_resize: bool = setting(VIDEO, "do_resize", True, kinds.Flag())
    video_size: Size = setting(VIDEO, "size", SIZE, kinds.SizeKind())
    video_resample: int = setting(
        VIDEO, "resample", kinds.BICUBIC, kinds.OneOf((kinds.BICUBIC,), "bicubic (3) only")
    )
    video_do_center_crop: bool = setting(VIDEO, "do_center_crop", False, kinds.Flag())
    #: Effective only with ``video_do_center_crop`` (:meth:`adjust`).
    video_crop_size: tuple[int, int] | None = setting(VIDEO, "crop_size", None, kinds.Crop())
    video_do_rescale: bool = setting(VIDEO, "do_rescale", True, kinds.Flag())
    video_rescale_factor: float = setting(
        VIDEO, "rescale_factor", kinds.RESCALE, kinds.Number(0, 1)
    )
    video_do_normalize: bool = setting(VIDEO, "do_normalize", True, kinds.Flag())
    video_mean: tuple[float, float, float] = setting(
        VIDEO, "image_mean", kinds.HALF, kinds.Triple()
    )
    video_std: tuple[float, float, float] = setting(
        VIDEO, "image_std", kinds.HALF, kinds.Triple(std=True)
    )
    video_token_index: int = setting(
        CONFIG, "video_token_index", 151647, kinds.TokenId(), aliases=("video_token_id",)
    )
    spatial_pool_stride: int = setting(
        CONFIG, "spatial_pool_stride", 2, kinds.Int(1, 64), default=2
    )  # vLLM's getattr default
    vision_aspect_ratio: str = setting(CONFIG, "vision_aspect_ratio", ASPECT_RATIO, _ASPECT)
    processor_aspect_ratio: str = setting(
        PROCESSOR, "vision_aspect_ratio", ASPECT_RATIO, _ASPECT, default=ASPECT_RATIO
    )
    #: Frames vLLM's video loader keeps (``VideoMediaIO(num_frames=32)``; a server's
    #: ``--media-io-kwargs '{"video": {"num_frames": N}}'``; mmctl's ``--num-frames``).
    num_frames: int = NUM_FRAMES

    @classmethod
    def adjust(cls, values: dict[str, Any]) -> dict[str, Any]:
        if not values.get("video_do_center_crop", False):
            values["video_crop_size"] = None
        return values

    def check(self) -> None:
        super().check()
        if self.video_do_center_crop and self.video_crop_size is None:
            raise InputError("the video processor's do_center_crop is set but crop_size is not")


def image_pixels(rgb: np.ndarray, vision: Vision) -> np.ndarray:
    """``[H, W, 3]`` uint8 RGB → ``float32 [1 + rows*cols, 3, 384, 384]``: base image, then
    tiles — LLaVA-NeXT's steps with OneVision's settings."""
    return llava_next.image_pixels(rgb, vision)


#: As LLaVA-NeXT's: the patch axis zero-padded across a call's images; their sizes.
batch_pixels = llava_next.batch_pixels
image_sizes = llava_next.image_sizes


def image_tokens(height: int, width: int, vision: Vision) -> int:
    """Placeholder tokens for one ``height`` x ``width`` image, as vLLM counts them."""
    base = vision.tower_tokens()
    npatches = vision.image_size // vision.patch_size
    rows, cols = tiles.anyres_grid_shape(
        height, width, vision.image_grid_pinpoints, vision.image_size
    )
    cur_h, cur_w = tiles.unpadded_grid(height, width, npatches, rows, cols)
    unpadded, newline = cur_h * cur_w, cur_h
    ratio = math.sqrt(cur_h * cur_w / (MAX_NUM_PATCHES * npatches**2))
    if ratio > SHRINK_ABOVE:
        unpadded = int(cur_h // ratio) * int(cur_w // ratio)
        newline = int(cur_h // ratio)
    return unpadded + newline + base


def sample_indices(total_frames: int, num_frames: int = NUM_FRAMES) -> np.ndarray:
    """int64 indices of the frames vLLM's default loader keeps
    (:func:`mmctl.models.tiled.loader_indices`, no target fps): every frame when
    ``total_frames <= num_frames`` (or ``num_frames <= 0``), else
    ``np.linspace(0, total - 1, num_frames, dtype=int)`` — truncated, not rounded.

    ``total_frames == 1`` gives ``[0]`` (vLLM's rule does too; its OpenCV
    decoder may still fail to produce that frame).
    """
    return tiled.loader_indices(total_frames, 0.0, num_frames)


def video_pixels(frames: np.ndarray, vision: Vision) -> np.ndarray:
    """``[F, H, W, 3]`` uint8 sampled frames → ``float32 [F, 3, 384, 384]``."""
    if frames.ndim != 4 or frames.shape[0] == 0:
        raise InputError(f"expected [F, H, W, 3] frames, got shape {frames.shape}")
    tiles.check_rgb(frames[0])
    done = []
    for frame in frames:
        if vision.video_do_resize:
            frame = tiles.resize(frame, vision.video_size)
        if vision.video_crop_size is not None:
            frame = tiles.center_crop(frame, *vision.video_crop_size)
        done.append(frame)
    return tiles.rescale_normalize(
        np.stack(done),
        do_rescale=vision.video_do_rescale,
        rescale_factor=vision.video_rescale_factor,
        do_normalize=vision.video_do_normalize,
        mean=vision.video_mean,
        std=vision.video_std,
    )


def frame_tokens(vision: Vision) -> int:
    """Tokens of one video frame: its patch grid pooled by ``spatial_pool_stride``
    (196 at 384 / 14 / 2)."""
    pooled = math.ceil((vision.image_size // vision.patch_size) / vision.spatial_pool_stride)
    return pooled * pooled


def video_tokens(num_frames: int, vision: Vision) -> int:
    """Placeholder tokens for one video of ``num_frames`` sampled frames: each
    frame's, then one newline after the last."""
    return frame_tokens(vision) * num_frames + 1


def frames(item: ItemFacts, model: ModelView) -> Frames | None:
    """A video's run: its frames' tokens, then the newline."""
    if item.kind is not MediaKind.VIDEO:
        return None
    vision = tiled.settings_of(model, Vision)
    return Frames(int(item.extra["frames"]), frame_tokens(vision), after=1)


#: vLLM's ``LlavaOnevisionMultiModalProcessor._get_mm_fields_config``: images as
#: LLaVA-NeXT's; ``pixel_values_videos`` batched per video (the servicer renames
#: a VIDEO batch's ``pixel_values``).
FIELDS = {
    MediaKind.IMAGE: anyres_fields(),
    MediaKind.VIDEO: (
        WireField(
            "pixel_values",
            FieldLayout.BATCHED,
            PIXELS,
            PIXELS,
            ("f", 3, "S", "S"),
            "[videos, frames, 3, S, S] normalized frames (pixel_values_videos at the worker)",
        ),
    ),
}


def video_item(frames: np.ndarray, vision: Vision) -> tiled.Item:
    count = int(frames.shape[0])
    return tiled.Item(
        video_pixels(frames, vision), video_tokens(count, vision), extra={"frames": count}
    )


def batch_videos(items: Sequence[np.ndarray]) -> np.ndarray:
    """Videos as one tensor: vLLM batches OneVision videos per item, so a
    request's videos must share a frame count."""
    if len({item.shape for item in items}) > 1:
        counts = [int(item.shape[0]) for item in items]
        raise InputError(
            f"videos of {counts} frames cannot share one batch: vLLM batches OneVision "
            "videos per item, and one tensor holds one frame count",
            hint="send them in separate requests, or --num-frames to sample each alike",
        )
    return np.stack(items)


_images_received = anyres_received(image_tokens)


def received_items(batch: Received, model: ModelView) -> list[ItemFacts]:
    kind, tensors, count = batch.kind, batch.tensors, batch.count
    if kind is MediaKind.IMAGE:
        return _images_received(batch, model)
    pixels = tensors.get("pixel_values_videos")
    if pixels is None:
        raise ContractError("carries no pixel_values_videos tensor")
    if pixels.ndim != 5 or pixels.shape[0] != count:
        raise ContractError(
            f"has shape {list(pixels.shape)}; {count} video(s) need [{count}, frames, 3, S, S]",
            "pixel_values_videos",
        )
    frames = int(pixels.shape[1])
    tokens = video_tokens(frames, tiled.settings_of(model, Vision))
    return [ItemFacts(kind, tokens, extra={"frames": frames}) for _ in range(count)]


def expected_pixels(
    kind: MediaKind, items: Sequence[ItemFacts], model: ModelView
) -> tuple[int | str, ...]:
    if kind is MediaKind.IMAGE:
        return anyres_expected(kind, items, model)
    side = tiled.settings_of(model, Vision).image_size
    return (len(items), "f", 3, side, side)


def chat_format(body: str, system: str | None) -> str:
    """The Qwen2 chat format OneVision's template writes for one user turn."""
    turns = [f"<|im_start|>system\n{system}<|im_end|>\n"] if system else []
    turns.append(f"<|im_start|>user {body}<|im_end|><|im_start|>assistant\n")
    return "".join(turns)


NAME = "llava-onevision"
FAMILY = Family(
    name=NAME,
    aliases=("llava_onevision",),
    model_types=("llava_onevision",),
    modalities=(MediaKind.IMAGE, MediaKind.VIDEO),
    settings=Vision,
    tokens=tiled.placeholder_tokens(Vision),
    processor=tiled.TileProcessor(
        NAME,
        anyres_image_item(image_pixels, image_tokens),
        video_item,
        lambda total, fps, vision: sample_indices(total, vision.num_frames),
    ),
    prompt=tiled.RunPrompt(
        NAME, media_words=("image", "video"), chat=chat_format, frame_runs=frames
    ),
    wire=tiled.TileWire(
        FIELDS,
        {MediaKind.IMAGE: llava_next.batch_pixels, MediaKind.VIDEO: batch_videos},
    ),
    contract=tiled.TileContract(NAME, received_items, expected_pixels),
)
