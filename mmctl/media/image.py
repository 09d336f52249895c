"""Load an image with Pillow into an RGB uint8 array.

EXIF orientation is applied. Modes are brought to RGB the way vLLM 0.33
loads images (``vllm/multimodal/image.py`` ``convert_image_mode``): anything
with transparency (RGBA, LA, a palette with a transparent index, and an RGB
or L PNG with a tRNS colour, which HF's ``convert_to_rgb`` would leave as it
is) is composited onto white — except 16-bit grayscale, which is scaled to 8
bits instead of clipped. Pillow's decompression-bomb guard stays on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mmctl.errors import InputError

if TYPE_CHECKING:
    from PIL import Image


@dataclass(frozen=True)
class ImageInfo:
    path: str
    format: str
    mode: str  # as stored, before conversion
    width: int  # after EXIF orientation
    height: int
    exif_transposed: bool


def check_image(path: Path) -> None:
    """Open the file's header only: a typed error when Pillow cannot read it."""
    from PIL import Image

    with _pillow_errors(path), Image.open(path):
        pass


def load_image(path: Path) -> tuple[ImageInfo, np.ndarray]:
    from PIL import Image, ImageOps

    with _pillow_errors(path), Image.open(path) as opened:
        fmt, mode = opened.format or "?", opened.mode
        opened.load()
        oriented = ImageOps.exif_transpose(opened)
        transposed = _has_orientation(opened)
        rgb = _to_rgb(oriented)
    array = np.asarray(rgb)
    info = ImageInfo(
        path=str(path),
        format=fmt,
        mode=mode,
        width=array.shape[1],
        height=array.shape[0],
        exif_transposed=transposed,
    )
    return info, array


@contextmanager
def _pillow_errors(path: Path) -> Iterator[None]:
    """Pillow's failures as one-line input errors."""
    from PIL import Image, UnidentifiedImageError

    try:
        yield
    except Image.DecompressionBombError as err:
        raise InputError(
            f"{path}: {err}", hint="Pillow's decompression-bomb guard refused it"
        ) from None
    except UnidentifiedImageError:
        raise InputError(f"cannot decode {path}: not an image Pillow can read") from None
    except (OSError, SyntaxError, ValueError) as err:
        raise InputError(f"cannot decode {path}: {err}") from None


def _has_orientation(image: Image.Image) -> bool:
    try:
        return image.getexif().get(0x0112, 1) not in (1, None)
    except Exception:
        return False


def _to_rgb(image: Image.Image) -> Image.Image:
    from PIL import Image

    # vLLM 0.33's convert_image_mode looks for transparency before anything else:
    # an RGB or L PNG with a tRNS chunk is composited onto white too.
    if image.mode in ("RGB", "L", "P") and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode == "RGB":
        return image
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        wide = np.asarray(image, dtype=np.uint32 if image.mode == "I" else np.uint16)
        shift = 8 if image.mode != "I" else 24
        gray = np.right_shift(wide, shift) if wide.max() > 255 else wide
        gray = gray.astype(np.uint8)
        return Image.fromarray(np.repeat(gray[..., None], 3, axis=2))
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")
