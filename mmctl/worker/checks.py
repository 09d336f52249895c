"""What the stub worker refuses, mirroring the real servicer and vLLM.

A request the stub accepts is one the real worker (smg-grpc-servicer 0.14.1
in front of vLLM 0.33) would accept; where the real one would crash deep in
the engine, the stub refuses up front and says what would have happened.
The converse holds too: what the servicer takes (its
``_build_preprocessed_mm_inputs``: any name for the flat sizes tensor, key
lists naming tensors a batch lacks, every modality but VIDEO as an image) the
stub takes, so other clients (the smg gateway) can test against it. Refused
although the real worker takes them, because it would answer garbage
silently: pixels of the wrong type for ``mm_device_do_normalize``, and, under
``--legacy-proto``, fields such a worker would drop.

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

from mmctl import modality
from mmctl.choices import STUB_ENCODER_BUDGET, STUB_ITEM_LIMITS, LayoutKind, PixelFormat
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models.family import Family
from mmctl.models.model import Model
from mmctl.request.limits import parse_item_limits
from mmctl.request.tensors import LEGACY_DTYPES, WIRE_DTYPES, from_bytes
from mmctl.request.view import batches, tensor_fields
from mmctl.transport.shm import ShmReadError, read_handle
from mmctl.values.fields import PIXELS, ROWS, FieldLayout, WireField
from mmctl.values.items import ItemFacts
from mmctl.values.layout import Layout, Span
from mmctl.values.received import ContractError, Received

if TYPE_CHECKING:
    from mmctl.wire._gen.vllm_engine_pb2 import GenerateRequest, MultimodalInputs, TensorData

ENGINE_FAIL = "the real worker would fail in the engine with"


#: The primary tensor's name when ``encoder_input_key`` is unset.
DEFAULT_ENCODER_INPUT_KEY = "pixel_values"


def worker_key(key: str, kind: MediaKind) -> str:
    """The servicer's rename: VIDEO batches carry ``pixel_values_videos``."""
    if key == DEFAULT_ENCODER_INPUT_KEY:
        return modality.pixel_key(kind)
    return key


class Rejected(ValueError):
    """One refusal; the message is what the client sees."""


def normalizes_by_default(spec: Family) -> bool:
    """Whether ``vllm serve MODEL --grpc`` (0.33) normalizes the family's pixels
    on the device when not told otherwise: the stub's default, so that a file
    ``build`` wrote for a default worker replays on the default stub."""
    return spec.processor.worker_pixels is PixelFormat.UINT8


def device_normalize_for(spec: Family, asked: bool | None) -> bool:
    """``--[no-]device-normalize`` for a stub serving ``spec``: the default worker's
    unless asked; asking for it where vLLM cannot is refused."""
    if asked is None:
        return normalizes_by_default(spec)
    if asked and not spec.processor.device_normalize:
        from mmctl.models.registry import FAMILIES

        able = ", ".join(f.name for f in FAMILIES if f.processor.device_normalize)
        raise UsageError(
            f"--device-normalize: vLLM normalizes {spec.name} pixels in its processor; only "
            f"the {able} families normalize on the device"
        )
    return asked


