"""Inkling (``inkling_mm_model``; ``thinkingmachines/Inkling``): images, and the prompt
vLLM renders itself.

Pure functions mirroring what vLLM 0.33 runs for ``InklingForConditionalGeneration``
(``vllm/models/inkling/common/mm_preprocess.py``) on transformers 5.20's
``InklingImageProcessor`` bit for bit (scripts/families/inkling.md has the source lines):

1. the image's long edge scaled by ``rescale_image_frac`` (vLLM's 2.0 when the folder
   names none), growth capped at ``rescale_image_max_upscaled_long_edge`` (2048), each
   side ``floor(d * ratio + 0.5)``, with **PIL's LANCZOS** (vLLM's ``_rescale_image``);
2. cut into ``P x P`` patches row by row: ``ceil(H / P)`` rows and ``W // P + 1``
   columns (one more than ``floor``, even when P divides W), each padded right and
   bottom with -1.0, then HF's fused rescale + normalize in float32;
3. each patch twice along a time axis, channels last: ``[patches, 2, P, P, 3]``, and
   rounded to bfloat16 (vLLM's ``.to(torch.bfloat16)``; the float32 values mmctl
   sends are those bfloat16 values, exact in either dtype).

The prompt: Inkling has no chat template. vLLM (``tokenizer_mode="inkling"``,
``vllm/renderers/inkling_encoding.py``) writes every content part as its own message
and a "Thinking effort level: 0.9" system block before the first user message
(:func:`chat_format`); each ``<|content_image|>`` (200005) stays and is followed by
``num_patches`` × 200054, where the embeddings go (``_get_prompt_updates``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind, dimensions
from mmctl.models import kinds, tiled
from mmctl.models.family import Family, ModelView
from mmctl.models.settings import REQUIRED, File, HFClass, Settings, setting
from mmctl.preprocessing.tiles import Size, rescale_normalize
from mmctl.values.fields import PIXELS, ROWS, FieldLayout, WireField
from mmctl.values.items import ItemFacts
from mmctl.values.received import ContractError, Received

IMAGE, CONFIG = File.IMAGE, File.CONFIG

#: ``mm_preprocess.py`` ``IMAGE_MARKER_ID`` (``<|content_image|>``): what the renderer
#: writes per image and vLLM's ``PromptReplacement`` targets; it stays in the prompt.
IMAGE_MARKER_ID = 200005
#: ``IMAGE_TOKEN_ID`` (``<|unused_200054|>``): the positions the embeddings go to.
IMAGE_TOKEN_ID = 200054
MARKER_TEXT = "<|content_image|>"
#: ``DEFAULT_RESCALE_IMAGE_FRAC``: vLLM's when the processor's is ``None`` (or 0).
DEFAULT_RESCALE_IMAGE_FRAC = 2.0
#: ``divide_to_patches`` pads with this raw value before rescaling and normalizing.
PAD_VALUE = -1.0

# The renderer's framing (``inkling_encoding.py``), by the names its tokens carry.
MESSAGE_USER = "<|message_user|>"
MESSAGE_MODEL = "<|message_model|>"
MESSAGE_SYSTEM = "<|message_system|>"
CONTENT_TEXT = "<|content_text|>"
END_MESSAGE = "<|end_message|>"
#: ``vllm/renderers/inkling.py`` ``_DEFAULT_REASONING_EFFORT`` (a request without
#: ``chat_template_kwargs.reasoning_effort``), as ``_thinking_effort_text`` writes it.
EFFORT_TEXT = "Thinking effort level: 0.9"
#: PIL's ``Image.Resampling.LANCZOS``: the filter of vLLM's ``_rescale_image``.
LANCZOS = 1

#: ``InklingImageProcessor``'s class attributes (transformers 5.20.2), as file values.
INKLING_IMAGE_DEFAULTS: Mapping[str, Any] = {
    "do_resize": True,
    "size": {"height": 40, "width": 40},
    "do_rescale": True,
    "rescale_factor": kinds.RESCALE,
    "do_normalize": True,
    "image_mean": kinds.CLIP_MEAN,
    "image_std": kinds.CLIP_STD,
    "rescale_image_max_upscaled_long_edge": 2048,
}


@dataclass(frozen=True)
class Vision(Settings):
    """Every setting that shapes Inkling's pixels and tokens; defaults are the
    published checkpoint's (vLLM's 2.0 for ``rescale_image_frac``, which the
    published processor file leaves out)."""

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (
        HFClass("InklingImageProcessor", INKLING_IMAGE_DEFAULTS),
    )
    #: ``resample`` is never used under vLLM: it resizes with PIL itself and calls
    #: the processor with ``rescale_image_frac=None``; ``default_to_square`` has no
    #: resize to shape.
    INERT: ClassVar[frozenset[str]] = frozenset({"resample", "default_to_square"})

    image_processor_type: str = setting(
        IMAGE, "image_processor_type", "InklingImageProcessor", kinds.OneOf(())
    )
    #: ``_validate_preprocess_kwargs``: "`do_resize` cannot be set to `False`".
    do_resize: bool = setting(IMAGE, "do_resize", True, kinds.Flag(only=True))
    size: Size = setting(IMAGE, "size", Size(height=40, width=40), kinds.SizeKind(square=True))
    do_rescale: bool = setting(IMAGE, "do_rescale", True, kinds.Flag())
    rescale_factor: float = setting(IMAGE, "rescale_factor", kinds.RESCALE, kinds.Number(0, 1))
    do_normalize: bool = setting(IMAGE, "do_normalize", True, kinds.Flag())
    image_mean: tuple[float, float, float] = setting(
        IMAGE, "image_mean", kinds.CLIP_MEAN, kinds.Triple()
    )
    image_std: tuple[float, float, float] = setting(
        IMAGE, "image_std", kinds.CLIP_STD, kinds.Triple(std=True)
    )
    rescale_image_frac: float = setting(
        IMAGE, "rescale_image_frac", DEFAULT_RESCALE_IMAGE_FRAC, kinds.Number(0, 16)
    )
    rescale_image_max_upscaled_long_edge: int = setting(
        IMAGE, "rescale_image_max_upscaled_long_edge", 2048, kinds.Int(1, kinds.MAX_SIDE)
    )
    #: config.json's vision tower: vLLM serves images only with ``decoder_dmodel``
    #: set (``inkling_vision_enabled``); the tower takes ``[N, T, P, P, C]``.
    decoder_dmodel: int = setting(
        CONFIG, "vision_config.decoder_dmodel", 6144, kinds.Int(1, 1 << 20), default=REQUIRED
    )
    patch_size: int = setting(
        CONFIG, "vision_config.patch_size", 40, kinds.Int(2, 1024), default=REQUIRED
    )
    temporal_patch_size: int = setting(
        CONFIG,
        "vision_config.temporal_patch_size",
        2,
        kinds.OneOf((2,), "2 (the image processor writes each patch twice)"),
        default=REQUIRED,
    )
    n_channels: int = setting(
        CONFIG, "vision_config.n_channels", 3, kinds.OneOf((3,), "3 (RGB)"), default=REQUIRED
    )
    #: The filter vLLM's ``_rescale_image`` resizes with, whatever a file says (INERT):
    #: not a file's setting; named so ``preprocess --json`` names every family's filter.
    resample: int = LANCZOS

    @property
    def patch(self) -> int:
        assert self.size.height is not None, "SizeKind(square=True) gives height and width"
        return self.size.height

    def check(self) -> None:
        if self.patch != self.patch_size:
            raise InputError(
                f"the image processor cuts patches of {self.patch} pixels a side (size) but "
                f"config.json's vision_config.patch_size is {self.patch_size}: vLLM's vision "
                "tower takes patch_size patches and fails on these"
            )


# ---- pixels ------------------------------------------------------------------------


def scaled_size(height: int, width: int, vision: Vision) -> tuple[int, int]:
    """(h, w) vLLM's ``_rescale_image`` gives an image: its long edge times
    ``rescale_image_frac``, growth capped at ``max(cap, long edge)``, each side
    ``floor(d * ratio + 0.5)`` and at least 1; unchanged when the ratio is 1."""
    long_edge = max(height, width)
    target = long_edge * vision.rescale_image_frac
    target = min(target, max(vision.rescale_image_max_upscaled_long_edge, long_edge))
    ratio = target / long_edge
    if ratio == 1.0:
        return height, width
    return max(1, math.floor(height * ratio + 0.5)), max(1, math.floor(width * ratio + 0.5))


def patch_grid(height: int, width: int, patch: int) -> tuple[int, int]:
    """``divide_to_patches``' (rows, columns): ``ceil(H / P)`` and ``W // P + 1``."""
    return (height + patch - 1) // patch, width // patch + 1


