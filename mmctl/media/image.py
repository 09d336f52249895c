"""Load an image with Pillow into an RGB uint8 array.

EXIF orientation is applied. Modes are brought to RGB the way vLLM 0.33
loads images (``vllm/multimodal/image.py`` ``convert_image_mode``): anything
with transparency (RGBA, LA, a palette with a transparent index, and an RGB
or L PNG with a tRNS colour, which HF's ``convert_to_rgb`` would leave as it
is) is composited onto white; every other mode goes through Pillow's
``convert("RGB")`` as there, so 16-bit grayscale (``I;16``) is clipped at
255, not scaled to 8 bits. Pillow's decompression-bomb guard stays on.
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
    """vLLM 0.33's ``convert_image_mode(image, "RGB")``, step for step."""
    from PIL import Image

    # Transparency first, whatever the mode: an RGB or L PNG with a tRNS chunk
    # is composited onto white too (HF's convert_to_rgb would leave it as it is).
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if image.mode == "RGB":
        return image
    # Pillow's own conversion, as vLLM's: 16-bit grayscale is clipped at 255.
    return image.convert("RGB")
