"""LLaVA-OneVision (``llava_onevision``; ``llava-hf/llava-onevision-qwen2-7b-ov-hf``):
anyres image pixels, video frames, and their tokens.

Images (transformers 5.20.2 ``LlavaOnevisionImageProcessor``, torchvision
backend): LLaVA-NeXT's anyres steps (:func:`mmctl.models.llava_next.anyres_pixels`)
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models import llava_next
from mmctl.models.family import ContractError, Frames, ItemFacts, Tokens
from mmctl.models.fields import PIXELS, FieldLayout, WireField
from mmctl.models.llava_next import AnyresImages, anyres_fields
from mmctl.models.tiled import FixedVision, Item, PlaceholderTokens
from mmctl.preprocessing import tiles
from mmctl.preprocessing.tiles import Size

if TYPE_CHECKING:
    from mmctl.models.base import ModelFiles
    from mmctl.models.model import Model

#: ``image_utils.OPENAI_CLIP_MEAN`` / ``OPENAI_CLIP_STD``: the classes' defaults
#: (the published configs say 0.5).
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
#: The published ``size``.
SIZE = Size(height=384, width=384)
HALF = (0.5, 0.5, 0.5)
#: ``LlavaOnevisionImageProcessor.image_grid_pinpoints``: [384*i, 384*j], i, j in 1..6.
DEFAULT_PINPOINTS = tuple((384 * i, 384 * j) for i in range(1, 7) for j in range(1, 7))
IMAGE_CLASS = "LlavaOnevisionImageProcessor"
VIDEO_CLASS = "LlavaOnevisionVideoProcessor"
#: The only ``vision_aspect_ratio`` vLLM implements (it hard-codes the 9).
ASPECT_RATIO = "anyres_max_9"
MAX_NUM_PATCHES = 9
#: ``_get_num_unpadded_features``: the grid is shrunk only above this ratio.
SHRINK_ABOVE = 1.1
#: ``vllm/multimodal/media/video.py`` ``VideoMediaIO(num_frames=32)``.
NUM_FRAMES = 32


@dataclass(frozen=True)
class Vision(FixedVision):
    """Every setting that shapes LLaVA-OneVision's pixels and tokens.

    Defaults are ``llava-hf/llava-onevision-qwen2-7b-ov-hf``'s published values.
    """

    do_resize: bool = True  # preprocessor do_resize
    size: Size = SIZE  # preprocessor size
    resample: int = tiles.BICUBIC  # preprocessor resample
    do_center_crop: bool = False  # preprocessor do_center_crop
    crop_size: tuple[int, int] | None = None  # preprocessor crop_size (also the tile side when set)
    do_rescale: bool = True  # preprocessor do_rescale
    rescale_factor: float = 0.00392156862745098  # preprocessor rescale_factor
    do_normalize: bool = True  # preprocessor do_normalize
    image_mean: tuple[float, float, float] = HALF  # preprocessor image_mean
    image_std: tuple[float, float, float] = HALF  # preprocessor image_std
    do_pad: bool = True  # preprocessor do_pad (zero-pad the patch axis across a batch)
    image_grid_pinpoints: tuple[tuple[int, int], ...] = DEFAULT_PINPOINTS  # preprocessor + config
    video_do_resize: bool = True  # video_preprocessor do_resize
    video_size: Size = SIZE  # video_preprocessor size
    video_resample: int = tiles.BICUBIC  # video_preprocessor resample
    video_crop_size: tuple[int, int] | None = None  # video crop_size if do_center_crop
    video_do_rescale: bool = True  # video_preprocessor do_rescale
    video_rescale_factor: float = 0.00392156862745098  # video_preprocessor rescale_factor
    video_do_normalize: bool = True  # video_preprocessor do_normalize
    video_mean: tuple[float, float, float] = HALF  # video_preprocessor image_mean
    video_std: tuple[float, float, float] = HALF  # video_preprocessor image_std
    image_size: int = 384  # config vision_config.image_size
    patch_size: int = 14  # config vision_config.patch_size
    vision_model_type: str = "siglip_vision_model"  # config vision_config.model_type
    image_token_index: int = 151646  # config image_token_index
    video_token_index: int = 151647  # config video_token_index
    vision_feature_select_strategy: str = "full"  # config vision_feature_select_strategy
    spatial_pool_stride: int = 2  # config spatial_pool_stride (vLLM's getattr default)
    #: Frames vLLM's video loader keeps (``VideoMediaIO(num_frames=32)``; a server's
    #: ``--media-io-kwargs '{"video": {"num_frames": N}}'``; mmctl's ``--num-frames``).
    num_frames: int = 32

    OVERRIDABLE = ("num_frames",)

    @classmethod
    def from_files(
        cls,
        preprocessor_config: Mapping[str, Any],
        processor_config: Mapping[str, Any],
        config: Mapping[str, Any],
        video_preprocessor_config: Mapping[str, Any] | None = None,
    ) -> Vision:
        """Resolve the settings as transformers and vLLM do (see ``llava.Vision.from_files``).

        The video processor's: processor_config.json's nested ``video_processor``,
        else ``video_preprocessor_config.json``, else preprocessor_config.json
        (``BaseVideoProcessor.get_video_processor_dict``); absent keys the
        ``LlavaOnevisionVideoProcessor`` class defaults.
        """
        s = tiles.processor_settings(preprocessor_config, processor_config)
        kind = str(tiles.setting(s, "image_processor_type", IMAGE_CLASS))
        if kind.removesuffix("Fast") != IMAGE_CLASS:
            raise InputError(f"image_processor_type {kind!r} is not {IMAGE_CLASS}")
        v = tiles.processor_settings(
            video_preprocessor_config
            if video_preprocessor_config is not None
            else preprocessor_config,
            processor_config,
            key="video_processor",
        )
        video_kind = str(tiles.setting(v, "video_processor_type", VIDEO_CLASS))
        if video_kind != VIDEO_CLASS:
            raise InputError(f"video_processor_type {video_kind!r} is not {VIDEO_CLASS}")
        pinpoints = tiles.parse_pinpoints(
            tiles.setting(s, "image_grid_pinpoints", DEFAULT_PINPOINTS)
        )
        if pinpoints != tiles.parse_pinpoints(
            tiles.setting(config, "image_grid_pinpoints", DEFAULT_PINPOINTS)
        ):
            raise InputError(
                "image_grid_pinpoints differ between the image processor and config.json: "
                "vLLM's token count and the processor's tiles would not match"
            )
        for where, ratio in (
            ("config.json", config.get("vision_aspect_ratio")),
            ("processor_config.json", processor_config.get("vision_aspect_ratio")),
        ):
            if ratio is not None and ratio != ASPECT_RATIO:
                raise InputError(
                    f"{where}: vision_aspect_ratio {ratio!r} is not supported "
                    f"(vLLM implements only {ASPECT_RATIO!r})"
                )
        image_size, patch_size, tower = tiles.vision_geometry(config)
        crop = _crop(s)
        do_crop = bool(tiles.setting(s, "do_center_crop", False))
        if do_crop and crop is None:
            raise InputError("do_center_crop is set but crop_size is not")
        return cls(
            do_resize=bool(tiles.setting(s, "do_resize", True)),
            size=tiles.parse_size(tiles.setting(s, "size", {"height": 384, "width": 384})),
            resample=tiles.check_bicubic(tiles.setting(s, "resample", tiles.BICUBIC)),
            do_center_crop=do_crop,
            crop_size=crop,
            do_rescale=bool(tiles.setting(s, "do_rescale", True)),
            rescale_factor=float(tiles.setting(s, "rescale_factor", 1 / 255)),
            do_normalize=bool(tiles.setting(s, "do_normalize", True)),
            image_mean=tiles.parse_floats(tiles.setting(s, "image_mean", CLIP_MEAN), "image_mean"),
            image_std=tiles.parse_floats(tiles.setting(s, "image_std", CLIP_STD), "image_std"),
            do_pad=bool(tiles.setting(s, "do_pad", True)),
            image_grid_pinpoints=pinpoints,
            video_do_resize=bool(tiles.setting(v, "do_resize", True)),
            video_size=tiles.parse_size(
                tiles.setting(v, "size", {"height": 384, "width": 384}), "video size"
            ),
            video_resample=tiles.check_bicubic(tiles.setting(v, "resample", tiles.BICUBIC)),
            video_crop_size=_video_crop(v),
            video_do_rescale=bool(tiles.setting(v, "do_rescale", True)),
            video_rescale_factor=float(tiles.setting(v, "rescale_factor", 1 / 255)),
            video_do_normalize=bool(tiles.setting(v, "do_normalize", True)),
            video_mean=tiles.parse_floats(tiles.setting(v, "image_mean", CLIP_MEAN), "image_mean"),
            video_std=tiles.parse_floats(tiles.setting(v, "image_std", CLIP_STD), "image_std"),
            image_size=image_size,
            patch_size=patch_size,
            vision_model_type=tower,
            image_token_index=tiles.config_id(
                config, "image_token_index", "image_token_id", 151646
            ),
            video_token_index=tiles.config_id(
                config, "video_token_index", "video_token_id", 151647
            ),
            vision_feature_select_strategy=str(
                config.get("vision_feature_select_strategy", "full")
            ),
            spatial_pool_stride=int(config.get("spatial_pool_stride", 2)),
        )


def _crop(settings: Mapping[str, Any]) -> tuple[int, int] | None:
    # The tile side is the crop height whenever crop_size is set (``_preprocess``),
    # with or without do_center_crop.
    crop = settings.get("crop_size")
    return None if crop is None else tiles.parse_crop(crop)


def _video_crop(settings: Mapping[str, Any]) -> tuple[int, int] | None:
    if not settings.get("do_center_crop"):
        return None
    return tiles.parse_crop(tiles.setting(settings, "crop_size", None))


def image_pixels(rgb: np.ndarray, vision: Vision) -> np.ndarray:
    """``[H, W, 3]`` uint8 RGB → ``float32 [1 + rows*cols, 3, 384, 384]``: base image, then
    tiles — LLaVA-NeXT's steps with OneVision's settings."""
    return llava_next.image_pixels(rgb, vision)


#: As LLaVA-NeXT's: the patch axis zero-padded across a call's images; their sizes.
batch_pixels = llava_next.batch_pixels
image_sizes = llava_next.image_sizes


def image_tokens(height: int, width: int, vision: Vision) -> int:
    """Placeholder tokens for one ``height`` x ``width`` image, as vLLM counts them."""
    base = tiles.vision_tokens(
        vision.image_size,
        vision.patch_size,
        vision.vision_model_type,
        vision.vision_feature_select_strategy,
    )
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
    """int64 indices of the frames vLLM's default loader keeps: every frame when
    ``total_frames <= num_frames`` (or ``num_frames <= 0``), else
    ``np.linspace(0, total - 1, num_frames, dtype=int)`` — truncated, not rounded.

    ``total_frames == 1`` gives ``[0]`` (vLLM's rule does too; its OpenCV
    decoder may still fail to produce that frame). ``total_frames <= 0`` is
    refused: vLLM's rule would ask for frame 0 of nothing.
    """
    if total_frames <= 0:
        raise InputError(f"a video with {total_frames} frames has nothing to sample")
    count = total_frames if num_frames <= 0 else min(num_frames, total_frames)
    count = max(1, count)
    if count == total_frames:
        return np.arange(total_frames, dtype=np.int64)
    return np.linspace(0, total_frames - 1, count, dtype=int).astype(np.int64)


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


@dataclass(frozen=True)
class LlavaOnevision(AnyresImages):
    name: str = "llava-onevision"
    aliases: tuple[str, ...] = ("llava_onevision",)
    model_types: tuple[str, ...] = ("llava_onevision",)
    modalities: tuple[MediaKind, ...] = (MediaKind.IMAGE, MediaKind.VIDEO)

    def resolve(self, files: ModelFiles) -> Vision:
        return Vision.from_files(
            files.preprocessor_config,
            files.processor_config,
            files.config,
            files.video_preprocessor_config or None,
        )

    def tokens(self, config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> Tokens:
        return PlaceholderTokens(
            tiles.config_id(config, "image_token_index", "image_token_id", 151646),
            tiles.config_id(config, "video_token_index", "video_token_id", 151647),
        )

    def knows_media(self, template: str) -> bool:
        return "image" in template and "video" in template

    def chat_format(self, body: str, system: str | None) -> str:
        """The Qwen2 chat format OneVision's template writes for one user turn."""
        turns = [f"<|im_start|>system\n{system}<|im_end|>\n"] if system else []
        turns.append(f"<|im_start|>user {body}<|im_end|><|im_start|>assistant\n")
        return "".join(turns)

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        return FIELDS[kind]

    def image_pixels(self, rgb: np.ndarray, vision: Any) -> np.ndarray:
        return image_pixels(rgb, vision)

    def image_tokens(self, height: int, width: int, vision: Any) -> int:
        return image_tokens(height, width, vision)

    def sample_indices(self, total_frames: int, vision: Any) -> np.ndarray:
        return sample_indices(total_frames, vision.num_frames)

    def video_item(self, frames: np.ndarray, vision: Any) -> Item:
        count = int(frames.shape[0])
        return Item(
            video_pixels(frames, vision), video_tokens(count, vision), extra={"frames": count}
        )

    def frames(self, item: ItemFacts, model: Model) -> Frames | None:
        if item.kind is not MediaKind.VIDEO:
            return None
        return Frames(int(item.extra["frames"]), frame_tokens(_vision(model)), after=1)

    def batch_pixels(self, kind: MediaKind, items: Sequence[np.ndarray]) -> np.ndarray:
        if kind is MediaKind.VIDEO and len({item.shape for item in items}) > 1:
            counts = [int(item.shape[0]) for item in items]
            raise InputError(
                f"videos of {counts} frames cannot share one batch: vLLM batches OneVision "
                "videos per item, and one tensor holds one frame count",
                hint="send them in separate requests, or --num-frames to sample each alike",
            )
        return super().batch_pixels(kind, items)

    def received_items(
        self, kind: MediaKind, tensors: Mapping[str, np.ndarray], count: int, model: Model
    ) -> list[ItemFacts]:
        if kind is MediaKind.IMAGE:
            return super().received_items(kind, tensors, count, model)
        pixels = tensors.get("pixel_values_videos")
        if pixels is None:
            raise ContractError("carries no pixel_values_videos tensor")
        if pixels.ndim != 5 or pixels.shape[0] != count:
            raise ContractError(
                f"has shape {list(pixels.shape)}; {count} video(s) need [{count}, frames, 3, S, S]",
                "pixel_values_videos",
            )
        frames = int(pixels.shape[1])
        tokens = video_tokens(frames, _vision(model))
        return [ItemFacts(kind, tokens, extra={"frames": frames}) for _ in range(count)]

    def expected_pixels(
        self, kind: MediaKind, items: Sequence[ItemFacts], model: Model
    ) -> tuple[int | str, ...]:
        if kind is MediaKind.IMAGE:
            return super().expected_pixels(kind, items, model)
        side = _vision(model).image_size
        return (len(items), "f", 3, side, side)


SPEC = LlavaOnevision()


def _vision(model: Model) -> Vision:
    vision = model.params
    assert isinstance(vision, Vision), "this family resolves its own Vision"
    return vision
