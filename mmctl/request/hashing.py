"""One content hash per media item: the worker's encoder-cache key (``mm_hashes``).

It covers the media file's bytes *and* every parameter that shapes the
encoder's input (family, sampled frames, resized size, grid, normalization
constants, and the pixel type: raw uint8 that the worker normalizes, or
normalized floats of one dtype), so re-sampling the same clip at another fps
or budget, or sending it as another pixel type, never hits a cache entry
computed from other input. vLLM keys its encoder cache on this hash: one
float32 request must not poison the entry a later uint8 request reads.
sha256 because it is the fastest hashlib digest on CPUs with SHA extensions
(~1.5 GB/s here, twice blake2b); the file is read in 1 MiB chunks, never
whole, and once: the hash covers the file's own digest (:func:`file_digest`),
which is also the pixel cache's key (:mod:`mmctl.request.pixel_cache`), so
an item made again or taken from the cache carries the same hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mmctl.errors import InputError
from mmctl.values.items import Preprocessed

VERSION = b"mmctl-mm-hash-v3\0"
CHUNK = 1 << 20


def pixel_facts(pre: Preprocessed) -> dict[str, Any]:
    """Everything besides the media bytes that decides the pixel values."""
    p = pre.params
    if pre.grid_thw is None:  # the families without a patch grid: all their settings
        return {
            "family": pre.family,
            "kind": pre.kind.value,
            "frames": [int(i) for i in pre.frame_indices],
            "shape": list(pre.pixel_values.shape),
            "settings": _jsonable(asdict(p)),
            "pixels": pre.pixel_format.value,
        }
    return {
        "family": pre.family,
        "kind": pre.kind.value,
        "frames": [int(i) for i in pre.frame_indices],
        "resized": list(pre.resized),
        "grid_thw": list(pre.grid_thw),
        "patch": [p.patch_size, p.temporal_patch_size, p.merge_size],
        "mean": list(p.image_mean),
        "std": list(p.image_std),
        "rescale": p.rescale_factor,
        "pixels": pre.pixel_format.value,  # uint8 raw, or the normalized floats' dtype
    }


def file_digest(media: Path | bytes) -> str:
    """sha256 of a medium's bytes (a file, read in chunks; or the bytes).

    Only a regular file is read: ``/dev/zero`` never ends and a FIFO with no
    writer never opens (hence ``O_NONBLOCK``), and a digest may be asked for
    before the file's own check (the pixel cache's key)."""
    if isinstance(media, bytes | bytearray | memoryview):
        return hashlib.sha256(media).hexdigest()
    digest = hashlib.sha256()
    fd = os.open(media, os.O_RDONLY | os.O_NONBLOCK)
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{media} is not a regular file")
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def content_hash(media: Path | bytes | str, facts: dict[str, Any]) -> str:
    """The hash of a medium (its bytes, or their :func:`file_digest` as ``str``)
    and the facts that shaped its pixels."""
    digest = media if isinstance(media, str) else file_digest(media)
    head = hashlib.sha256(VERSION)
    head.update(json.dumps(facts, sort_keys=True, separators=(",", ":")).encode())
    head.update(b"\0" + digest.encode())
    return head.hexdigest()


def item_hash(pre: Preprocessed, media: Path | bytes | str) -> str:
    """``media``: the file, its bytes, or their :func:`file_digest` already taken."""
    return content_hash(media, pixel_facts(pre))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
