"""What the stub worker refuses, mirroring the real servicer and vLLM.

A request the stub accepts is one the real worker (smg-grpc-servicer 0.14.1
in front of vLLM 0.33) would accept; where the real one would crash deep in
the engine, the stub refuses up front and says what would have happened.
Every refusal is a :class:`Rejected` with one sentence naming the field and
the values; the server turns it into ``INVALID_ARGUMENT``.

Order matters and follows the servicer: tensors are decoded (and shm files
read and unlinked) first, then the batch structure, then the prompt.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.base import ModelSpec
from mmctl.models.fields import GRID, PIXELS, FieldLayout, WireField, by_value
from mmctl.models.model import Model
from mmctl.prompt.layout import Span
from mmctl.prompt.mrope import walk
from mmctl.request.tensors import LEGACY_DTYPES, WIRE_DTYPES, from_bytes
from mmctl.request.view import batches, tensor_fields
from mmctl.transport.shm import ShmReadError, read_handle
from mmctl.wire import proto

if TYPE_CHECKING:
    from mmctl.wire._gen.vllm_engine_pb2 import GenerateRequest, TensorData

ENGINE_FAIL = "the real worker would fail in the engine with"


def worker_key(key: str, kind: MediaKind) -> str:
    """The servicer's rename: VIDEO batches carry ``pixel_values_videos``."""
    return "pixel_values_videos" if kind is MediaKind.VIDEO and key == "pixel_values" else key


class Rejected(ValueError):
    """One refusal; the message is what the client sees."""


def normalizes_by_default(spec: ModelSpec) -> bool:
    """Whether ``vllm serve MODEL --grpc`` (0.33) normalizes the family's pixels
    on the device when not told otherwise: the stub's default, so that a file
    ``build`` wrote for a default worker replays on the default stub."""
    return spec.worker_pixels is PixelFormat.UINT8


@dataclass(frozen=True)
class Policy:
    """What this worker accepts (the capabilities it advertises)."""

    device_normalize: bool = False
    legacy_proto: bool = False
    item_limits: dict[str, int] = field(default_factory=lambda: {"image": 8, "video": 2})
    encoder_budget: int = 65536  # feature tokens one item may carry
    #: uids whose /dev/shm files this worker reads (default: its own).
    shm_owners: frozenset[int] = field(default_factory=lambda: frozenset({os.getuid()}))

    @property
    def dtypes(self) -> frozenset[str]:
        return LEGACY_DTYPES if self.legacy_proto else frozenset(WIRE_DTYPES)


@dataclass
class ReceivedBatch:
    """One ``MultimodalInputs`` as the worker sees it after decoding."""

    index: int  # 0 = mm_inputs, 1.. = extra_mm_inputs
    kind: MediaKind
    tensors: dict[str, np.ndarray]  # wire keys, pixel_values renamed for video
    dtypes: dict[str, str]
    transports: dict[str, str]
    placeholders: list[tuple[int, int]]
    im_token_id: int | None
    hashes: list[str]
    batched_keys: list[str]
    flat_keys: dict[str, str]
    keep_on_cpu_keys: list[str]
    #: The served model's field table for this batch's modality.
    fields: tuple[WireField, ...] = ()

    @property
    def label(self) -> str:
        return "mm_inputs" if self.index == 0 else f"extra_mm_inputs[{self.index - 1}]"

    @property
    def pixel_key(self) -> str:
        return worker_key("pixel_values", self.kind)

    def rename(self, key: str) -> str:
        return worker_key(key, self.kind)

    @property
    def grid_key(self) -> str:
        return by_value(self.fields, GRID).key

    def grids(self) -> list[tuple[int, int, int]]:
        grid = self.tensors[self.grid_key].reshape(-1, 3)
        return [(int(t), int(h), int(w)) for t, h, w in grid]


def _kind(modality: int, legacy: bool, label: str) -> MediaKind:
    if legacy:
        return MediaKind.IMAGE  # field 10 is unknown to such a worker: everything is an image
    common = proto.common_pb2
    if modality in (common.MODALITY_UNSPECIFIED, common.IMAGE):  # unspecified reads as image
        return MediaKind.IMAGE
    if modality == common.VIDEO:
        return MediaKind.VIDEO
    if modality == common.AUDIO:
        raise Rejected(f"{label}.modality AUDIO is not supported on the vLLM preprocessed path")
    raise Rejected(f"{label}.modality {modality} is not a known Modality value")


