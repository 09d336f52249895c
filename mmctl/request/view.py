"""Reading ``GenerateRequest`` messages back: files, batches, readable summaries.

Summaries never dump tensor payloads: shape, dtype, bytes, where the bytes
live (inline / shm name) and a sha256 of inline bytes.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from mmctl import modality
from mmctl.choices import LayoutKind
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.request.tensors import from_bytes
from mmctl.values.layout import Layout, Span

if TYPE_CHECKING:
    from mmctl.models.model import Model
    from mmctl.values.items import ItemFacts
    from mmctl.wire._gen.vllm_engine_pb2 import GenerateRequest, MultimodalInputs, TensorData


def read_request(path: str | os.PathLike[str]) -> GenerateRequest:
    """The ``GenerateRequest`` in a file (as ``mmctl build`` writes it)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}") from None
    return parse_request(data, str(path))


def parse_request(data: bytes, label: str) -> GenerateRequest:
    """A ``GenerateRequest`` from its binary protobuf (``label`` names it in errors)."""
    from google.protobuf.message import DecodeError

    from mmctl.wire import proto

    req = proto.engine_pb2.GenerateRequest()
    try:
        req.ParseFromString(data)
    except DecodeError as err:
        raise InputError(f"{label} is not a GenerateRequest (binary protobuf): {err}") from None
    if req.WhichOneof("input") != "tokenized":
        raise InputError(f"{label}: the request carries no tokenized input")
    return req


def write_request(req: GenerateRequest, path: str | os.PathLike[str]) -> int:
    """Write ``req`` to exactly ``path``, atomically; returns the bytes written."""
    from mmctl.fileio import write_atomic

    data = req.SerializeToString()
    write_atomic(Path(path), lambda f: _write(f, data))
    return len(data)


def _write(file: BinaryIO, data: bytes) -> None:
    file.write(data)


def batches(req: GenerateRequest) -> list[MultimodalInputs]:
    """``mm_inputs`` then ``extra_mm_inputs``."""
    out = [req.mm_inputs] if req.HasField("mm_inputs") else []
    out.extend(req.extra_mm_inputs)
    return out


def tensor_fields(batch: MultimodalInputs) -> list[tuple[str, TensorData]]:
    """A batch's ``(key, TensorData)`` pairs: ``pixel_values`` first, then the
    model-specific tensors by name."""
    named = [("pixel_values", batch.pixel_values)] if batch.HasField("pixel_values") else []
    named.extend(sorted(batch.model_specific_tensors.items()))
    return named


def batch_kind(batch: MultimodalInputs, what: str = "a batch") -> MediaKind:
    """A recorded batch's kind; a modality mmctl does not handle is refused."""
    return modality.from_wire(batch.modality, what)


def tensor_summary(td: TensorData) -> dict[str, Any]:
    doc: dict[str, Any] = {"shape": list(td.shape), "dtype": td.dtype}
    where = td.WhichOneof("payload")
    if where == "inline":
        doc.update(
            transport="inline",
            bytes=len(td.inline),
            sha256=hashlib.sha256(td.inline).hexdigest(),
        )
    elif where == "shm":
        doc.update(transport="shm", bytes=td.shm.nbytes, shm_name=td.shm.name, offset=td.shm.offset)
    else:
        doc.update(transport=where or "none", bytes=0)
    return doc


