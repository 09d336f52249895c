"""Tell a video from an image or a sound before decoding, and fail early on bad paths."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path

from mmctl.errors import InputError


class MediaKind(Enum):
    IMAGE = "image"
    VIDEO = "video"
    AUDIO = "audio"


#: The kinds a family's pixels carry (sound is the worker's: mmctl.media.audio).
PIXEL_KINDS = (MediaKind.IMAGE, MediaKind.VIDEO)


#: The one media-type table: file suffix → (kind, MIME type). Data URLs are
#: written with these types and read back to a suffix with the same table.
MEDIA_TYPES: dict[str, tuple[MediaKind, str]] = {
    ".mp4": (MediaKind.VIDEO, "video/mp4"),
    ".m4v": (MediaKind.VIDEO, "video/x-m4v"),
    ".webm": (MediaKind.VIDEO, "video/webm"),
    ".mkv": (MediaKind.VIDEO, "video/x-matroska"),
    ".mov": (MediaKind.VIDEO, "video/quicktime"),
    ".avi": (MediaKind.VIDEO, "video/x-msvideo"),
    ".ts": (MediaKind.VIDEO, "video/mp2t"),
    ".gif": (MediaKind.VIDEO, "image/gif"),  # animated: each frame is a frame
    ".jpg": (MediaKind.IMAGE, "image/jpeg"),
    ".jpeg": (MediaKind.IMAGE, "image/jpeg"),
    ".jfif": (MediaKind.IMAGE, "image/jpeg"),
    ".png": (MediaKind.IMAGE, "image/png"),
    ".webp": (MediaKind.IMAGE, "image/webp"),
    ".bmp": (MediaKind.IMAGE, "image/bmp"),
    ".tif": (MediaKind.IMAGE, "image/tiff"),
    ".tiff": (MediaKind.IMAGE, "image/tiff"),
    ".ppm": (MediaKind.IMAGE, "image/x-portable-pixmap"),
    ".pgm": (MediaKind.IMAGE, "image/x-portable-graymap"),
    ".pbm": (MediaKind.IMAGE, "image/x-portable-bitmap"),
    ".heic": (MediaKind.IMAGE, "image/heic"),
    ".avif": (MediaKind.IMAGE, "image/avif"),
    # Sound travels only as media_refs: the worker decodes it (mmctl.media.audio).
    ".wav": (MediaKind.AUDIO, "audio/wav"),
    ".flac": (MediaKind.AUDIO, "audio/flac"),
    ".mp3": (MediaKind.AUDIO, "audio/mpeg"),
    ".ogg": (MediaKind.AUDIO, "audio/ogg"),
    ".oga": (MediaKind.AUDIO, "audio/ogg"),
    ".opus": (MediaKind.AUDIO, "audio/ogg"),
    ".m4a": (MediaKind.AUDIO, "audio/mp4"),
    ".aac": (MediaKind.AUDIO, "audio/aac"),
}
#: Each kind's suffix where a MIME type is not in the table.
DEFAULT_SUFFIX = {MediaKind.IMAGE: ".png", MediaKind.VIDEO: ".mp4", MediaKind.AUDIO: ".wav"}


def dimensions(width: int, height: int) -> str:
    """A picture's size as PIL and ffprobe write it, width first: ``97x61``."""
    return f"{width}x{height}"


def media_type(path: Path) -> str:
    """The MIME type of a media file, from its suffix."""
    entry = MEDIA_TYPES.get(path.suffix.lower())
    return entry[1] if entry else "application/octet-stream"


def suffix_for(mime: str, kind: MediaKind) -> str:
    """A file suffix for a MIME type (the first in the table), else the kind's usual one."""
    for suffix, (_, known) in MEDIA_TYPES.items():
        if known == mime:
            return suffix
    return DEFAULT_SUFFIX[kind]


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
    """Image, video or sound, from the file's suffix and, failing that, its first bytes.

    Animated GIFs are videos (each frame is a frame); ``--as-image`` style
    overrides belong to the caller.
    """
    entry = MEDIA_TYPES.get(path.suffix.lower())
    if entry is not None:
        return entry[0]
    with path.open("rb") as f:
        head = f.read(16)
    if head.startswith((b"\x89PNG", b"\xff\xd8\xff", b"BM")) or head[8:12] == b"WEBP":
        return MediaKind.IMAGE
    if (head[:4] == b"RIFF" and head[8:12] == b"WAVE") or head.startswith((b"fLaC", b"ID3")):
        return MediaKind.AUDIO
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
    elif kind is MediaKind.AUDIO:
        from mmctl.media.audio import check_audio

        check_audio(path)
    else:
        from mmctl.media.video import check_video

        check_video(path)
    return kind
