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
from typing import Any, ClassVar

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models import kinds, tiled
from mmctl.models.family import Family, ModelView
from mmctl.models.settings import File, HFClass, setting
from mmctl.preprocessing import tiles
from mmctl.preprocessing.tiles import Size
from mmctl.values.fields import PIXELS, FieldLayout, WireField
from mmctl.values.items import ItemFacts
from mmctl.values.received import ContractError, Received, table_rows

#: ``LlavaNextImageProcessor.image_grid_pinpoints`` and ``LlavaNextConfig``'s default.
DEFAULT_PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))
PROCESSOR_CLASS = HFClass(
    "LlavaNextImageProcessor",
    {**tiled.CLIP_IMAGE_DEFAULTS, "do_pad": True, "image_grid_pinpoints": DEFAULT_PINPOINTS},
)


@dataclass(frozen=True)
class Anyres(tiled.ClipImage):
    """``ClipImage`` plus the anyres tiling: the processor's pinpoints cut the
    tiles, config.json's count vLLM's tokens — the two must agree, or prompt and
    pixels would not."""

    image_grid_pinpoints: tuple[tuple[int, int], ...] = setting(
        File.IMAGE, "image_grid_pinpoints", DEFAULT_PINPOINTS, kinds.Pinpoints()
    )
    model_pinpoints: tuple[tuple[int, int], ...] = setting(
        File.CONFIG, "image_grid_pinpoints", DEFAULT_PINPOINTS, kinds.Pinpoints()
    )

    def check(self) -> None:
        super().check()
        if self.image_grid_pinpoints != self.model_pinpoints:
            raise InputError(
                "image_grid_pinpoints differ between the image processor and config.json: "
                "vLLM's token count and the processor's tiles would not match"
            )
        small = [p for p in self.image_grid_pinpoints if min(p) < self.image_size]
        if small:
            raise InputError(
                f"image_grid_pinpoints {list(small[0])} is smaller than one "
                f"{self.image_size}-pixel tile (vision_config.image_size)"
            )


@dataclass(frozen=True)
class Vision(Anyres):
    """Every setting that shapes LLaVA-NeXT's pixels and tokens; defaults are
    ``llava-hf/llava-v1.6-mistral-7b-hf``'s published values."""

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (PROCESSOR_CLASS,)
    CONFIG_CLASS: ClassVar[HFClass | None] = HFClass(
        "LlavaNextConfig",
        {
            "image_token_index": 32000,
            "vision_feature_select_strategy": "default",
            "image_grid_pinpoints": DEFAULT_PINPOINTS,
        },
    )
    #: vLLM reads the processor's own aspect-ratio setting nowhere: anyres always.
    INERT: ClassVar[frozenset[str]] = tiled.ClipImage.INERT | {"aspect_ratio_setting"}
    PUBLISHED: ClassVar[Mapping[str, Any]] = {
        "image_processor_type": PROCESSOR_CLASS.name,
        "do_pad": True,
    }


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


def image_pixels(rgb: np.ndarray, vision: Anyres) -> np.ndarray:
    """``[H, W, 3]`` uint8 RGB → ``float32 [1 + rows*cols, 3, S, S]``: the whole image,
    then the tiles of its best pinpoint, each through the CLIP steps — the anyres
    steps LLaVA-NeXT and OneVision share (each with its own settings)."""
    tiles.check_rgb(rgb)
    base, tile = base_and_tile(vision.size, vision.crop_size)
    crop = vision.crop_size if vision.do_center_crop else None
    done = []
    for patch in tiles.anyres_tiles(rgb, vision.image_grid_pinpoints, base, tile):
        if vision.do_resize:
            patch = tiles.resize(patch, vision.size)
        if crop is not None:
            patch = tiles.center_crop(patch, *crop)
        done.append(patch)
    if len({p.shape for p in done}) != 1:
        raise InputError(f"anyres tiles came out in different sizes: {[p.shape for p in done]}")
    return vision.normalize(np.stack(done))


def batch_pixels(items: Sequence[np.ndarray]) -> np.ndarray:
    """The images of one call as HF batches them: ``float32 [n, max_tiles, 3, S, S]``,
    each image's missing tiles zeros."""
    return tiles.pad_patch_axis(items)


def image_sizes(items: Sequence[np.ndarray]) -> np.ndarray:
    """``image_sizes``: int64 ``[n, 2]`` (height, width) of the loaded images."""
    return np.asarray([item.shape[:2] for item in items], dtype=np.int64).reshape(-1, 2)


def image_tokens(height: int, width: int, vision: Vision) -> int:
    """Placeholder tokens for one ``height`` x ``width`` image, as vLLM counts them."""
    base = vision.tower_tokens()
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


def anyres_image_item(
    pixels: Callable[[np.ndarray, Any], np.ndarray], tokens: Callable[[int, int, Any], int]
) -> Callable[[np.ndarray, Any], tiled.Item]:
    """An anyres family's image item (LLaVA-NeXT, OneVision): its pixels, tokens
    and ``image_sizes`` row."""

    def item(rgb: np.ndarray, vision: Any) -> tiled.Item:
        height, width = int(rgb.shape[0]), int(rgb.shape[1])
        return tiled.Item(
            pixels(rgb, vision),
            tokens(height, width, vision),
            {"image_sizes": np.asarray([height, width], dtype=np.int64)},
            {"image_size": (height, width)},
        )

    return item


def anyres_received(
    tokens: Callable[[int, int, Any], int],
) -> Callable[[Received, ModelView], list[ItemFacts]]:
    """An anyres family's images read back from their ``image_sizes`` rows."""

    def read(batch: Received, model: ModelView) -> list[ItemFacts]:
        kind, tensors, count = batch.kind, batch.tensors, batch.count
        vision: Any = model.params
        out = []
        for height, width in table_rows(tensors, "image_sizes", count, 2):
            if height < 1 or width < 1:
                raise ContractError(f"row {[height, width]} is not an image size", "image_sizes")
            out.append(
                ItemFacts(
                    kind,
                    tokens(height, width, vision),
                    extra={
                        "image_size": (height, width),
                        "tiles": 1 + _tile_count(height, width, vision),
                    },
                )
            )
        return out

    return read


def anyres_expected(
    kind: MediaKind, items: Sequence[ItemFacts], model: ModelView
) -> tuple[int | str, ...]:
    side = int(model.params.image_size)
    most = max(int(it.extra["tiles"]) for it in items)
    return (len(items), most, 3, side, side)


def _tile_count(height: int, width: int, vision: Any) -> int:
    rows, cols = tiles.anyres_grid_shape(
        height, width, vision.image_grid_pinpoints, vision.image_size
    )
    return rows * cols


FIELDS = anyres_fields()
NAME = "llava-next"
FAMILY = Family(
    name=NAME,
    aliases=("llava_next", "llava-v1.6"),
    model_types=("llava_next",),
    modalities=(MediaKind.IMAGE,),
    settings=Vision,
    tokens=tiled.placeholder_tokens(Vision),
    processor=tiled.TileProcessor(NAME, anyres_image_item(image_pixels, image_tokens)),
    prompt=tiled.RunPrompt(NAME),
    wire=tiled.TileWire({MediaKind.IMAGE: FIELDS}, {MediaKind.IMAGE: batch_pixels}),
    contract=tiled.TileContract(NAME, anyres_received(image_tokens), anyres_expected),
)