def summary(req: GenerateRequest) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    from mmctl.wire import proto

    modality_names = {v: k for k, v in proto.common_pb2.Modality.items()}
    out_batches = []
    for batch in batches(req):
        tensors = {}
        for key, td in tensor_fields(batch):
            tensors[key] = tensor_summary(td)
            small = td.WhichOneof("payload") == "inline" and len(td.inline) <= 256
            if key != "pixel_values" and small:
                tensors[key]["values"] = from_bytes(td.inline, td.shape, td.dtype).tolist()
        out_batches.append(
            {
                "modality": modality_names.get(batch.modality, batch.modality),
                "im_token_id": batch.im_token_id if batch.HasField("im_token_id") else None,
                "mm_placeholders": [
                    {"offset": p.offset, "length": p.length} for p in batch.mm_placeholders
                ],
                "mm_hashes": list(batch.mm_hashes),
                "batched_keys": list(batch.batched_keys),
                "flat_keys": dict(batch.flat_keys),
                "keep_on_cpu_keys": list(batch.keep_on_cpu_keys),
                "encoder_input_key": batch.encoder_input_key
                if batch.HasField("encoder_input_key")
                else None,
                "tensors": tensors,
            }
        )
    return {
        "request_id": req.request_id,
        "stream": req.stream,
        "num_input_ids": len(req.tokenized.input_ids),
        "original_text": req.tokenized.original_text,
        "sampling_params": MessageToDict(req.sampling_params, preserving_proto_field_name=True),
        "batches": out_batches,
        "media_refs": [
            {
                "modality": modality_names.get(ref.modality, ref.modality),
                "url": ref.url
                if len(ref.url) <= 96
                else ref.url[:80] + f"… ({len(ref.url)} chars)",
            }
            for ref in req.media_refs.items
        ],
        "serialized_bytes": req.ByteSize(),
    }


def shaped_tensors(batch: MultimodalInputs, kind: MediaKind) -> dict[str, np.ndarray]:
    """A batch's tensors under the names the worker registers them (``pixel_values``
    renamed for video): inline ones as views of their bytes, others (shm) as
    zero-strided stand-ins of their shape — what reading a layout back needs."""
    out: dict[str, np.ndarray] = {}
    for key, td in tensor_fields(batch):
        name = modality.pixel_key(kind) if key == "pixel_values" else key
        if td.WhichOneof("payload") == "inline":
            out[name] = from_bytes(td.inline, td.shape, td.dtype)
        else:
            out[name] = np.broadcast_to(np.zeros((), dtype=np.uint8), tuple(td.shape))
    return out


def families_of(batch: MultimodalInputs, kind: MediaKind) -> list[str]:
    """The families whose requests carry exactly this batch's tensors (by their
    field tables): who a request file was built for, read from the file."""
    from mmctl.models import registry

    keys = {key for key, _ in tensor_fields(batch)}
    return [
        f.name
        for f in registry.FAMILIES
        if kind in f.modalities and {w.key for w in f.wire.fields(kind)} == keys
    ]


def _another_family(batch: MultimodalInputs, kind: MediaKind, model: Model) -> str:
    """The hint for a batch the model's family cannot read: most often a request
    file built for another model's worker."""
    built = families_of(batch, kind)
    whose = (
        f"it carries the tensors of a {' or '.join(built)} request"
        if built
        else "was it built for another model?"
    )
    return (
        f"{whose}; it is read as {model.spec.name}'s here: build the request for this "
        "model (mmctl build MEDIA -o FILE -t TARGET)"
    )


def layout_of(req: GenerateRequest, model: Model) -> tuple[Layout, list[ItemFacts]]:
    """The request's token layout (spans in prompt order) and each span's item,
    read back by the served family from the batch's tensors."""
    from mmctl.values.received import ContractError, Received

    spans: list[tuple[int, int, ItemFacts]] = []
    for n, batch in enumerate(batches(req)):
        label = "mm_inputs" if n == 0 else f"extra_mm_inputs[{n - 1}]"
        kind = batch_kind(batch, label)
        count = len(batch.mm_placeholders)
        try:
            received = Received(kind, shaped_tensors(batch, kind), count)
            items = model.spec.contract.received_items(received, model)
        except ContractError as err:
            raise InputError(
                err.about(label, kind), hint=_another_family(batch, kind, model)
            ) from None
        for p, item in zip(batch.mm_placeholders, items, strict=True):
            spans.append((p.offset, p.length, item))
    spans.sort(key=lambda s: s[0])
    layout = Layout(
        kind=LayoutKind.VLLM,
        ids=np.asarray(req.tokenized.input_ids, dtype=np.int64),
        spans=tuple(Span(n, it.kind, off, length) for n, (off, length, it) in enumerate(spans)),
    )
    return layout, [s[2] for s in spans]