def _payload(
    td: TensorData, key: str, label: str, policy: Policy, taken: memoryview | None = None
) -> tuple[bytes | memoryview, str]:
    where = td.WhichOneof("payload")
    if where is None and taken is not None:  # parsed apart (mmctl.wire.splice)
        return taken, "inline"
    if where == "inline":
        return td.inline, "inline"
    if where == "shm":
        try:
            return (
                read_handle(td.shm.name, td.shm.offset, td.shm.nbytes, owners=policy.shm_owners),
                "shm",
            )
        except ShmReadError as err:
            raise Rejected(f"{label}.{key}: {err}") from None
    if where == "remote":
        raise Rejected(f"{label}.{key}: TensorData.remote payload is not implemented")
    raise Rejected(f"{label}.{key}: TensorData payload is required")


def decode(
    req: GenerateRequest, policy: Policy, spec: ModelSpec, pixels: memoryview | None = None
) -> list[ReceivedBatch]:
    """Read every batch's tensors (shm files are consumed here) with the servicer's checks.
    ``pixels``: the first batch's inline ``pixel_values`` payload, parsed apart
    from ``req`` (:func:`mmctl.wire.splice.take_pixels`)."""
    out: list[ReceivedBatch] = []
    errors: list[str] = []
    for n, mm in enumerate(batches(req)):
        label = "mm_inputs" if n == 0 else f"extra_mm_inputs[{n - 1}]"
        tensors, dtypes, transports = {}, {}, {}
        kind_error = None
        try:
            kind = _kind(mm.modality, policy.legacy_proto, label)
        except Rejected as err:
            kind, kind_error = MediaKind.IMAGE, str(err)
        for key, td in tensor_fields(mm):
            # Read every payload even after a failure: a real worker consumes
            # each shm file it reaches, and a stub must not leave them behind.
            try:
                taken = pixels if n == 0 and key == "pixel_values" else None
                payload, transport = _payload(td, key, label, policy, taken)
                name = worker_key(key, kind)
                tensors[name] = _tensor(payload, td, key, label, policy)
                dtypes[name], transports[name] = td.dtype, transport
            except Rejected as err:
                errors.append(str(err))
        if kind_error:
            errors.insert(0, kind_error)
        batch = ReceivedBatch(
            index=n,
            kind=kind,
            tensors=tensors,
            dtypes=dtypes,
            transports=transports,
            placeholders=[(p.offset, p.length) for p in mm.mm_placeholders],
            im_token_id=mm.im_token_id if mm.HasField("im_token_id") else None,
            hashes=list(mm.mm_hashes),
            batched_keys=list(mm.batched_keys),
            flat_keys=dict(mm.flat_keys),
            keep_on_cpu_keys=list(mm.keep_on_cpu_keys),
            fields=spec.fields(kind),
        )
        out.append(batch)
    if errors:
        raise Rejected(errors[0])
    return out


#: numpy's limit on array dimensions (64 since numpy 2).
MAX_DIMS = 64


def _tensor(
    payload: bytes | memoryview, td: TensorData, key: str, label: str, policy: Policy
) -> np.ndarray:
    if td.dtype not in policy.dtypes:
        accepted = ", ".join(sorted(policy.dtypes))
        raise Rejected(
            f"{label}.{key}: unsupported proto tensor dtype {td.dtype!r} (accepted: {accepted})"
        )
    if len(td.shape) > MAX_DIMS:  # numpy cannot hold it; a refusal, not a crash
        raise Rejected(f"{label}.{key}: {len(td.shape)} dimensions, at most {MAX_DIMS}")
    try:
        return from_bytes(payload, td.shape, td.dtype)
    except InputError as err:
        raise Rejected(f"{label}.{key}: {err.message}") from None


