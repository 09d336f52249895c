"""Tell a video from an image before decoding, and fail early on bad paths."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path

from mmctl.errors import InputError

IMAGE_SUFFIXES = frozenset(
    [
        ".jpg",
        ".jpeg",
        ".png",
        ".webp",
        ".bmp",
        ".tif",
        ".tiff",
        ".ppm",
        ".pgm",
        ".pbm",
        ".jfif",
        ".heic",
        ".avif",
    ]
)


class MediaKind(Enum):
    IMAGE = "image"
    VIDEO = "video"


def check_readable(path: Path) -> int:
    """Size in bytes of a regular, readable, non-empty file; typed error otherwise."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}") from None
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a media file")
    if not path.is_file():
        raise InputError(f"{path} is not a regular file")
    if st.st_size == 0:
        raise InputError(f"{path} is empty (0 bytes)")
    if not os.access(path, os.R_OK):
        raise InputError(f"cannot read {path}: permission denied")
    return st.st_size


def media_kind(path: Path) -> MediaKind:
    """Image or video, from the file's suffix and, failing that, its first bytes.

    Animated GIFs are videos (each frame is a frame); ``--as-image`` style
    overrides belong to the caller.
    """
    suffix = path.suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        return MediaKind.IMAGE
    if suffix == ".gif":
        return MediaKind.VIDEO
    with path.open("rb") as f:
        head = f.read(16)
    if head.startswith((b"\x89PNG", b"\xff\xd8\xff", b"BM")) or head[8:12] == b"WEBP":
        return MediaKind.IMAGE
    return MediaKind.VIDEO


def check_media(path: Path) -> MediaKind:
    """A readable file whose header its decoder accepts (cheap: no frame is
    decoded); its kind. Run before any worker is contacted, so a bad file is
    reported as a bad file whatever the network does."""
    check_readable(path)
    kind = media_kind(path)
    if kind is MediaKind.IMAGE:
        from mmctl.media.image import check_image

        check_image(path)
    else:
        from mmctl.media.video import check_video

        check_video(path)
    return kind