@dataclass(frozen=True)
class Policy:
    """What this worker accepts (the capabilities it advertises)."""

    device_normalize: bool = False
    legacy_proto: bool = False
    item_limits: dict[str, int] = field(default_factory=lambda: parse_item_limits(STUB_ITEM_LIMITS))
    encoder_budget: int = STUB_ENCODER_BUDGET  # feature tokens one item may carry
    #: uids whose /dev/shm files this worker reads (default: its own).
    shm_owners: frozenset[int] = field(default_factory=lambda: frozenset({os.getuid()}))

    def __post_init__(self) -> None:
        if self.encoder_budget < 0:
            raise UsageError(f"--mm-encoder-budget must not be negative, got {self.encoder_budget}")

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
    #: The bytes as received, by proto name (``pixel_values`` for the primary
    #: tensor, else the ``model_specific_tensors`` key): what ``--record`` writes.
    payloads: dict[str, bytes | memoryview] = field(default_factory=dict)
    #: The name the primary tensor is registered under (``encoder_input_key``).
    primary_key: str = DEFAULT_ENCODER_INPUT_KEY

    @property
    def label(self) -> str:
        return "mm_inputs" if self.index == 0 else f"extra_mm_inputs[{self.index - 1}]"

    @property
    def pixel_key(self) -> str:
        """The kwarg the model's forward takes its pixels as: the family's pixel field,
        renamed as the servicer renames it (``pixel_values_videos`` for video)."""
        named = [f.key for f in self.fields if f.value == PIXELS]
        return worker_key(named[0] if named else DEFAULT_ENCODER_INPUT_KEY, self.kind)

    def rename(self, key: str) -> str:
        return worker_key(key, self.kind)

    def batched(self) -> set[str]:
        """``batched_keys`` as the servicer reads them: renamed like the tensors."""
        return {self.rename(k) for k in self.batched_keys}

    def flat(self) -> dict[str, str]:
        """``flat_keys`` as the servicer reads them: both sides renamed (last wins)."""
        return {self.rename(k): self.rename(v) for k, v in self.flat_keys.items()}

    def items(self, model: Model) -> list[ItemFacts]:
        """The batch's items as the served family reads them from its tensors."""
        try:
            received = Received(self.kind, self.tensors, len(self.placeholders))
            return model.spec.contract.received_items(received, model)
        except ContractError as err:
            raise Rejected(err.about(self.label, self.kind)) from None


def _kind(value: int, legacy: bool) -> MediaKind:
    """The servicer's ``modality_name``: VIDEO is video, every other value (UNSPECIFIED,
    AUDIO, a number it does not know) is an image batch and checked as one."""
    if legacy:
        return MediaKind.IMAGE  # field 10 is unknown to such a worker: everything is an image
    return modality.servicer_kind(value)


def _primary_key(mm: MultimodalInputs, legacy: bool) -> str:
    """The servicer's ``primary_encoder_key``: ``encoder_input_key`` names the
    model kwarg the primary tensor is registered under (a legacy proto has no field 11)."""
    if legacy or not mm.HasField("encoder_input_key"):
        return DEFAULT_ENCODER_INPUT_KEY
    return mm.encoder_input_key or DEFAULT_ENCODER_INPUT_KEY


