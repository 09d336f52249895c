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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.family import ItemFacts, Tokens
from mmctl.models.fields import PIXELS, FieldLayout, WireField
from mmctl.models.tiled import FixedVision, Item, PlaceholderTokens, TileFamily
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

#: Image processor classes this module reproduces (``image_processor_type``).
PROCESSOR_CLASSES = ("CLIPImageProcessor", "LlavaImageProcessor")


@dataclass(frozen=True)
class Vision(FixedVision):
    """Every setting that shapes LLaVA-1.5's pixels and tokens.

    Defaults are ``llava-hf/llava-1.5-7b-hf``'s published values.
    """

    image_processor_type: str = "CLIPImageProcessor"  # preprocessor image_processor_type
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
    do_pad: bool = False  # preprocessor do_pad (pad to square; LlavaImageProcessor only)
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
        """Resolve the settings as transformers and vLLM do: the image processor's
        from processor_config.json's nested ``image_processor`` if present, else
        preprocessor_config.json, absent keys the HF class's defaults; the model's
        from config.json."""
        s = tiles.processor_settings(preprocessor_config, processor_config)
        kind = str(tiles.setting(s, "image_processor_type", "CLIPImageProcessor"))
        if kind.endswith("Fast"):  # transformers 5 maps the v4 "…Fast" names to the class
            kind = kind[: -len("Fast")]
        if kind not in PROCESSOR_CLASSES:
            raise InputError(
                f"image_processor_type {kind!r} is not LLaVA-1.5's "
                f"(expected one of {', '.join(PROCESSOR_CLASSES)})"
            )
        image_size, patch_size, tower = tiles.vision_geometry(config)
        return cls(
            image_processor_type=kind,
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
            # CLIPImageProcessor has no pad-to-square; its do_pad pads a batch to its
            # largest image, which after the crop is no-op.
            do_pad=kind == "LlavaImageProcessor" and bool(tiles.setting(s, "do_pad", False)),
            image_size=image_size,
            patch_size=patch_size,
            vision_model_type=tower,
            image_token_index=tiles.config_id(config, "image_token_index", "image_token_id", 32000),
            vision_feature_select_strategy=str(
                config.get("vision_feature_select_strategy", "default")
            ),
        )


def image_pixels(rgb: np.ndarray, vision: Vision) -> np.ndarray:
    """``[H, W, 3]`` uint8 RGB → ``float32 [3, S, S]`` (S = the crop, 336)."""
    tiles.check_rgb(rgb)
    frame = rgb
    if vision.do_pad:
        fill = tuple(int(x * 255) for x in vision.image_mean)
        frame = tiles.pad_to_square(frame, fill)
    if vision.do_resize:
        frame = tiles.resize(frame, vision.size)
    if vision.do_center_crop:
        frame = tiles.center_crop(frame, *vision.crop_size)
    return tiles.rescale_normalize(
        frame,
        do_rescale=vision.do_rescale,
        rescale_factor=vision.rescale_factor,
        do_normalize=vision.do_normalize,
        mean=vision.image_mean,
        std=vision.image_std,
    )


def batch_pixels(items: Sequence[np.ndarray]) -> np.ndarray:
    """The images of one request as HF stacks them: ``float32 [n, 3, S, S]``."""
    if not items:
        raise InputError("no images to batch")
    return np.stack(items).astype(np.float32, copy=False)


def image_tokens(height: int, width: int, vision: Vision) -> int:
    """Placeholder tokens for one image (576 for the published checkpoint, any size)."""
    del height, width  # LLaVA-1.5 always sees one fixed-size crop
    return tiles.vision_tokens(
        vision.image_size,
        vision.patch_size,
        vision.vision_model_type,
        vision.vision_feature_select_strategy,
    )


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


@dataclass(frozen=True)
class Llava(TileFamily):
    name: str = "llava"
    aliases: tuple[str, ...] = ("llava-1.5",)
    model_types: tuple[str, ...] = ("llava",)

    def resolve(self, files: ModelFiles) -> Vision:
        return Vision.from_files(files.preprocessor_config, files.processor_config, files.config)

    def tokens(self, config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> Tokens:
        return PlaceholderTokens(
            tiles.config_id(config, "image_token_index", "image_token_id", 32000)
        )

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        return FIELDS

    def image_item(self, rgb: np.ndarray, vision: Any) -> Item:
        return Item(image_pixels(rgb, vision), image_tokens(rgb.shape[0], rgb.shape[1], vision))

    def received_items(
        self, kind: MediaKind, tensors: Mapping[str, np.ndarray], count: int, model: Model
    ) -> list[ItemFacts]:
        tokens = image_tokens(0, 0, _vision(model))
        return [ItemFacts(kind, tokens) for _ in range(count)]

    def expected_pixels(
        self, kind: MediaKind, items: Sequence[ItemFacts], model: Model
    ) -> tuple[int | str, ...]:
        side = _vision(model).image_size
        return (len(items), 3, side, side)


SPEC = Llava()


def _vision(model: Model) -> Vision:
    vision = model.params
    assert isinstance(vision, Vision), "this family resolves its own Vision"
    return vision
