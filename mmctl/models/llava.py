"""LLaVA-1.5 (``llava``; ``llava-hf/llava-1.5-7b-hf``): one image's pixels and tokens.

Pixels (transformers 5.20.2 ``CLIPImageProcessor`` — the class the published
``preprocessor_config.json`` names — on the ``TorchvisionBackend``;
``LlavaImageProcessor`` is the same plus ``do_pad``): shortest edge to 336 with
uint8 antialiased bicubic, centre crop 336x336, then the fused rescale
(1/255) + CLIP normalisation in float32 — ``float32 [3, 336, 336]`` per image;
a request's images stack to ``[n, 3, 336, 336]`` with nothing shared between
them. No pad-to-square: the original LLaVA's ``expand2square`` is not in the
HF processor (``do_pad`` is off, and absent from CLIP's), so not in vLLM.

Tokens (vLLM 0.33 ``llava.py`` ``BaseLlavaProcessingInfo.get_num_image_tokens``):
``(image_size // patch_size) ** 2`` (+1 CLS for a CLIP tower) less what
``vision_feature_select_strategy`` drops ("default" drops the CLS) = 576 for
every image whatever its size; each ``<image>`` (``image_token_index`` 32000)
is replaced by that many.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models import tiled
from mmctl.models.family import Family, ModelView
from mmctl.models.settings import HFClass
from mmctl.preprocessing import tiles
from mmctl.values.fields import PIXELS, FieldLayout, WireField
from mmctl.values.items import ItemFacts
from mmctl.values.received import Received


@dataclass(frozen=True)
class Vision(tiled.ClipImage):
    """Every setting that shapes LLaVA-1.5's pixels and tokens (``ClipImage``'s);
    defaults are ``llava-hf/llava-1.5-7b-hf``'s published values.

    ``do_pad`` is ``LlavaImageProcessor``'s pad-to-square; ``CLIPImageProcessor``
    has none (its ``do_pad`` pads a batch to its largest image, a no-op after the
    crop), so there it is off whatever the file says.
    """

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (
        HFClass("CLIPImageProcessor", tiled.CLIP_IMAGE_DEFAULTS),
        HFClass("LlavaImageProcessor", tiled.CLIP_IMAGE_DEFAULTS),
    )
    CONFIG_CLASS: ClassVar[HFClass | None] = HFClass(
        "LlavaConfig", {"image_token_index": 32000, "vision_feature_select_strategy": "default"}
    )

    @classmethod
    def adjust(cls, values: dict[str, Any]) -> dict[str, Any]:
        if values.get("image_processor_type") == "CLIPImageProcessor":
            values["do_pad"] = False
        return values


def image_pixels(rgb: np.ndarray, vision: Vision) -> np.ndarray:
    """``[H, W, 3]`` uint8 RGB → ``float32 [3, S, S]`` (S = the crop, 336)."""
    tiles.check_rgb(rgb)
    frame = rgb
    if vision.do_pad:
        fill = tuple(int(x * 255) for x in vision.image_mean)
        frame = tiles.pad_to_square(frame, fill)
    if vision.do_resize:
        frame = tiles.resize(frame, vision.size)
    if vision.do_center_crop and vision.crop_size is not None:
        frame = tiles.center_crop(frame, *vision.crop_size)
    return vision.normalize(frame)


def batch_pixels(items: Sequence[np.ndarray]) -> np.ndarray:
    """The images of one request as HF stacks them: ``float32 [n, 3, S, S]``."""
    if not items:
        raise InputError("no images to batch")
    return np.stack(items).astype(np.float32, copy=False)


def image_tokens(height: int, width: int, vision: Vision) -> int:
    """Placeholder tokens for one image (576 for the published checkpoint, any size)."""
    del height, width  # LLaVA-1.5 always sees one fixed-size crop
    return vision.tower_tokens()


#: vLLM's ``LlavaMultiModalProcessor._get_mm_fields_config``: ``pixel_values``
#: batched per image, nothing kept on the CPU.
FIELDS = (
    WireField(
        "pixel_values",
        FieldLayout.BATCHED,
        PIXELS,
        PIXELS,
        (3, "S", "S"),
        "[images, 3, S, S] normalized pixels, one crop per image",
    ),
)


def image_item(rgb: np.ndarray, vision: Vision) -> tiled.Item:
    return tiled.Item(image_pixels(rgb, vision), image_tokens(rgb.shape[0], rgb.shape[1], vision))


def received_items(batch: Received, model: ModelView) -> list[ItemFacts]:
    tokens = image_tokens(0, 0, tiled.settings_of(model, Vision))
    return [ItemFacts(batch.kind, tokens) for _ in range(batch.count)]


def expected_pixels(
    kind: MediaKind, items: Sequence[ItemFacts], model: ModelView
) -> tuple[int | str, ...]:
    side = tiled.settings_of(model, Vision).image_size
    return (len(items), 3, side, side)


NAME = "llava"
FAMILY = Family(
    name=NAME,
    aliases=("llava-1.5",),
    model_types=("llava",),
    modalities=(MediaKind.IMAGE,),
    settings=Vision,
    tokens=tiled.placeholder_tokens(Vision),
    processor=tiled.TileProcessor(NAME, image_item),
    prompt=tiled.RunPrompt(NAME),
    wire=tiled.TileWire({MediaKind.IMAGE: FIELDS}),
    contract=tiled.TileContract(NAME, received_items, expected_pixels),
)