def carries_tensors(mm: MultimodalInputs) -> bool:
    """The servicer's ``has_preprocessed_mm_payload``: a batch with neither pixels
    nor model-specific tensors is not read as media (its placeholders and
    hashes go nowhere; the prompt's pad tokens stay text)."""
    return mm.HasField("pixel_values") or len(mm.model_specific_tensors) > 0


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
    req: GenerateRequest, policy: Policy, spec: Family, pixels: memoryview | None = None
) -> list[ReceivedBatch]:
    """Read every batch's tensors (shm files are consumed here) with the servicer's checks.
    ``pixels``: the first batch's inline ``pixel_values`` payload, parsed apart
    from ``req`` (:func:`mmctl.wire.splice.take_pixels`). Batches the servicer
    does not read as media (:func:`carries_tensors`) are left out."""
    out: list[ReceivedBatch] = []
    errors: list[str] = []
    for n, mm in enumerate(batches(req)):
        if not (carries_tensors(mm) or (n == 0 and pixels is not None)):
            continue
        label = "mm_inputs" if n == 0 else f"extra_mm_inputs[{n - 1}]"
        tensors, dtypes, transports, payloads = {}, {}, {}, {}
        kind = _kind(mm.modality, policy.legacy_proto)
        primary = _primary_key(mm, policy.legacy_proto)
        for key, td in tensor_fields(mm):
            # Read every payload even after a failure: a real worker consumes
            # each shm file it reaches, and a stub must not leave them behind.
            try:
                taken = pixels if n == 0 and key == "pixel_values" else None
                payload, transport = _payload(td, key, label, policy, taken)
                # As the servicer: the primary tensor goes in first under its kwarg
                # name, so a model-specific tensor of the same name replaces it.
                name = worker_key(primary if key == "pixel_values" else key, kind)
                tensors[name] = _tensor(payload, td, key, label, policy)
                dtypes[name], transports[name] = td.dtype, transport
                payloads[key] = payload
            except Rejected as err:
                errors.append(str(err))
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
            fields=spec.wire.fields(kind),
            payloads=payloads,
            primary_key=primary,
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
    facts: list[ItemFacts] = []
    deferred = ""
    for batch in batches:
        for (offset, length), item in zip(batch.placeholders, batch.items(model), strict=True):
            if offset + length > len(ids):
                raise Rejected(
                    f"{batch.label}.mm_placeholders [{offset}, {offset + length}) lies outside the "
                    f"prompt of {len(ids)} tokens"
                )
            tokens = item.tokens
            if batch.im_token_id is None and length != tokens and not deferred:
                # Without im_token_id the servicer marks the whole span as embedding
                # positions; only a span of exactly the item's pads fits that (or, for
                # a pruned Qwen3-VL video, the whole span its model builds). Said
                # after the family's check, whose sentence names a pruning mismatch.
                deferred = (
                    f"{batch.label}.im_token_id is unset, so all {length} tokens of the span at "
                    f"{offset} would receive embeddings; the item has {tokens}; {ENGINE_FAIL} "
                    "a placeholder/embedding count mismatch"
                )
            whole = length == tokens  # the model embeds every position (Nemotron's video)
            if batch.im_token_id is not None and whole and not deferred:
                marked = int(np.count_nonzero(ids[offset : offset + length] == batch.im_token_id))
                if marked != tokens and not model.pruning.enabled:
                    deferred = (
                        f"{batch.label}.im_token_id is set, so only the {marked} embedding "
                        f"tokens of the span at {offset} would receive embeddings; the model "
                        f"embeds all {tokens} positions of it (leave im_token_id unset); "
                        f"{ENGINE_FAIL} a placeholder/embedding count mismatch"
                    )
            if batch.im_token_id is not None and model.pruning.enabled and not deferred:
                marked = int(np.count_nonzero(ids[offset : offset + length] == batch.im_token_id))
                if marked != tokens:
                    deferred = (
                        f"{batch.label}.im_token_id is set, so only the {marked} embedding "
                        f"tokens of the span at {offset} would receive embeddings; this worker "
                        f"prunes video ({model.pruning.describe()}) and its model embeds "
                        f"{tokens} positions (the whole span: leave im_token_id unset); "
                        f"{ENGINE_FAIL} a placeholder/embedding count mismatch"
                    )
            if tokens > policy.encoder_budget:
                what = f"of grid {list(item.grid_thw)} " if item.grid_thw else ""
                raise Rejected(
                    f"{batch.label}: an item {what}carries {tokens} feature tokens, "
                    f"more than this worker's mm_encoder_budget {policy.encoder_budget}"
                )
            spans.append(Span(len(spans), batch.kind, offset, length))
            facts.append(item)
    order = sorted(range(len(spans)), key=lambda i: spans[i].offset)
    for a, b in itertools.pairwise(order):
        if spans[a].end > spans[b].offset:
            raise Rejected(f"placeholder spans overlap at token {spans[b].offset}")
    # Which pad token counts is im_token_id per batch; the family's check uses the
    # model's ids, so im_token_id was checked against them first.
    ordered = sorted(zip(spans, facts, strict=True), key=lambda sf: sf[0].offset)
    layout = Layout(
        LayoutKind.VLLM,
        ids,
        tuple(Span(i, s.kind, s.offset, s.length) for i, (s, _) in enumerate(ordered)),
    )
    result = model.spec.prompt.check(layout, [f for _, f in ordered], model)
    if not result.ok:
        fail = ""
        if "not in list" in result.reason:
            fail = f"; {ENGINE_FAIL} ValueError"
        raise Rejected(f"{model.spec.check_failed(result.reason)}{fail}")
    if deferred:
        raise Rejected(deferred)