def resized(rgb: np.ndarray, vision: Vision) -> np.ndarray:
    """The ``[H, W, 3]`` uint8 image at :func:`scaled_size`, by PIL's LANCZOS."""
    from PIL import Image

    height, width = scaled_size(rgb.shape[0], rgb.shape[1], vision)
    if max(height, width) > kinds.MAX_SIDE:
        raise InputError(
            f"a {dimensions(rgb.shape[1], rgb.shape[0])} image scales to "
            f"{dimensions(width, height)}, beyond mmctl's {kinds.MAX_SIDE:,}-pixel side"
        )
    if (height, width) == rgb.shape[:2]:
        return rgb
    image = Image.fromarray(np.ascontiguousarray(rgb), "RGB")
    return np.asarray(image.resize((width, height), resample=LANCZOS))


def image_patches(rgb: np.ndarray, vision: Vision) -> np.ndarray:
    """``[H, W, 3]`` uint8 (as vLLM loads it) → ``float32 [n, 2, P, P, 3]``: bfloat16
    values, the patches of the rescaled image row by row."""
    from mmctl.preprocessing.pixels import bfloat16_bits_to_float32, float32_to_bfloat16_bits
    from mmctl.preprocessing.tiles import check_rgb

    check_rgb(rgb)
    frame = resized(rgb, vision)
    height, width = frame.shape[:2]
    patch = vision.patch
    rows, cols = patch_grid(height, width, patch)
    canvas = np.full((rows * patch, cols * patch, 3), PAD_VALUE, dtype=np.float32)
    canvas[:height, :width] = frame
    chw = rescale_normalize(
        canvas,
        do_rescale=vision.do_rescale,
        rescale_factor=vision.rescale_factor,
        do_normalize=vision.do_normalize,
        mean=vision.image_mean,
        std=vision.image_std,
    )
    # [3, rows*P, cols*P] → [rows, cols, P, P, 3] → one patch per row, twice in time.
    hwc = chw.reshape(3, rows, patch, cols, patch).transpose(1, 3, 2, 4, 0)
    patches = hwc.reshape(rows * cols, 1, patch, patch, 3)
    rounded = bfloat16_bits_to_float32(float32_to_bfloat16_bits(np.ascontiguousarray(patches)))
    return np.ascontiguousarray(np.repeat(rounded, 2, axis=1))


