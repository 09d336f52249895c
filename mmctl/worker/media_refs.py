"""Worker-side processing: ``media_refs`` requests run through mmctl's own pipeline.

The request's ``tokenized`` input holds one *unexpanded* placeholder triple
per item; each ``MediaRef`` names the media by a ``data:`` URL or, when the
worker was started with ``--allowed-local-media-path DIR``, a ``file://``
URL under that folder. The stub preprocesses them as a real worker's
processor would and builds the same batches a client would have sent.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from mmctl import modality
from mmctl.choices import LayoutKind, PixelFormat
from mmctl.errors import MmctlError
from mmctl.media.probe import MediaKind, suffix_for
from mmctl.models.model import Model
from mmctl.models.registry import refuse_kind
from mmctl.request.build import MediaItem, make_batches
from mmctl.request.hashing import item_hash
from mmctl.request.limits import check_item_limits
from mmctl.values.items import DEFAULT_OPTIONS
from mmctl.worker.checks import Rejected

if TYPE_CHECKING:
    from mmctl.request.build import Batch
    from mmctl.values.layout import Layout
    from mmctl.wire._gen.vllm_engine_pb2 import GenerateRequest

MAX_DATA_URL_BYTES = 512 * 2**20


def schemes(allowed_dir: Path | None) -> list[str]:
    return ["data", "file"] if allowed_dir else ["data"]


def resolve(url: str, kind: MediaKind, workdir: Path, allowed_dir: Path | None, n: int) -> Path:
    parsed = urlparse(url)
    if parsed.scheme == "data":
        header, sep, body = url[5:].partition(",")
        if not sep or ";base64" not in header:
            raise Rejected(f"media_refs[{n}]: only base64 data: URLs are supported")
        mime = header.split(";")[0].lower()
        if len(body) > MAX_DATA_URL_BYTES * 4 // 3:
            raise Rejected(f"media_refs[{n}]: data: URL larger than {MAX_DATA_URL_BYTES} bytes")
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise Rejected(f"media_refs[{n}]: data: URL is not valid base64") from None
        path = workdir / f"item{n}{suffix_for(mime, kind)}"
        path.write_bytes(data)
        return path
    if parsed.scheme == "file":
        if allowed_dir is None:
            raise Rejected(
                f"media_refs[{n}]: file:// URLs need the worker started with --allowed-local-media-path"
            )
        if parsed.netloc not in ("", "localhost"):
            raise Rejected(
                f"media_refs[{n}]: file://{parsed.netloc}/…: a file:// URL names this host "
                "(file:///path or file://localhost/path)"
            )
        path = Path(unquote(parsed.path))
        real = Path(os.path.realpath(path))
        root = Path(os.path.realpath(allowed_dir))
        if root not in real.parents:
            raise Rejected(f"media_refs[{n}]: {path} is outside the allowed folder {allowed_dir}")
        return real
    raise Rejected(
        f"media_refs[{n}]: URL scheme {parsed.scheme or '(none)'!r} is not accepted here"
    )


def process(
    req: GenerateRequest,
    model: Model,
    device_normalize: bool,
    allowed_dir: Path | None,
    item_limits: dict[str, int] | None = None,
) -> tuple[Layout, list[Batch]]:
    """(expanded input ids, batches) for a media_refs request. The item limits
    are checked from the refs' modalities before anything is decoded: a
    request over them costs nothing."""
    fmt = PixelFormat.UINT8 if device_normalize else PixelFormat.FLOAT32
    kinds = []
    if not req.media_refs.items:
        raise Rejected("media_refs is set but carries no items")
    for n, ref in enumerate(req.media_refs.items):
        # As the servicer's parse_media_refs: a reference names its modality
        # (UNSPECIFIED is refused there, unlike in a tensor batch).
        kind = modality.ref_from_wire(ref.modality)
        if kind is None:
            name = modality.WIRE_NAMES.get(ref.modality, str(ref.modality))
            raise Rejected(f"media_refs[{n}]: unsupported modality {name}")
        kinds.append(kind)
    if item_limits:
        try:
            check_item_limits([k.value for k in kinds], item_limits, "this worker")
        except MmctlError as err:
            raise Rejected(f"media_refs: {err.message}") from None
    items: list[MediaItem] = []
    with tempfile.TemporaryDirectory(prefix="mmctl-stub-") as tmp:
        for n, (ref, kind) in enumerate(zip(req.media_refs.items, kinds, strict=True)):
            path = resolve(ref.url, kind, Path(tmp), allowed_dir, n)
            try:
                refuse_kind(model.spec, kind)
                pre = model.spec.processor.preprocess(
                    path, kind, model.params, fmt, DEFAULT_OPTIONS
                )
            except MmctlError as err:
                raise Rejected(f"media_refs[{n}]: {err.message}") from None
            items.append(MediaItem(ref.url[:64], pre, item_hash(pre, path)))
    try:
        layout = model.spec.prompt.expand(
            list(req.tokenized.input_ids), [it.pre.facts for it in items], model, LayoutKind.VLLM
        )
    except MmctlError as err:
        raise Rejected(f"media_refs: {err.message}") from None
    return layout, make_batches(items, layout, model)