def _check_batch(batch: ReceivedBatch, model: Model, policy: Policy) -> None:
    label = batch.label
    by_worker = dict(model.spec.worker_kinds).get(batch.kind)
    if by_worker is not None:
        raise Rejected(
            f"{label} is a preprocessed {batch.kind.value} batch: {by_worker}; {ENGINE_FAIL} "
            "an AssertionError"
        )
    if batch.pixel_key not in batch.tensors:
        if batch.primary_key != DEFAULT_ENCODER_INPUT_KEY:
            raise Rejected(
                f"{label}.encoder_input_key {batch.primary_key!r} registers the pixels under a "
                f"name this model's forward does not take ({batch.pixel_key!r}); its encoder "
                "would run with nothing to encode"
            )
        raise Rejected(
            f"{label} carries other tensors but no pixel_values (a pixel-less leg needs remote "
            "KV, which this worker does not have); each modality batch needs its own"
        )
    if batch.kind not in model.spec.modalities:
        raise Rejected(
            f"{label} is a {batch.kind.value} batch; {model.spec.name} models read "
            f"{' and '.join(k.value for k in model.spec.modalities)}; {ENGINE_FAIL} an "
            "unsupported modality"
        )
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
    want = model.token_ids.embed(batch.kind)
    if batch.im_token_id is not None and batch.im_token_id != want:
        raise Rejected(
            f"{label}.im_token_id is {batch.im_token_id}, the served model's "
            f"{batch.kind.value} embedding token is {want}"
        )
    items = len(batch.placeholders)
    facts = batch.items(model)
    _check_batched_fields(batch, facts)
    try:
        received = Received(batch.kind, batch.tensors, items, raw=dtype == "uint8")
        model.spec.contract.check_received(received, model)
    except ContractError as err:
        raise Rejected(err.about(label, batch.kind)) from None
    if len(batch.hashes) < items:
        # vLLM keys each item's encoder cache by mm_hashes[modality][i]; extra ones go unused.
        raise Rejected(
            f"{label}: {len(batch.hashes)} mm_hashes for {items} placeholders; {ENGINE_FAIL} "
            f"{'KeyError' if not batch.hashes else 'IndexError'} (one content hash per item)"
        )
    # The servicer gives a layout only to the tensors a batch carries: a key list
    # naming one it lacks (the smg gateway names both grids in keep_on_cpu_keys)
    # is ignored, as here. Batched wins over flat, as there.
    for name in batch.batched():
        if name in batch.tensors and batch.tensors[name].shape[:1] != (items,):
            raise Rejected(
                f"{label}.batched_keys {name!r} has shape {list(batch.tensors[name].shape)}, "
                f"not one row for each of the {items} items; {ENGINE_FAIL} a batch size mismatch"
            )
    for name, sizes_name in batch.flat().items():
        if name not in batch.tensors or name in batch.batched():
            continue
        if sizes_name not in batch.tensors:
            raise Rejected(
                f"{label}.flat_keys splits {name!r} by {sizes_name!r}, which is not a tensor of "
                f"the batch; {ENGINE_FAIL} KeyError"
            )
        sizes = batch.tensors[sizes_name].reshape(-1).astype(np.int64)
        rows = batch.tensors[name].shape[0] if batch.tensors[name].ndim else 0
        if len(sizes) != items or int(sizes.sum()) != rows or (sizes < 0).any():
            raise Rejected(
                f"{label}.flat_keys {name!r}: sizes {sizes.tolist()} from {sizes_name!r} do not "
                f"split its {rows} rows into {items} item(s); {ENGINE_FAIL} a batch size mismatch"
            )
    _check_declared(batch, facts)


