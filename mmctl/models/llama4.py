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
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind, dimensions
from mmctl.models.family import ContractError, ItemFacts, Tokens
from mmctl.models.fields import PIXELS, ROWS, FieldLayout, WireField
from mmctl.models.tiled import FixedVision, Item, TileFamily, table_rows
from mmctl.preprocessing.resize import Filter, resize_rgb

if TYPE_CHECKING:
    from mmctl.models.base import ModelFiles
    from mmctl.models.model import Model

#: ``PILImageResampling`` values of the filters mmctl has (HF's ``resample`` key).
RESAMPLE_FILTERS: dict[int, Filter] = {2: "bilinear", 3: "bicubic"}

#: The token strings ``Llama4Processor._prompt_split_image`` writes (hard-coded
#: there, whatever the processor's own ``*_token`` settings say).
IMAGE_START = "<|image_start|>"
IMAGE_END = "<|image_end|>"
PATCH = "<|patch|>"
TILE_X_SEPARATOR = "<|tile_x_separator|>"
TILE_Y_SEPARATOR = "<|tile_y_separator|>"
#: ``Llama4Processor(image_token=...)``: the placeholder vLLM replaces.
IMAGE = "<|image|>"


@dataclass(frozen=True)
class Vision(FixedVision):
    """The settings that shape Llama 4's tiles and tokens.

    Defaults are ``meta-llama/Llama-4-Scout-17B-16E-Instruct``'s published ones.
    """

    tile_size: int = 336  # preprocessor_config.json size {"height", "width"} (square)
    max_patches: int = 16  # preprocessor_config.json max_patches
    resize_to_max_canvas: bool = False  # preprocessor_config.json resize_to_max_canvas
    resample: Filter = "bilinear"  # preprocessor_config.json resample (2 = BILINEAR)
    rescale_factor: float = 1 / 255  # preprocessor_config.json rescale_factor
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)  # preprocessor_config.json image_mean
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)  # preprocessor_config.json image_std
    image_token: str = IMAGE  # processor_config.json image_token (the placeholder)
    image_size: int = 336  # config.json vision_config.image_size (vLLM's tile size)
    patch_size: int = 14  # config.json vision_config.patch_size
    pixel_shuffle_ratio: float = 0.5  # config.json vision_config.pixel_shuffle_ratio
    image_token_index: int = 200092  # config.json image_token_index (<|patch|>)

    @property
    def patches_per_tile(self) -> int:
        """``<|patch|>`` tokens per tile: vLLM's ``get_patch_per_chunk`` (144)."""
        downsample = round(1.0 / (self.pixel_shuffle_ratio**2))
        return (self.image_size // self.patch_size) ** 2 // downsample

    @classmethod
    def from_files(
        cls,
        preprocessor_config: Mapping[str, Any],
        processor_config: Mapping[str, Any],
        config: Mapping[str, Any],
    ) -> Vision:
        """The settings as ``AutoProcessor.from_pretrained`` and vLLM resolve them.

        The image processor reads ``processor_config.json``'s nested
        ``"image_processor"`` when there is one (instead of, not on top of,
        ``preprocessor_config.json``); a key absent or null takes the class
        default (``Llama4ImageProcessor``, ``Llama4VisionConfig``,
        ``Llama4Config``: note the vision class's ``image_size`` is 448, not
        Scout's 336). Settings mmctl does not reproduce are refused.
        """
        nested = processor_config.get("image_processor")
        image = nested if isinstance(nested, Mapping) else preprocessor_config
        vision_config = config.get("vision_config")
        if not isinstance(vision_config, Mapping):
            vision_config = {}

        def get(source: Mapping[str, Any], key: str, default: Any) -> Any:
            value = source.get(key)
            return default if value is None else value

        for key in ("do_resize", "do_rescale", "do_normalize"):
            if get(image, key, True) is not True:
                raise InputError(
                    f"the image processor's {key} is {image[key]!r}; mmctl reproduces Llama 4 "
                    "only with resizing, rescaling and normalising on"
                )
        size = get(image, "size", {"height": 336, "width": 336})
        if not isinstance(size, Mapping) or not size.get("height") or not size.get("width"):
            raise InputError(
                f"Llama 4's image processor needs size {{height, width}}, got {size!r}"
            )
        if size["height"] != size["width"]:
            raise InputError(f"Llama 4's tiles must be square, got size {dict(size)!r}")
        resample = get(image, "resample", 2)
        if resample not in RESAMPLE_FILTERS:
            raise InputError(
                f"resample={resample!r} is not a filter mmctl has; one of {sorted(RESAMPLE_FILTERS)}"
            )
        try:
            return cls(
                tile_size=int(size["height"]),
                max_patches=int(get(image, "max_patches", 16)),
                resize_to_max_canvas=bool(get(image, "resize_to_max_canvas", False)),
                resample=RESAMPLE_FILTERS[resample],
                rescale_factor=float(get(image, "rescale_factor", 1 / 255)),
                image_mean=_triple(get(image, "image_mean", (0.5, 0.5, 0.5)), "image_mean"),
                image_std=_triple(get(image, "image_std", (0.5, 0.5, 0.5)), "image_std"),
                image_token=str(get(processor_config, "image_token", IMAGE)),
                image_size=int(get(vision_config, "image_size", 448)),
                patch_size=int(get(vision_config, "patch_size", 14)),
                pixel_shuffle_ratio=float(get(vision_config, "pixel_shuffle_ratio", 0.5)),
                image_token_index=int(get(config, "image_token_index", 200092)),
            )
        except (TypeError, ValueError) as exc:
            raise InputError(f"Llama 4's processor settings are malformed: {exc}") from exc


def _triple(value: Any, key: str) -> tuple[float, float, float]:
    # HF accepts one number for all channels, as torchvision's normalize does.
    values = [value] * 3 if isinstance(value, int | float) else list(value)
    if len(values) != 3:
        raise InputError(f"{key} needs 3 values (one per RGB channel), got {value!r}")
    return float(values[0]), float(values[1]), float(values[2])


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
    padded[:new_h, :new_w] = resize_rgb(rgb, new_h, new_w, filter=vision.resample)
    # split_to_tiles: row-major over the canvas, each tile channel-first.
    _normalize_into(
        out[:count], padded.reshape(rows, tile, cols, tile, 3).transpose(0, 2, 4, 1, 3), table
    )
    if count > 1:
        global_tile = resize_rgb(rgb, tile, tile, filter=vision.resample)
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
        cls, token_to_id: Callable[[str], int | None], *, image_token: str = IMAGE
    ) -> Llama4Tokens:
        """The ids from a tokenizer's ``token_to_id``; :class:`InputError` naming
        the first token the vocabulary lacks."""

        def look_up(token: str) -> int:
            found = token_to_id(token)
            if found is None:
                raise InputError(
                    f"the tokenizer has no {token} token, which Llama 4's image prompt needs",
                    hint="check that the model folder's tokenizer.json is Llama 4's",
                )
            return found

        return cls(
            image_start=look_up(IMAGE_START),
            image_end=look_up(IMAGE_END),
            image=look_up(image_token),
            patch=look_up(PATCH),
            tile_x_separator=look_up(TILE_X_SEPARATOR),
            tile_y_separator=look_up(TILE_Y_SEPARATOR),
        )

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


