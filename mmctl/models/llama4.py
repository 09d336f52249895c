"""Llama 4 (Scout, Maverick): an image's tiles and its prompt tokens.

Pure functions mirroring transformers 5.20's ``Llama4ImageProcessor`` (the
torchvision backend, ``models/llama4/image_processing_llama4.py``) and vLLM
0.33's ``Mllama4MultiModalProcessor`` (``model_executor/models/mllama4.py``)
bit for bit. Per image:

1. the canvas: among ``find_supported_resolutions(max_patches, 336)`` the best
   fit (``get_best_fit``: the smallest upscale, else the mildest downscale; the
   smallest area on a tie), computed in float32 as HF's tensors do;
2. the image resized into it keeping its aspect (``get_max_res_without_distortion``,
   upscaling capped at one tile), uint8 antialiased bilinear;
3. padded right and bottom with 0, rescaled and normalised **in bfloat16**
   (HF's override of ``rescale_and_normalize``), cut into 336x336 tiles row by
   row, and, when there is more than one, a global tile appended: the
   *original* image resized to 336x336, same filter, same arithmetic.

The values are bfloat16 ones widened to float32 (exactly representable), so a
caller can send either dtype. A uint8 input takes only 256 values, so the whole
bfloat16 chain is a 256-entry table per channel (:func:`_bf16_table`).

The prompt: each ``<|image|>`` the template writes becomes vLLM's
``_prompt_split_image`` sequence (:func:`image_token_ids`); the encoder's
embeddings go to its ``<|patch|>`` tokens (``image_token_index``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind, dimensions
from mmctl.models import kinds, tiled
from mmctl.models.family import Family, ModelView
from mmctl.models.settings import File, HFClass, Settings, setting
from mmctl.preprocessing.resize import Filter, resize_rgb
from mmctl.preprocessing.tiles import Size
from mmctl.values.fields import ROWS, FieldLayout, WireField
from mmctl.values.items import ItemFacts
from mmctl.values.received import ContractError, Received, table_rows

IMAGE, PROCESSOR, CONFIG = File.IMAGE, File.PROCESSOR, File.CONFIG

#: ``PILImageResampling`` values of the filters mmctl has (HF's ``resample`` key).
RESAMPLE_FILTERS: dict[int, Filter] = {kinds.BILINEAR: "bilinear", kinds.BICUBIC: "bicubic"}

#: The token strings ``Llama4Processor._prompt_split_image`` writes (hard-coded
#: there, whatever the processor's own ``*_token`` settings say).
IMAGE_START = "<|image_start|>"
IMAGE_END = "<|image_end|>"
PATCH = "<|patch|>"
TILE_X_SEPARATOR = "<|tile_x_separator|>"
TILE_Y_SEPARATOR = "<|tile_y_separator|>"
#: ``Llama4Processor(image_token=...)``: the placeholder vLLM replaces.
IMAGE_TOKEN = "<|image|>"

IMAGE_CLASS = HFClass(
    "Llama4ImageProcessor",
    {
        "do_resize": True,
        "size": {"height": 336, "width": 336},
        "resample": kinds.BILINEAR,
        "do_rescale": True,
        "rescale_factor": kinds.RESCALE,
        "do_normalize": True,
        "image_mean": kinds.HALF,
        "image_std": kinds.HALF,
        "max_patches": 16,
        "resize_to_max_canvas": False,
    },
)
#: ``Llama4Config`` / ``Llama4VisionConfig`` defaults (note the vision class's
#: ``image_size`` is 448, not Scout's 336).
CONFIG_CLASS = HFClass(
    "Llama4Config",
    {
        "vision_config": {"image_size": 448, "patch_size": 14, "pixel_shuffle_ratio": 0.5},
        "image_token_index": 200092,
    },
)
_ONLY_ON = kinds.Flag(only=True)


@dataclass(frozen=True)
class Vision(Settings):
    """The settings that shape Llama 4's tiles and tokens; defaults are
    ``meta-llama/Llama-4-Scout-17B-16E-Instruct``'s published ones."""

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (IMAGE_CLASS,)
    CONFIG_CLASS: ClassVar[HFClass | None] = CONFIG_CLASS
    #: ``Llama4ImageProcessor._preprocess`` crops nothing and takes no square default.
    INERT: ClassVar[frozenset[str]] = frozenset(
        {"crop_size", "do_center_crop", "default_to_square"}
    )

    #: The tile side (``size`` {height, width}, square).
    size: Size = setting(IMAGE, "size", Size(height=336, width=336), kinds.SizeKind(square=True))
    max_patches: int = setting(IMAGE, "max_patches", 16, kinds.Int(1, 256))
    resize_to_max_canvas: bool = setting(IMAGE, "resize_to_max_canvas", False, kinds.Flag())
    resample: int = setting(
        IMAGE,
        "resample",
        kinds.BILINEAR,
        kinds.OneOf(tuple(RESAMPLE_FILTERS), "bilinear (2) or bicubic (3)"),
    )
    do_resize: bool = setting(IMAGE, "do_resize", True, _ONLY_ON)
    do_rescale: bool = setting(IMAGE, "do_rescale", True, _ONLY_ON)
    do_normalize: bool = setting(IMAGE, "do_normalize", True, _ONLY_ON)
    rescale_factor: float = setting(IMAGE, "rescale_factor", kinds.RESCALE, kinds.Number(0, 1))
    # HF accepts one number for all channels, as torchvision's normalize does.
    image_mean: tuple[float, float, float] = setting(
        IMAGE, "image_mean", kinds.HALF, kinds.Triple(scalar=True)
    )
    image_std: tuple[float, float, float] = setting(
        IMAGE, "image_std", kinds.HALF, kinds.Triple(std=True, scalar=True)
    )
    #: processor_config.json ``image_token``: the placeholder the template writes.
    image_token: str = setting(
        PROCESSOR, "image_token", IMAGE_TOKEN, kinds.Text(), default=IMAGE_TOKEN
    )
    #: vLLM's tile size.
    image_size: int = setting(CONFIG, "vision_config.image_size", 336, kinds.Int(1, kinds.MAX_SIDE))
    patch_size: int = setting(CONFIG, "vision_config.patch_size", 14, kinds.Int(1, 256))
    pixel_shuffle_ratio: float = setting(
        CONFIG, "vision_config.pixel_shuffle_ratio", 0.5, kinds.Number(0, 1)
    )
    image_token_index: int = setting(
        CONFIG, "image_token_index", 200092, kinds.TokenId()
    )  # <|patch|>

    @property
    def tile_size(self) -> int:
        assert self.size.height is not None, "a square size"
        return self.size.height

    @property
    def filter(self) -> Filter:
        return RESAMPLE_FILTERS[self.resample]

    @property
    def patches_per_tile(self) -> int:
        """``<|patch|>`` tokens per tile: vLLM's ``get_patch_per_chunk`` (144)."""
        downsample = round(1.0 / (self.pixel_shuffle_ratio**2))
        return (self.image_size // self.patch_size) ** 2 // downsample

    def check(self) -> None:
        if self.image_size < self.patch_size:
            raise InputError(
                f"config.json: vision_config.image_size ({self.image_size}) is smaller than its "
                f"patch_size ({self.patch_size})"
            )
        if self.patches_per_tile < 1:
            raise InputError(
                f"config.json: vision_config.pixel_shuffle_ratio {self.pixel_shuffle_ratio} "
                f"leaves no patch of a {self.image_size}-pixel tile"
            )


# ---- the canvas ----


@functools.lru_cache(maxsize=8)
def find_supported_resolutions(max_num_chunks: int, tile: int) -> tuple[tuple[int, int], ...]:
    """Every canvas (height, width) of at most ``max_num_chunks`` tiles, in HF's order:
    grouped by aspect ratio (ratios in the order first met, counting chunks down),
    which decides :func:`get_best_fit`'s ties."""
    by_ratio: dict[float, list[tuple[int, int]]] = {}
    for chunks in range(max_num_chunks, 0, -1):
        for rows in sorted(_factors(chunks)):
            by_ratio.setdefault(rows / (chunks // rows), []).append((rows, chunks // rows))
    return tuple((r * tile, c * tile) for group in by_ratio.values() for r, c in group)


def _factors(n: int) -> set[int]:
    found: set[int] = set()
    for i in range(1, int(n**0.5) + 1):
        if n % i == 0:
            found.update((i, n // i))
    return found


def get_best_fit(
    height: int,
    width: int,
    resolutions: tuple[tuple[int, int], ...],
    *,
    resize_to_max_canvas: bool = False,
) -> tuple[int, int]:
    """The canvas (height, width) HF's ``get_best_fit`` picks for a height x width image.

    Each canvas's scale is min(its height / height, its width / width) in float32
    (HF divides int64 tensors). With any scale >= 1 the smallest of those
    (the largest with ``resize_to_max_canvas``), else the largest below 1; of
    the canvases with exactly that scale, the first of the smallest area.
    """
    canvases = np.asarray(resolutions, dtype=np.int64)
    scale_h = canvases[:, 0].astype(np.float32) / np.float32(height)
    scale_w = canvases[:, 1].astype(np.float32) / np.float32(width)
    scales = np.where(scale_h > scale_w, scale_w, scale_h)
    up = scales[scales >= 1]
    if up.size:
        selected = up.max() if resize_to_max_canvas else up.min()
    else:
        selected = scales[scales < 1].max()
    chosen = canvases[scales == selected]
    best = chosen[int(np.argmin(chosen[:, 0] * chosen[:, 1]))]
    return int(best[0]), int(best[1])


def resized_size(
    height: int, width: int, vision: Vision
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((canvas h, w), (resized h, w)): where HF's ``_preprocess`` puts the image.

    HF mixes Python ints with 0-d tensors here (``min(max(h, 336), canvas[0])``
    is the tensor only when strictly smaller), and
    ``get_max_res_without_distortion`` divides, multiplies and compares in
    float32 where a tensor takes part, in float64 where both are ints; the
    arithmetic below follows which is which.
    """
    resolutions = find_supported_resolutions(vision.max_patches, vision.tile_size)
    canvas = get_best_fit(
        height, width, resolutions, resize_to_max_canvas=vision.resize_to_max_canvas
    )
    # (value, whether HF holds it as a tensor)
    if vision.resize_to_max_canvas:
        target = ((canvas[0], True), (canvas[1], True))
    else:
        cap_h, cap_w = max(height, vision.tile_size), max(width, vision.tile_size)
        target = (
            (canvas[0], True) if canvas[0] < cap_h else (cap_h, False),
            (canvas[1], True) if canvas[1] < cap_w else (cap_w, False),
        )
    (target_h, h_tensor), (target_w, w_tensor) = target
    scale_w = _divide(target_w, width, w_tensor)
    scale_h = _divide(target_h, height, h_tensor)
    if h_tensor or w_tensor:
        width_limits = bool(np.float32(scale_w) < np.float32(scale_h))
    else:
        width_limits = scale_w < scale_h
    if width_limits:
        new_w = target_w
        new_h = min(_floor_product(height, scale_w, w_tensor), target_h)
    else:
        new_h = target_h
        new_w = min(_floor_product(width, scale_h, h_tensor), target_w)
    return canvas, (max(new_h, 1), max(new_w, 1))


def _divide(numerator: int, denominator: int, tensor: bool) -> float:
    if tensor:
        return float(np.float32(numerator) / np.float32(denominator))
    return numerator / denominator


def _floor_product(size: int, scale: float, tensor: bool) -> int:
    if tensor:
        return math.floor(np.float32(size) * np.float32(scale))
    return math.floor(size * scale)


def aspect_ratio(height: int, width: int, vision: Vision) -> tuple[int, int]:
    """(tile rows, tile columns) as vLLM's ``_postprocess_hf_mm_data`` computes them:
    the best-fit canvas over ``vision_config.image_size``."""
    resolutions = find_supported_resolutions(vision.max_patches, vision.image_size)
    canvas = get_best_fit(
        height, width, resolutions, resize_to_max_canvas=vision.resize_to_max_canvas
    )
    return canvas[0] // vision.image_size, canvas[1] // vision.image_size


def patches_per_image(ratio: tuple[int, int]) -> int:
    """Tiles of one image (vLLM's ``patches_per_image``): one, or all plus the global one."""
    rows, cols = ratio
    return 1 if rows * cols == 1 else 1 + rows * cols


# ---- the pixels ----


def image_tiles(rgb: np.ndarray, vision: Vision) -> tuple[np.ndarray, tuple[int, int]]:
    """(tiles, aspect ratio) of one ``[H, W, 3]`` uint8 image.

    ``tiles``: float32 ``[patches_per_image, 3, tile, tile]`` holding exactly HF's
    bfloat16 values; the aspect ratio is (rows, cols) as vLLM computes it.
    """
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise InputError(f"expected an [H, W, 3] uint8 image, got {rgb.dtype} {rgb.shape}")
    height, width = int(rgb.shape[0]), int(rgb.shape[1])
    if height == 0 or width == 0:
        raise InputError(f"image has no pixels: {dimensions(width, height)}")
    tile = vision.tile_size
    (canvas_h, canvas_w), (new_h, new_w) = resized_size(height, width, vision)
    rows, cols = canvas_h // tile, canvas_w // tile
    table = _bf16_table(vision.rescale_factor, vision.image_mean, vision.image_std)
    count = rows * cols
    out = np.empty((patches_per_image((rows, cols)), 3, tile, tile), dtype=np.float32)

    padded = np.zeros((canvas_h, canvas_w, 3), dtype=np.uint8)  # pad_to_best_fit's fill 0
    padded[:new_h, :new_w] = resize_rgb(rgb, new_h, new_w, filter=vision.filter)
    # split_to_tiles: row-major over the canvas, each tile channel-first.
    _normalize_into(
        out[:count], padded.reshape(rows, tile, cols, tile, 3).transpose(0, 2, 4, 1, 3), table
    )
    if count > 1:
        global_tile = resize_rgb(rgb, tile, tile, filter=vision.filter)
        _normalize_into(out[count:], global_tile.transpose(2, 0, 1)[None], table)
    return out, aspect_ratio(height, width, vision)


def _normalize_into(out: np.ndarray, tiles: np.ndarray, table: np.ndarray) -> None:
    """out[n, c] = table[c][tiles[n, c]] for uint8 tiles laid out ``[n, c, h, w]``."""
    tiles = np.ascontiguousarray(tiles).reshape(out.shape)
    for c in range(3):
        out[:, c] = table[c][tiles[:, c]]


@functools.lru_cache(maxsize=8)
def _bf16_table(
    rescale_factor: float,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
) -> np.ndarray:
    """``[3, 256]`` float32: HF's value for each uint8 level of each channel.

    HF's ``rescale_and_normalize``: ``x.to(bfloat16) * rescale_factor``, then
    torchvision's ``normalize`` with mean and std cast to bfloat16:
    ``(x - mean) / std``. torch evaluates each bfloat16 op in float32 and
    rounds the result to bfloat16 (nearest, ties to even), so each step rounds.
    """
    levels = np.arange(256, dtype=np.float32)  # uint8 -> bfloat16 is exact
    scaled = _round_bf16(levels * np.float32(rescale_factor))
    table = np.empty((3, 256), dtype=np.float32)
    for c in range(3):
        shifted = _round_bf16(scaled - _round_bf16(np.float32(mean[c])))
        table[c] = _round_bf16(shifted / _round_bf16(np.float32(std[c])))
    table.flags.writeable = False
    return table


def _round_bf16(values: np.ndarray | np.float32) -> np.ndarray:
    """float32 rounded to the nearest bfloat16 (ties to even), kept as float32."""
    bits = np.atleast_1d(np.asarray(values, dtype=np.float32)).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32)


# ---- the prompt ----


@dataclass(frozen=True)
class Llama4Tokens:
    """The special token ids of Llama 4's image prompt."""

    image_start: int  # <|image_start|> (config.json boi_token_index)
    image_end: int  # <|image_end|> (config.json eoi_token_index)
    image: int  # <|image|>: the placeholder the chat template writes
    patch: int  # <|patch|>: where the embeddings go (config.json image_token_index)
    tile_x_separator: int  # <|tile_x_separator|>: between the tiles of a row
    tile_y_separator: int  # <|tile_y_separator|>: after each row of tiles

    @classmethod
    def from_vocab(
        cls, token_to_id: Callable[[str], int | None], *, image_token: str = IMAGE_TOKEN
    ) -> Llama4Tokens:
        """The ids from a tokenizer's ``token_to_id``; :class:`InputError` naming
        the first token the vocabulary lacks."""
        names = {
            "image_start": IMAGE_START,
            "image_end": IMAGE_END,
            "image": image_token,
            "patch": PATCH,
            "tile_x_separator": TILE_X_SEPARATOR,
            "tile_y_separator": TILE_Y_SEPARATOR,
        }
        return cls(**tiled.vocab_ids(token_to_id, names, "Llama 4"))

    # The family interface's view of them (:class:`~mmctl.models.family.Tokens`).

    def placeholder(self, kind: MediaKind) -> int:
        if kind is not MediaKind.IMAGE:
            raise InputError(f"Llama 4 has no {kind.value} token")
        return self.image

    def embed(self, kind: MediaKind) -> int:
        self.placeholder(kind)
        return self.patch

    def markers(self) -> dict[int, str]:
        return {
            self.image_start: "image_start",
            self.image_end: "image_end",
            self.tile_x_separator: "tile_x_separator",
            self.tile_y_separator: "tile_y_separator",
        }

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


def image_token_ids(
    ratio: tuple[int, int], tokens: Llama4Tokens, *, patches_per_tile: int = 144
) -> list[int]:
    """What replaces one ``<|image|>``: vLLM's ``_prompt_split_image`` tokenized.

    ``<|image_start|>``; when there is more than one tile, each row's tiles of
    ``patches_per_tile`` ``<|patch|>`` separated by ``<|tile_x_separator|>``,
    each row closed by ``<|tile_y_separator|>``; then ``<|image|>``, the global
    (or only) tile's patches and ``<|image_end|>``.
    """
    rows, cols = ratio
    tile = [tokens.patch] * patches_per_tile
    ids = [tokens.image_start]
    if rows * cols > 1:
        for _ in range(rows):
            for col in range(cols):
                ids += tile
                if col < cols - 1:
                    ids.append(tokens.tile_x_separator)
            ids.append(tokens.tile_y_separator)
    ids.append(tokens.image)
    ids += tile
    ids.append(tokens.image_end)
    return ids


def llama4_tokens(config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> Llama4Tokens:
    return Llama4Tokens.from_vocab(vocab)


def image_item(rgb: np.ndarray, vision: Vision) -> tiled.Item:
    pixels, ratio = image_tiles(rgb, vision)
    count = patches_per_image(ratio)
    return tiled.Item(
        pixels,
        count * vision.patches_per_tile,
        {
            "patches_per_image": np.asarray(count, dtype=np.int64),
            "aspect_ratios": np.asarray(ratio, dtype=np.int64),
        },
        {"aspect_ratio": ratio},
        rows=count,
    )


def replacement(item: ItemFacts, model: ModelView) -> list[int]:
    tokens = model.token_ids
    assert isinstance(tokens, Llama4Tokens), "the Llama 4 family resolves Llama4Tokens"
    return image_token_ids(
        (int(item.extra["aspect_ratio"][0]), int(item.extra["aspect_ratio"][1])),
        tokens,
        patches_per_tile=tiled.settings_of(model, Vision).patches_per_tile,
    )


def received_items(batch: Received, model: ModelView) -> list[ItemFacts]:
    kind, tensors, count = batch.kind, batch.tensors, batch.count
    vision = tiled.settings_of(model, Vision)
    out = []
    for rows, cols in table_rows(tensors, "aspect_ratios", count, 2):
        if rows < 1 or cols < 1 or rows * cols > vision.max_patches:
            raise ContractError(
                f"row {[rows, cols]} is not a tile grid of at most {vision.max_patches} tiles",
                "aspect_ratios",
            )
        tiles = patches_per_image((rows, cols))
        out.append(
            ItemFacts(
                kind,
                tiles * vision.patches_per_tile,
                extra={"aspect_ratio": (rows, cols)},
                rows=tiles,
            )
        )
    return out


#: vLLM's ``Mllama4MultiModalProcessor._get_mm_fields_config``: every image's
#: tiles in one flat ``pixel_values``, split by ``patches_per_image``; that and
#: ``aspect_ratios`` batched and kept on the CPU.
FIELDS = (
    tiled.flat_pixels(
        "[Σ tiles, 3, S, S] normalized tiles (bfloat16 values), each image's global tile last",
        "patches_per_image",
    ),
    WireField(
        "patches_per_image",
        FieldLayout.BATCHED,
        ROWS,
        "int64",
        (),
        "[images] tiles per image (the flat sizes)",
        keep_on_cpu=True,
    ),
    WireField(
        "aspect_ratios",
        FieldLayout.BATCHED,
        "aspect_ratios",
        "int64",
        (2,),
        "[images, 2] (rows, columns) of tiles per image",
        keep_on_cpu=True,
    ),
)


NAME = "llama4"
FAMILY = Family(
    name=NAME,
    aliases=("llama-4",),
    model_types=("llama4",),
    modalities=(MediaKind.IMAGE,),
    settings=Vision,
    tokens=llama4_tokens,
    processor=tiled.TileProcessor(NAME, image_item),
    prompt=tiled.RunPrompt(NAME, replacement, media_words=("image",)),
    wire=tiled.TileWire({MediaKind.IMAGE: FIELDS}, {MediaKind.IMAGE: tiled.concatenate}),
    contract=tiled.TileContract(
        NAME, received_items, tiled.flat_expected(Vision), tiled.flat_tiles, tiled.last_tile
    ),
)
