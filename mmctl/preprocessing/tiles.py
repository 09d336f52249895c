"""The pixel steps the LLaVA families share, bit for bit as transformers 5.20's
torchvision ("fast") processors run them on CPU.

Every geometric step works on ``[H, W, 3]`` uint8 frames, because HF runs
them on uint8 tensors: the bicubic resize is torchvision's native uint8
antialiased kernel on CPU (``torchvision.transforms.v2.functional.resize_image``:
``_do_native_uint8_resize_on_cpu`` is true for BICUBIC, so there is no float
round trip; :func:`mmctl.preprocessing.resize.resize_rgb` is that kernel), and
the anyres padding and the centre crop's padding are ``tvF.pad`` on uint8 with
fill 0, *before* rescale/normalise (so a padded pixel becomes ``-mean/std``,
not 0). Only :func:`rescale_normalize` makes floats, and only
:func:`pad_patch_axis` pads floats (with true zeros).

Upstream, each function mirrors (transformers 5.20.2 unless said otherwise):

- :func:`rescale_normalize` — ``TorchvisionBackend.rescale_and_normalize`` and
  ``_fuse_mean_std_and_rescale_factor`` (``image_processing_backends.py``).
- :class:`Size`, :func:`Size.target` — ``SizeDict`` and the ``resize`` size
  branches of ``TorchvisionBackend``; :func:`shortest_edge_size` —
  ``image_transforms.get_resize_output_image_size`` (``default_to_square=False``).
- :func:`center_crop` — ``TorchvisionBackend.center_crop``.
- :func:`pad_to_square` — ``LlavaImageProcessor.pad_to_square``.
- :func:`select_best_resolution`, :func:`patch_output_size` —
  ``image_processing_utils`` functions of those names (vLLM's token counts
  call the same ``select_best_resolution`` through
  ``modeling_llava_next.get_anyres_image_grid_shape``).
- :func:`pad_for_patching` — ``LlavaNextImageProcessor._pad_for_patching`` /
  ``_get_padding_size`` (the OneVision processor's are identical).
- :func:`divide_to_patches` — ``image_transforms.divide_to_patches`` (row-major).
- :func:`anyres_tiles` — ``LlavaNextImageProcessor._get_image_patches``.
- :func:`pad_patch_axis` — ``LlavaNextImageProcessor._pad_for_batching``.
- :func:`anyres_grid_shape`, :func:`unpadded_grid` — vLLM 0.33
  ``llava_next.py`` (``get_anyres_image_grid_shape`` with
  ``patch_size=vision_config.image_size``, ``_get_num_unpadded_features``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import dimensions
from mmctl.preprocessing.resize import resize_rgb


@dataclass(frozen=True)
class Size:
    """HF's ``size`` dict (``SizeDict``): a shortest edge, or a fixed height and width."""

    shortest_edge: int | None = None
    height: int | None = None
    width: int | None = None

    def target(self, height: int, width: int) -> tuple[int, int]:
        """The (h, w) HF's torchvision ``resize`` computes for this size."""
        if self.shortest_edge:
            return shortest_edge_size(height, width, self.shortest_edge)
        if self.height and self.width:
            return self.height, self.width
        raise InputError(
            f"image size setting {self} has neither shortest_edge nor height and width"
        )


def check_rgb(frame: np.ndarray) -> None:
    """A typed error unless ``frame`` is a non-empty ``[H, W, 3]`` uint8 image."""
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
        raise InputError(f"expected an [H, W, 3] uint8 image, got {frame.dtype} {frame.shape}")
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise InputError(f"image has no pixels: {dimensions(frame.shape[1], frame.shape[0])}")


def config_id(config: Mapping[str, Any], key: str, alias: str, default: int) -> int:
    """A token id of ``config.json``, under its name or its ``attribute_map`` alias
    (``image_token_id`` → ``image_token_index``), else the config class's default."""
    value = config.get(key, config.get(alias))
    return default if value is None else int(value)


def shortest_edge_size(height: int, width: int, shortest_edge: int) -> tuple[int, int]:
    """Short side to ``shortest_edge``, long side ``int(shortest_edge * long / short)``
    (truncated, in Python float arithmetic, as HF does)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shortest_edge, int(shortest_edge * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def resize(frame: np.ndarray, size: Size) -> np.ndarray:
    """Bicubic (uint8, antialiased) resize of ``[H, W, 3]`` to ``size``'s target."""
    height, width = size.target(frame.shape[0], frame.shape[1])
    return resize_rgb(frame, height, width)