def image_item(rgb: np.ndarray, vision: Vision) -> tiled.Item:
    pixels = image_patches(rgb, vision)
    count = int(pixels.shape[0])
    height, width = scaled_size(rgb.shape[0], rgb.shape[1], vision)
    return tiled.Item(
        pixels,
        count,
        {"num_patches": np.asarray(count, dtype=np.int64)},
        {"patch_grid": patch_grid(height, width, vision.patch)},
        rows=count,
        resized=(height, width),
    )


# ---- tokens and the prompt ---------------------------------------------------------


@dataclass(frozen=True)
class InklingTokens:
    """vLLM 0.33's constants (not read from config.json): the marker the renderer
    writes and its processor targets, and the token the embeddings go to."""

    image_marker: int = IMAGE_MARKER_ID
    image: int = IMAGE_TOKEN_ID

    def placeholder(self, kind: MediaKind) -> int:
        if kind is not MediaKind.IMAGE:
            raise InputError(f"Inkling has no {kind.value} token mmctl sends")
        return self.image_marker

    def embed(self, kind: MediaKind) -> int:
        self.placeholder(kind)
        return self.image

    def markers(self) -> dict[int, str]:
        return {self.image_marker: "content_image"}

    def as_dict(self) -> dict[str, int]:
        return {"image_bos_token_id": self.image_marker, "image_token_id": self.image}


