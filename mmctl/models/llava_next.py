"""LLaVA-NeXT (``llava_next``; ``llava-hf/llava-v1.6-mistral-7b-hf``): anyres pixels and tokens.

Pixels (transformers 5.20.2 ``LlavaNextImageProcessor._preprocess`` /
``_get_image_patches``, torchvision backend): pick the best of
``image_grid_pinpoints`` (``select_best_resolution``), resize the image into
it keeping its aspect (``_resize_for_patching``: uint8 bicubic to
``get_patch_output_size``), pad it there centred with 0 on uint8
(``_pad_for_patching``), cut it into ``crop_size`` tiles row by row, and put
the whole image resized to ``size.shortest_edge`` square **first**. Every
tile then passes the shortest-edge resize and the centre crop (no-ops on
336x336 tiles) and the fused rescale + CLIP normalisation. One image is
``float32 [1 + rows*cols, 3, 336, 336]``; the images of one call are stacked
with the patch axis zero-padded to the largest count
(``_pad_for_batching``, after normalising) — so an image's tensor depends on
the other images of its request: send them as HF batches them.
``image_sizes`` is ``[[height, width], …]`` of the images as loaded.

Tokens (vLLM 0.33 ``llava_next.py`` ``LlavaNextProcessingInfo.get_num_image_tokens``):
``base = grid**2`` (CLIP's CLS dropped by "default"), the pinpoint's tile grid
from ``config.json``'s ``image_grid_pinpoints`` and ``vision_config.image_size``
(``get_anyres_image_grid_shape``), the unpadded feature grid
(``_get_num_unpadded_features``); total ``cur_h * cur_w + cur_h + base``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.family import ContractError, ItemFacts, Tokens
from mmctl.models.fields import PIXELS, FieldLayout, WireField
from mmctl.models.tiled import (
    FixedVision,
    Item,
    PlaceholderTokens,
    TileFamily,
    table_rows,
)
from mmctl.preprocessing import tiles
from mmctl.preprocessing.tiles import Size

if TYPE_CHECKING:
    from mmctl.models.base import ModelFiles
    from mmctl.models.model import Model

#: ``image_utils.OPENAI_CLIP_MEAN`` / ``OPENAI_CLIP_STD``: the class defaults.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
#: The published ``size``.
SIZE = Size(shortest_edge=336)
#: ``LlavaNextImageProcessor.image_grid_pinpoints`` and ``LlavaNextConfig``'s default.
DEFAULT_PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))
PROCESSOR_CLASS = "LlavaNextImageProcessor"


@dataclass(frozen=True)
class Vision(FixedVision):
    """Every setting that shapes LLaVA-NeXT's pixels and tokens.

    Defaults are ``llava-hf/llava-v1.6-mistral-7b-hf``'s published values.
    """

    do_resize: bool = True  # preprocessor do_resize
    size: Size = SIZE  # preprocessor size
    resample: int = tiles.BICUBIC  # preprocessor resample
    do_center_crop: bool = True  # preprocessor do_center_crop
    crop_size: tuple[int, int] = (336, 336)  # preprocessor crop_size (height, width)
    do_rescale: bool = True  # preprocessor do_rescale
    rescale_factor: float = 0.00392156862745098  # preprocessor rescale_factor
    do_normalize: bool = True  # preprocessor do_normalize
    image_mean: tuple[float, float, float] = CLIP_MEAN  # preprocessor image_mean
    image_std: tuple[float, float, float] = CLIP_STD  # preprocessor image_std
    do_pad: bool = True  # preprocessor do_pad (zero-pad the patch axis across a batch)
    image_grid_pinpoints: tuple[tuple[int, int], ...] = DEFAULT_PINPOINTS  # preprocessor + config
    image_size: int = 336  # config vision_config.image_size
    patch_size: int = 14  # config vision_config.patch_size
    vision_model_type: str = "clip_vision_model"  # config vision_config.model_type
    image_token_index: int = 32000  # config image_token_index
    vision_feature_select_strategy: str = "default"  # config vision_feature_select_strategy

    @classmethod
    def from_files(
        cls,
        preprocessor_config: Mapping[str, Any],
        processor_config: Mapping[str, Any],
        config: Mapping[str, Any],
    ) -> Vision:
        """Resolve the settings as transformers and vLLM do (see ``llava.Vision.from_files``).

        vLLM counts tokens with ``config.json``'s pinpoints while the processor cuts
        tiles with its own; the two must agree, or prompt and pixels would not.
        """
        s = tiles.processor_settings(preprocessor_config, processor_config)
        kind = str(tiles.setting(s, "image_processor_type", PROCESSOR_CLASS))
        if kind.removesuffix("Fast") != PROCESSOR_CLASS:
            raise InputError(f"image_processor_type {kind!r} is not {PROCESSOR_CLASS}")
        pinpoints = tiles.parse_pinpoints(
            tiles.setting(s, "image_grid_pinpoints", DEFAULT_PINPOINTS)
        )
        model_pinpoints = tiles.parse_pinpoints(
            tiles.setting(config, "image_grid_pinpoints", DEFAULT_PINPOINTS)
        )
        if pinpoints != model_pinpoints:
            raise InputError(
                "image_grid_pinpoints differ between the image processor and config.json: "
                "vLLM's token count and the processor's tiles would not match"
            )
        image_size, patch_size, tower = tiles.vision_geometry(config)
        return cls(
            do_resize=bool(tiles.setting(s, "do_resize", True)),
            size=tiles.parse_size(tiles.setting(s, "size", {"shortest_edge": 224})),
            resample=tiles.check_bicubic(tiles.setting(s, "resample", tiles.BICUBIC)),
            do_center_crop=bool(tiles.setting(s, "do_center_crop", True)),
            crop_size=tiles.parse_crop(tiles.setting(s, "crop_size", 224)),
            do_rescale=bool(tiles.setting(s, "do_rescale", True)),
            rescale_factor=float(tiles.setting(s, "rescale_factor", 1 / 255)),
            do_normalize=bool(tiles.setting(s, "do_normalize", True)),
            image_mean=tiles.parse_floats(tiles.setting(s, "image_mean", CLIP_MEAN), "image_mean"),
            image_std=tiles.parse_floats(tiles.setting(s, "image_std", CLIP_STD), "image_std"),
            do_pad=bool(tiles.setting(s, "do_pad", True)),
            image_grid_pinpoints=pinpoints,
            image_size=image_size,
            patch_size=patch_size,
            vision_model_type=tower,
            image_token_index=tiles.config_id(config, "image_token_index", "image_token_id", 32000),
            vision_feature_select_strategy=str(
                config.get("vision_feature_select_strategy", "default")
            ),
        )


def base_and_tile(size: Size, crop_size: tuple[int, int] | None) -> tuple[tuple[int, int], int]:
    """(the base image's (h, w), the tile side) as ``_preprocess`` derives them: the
    base is ``size`` (a shortest edge made square); the tile is the crop height, else
    the size's height, else its shortest edge — whether or not the crop runs."""
    if size.height and size.width:
        base = (size.height, size.width)
    elif size.shortest_edge:
        base = (size.shortest_edge, size.shortest_edge)
    else:
        raise InputError(
            f"image size setting {size} has neither shortest_edge nor height and width"
        )
    tile = crop_size[0] if crop_size and crop_size[0] else base[0]
    return base, tile


def anyres_pixels(
    rgb: np.ndarray,
    *,
    pinpoints: Sequence[Sequence[int]],
    base: tuple[int, int],
    tile: int,
    do_resize: bool,
    size: Size,
    crop: tuple[int, int] | None,
    do_rescale: bool,
    rescale_factor: float,
    do_normalize: bool,
    mean: Sequence[float],
    std: Sequence[float],
) -> np.ndarray:
    """One image through the anyres steps LLaVA-NeXT and OneVision share:
    ``float32 [1 + tiles, 3, h, w]``."""
    tiles.check_rgb(rgb)
    patches = tiles.anyres_tiles(rgb, pinpoints, base, tile)
    done = []
    for patch in patches:
        if do_resize:
            patch = tiles.resize(patch, size)
        if crop is not None:
            patch = tiles.center_crop(patch, *crop)
        done.append(patch)
    if len({p.shape for p in done}) != 1:
        raise InputError(f"anyres tiles came out in different sizes: {[p.shape for p in done]}")
    return tiles.rescale_normalize(
        np.stack(done),
        do_rescale=do_rescale,
        rescale_factor=rescale_factor,
        do_normalize=do_normalize,
        mean=mean,
        std=std,
    )


def image_pixels(rgb: np.ndarray, vision: Any) -> np.ndarray:
    """``[H, W, 3]`` uint8 RGB → ``float32 [1 + rows*cols, 3, S, S]``: base image, then
    tiles. ``vision``: LLaVA-NeXT's or OneVision's (the same settings by name)."""
    base, tile = base_and_tile(vision.size, vision.crop_size)
    return anyres_pixels(
        rgb,
        pinpoints=vision.image_grid_pinpoints,
        base=base,
        tile=tile,
        do_resize=vision.do_resize,
        size=vision.size,
        crop=vision.crop_size if vision.do_center_crop else None,
        do_rescale=vision.do_rescale,
        rescale_factor=vision.rescale_factor,
        do_normalize=vision.do_normalize,
        mean=vision.image_mean,
        std=vision.image_std,
    )


def batch_pixels(items: Sequence[np.ndarray]) -> np.ndarray:
    """The images of one call as HF batches them: ``float32 [n, max_tiles, 3, S, S]``,
    each image's missing tiles zeros."""
    return tiles.pad_patch_axis(items)


def image_sizes(items: Sequence[np.ndarray]) -> np.ndarray:
    """``image_sizes``: int64 ``[n, 2]`` (height, width) of the loaded images."""
    return np.asarray([item.shape[:2] for item in items], dtype=np.int64).reshape(-1, 2)


def image_tokens(height: int, width: int, vision: Vision) -> int:
    """Placeholder tokens for one ``height`` x ``width`` image, as vLLM counts them."""
    base = tiles.vision_tokens(
        vision.image_size,
        vision.patch_size,
        vision.vision_model_type,
        vision.vision_feature_select_strategy,
    )
    rows, cols = tiles.anyres_grid_shape(
        height, width, vision.image_grid_pinpoints, vision.image_size
    )
    cur_h, cur_w = tiles.unpadded_grid(
        height, width, vision.image_size // vision.patch_size, rows, cols
    )
    return cur_h * cur_w + cur_h + base


def anyres_fields(name: str = "image") -> tuple[WireField, ...]:
    """vLLM's LLaVA-NeXT (and OneVision image) field config: ``pixel_values``
    batched per image — padded to the batch's most tiles, as HF batches them —
    and ``image_sizes`` batched and kept on the CPU."""
    return (
        WireField(
            "pixel_values",
            FieldLayout.BATCHED,
            PIXELS,
            PIXELS,
            ("np", 3, "S", "S"),
            "[images, most tiles, 3, S, S] normalized tiles, base image first, zero-padded",
        ),
        WireField(
            f"{name}_sizes",
            FieldLayout.BATCHED,
            f"{name}_sizes",
            "int64",
            (2,),
            "[images, 2] (height, width) of each image as loaded",
            keep_on_cpu=True,
        ),
    )


class AnyresImages(TileFamily):
    """Images as LLaVA-NeXT's anyres tiles (LLaVA-NeXT, OneVision): the family's
    module gives ``image_pixels`` and ``image_tokens`` for its ``Vision``."""

    def image_pixels(self, rgb: np.ndarray, vision: Any) -> np.ndarray:
        raise NotImplementedError

    def image_tokens(self, height: int, width: int, vision: Any) -> int:
        raise NotImplementedError

    def image_item(self, rgb: np.ndarray, vision: Any) -> Item:
        height, width = int(rgb.shape[0]), int(rgb.shape[1])
        return Item(
            self.image_pixels(rgb, vision),
            self.image_tokens(height, width, vision),
            {"image_sizes": np.asarray([height, width], dtype=np.int64)},
            {"image_size": (height, width)},
        )

    def batch_pixels(self, kind: MediaKind, items: Sequence[np.ndarray]) -> np.ndarray:
        if kind is MediaKind.IMAGE:
            return batch_pixels(items)
        return super().batch_pixels(kind, items)

    def received_items(
        self, kind: MediaKind, tensors: Mapping[str, np.ndarray], count: int, model: Model
    ) -> list[ItemFacts]:
        vision: Any = model.params  # the subclass's own Vision
        out = []
        for height, width in table_rows(tensors, "image_sizes", count, 2):
            if height < 1 or width < 1:
                raise ContractError(f"row {[height, width]} is not an image size", "image_sizes")
            tiles_needed = 1 + _tile_count(height, width, vision)
            out.append(
                ItemFacts(
                    kind,
                    self.image_tokens(height, width, vision),
                    extra={"image_size": (height, width), "tiles": tiles_needed},
                )
            )
        return out

    def expected_pixels(
        self, kind: MediaKind, items: Sequence[ItemFacts], model: Model
    ) -> tuple[int | str, ...]:
        side = int(getattr(model.params, "image_size"))  # noqa: B009 - the subclass's Vision
        most = max(int(it.extra["tiles"]) for it in items)
        return (len(items), most, 3, side, side)


def _tile_count(height: int, width: int, vision: Any) -> int:
    rows, cols = tiles.anyres_grid_shape(
        height, width, vision.image_grid_pinpoints, vision.image_size
    )
    return rows * cols


@dataclass(frozen=True)
class LlavaNext(AnyresImages):
    name: str = "llava-next"
    aliases: tuple[str, ...] = ("llava_next", "llava-v1.6")
    model_types: tuple[str, ...] = ("llava_next",)

    def resolve(self, files: ModelFiles) -> Vision:
        return Vision.from_files(files.preprocessor_config, files.processor_config, files.config)

    def tokens(self, config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> Tokens:
        return PlaceholderTokens(
            tiles.config_id(config, "image_token_index", "image_token_id", 32000)
        )

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        return FIELDS

    def image_pixels(self, rgb: np.ndarray, vision: Any) -> np.ndarray:
        return image_pixels(rgb, vision)

    def image_tokens(self, height: int, width: int, vision: Any) -> int:
        return image_tokens(height, width, vision)


FIELDS = anyres_fields()
SPEC = LlavaNext()


def _vision(model: Model) -> Vision:
    vision = model.params
    assert isinstance(vision, Vision), "this family resolves its own Vision"
    return vision