def center_crop(frame: np.ndarray, crop_height: int, crop_width: int) -> np.ndarray:
    """Centre crop of ``[H, W, C]``; a crop larger than the frame first pads it with 0
    (left/top get the floor of half the excess, right/bottom the rest), as HF's
    torchvision ``center_crop``; offsets are ``int((size - crop) / 2.0)``."""
    height, width = frame.shape[:2]
    if crop_width > width or crop_height > height:
        pad_w = max(crop_width - width, 0)
        pad_h = max(crop_height - height, 0)
        frame = np.pad(
            frame,
            ((pad_h // 2, (pad_h + 1) // 2), (pad_w // 2, (pad_w + 1) // 2), (0, 0)),
        )
        height, width = frame.shape[:2]
        if (height, width) == (crop_height, crop_width):
            return frame
    top = int((height - crop_height) / 2.0)
    left = int((width - crop_width) / 2.0)
    return frame[top : top + crop_height, left : left + crop_width]


def pad_to_square(frame: np.ndarray, fill: Sequence[int]) -> np.ndarray:
    """Pad ``[H, W, 3]`` to a square of its long side, centred (the odd pixel right/bottom),
    each channel with its ``fill`` value."""
    height, width = frame.shape[:2]
    if height == width:
        return frame
    side = max(height, width)
    top, left = (side - height) // 2, (side - width) // 2
    out = np.empty((side, side, frame.shape[2]), dtype=frame.dtype)
    out[...] = np.asarray(fill, dtype=frame.dtype)
    out[top : top + height, left : left + width] = frame
    return out


def rescale_normalize(
    frames: np.ndarray,
    *,
    do_rescale: bool,
    rescale_factor: float,
    do_normalize: bool,
    mean: Sequence[float],
    std: Sequence[float],
) -> np.ndarray:
    """``[..., H, W, 3]`` uint8 → ``[..., 3, H, W]`` float32, in HF's float order.

    Both on (the LLaVA configs): HF fuses the rescale into mean and std —
    ``float32(mean) * float32(1 / rescale_factor)`` — then ``(x - mean) / std``
    in float32. Rescale only: ``x * float32(rescale_factor)``. Normalise only:
    ``(x - mean) / std`` with the unscaled mean/std. Neither: the values as
    float32 (HF would hand back the uint8 tensor).
    """
    chw = np.ascontiguousarray(np.moveaxis(frames, -1, -3), dtype=np.float32)
    shape = (3, 1, 1)
    if do_rescale and do_normalize:
        scale = np.float32(1.0 / rescale_factor)
        m = np.asarray(mean, dtype=np.float32) * scale
        s = np.asarray(std, dtype=np.float32) * scale
        chw -= m.reshape(shape)
        chw /= s.reshape(shape)
    elif do_normalize:
        chw -= np.asarray(mean, dtype=np.float32).reshape(shape)
        chw /= np.asarray(std, dtype=np.float32).reshape(shape)
    elif do_rescale:
        chw *= np.float32(rescale_factor)
    return chw


class PixelSteps(Protocol):
    """A processor's rescale and normalize settings (a family's settings class)."""

    @property
    def do_rescale(self) -> bool: ...
    @property
    def rescale_factor(self) -> float: ...
    @property
    def do_normalize(self) -> bool: ...
    @property
    def image_mean(self) -> tuple[float, float, float]: ...
    @property
    def image_std(self) -> tuple[float, float, float]: ...


def normalized(frames: np.ndarray, steps: PixelSteps) -> np.ndarray:
    """:func:`rescale_normalize` as ``steps`` say."""
    return rescale_normalize(
        frames,
        do_rescale=steps.do_rescale,
        rescale_factor=steps.rescale_factor,
        do_normalize=steps.do_normalize,
        mean=steps.image_mean,
        std=steps.image_std,
    )


def select_best_resolution(
    height: int, width: int, possible: Sequence[Sequence[int]]
) -> tuple[int, int]:
    """The (h, w) of ``possible`` that keeps the most of the image's resolution
    after a fit-inside downscale (int-truncated), ties to the least wasted area;
    the first such one in list order."""
    best: tuple[int, int] | None = None
    max_effective, min_wasted = 0, math.inf
    for target_h, target_w in possible:
        scale = min(target_w / width, target_h / height)
        down_w, down_h = int(width * scale), int(height * scale)
        effective = min(down_w * down_h, width * height)
        wasted = target_w * target_h - effective
        if effective > max_effective or (effective == max_effective and wasted < min_wasted):
            max_effective, min_wasted = effective, wasted
            best = (int(target_h), int(target_w))
    if best is None:
        raise InputError(
            f"no grid pinpoint fits a {dimensions(width, height)} image: {list(possible)}"
        )
    return best


def patch_output_size(height: int, width: int, target: tuple[int, int]) -> tuple[int, int]:
    """(h, w) the image is resized to inside ``target`` keeping its aspect: the
    tighter side exactly, the other ``ceil``-ed and capped."""
    target_h, target_w = target
    scale_w, scale_h = target_w / width, target_h / height
    if scale_w < scale_h:
        return min(math.ceil(height * scale_w), target_h), target_w
    return target_h, min(math.ceil(width * scale_h), target_w)


def pad_for_patching(frame: np.ndarray, target: tuple[int, int]) -> np.ndarray:
    """Pad the resized ``[h, w, 3]`` uint8 frame to ``target`` with 0, centred
    (left/top ``floor(excess / 2)``, right/bottom the rest)."""
    # HF recomputes the inner size from the resized frame; it is the frame's own size.
    inner_h, inner_w = patch_output_size(frame.shape[0], frame.shape[1], target)
    paste_x, r_x = divmod(target[1] - inner_w, 2)
    paste_y, r_y = divmod(target[0] - inner_h, 2)
    return np.pad(frame, ((paste_y, paste_y + r_y), (paste_x, paste_x + r_x), (0, 0)))


def divide_to_patches(frame: np.ndarray, patch: int) -> list[np.ndarray]:
    """``patch``-square tiles of ``[H, W, C]``, row by row, left to right."""
    height, width = frame.shape[:2]
    return [
        frame[i : i + patch, j : j + patch]
        for i in range(0, height, patch)
        for j in range(0, width, patch)
    ]


def anyres_tiles(
    frame: np.ndarray,
    pinpoints: Sequence[Sequence[int]],
    base: tuple[int, int],
    patch: int,
) -> list[np.ndarray]:
    """The whole image resized to ``base`` first, then the tiles of the image
    resized into its best pinpoint and padded there (all uint8 ``[h, w, 3]``)."""
    height, width = frame.shape[:2]
    best = select_best_resolution(height, width, pinpoints)
    inner = resize_rgb(frame, *patch_output_size(height, width, best))
    tiles = divide_to_patches(pad_for_patching(inner, best), patch)
    return [resize_rgb(frame, *base), *tiles]


def pad_patch_axis(items: Sequence[np.ndarray]) -> np.ndarray:
    """Stack ``[n_i, C, H, W]`` items (float32, or a wire format) into ``[len, max n_i, C, H, W]``,
    the missing patches zeros."""
    if not items:
        raise InputError("no images to batch")
    most = max(item.shape[0] for item in items)
    # The items' own dtype: zero is zero in float32, float16 and bfloat16 bits alike.
    out = np.zeros((len(items), most, *items[0].shape[1:]), dtype=items[0].dtype)
    for row, item in zip(out, items, strict=True):
        row[: item.shape[0]] = item
    return out


def anyres_grid_shape(
    height: int, width: int, pinpoints: Sequence[Sequence[int]], tile: int
) -> tuple[int, int]:
    """(rows, cols) of tiles of the best pinpoint for an image."""
    best_h, best_w = select_best_resolution(height, width, pinpoints)
    return best_h // tile, best_w // tile


def unpadded_grid(height: int, width: int, npatches: int, rows: int, cols: int) -> tuple[int, int]:
    """(current_height, current_width) in feature cells of the tile grid with the
    padding rows (or columns) the image does not cover removed, vLLM's arithmetic
    (``round(…, 7)`` then ``int``)."""
    current_h, current_w = npatches * rows, npatches * cols
    if width / height > current_w / current_h:
        new_h = int(round(height * (current_w / width), 7))
        current_h -= 2 * ((current_h - new_h) // 2)
    else:
        new_w = int(round(width * (current_h / height), 7))
        current_w -= 2 * ((current_w - new_w) // 2)
    return current_h, current_w


# --- reading the processor files (transformers' resolution rules) ---

#: PIL resampling id of bicubic, the only filter these functions implement.
BICUBIC = 3


def processor_settings(
    preprocessor_config: Mapping[str, Any] | None,
    processor_config: Mapping[str, Any],
    key: str = "image_processor",
) -> Mapping[str, Any]:
    """The dict HF builds the image (``key="video_processor"``: video) processor
    from: ``processor_config.json``'s nested ``key`` when it has one — the whole of
    it, not merged — else the legacy file's (``ImageProcessingMixin.get_image_processor_dict``)."""
    if key in processor_config:
        nested = processor_config[key]
        if not isinstance(nested, Mapping):
            raise InputError(f"processor_config.json: {key!r} is not an object")
        return nested
    if preprocessor_config is None:
        raise InputError(
            f"no {key} settings: neither processor_config.json nor a preprocessor file"
        )
    return preprocessor_config


def setting(settings: Mapping[str, Any], key: str, default: Any) -> Any:
    """``settings[key]``, the class default when absent or null (HF's ``_set_attributes``)."""
    value = settings.get(key)
    return default if value is None else value


def parse_size(value: Any, key: str = "size") -> Size:
    """HF's ``get_size_dict(default_to_square=False)``: an int is a shortest edge; a
    dict gives ``shortest_edge`` or ``height`` + ``width`` (other keys refused)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return Size(shortest_edge=value)
    if isinstance(value, Mapping):
        keys = {k for k, v in value.items() if v is not None}
        if keys == {"shortest_edge"}:
            return Size(shortest_edge=int(value["shortest_edge"]))
        if keys == {"height", "width"}:
            return Size(height=int(value["height"]), width=int(value["width"]))
    raise InputError(f"unsupported {key} setting {value!r}: expected shortest_edge or height+width")


def parse_crop(value: Any) -> tuple[int, int]:
    """``crop_size`` as (height, width): an int is a square."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, Mapping) and value.get("height") and value.get("width"):
        return int(value["height"]), int(value["width"])
    raise InputError(f"unsupported crop_size setting {value!r}: expected height and width")


def parse_floats(value: Any, key: str) -> tuple[float, float, float]:
    """``image_mean`` / ``image_std``: three floats (a single one is repeated)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), float(value), float(value)
    if isinstance(value, Sequence) and len(value) == 3:
        return float(value[0]), float(value[1]), float(value[2])
    raise InputError(f"unsupported {key} setting {value!r}: expected 3 numbers")


def parse_pinpoints(value: Any, key: str = "image_grid_pinpoints") -> tuple[tuple[int, int], ...]:
    """``image_grid_pinpoints``: (height, width) pairs."""
    if (
        isinstance(value, Sequence)
        and value
        and all(isinstance(p, Sequence) and len(p) == 2 for p in value)
    ):
        return tuple((int(p[0]), int(p[1])) for p in value)
    raise InputError(f"unsupported {key} setting {value!r}: expected [[height, width], …]")


def check_bicubic(resample: Any) -> int:
    """Only bicubic (PIL id 3) is implemented; anything else is refused, not approximated."""
    if resample != BICUBIC:
        raise InputError(
            f"resample={resample!r} is not supported: only bicubic ({BICUBIC}) is implemented"
        )
    return BICUBIC


def vision_geometry(config: Mapping[str, Any]) -> tuple[int, int, str]:
    """(image_size, patch_size, model_type) of ``config.json``'s ``vision_config``."""
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping):
        raise InputError("config.json has no vision_config")
    try:
        return int(vision["image_size"]), int(vision["patch_size"]), str(vision["model_type"])
    except KeyError as err:
        raise InputError(f"config.json vision_config has no {err.args[0]!r}") from None


def vision_tokens(image_size: int, patch_size: int, model_type: str, strategy: str) -> int:
    """Tokens of one vision-tower pass as vLLM selects them
    (``CLIPEncoderInfo``/``SiglipEncoderInfo.get_num_image_tokens``: CLIP adds a CLS
    token, SigLIP none; ``vision.get_num_selected_vision_tokens``)."""
    grid = image_size // patch_size
    if model_type == "clip_vision_model":
        tokens = grid * grid + 1
    elif model_type == "siglip_vision_model":
        tokens = grid * grid
    else:
        raise InputError(f"unsupported vision tower {model_type!r}: expected CLIP or SigLIP")
    if strategy == "default":
        return tokens - 1
    if strategy == "full":
        return tokens
    if strategy == "class":
        return 1
    raise InputError(f"unsupported vision_feature_select_strategy {strategy!r}")