# ---- the family ----

#: vLLM's ``Mllama4MultiModalProcessor._get_mm_fields_config``: every image's
#: tiles in one flat ``pixel_values``, split by ``patches_per_image``; that and
#: ``aspect_ratios`` batched and kept on the CPU.
FIELDS = (
    WireField(
        "pixel_values",
        FieldLayout.FLAT,
        PIXELS,
        PIXELS,
        (3, "S", "S"),
        "[Σ tiles, 3, S, S] normalized tiles (bfloat16 values), each image's global tile last",
        sizes="patches_per_image",
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


@dataclass(frozen=True)
class Llama4(TileFamily):
    name: str = "llama4"
    aliases: tuple[str, ...] = ("llama-4",)
    model_types: tuple[str, ...] = ("llama4",)
    #: Llama 4 models run in bfloat16; its processor's values are bfloat16.
    default_system: str | None = None

    def resolve(self, files: ModelFiles) -> Vision:
        return Vision.from_files(files.preprocessor_config, files.processor_config, files.config)

    def tokens(self, config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> Tokens:
        return Llama4Tokens.from_vocab(vocab)

    def knows_media(self, template: str) -> bool:
        return IMAGE in template or "image" in template

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        return FIELDS

    def image_item(self, rgb: np.ndarray, vision: Any) -> Item:
        pixels, ratio = image_tiles(rgb, vision)
        count = patches_per_image(ratio)
        return Item(
            pixels,
            count * vision.patches_per_tile,
            {
                "patches_per_image": np.asarray(count, dtype=np.int64),
                "aspect_ratios": np.asarray(ratio, dtype=np.int64),
            },
            {"aspect_ratio": ratio},
            rows=count,
        )

    def replacement(self, item: ItemFacts, model: Model) -> list[int]:
        tokens = model.token_ids
        assert isinstance(tokens, Llama4Tokens), "the Llama 4 family resolves Llama4Tokens"
        return image_token_ids(
            (int(item.extra["aspect_ratio"][0]), int(item.extra["aspect_ratio"][1])),
            tokens,
            patches_per_tile=_vision(model).patches_per_tile,
        )

    def batch_pixels(self, kind: MediaKind, items: Sequence[np.ndarray]) -> np.ndarray:
        return items[0] if len(items) == 1 else np.concatenate(items)

    def received_items(
        self, kind: MediaKind, tensors: Mapping[str, np.ndarray], count: int, model: Model
    ) -> list[ItemFacts]:
        out = []
        for rows, cols in table_rows(tensors, "aspect_ratios", count, 2):
            if rows < 1 or cols < 1 or rows * cols > _vision(model).max_patches:
                raise ContractError(
                    f"row {[rows, cols]} is not a tile grid of at most "
                    f"{_vision(model).max_patches} tiles",
                    "aspect_ratios",
                )
            tiles = patches_per_image((rows, cols))
            out.append(
                ItemFacts(
                    kind,
                    tiles * _vision(model).patches_per_tile,
                    extra={"aspect_ratio": (rows, cols)},
                    rows=tiles,
                )
            )
        return out

    def expected_pixels(
        self, kind: MediaKind, items: Sequence[ItemFacts], model: Model
    ) -> tuple[int | str, ...]:
        side = _vision(model).image_size
        return (sum(int(it.rows or 0) for it in items), 3, side, side)

    def item_tiles(
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts]
    ) -> list[np.ndarray]:
        bounds = np.cumsum([0, *[int(it.rows or 0) for it in items]])
        return [pixels[a:b] for a, b in itertools.pairwise(bounds.tolist())]

    def whole_image(self, tiles: np.ndarray, item: ItemFacts) -> np.ndarray:
        return tiles[-1]  # the global tile (the only one for a one-tile image)


SPEC = Llama4()


def _vision(model: Model) -> Vision:
    vision = model.params
    assert isinstance(vision, Vision), "this family resolves its own Vision"
    return vision