def validate(
    req: GenerateRequest, batches: list[ReceivedBatch], model: Model, policy: Policy
) -> None:
    """Everything after decoding; raises :class:`Rejected` on the first problem."""
    ids = np.asarray(req.tokenized.input_ids, dtype=np.int64)
    seen: dict[str, str] = {}
    for batch in batches:
        for key in batch.tensors:
            if key in seen:
                raise Rejected(
                    f"multimodal batches carry the same tensor keys ['{key}'] ({seen[key]} and "
                    f"{batch.label}); one batch per modality is expected"
                )
            seen[key] = batch.label
        _check_batch(batch, model, policy)
    kinds = Counter(b.kind.value for b in batches for _ in b.placeholders)
    for kind, count in kinds.items():
        limit = policy.item_limits.get(kind)
        if limit is not None and count > limit:
            raise Rejected(
                f"{count} {kind} items in one request; this worker's mm_item_limits allow {limit}"
            )
    spans: list[Span] = []
    grids: list[tuple[int, int, int]] = []
    merge = model.params.merge_size
    for batch in batches:
        for (offset, length), grid in zip(batch.placeholders, batch.grids(), strict=True):
            if offset + length > len(ids):
                raise Rejected(
                    f"{batch.label}.mm_placeholders [{offset}, {offset + length}) lies outside the "
                    f"prompt of {len(ids)} tokens"
                )
            tokens = int(np.prod(grid)) // (merge * merge)
            if tokens > policy.encoder_budget:
                raise Rejected(
                    f"{batch.label}: an item of grid {list(grid)} carries {tokens} feature tokens, "
                    f"more than this worker's mm_encoder_budget {policy.encoder_budget}"
                )
            spans.append(Span(len(spans), batch.kind, offset, length))
            grids.append(grid)
    order = sorted(range(len(spans)), key=lambda i: spans[i].offset)
    for a, b in itertools.pairwise(order):
        if spans[a].end > spans[b].offset:
            raise Rejected(f"placeholder spans overlap at token {spans[b].offset}")
    # Which pad token counts is im_token_id per batch; the walk uses the model's ids,
    # so check im_token_id against them first.
    result = walk(
        ids,
        [Span(i, s.kind, s.offset, s.length) for i, s in enumerate(spans)],
        grids,
        model.token_ids,
        merge,
        per_frame_markers=model.spec.per_frame_markers,
    )
    if not result.ok:
        fail = ""
        if "not in list" in result.reason:
            fail = f"; {ENGINE_FAIL} ValueError"
        raise Rejected(f"mrope/placeholder check: {result.reason}{fail}")