def inkling_tokens(config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> InklingTokens:
    """The constants, once the tokenizer is seen to agree: vLLM's renderer writes the
    tokenizer's ``<|content_image|>``, its processor expands the constant 200005."""
    found = vocab(MARKER_TEXT)
    if found != IMAGE_MARKER_ID:
        held = f"has {MARKER_TEXT} at {found}" if found is not None else f"has no {MARKER_TEXT}"
        raise InputError(
            f"the tokenizer {held}; vLLM 0.33 expands Inkling images at {IMAGE_MARKER_ID} "
            "only, so it cannot serve images with this folder",
            hint="check that the model folder's tokenizer.json is Inkling's",
        )
    return InklingTokens()


def replacement(item: ItemFacts, model: ModelView) -> list[int]:
    """``_get_prompt_updates``: the marker, then ``num_patches`` image tokens."""
    return [IMAGE_MARKER_ID] + [IMAGE_TOKEN_ID] * item.tokens


def _message(role: str, content: str = "", marker: str = CONTENT_TEXT) -> str:
    return f"{role}{marker}{content}{END_MESSAGE}"


def chat_format(body: str, system: str | None) -> str:
    """One user turn as vLLM's Inkling renderer writes it (``render_inkling_messages``
    with the default effort and a generation prompt): the system text first, if any,
    then the effort block, then each image and each stretch of text of ``body`` as a
    message of its own, in order, then ``<|message_model|>``."""
    out = [_message(MESSAGE_SYSTEM, system)] if system else []
    out.append(_message(MESSAGE_SYSTEM, EFFORT_TEXT))
    for part in re.split(f"({re.escape(MARKER_TEXT)})", body):
        if part == MARKER_TEXT:
            out.append(_message(MESSAGE_USER, marker=MARKER_TEXT))
        elif part:
            out.append(_message(MESSAGE_USER, part))
    out.append(MESSAGE_MODEL)
    return "".join(out)


@dataclass(frozen=True)
class InklingPrompt(tiled.RunPrompt):
    """vLLM renders Inkling prompts itself (``tokenizer_mode="inkling"`` for these
    architectures, whatever template a folder holds): no template is ever the model's."""

    def knows_media(self, template: str) -> bool:
        return False


# ---- the stub's contract -----------------------------------------------------------


def received_items(batch: Received, model: ModelView) -> list[ItemFacts]:
    if "num_patches" not in batch.tensors:
        raise ContractError("carries no num_patches tensor")
    counts = np.asarray(batch.tensors["num_patches"])
    if list(counts.shape) != [batch.count]:
        raise ContractError(
            f"has shape {list(counts.shape)}; {batch.count} placeholder(s) need [{batch.count}]",
            "num_patches",
        )
    out = []
    for value in counts.tolist():
        if int(value) < 1:
            raise ContractError(f"holds {value}; an image has at least one patch", "num_patches")
        out.append(ItemFacts(batch.kind, int(value), rows=int(value)))
    return out


def expected_pixels(
    kind: MediaKind, items: Sequence[ItemFacts], model: ModelView
) -> tuple[int | str, ...]:
    """The hMLP tower's input (``towers.py``' shape asserts): ``[Σ patches, T, P, P, C]``."""
    vision = tiled.settings_of(model, Vision)
    rows = sum(int(it.rows or 0) for it in items)
    return (rows, vision.temporal_patch_size, vision.patch_size, vision.patch_size, 3)


def image_pixels(patches: np.ndarray, item: ItemFacts) -> np.ndarray:
    """An item's pixels without the padding, as ``[3, 1, k]`` (the colour answer's
    shape): each pixel of its first time step whose values are not all the pad's."""
    first = np.asarray(patches[:, 0], dtype=np.float32).reshape(-1, 3)
    pad = first[-1]  # the last column is always padded (``W // P + 1`` columns)
    keep = first[~np.all(first == pad, axis=1)]
    return keep.T[:, None, :] if len(keep) else first.T[:, None, :]


#: vLLM's ``InklingMultiModalProcessor._get_mm_fields_config``: the images' patches in
#: one flat ``pixel_values`` split by ``num_patches``, that batched and kept on the CPU.
FIELDS = (
    WireField(
        "pixel_values",
        FieldLayout.FLAT,
        PIXELS,
        PIXELS,
        (2, "P", "P", 3),
        "[Σ patches, 2, P, P, 3] normalized patches (bfloat16 values), channels last",
        sizes="num_patches",
    ),
    WireField(
        "num_patches",
        FieldLayout.BATCHED,
        ROWS,
        "int64",
        (),
        "[images] patches per image (the flat sizes)",
        keep_on_cpu=True,
    ),
)


NAME = "inkling"
FAMILY = Family(
    name=NAME,
    aliases=(),
    model_types=("inkling_mm_model",),
    modalities=(MediaKind.IMAGE,),
    settings=Vision,
    tokens=inkling_tokens,
    processor=tiled.TileProcessor(NAME, image_item),
    prompt=InklingPrompt(NAME, replacement, chat=chat_format),
    wire=tiled.TileWire({MediaKind.IMAGE: FIELDS}, {MediaKind.IMAGE: tiled.concatenate}),
    contract=tiled.TileContract(
        NAME, received_items, expected_pixels, tiled.flat_tiles, image_pixels
    ),
)