def _check_batched_fields(batch: ReceivedBatch, facts: list[ItemFacts]) -> None:
    """The tensors the served model's field table names have one row per item
    (an optional one may be left out), or a flat one the items' rows; a "t"
    dimension is each item's temporal patches, as vLLM asserts for Qwen3-VL's
    timestamps; another named dimension is the family contract's to check
    (Gemma 4's patches per item). The flat sizes tensor
    (:data:`~mmctl.values.fields.ROWS`) is the client's to name, so it is
    checked through ``flat_keys`` instead."""
    items = len(facts)
    grids = [list(f.grid_thw) for f in facts if f.grid_thw is not None]
    temporal = {g[0] for g in grids}
    # A dense row per item needs one t for all of them; otherwise no shape fits.
    t = temporal.pop() if len(temporal) == 1 else "one t for every item"
    for f in batch.fields:
        if f.value in (PIXELS, ROWS):
            continue
        name = batch.rename(f.key)
        if name not in batch.tensors:
            if f.optional:
                continue
            fails = f"; {ENGINE_FAIL} KeyError" if f.layout is FieldLayout.SHARED else ""
            raise Rejected(f"{batch.label} ({batch.kind.value}) carries no {f.key} tensor{fails}")
        if f.layout is FieldLayout.SHARED:
            # The model reads it as tensor.flatten().unique().item(): one value.
            held = np.unique(batch.tensors[name]).tolist()
            if len(held) != 1:
                raise Rejected(
                    f"{batch.label}.{f.key} holds {held}, not one value for the batch; "
                    f"{ENGINE_FAIL} RuntimeError (a tensor of {len(held)} values read as a number)"
                )
            continue
        rows = sum(int(i.rows or 0) for i in facts) if f.layout is FieldLayout.FLAT else items
        shape: list[int | str] = [rows, *(t if d == "t" else d for d in f.item_shape)]
        got = batch.tensors[name]
        fits = len(got.shape) == len(shape) and all(
            g == want or (isinstance(want, str) and want != t)
            for g, want in zip(got.shape, shape, strict=True)
        )
        if not fits:
            raise Rejected(
                f"{batch.label}.{f.key} has shape {list(got.shape)}; {items} placeholder(s) "
                f"with grids {grids} need {shape}"
            )


def _check_declared(batch: ReceivedBatch, facts: list[ItemFacts]) -> None:
    """The key lists give the model's tensors the layout vLLM's field config
    does: one declared otherwise reaches the model wrongly cut. The pixels are
    flat by *some* sizes tensor holding each item's ``t·h·w`` (the servicer
    takes whichever tensor ``flat_keys`` names); keeping a tensor on the CPU
    only saves a device copy, so a missing ``keep_on_cpu_keys`` entry is accepted."""
    batched, flat = batch.batched(), batch.flat()
    for f in batch.fields:
        name = batch.rename(f.key)
        if (
            f.value == ROWS
            or f.layout is FieldLayout.SHARED
            or (f.optional and name not in batch.tensors)
        ):
            continue
        if f.layout is FieldLayout.BATCHED and name not in batched:
            raise Rejected(f"{batch.label}.batched_keys lacks {f.key!r} (one row per item)")
        if f.layout is FieldLayout.FLAT:
            sizes_name = flat.get(name)
            if sizes_name is None or name in batched:
                raise Rejected(
                    f"{batch.label}.flat_keys lacks {f.key!r}: it must be split per item by a "
                    "sizes tensor (rows per item)"
                )
            sizes = batch.tensors[sizes_name].reshape(-1).tolist()
            want = [item.rows for item in facts]
            if sizes != want:
                what = "grids need t*h*w" if all(i.grid_thw for i in facts) else "tiles need"
                raise Rejected(
                    f"{batch.label}.flat_keys[{f.key!r}] splits by {sizes_name!r} = {sizes}; "
                    f"the items' {what} = {want} rows each"
                )