def _check_batch(batch: ReceivedBatch, model: Model, policy: Policy) -> None:
    label = batch.label
    p = model.params
    if batch.pixel_key not in batch.tensors:
        raise Rejected(f"{label} carries no pixel_values; each modality batch needs its own")
    pixels = batch.tensors[batch.pixel_key]
    dtype = batch.dtypes[batch.pixel_key]
    if policy.device_normalize and dtype != "uint8":
        raise Rejected(
            f"{label}.pixel_values is {dtype}, but this worker normalizes on the device "
            "(mm_device_do_normalize): it expects raw uint8 pixels; normalized floats would "
            "be normalized twice"
        )
    if not policy.device_normalize and dtype == "uint8":
        raise Rejected(
            f"{label}.pixel_values is uint8, but this worker does not normalize on the device: "
            "raw 0-255 values would reach the vision encoder as if normalized"
        )
    if batch.im_token_id is None:
        raise Rejected(f"{label}.im_token_id is unset; the worker cannot tell embedding positions")
    want_pad = (
        model.token_ids.video_token_id
        if batch.kind is MediaKind.VIDEO
        else model.token_ids.image_token_id
    )
    if batch.im_token_id != want_pad:
        raise Rejected(
            f"{label}.im_token_id is {batch.im_token_id}, the served model's "
            f"{batch.kind.value} pad token is {want_pad}"
        )
    items = len(batch.placeholders)
    _check_batched_fields(batch, items)
    want_dim = 3 * p.temporal_patch_size * p.patch_size * p.patch_size
    if pixels.ndim != 2 or pixels.shape[1] != want_dim:
        raise Rejected(
            f"{label}.pixel_values has shape {list(pixels.shape)}; patches of this model have "
            f"3*{p.temporal_patch_size}*{p.patch_size}*{p.patch_size} = {want_dim} features"
        )
    rows = sum(int(np.prod(g)) for g in batch.grids())
    if pixels.shape[0] != rows:
        raise Rejected(
            f"{label}.pixel_values has {pixels.shape[0]} rows, {batch.grid_key} "
            f"{[list(g) for g in batch.grids()]} needs sum(t*h*w) = {rows}; {ENGINE_FAIL} a shape mismatch"
        )
    if batch.hashes and len(batch.hashes) != items:
        raise Rejected(f"{label}: {len(batch.hashes)} mm_hashes for {items} placeholders")
    for key in batch.batched_keys:
        name = batch.rename(key)
        if name not in batch.tensors:
            raise Rejected(
                f"{label}.batched_keys names {key!r}, which is not a tensor of the batch"
            )
        if batch.tensors[name].shape[0] != items:
            raise Rejected(
                f"{label}.batched_keys {key!r} has {batch.tensors[name].shape[0]} rows for {items} items"
            )
    for key, sizes_key in batch.flat_keys.items():
        name, sizes_name = batch.rename(key), batch.rename(sizes_key)
        for k, n in ((key, name), (sizes_key, sizes_name)):
            if n not in batch.tensors:
                raise Rejected(f"{label}.flat_keys names {k!r}, which is not a tensor of the batch")
        sizes = batch.tensors[sizes_name].reshape(-1).astype(np.int64)
        rows = batch.tensors[name].shape[0]
        if int(sizes.sum()) != rows:
            raise Rejected(
                f"{label}.flat_keys {key!r}: sizes {sizes.tolist()} from {sizes_key!r} sum to "
                f"{int(sizes.sum())}, the tensor has {rows} rows"
            )
    for key in batch.keep_on_cpu_keys:
        if batch.rename(key) not in batch.tensors:
            raise Rejected(
                f"{label}.keep_on_cpu_keys names {key!r}, which is not a tensor of the batch"
            )
    _check_declared(batch)
    for grid_row in batch.grids():
        _, h, w = grid_row
        if min(grid_row) < 1 or h % p.merge_size or w % p.merge_size:
            raise Rejected(f"{label}.{batch.grid_key} row {list(grid_row)} is not a valid grid")


def _check_batched_fields(batch: ReceivedBatch, items: int) -> None:
    """Every tensor the served model's field table names is there (an optional
    one may be left out), one row per item; a "t" dimension is each item's
    temporal patches, as vLLM asserts for Qwen3-VL's timestamps."""
    grids = [list(g) for g in batch.grids()]
    temporal = {g[0] for g in grids}
    # A dense row per item needs one t for all of them; otherwise no shape fits.
    t = temporal.pop() if len(temporal) == 1 else "one t for every item"
    for f in batch.fields:
        if f.value == PIXELS:
            continue
        name = batch.rename(f.key)
        if name not in batch.tensors:
            if f.optional:
                continue
            raise Rejected(f"{batch.label} ({batch.kind.value}) carries no {f.key} tensor")
        shape = [items, *(t if d == "t" else d for d in f.item_shape)]
        got = batch.tensors[name]
        if list(got.shape) != shape:
            raise Rejected(
                f"{batch.label}.{f.key} has shape {list(got.shape)}; {items} placeholder(s) "
                f"with grids {grids} need {shape}"
            )


def _check_declared(batch: ReceivedBatch) -> None:
    """The batch's key lists say what the model's field table says: a tensor
    not declared batched, flat or kept on the CPU reaches the model wrongly cut."""
    for f in batch.fields:
        if f.optional and batch.rename(f.key) not in batch.tensors:
            continue
        if f.layout is FieldLayout.BATCHED and f.key not in batch.batched_keys:
            raise Rejected(f"{batch.label}.batched_keys lacks {f.key!r} (one row per item)")
        if f.layout is FieldLayout.FLAT and batch.flat_keys.get(f.key) != f.sizes:
            raise Rejected(
                f"{batch.label}.flat_keys[{f.key!r}] must be {f.sizes!r} (rows per item), "
                f"got {batch.flat_keys.get(f.key)!r}"
            )
        if f.keep_on_cpu and f.key not in batch.keep_on_cpu_keys:
            raise Rejected(f"{batch.label}.keep_on_cpu_keys lacks {f.key!r}")
