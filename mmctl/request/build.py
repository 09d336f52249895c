"""``GenerateRequest`` assembly: modality batches, key lists, sampling parameters.

A request is planned in numpy (:class:`RequestPlan`) and turned into protobuf
only at the end, by :meth:`RequestPlan.to_proto` with a *placer* that decides
where each tensor's bytes go: inline (default) or a shared-memory file (the
send command's transport). That keeps one builder for both transports.

What each modality batch carries — keys, flat or batched, kept on the CPU —
is the model family's field table (:mod:`mmctl.values.fields`), the same
table the stub worker checks against. Each batch also names its embedding
token (``im_token_id``, the family's), one placeholder span and one content
hash per item. ``encoder_input_key`` stays unset where the family's forward
takes ``pixel_values`` (the servicer renames it for video); a family whose pixel
field has another name (Nemotron's ``pixel_values_flat_video``) names it there.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl import modality
from mmctl.choices import DEFAULT_MAX_TOKENS
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.request import tensors
from mmctl.values.fields import EMBED, GRID, PIXELS, ROWS, FieldLayout, WireField
from mmctl.values.items import Preprocessed
from mmctl.values.layout import Layout
from mmctl.wire import splice

if TYPE_CHECKING:
    from mmctl.models.model import Model
    from mmctl.wire.proto import engine_pb2

# (key, array, wire dtype) -> TensorData, or None: "inline, as the builder sees fit"
Placer = Callable[[str, np.ndarray, str], Any]

PIXEL_KEY = "pixel_values"


UINT32_MAX = 2**32 - 1
INT32_RANGE = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters, checked against vLLM's rules and the wire's field types.

    ``None`` (or empty) means "not given": a new request then gets
    :data:`~mmctl.choices.DEFAULT_MAX_TOKENS` and the worker's defaults for
    the rest, while a replayed request keeps what it recorded
    (:meth:`apply_to`).
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        # The worker would refuse these after mmctl had probed it and shipped
        # the pixels, or the protobuf encoder would crash on them.
        if self.max_tokens is not None and not 1 <= self.max_tokens <= UINT32_MAX:
            raise UsageError(f"max-tokens must be 1 to {UINT32_MAX:,}, got {self.max_tokens:,}")
        if self.temperature is not None and not 0 <= self.temperature < math.inf:
            raise UsageError(f"temperature must be 0 (greedy) or more, got {self.temperature}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise UsageError(f"top-p must be in (0, 1], got {self.top_p}")
        if self.top_k is not None and not 0 <= self.top_k <= UINT32_MAX:
            raise UsageError(f"top-k must be 0 (no limit) or more, got {self.top_k}")
        if self.seed is not None and not INT32_RANGE[0] <= self.seed <= INT32_RANGE[1]:
            raise UsageError(f"seed must be a 32-bit signed integer, got {self.seed}")
        if any(not s for s in self.stop):
            raise UsageError("a stop string must not be empty")

    def given(self) -> list[str]:
        """Names of the values that are set (what a replay would change)."""
        defaults = Sampling()
        return [k for k, v in vars(self).items() if v != getattr(defaults, k)]

    def to_proto(self) -> engine_pb2.SamplingParams:
        from mmctl.wire import proto

        msg = proto.engine_pb2.SamplingParams(skip_special_tokens=True, n=1)
        msg.max_tokens = DEFAULT_MAX_TOKENS
        self.apply_to(msg)
        return msg

    def apply_to(self, msg: engine_pb2.SamplingParams) -> None:
        """Set the given values on a ``SamplingParams`` message, keep the rest."""
        for name in ("max_tokens", "temperature", "top_p", "top_k", "seed"):
            value = getattr(self, name)
            if value is not None:
                setattr(msg, name, value)
        if self.stop:
            msg.stop[:] = list(self.stop)
        if self.stop_token_ids:
            msg.stop_token_ids[:] = list(self.stop_token_ids)
        if self.ignore_eos:
            msg.ignore_eos = True


@dataclass(frozen=True)
class MediaItem:
    """One preprocessed media item of a request, with its encoder-cache key."""

    path: str
    pre: Preprocessed
    content_hash: str

    @property
    def kind(self) -> MediaKind:
        return self.pre.kind


@dataclass
class Batch:
    """One modality's tensors and metadata (a ``MultimodalInputs``), still numpy."""

    kind: MediaKind
    pixel_values: np.ndarray
    pixel_dtype: str
    tensors: dict[str, np.ndarray]
    #: ``None``: unset, so the servicer marks every position of each span
    #: (``Span.embeds_all``).
    im_token_id: int | None
    placeholders: list[tuple[int, int]]
    hashes: list[str]
    batched_keys: list[str]
    flat_keys: dict[str, str]
    keep_on_cpu_keys: list[str]
    #: The kwarg the pixels are registered under, where not ``pixel_values``.
    encoder_input_key: str | None = None

    @property
    def modality(self) -> int:
        return modality.to_wire(self.kind)

    def arrays(self) -> dict[str, np.ndarray]:
        return {PIXEL_KEY: self.pixel_values, **self.tensors}

    def to_proto(self, place: Placer, pixels: Placer | None = None) -> engine_pb2.MultimodalInputs:
        """``pixels``: the placer of ``pixel_values`` when it is not ``place``."""
        from mmctl.wire import proto

        msg = proto.engine_pb2.MultimodalInputs(
            mm_hashes=self.hashes,
            batched_keys=self.batched_keys,
            flat_keys=self.flat_keys,
            keep_on_cpu_keys=self.keep_on_cpu_keys,
            modality=self.modality,
        )
        if self.im_token_id is not None:
            msg.im_token_id = self.im_token_id
        if self.encoder_input_key is not None:
            msg.encoder_input_key = self.encoder_input_key
        pixel_place = pixels or place
        msg.pixel_values.CopyFrom(
            pixel_place(PIXEL_KEY, self.pixel_values, self.pixel_dtype)
            or tensors.inline(self.pixel_values, self.pixel_dtype)
        )
        for key, array in self.tensors.items():
            name = tensors.wire_name(array)
            msg.model_specific_tensors[key].CopyFrom(
                place(key, array, name) or tensors.inline(array, name)
            )
        for offset, length in self.placeholders:
            msg.mm_placeholders.add(offset=offset, length=length)
        return msg


def make_batches(items: Sequence[MediaItem], layout: Layout, model: Model) -> list[Batch]:
    """One batch per modality, in the order the modalities first appear in the
    prompt, laid out as the family's field table says (:mod:`mmctl.values.fields`),
    the pixels joined as its HF processor batches them (``Family.batch_pixels``)."""
    spec = model.spec
    order: list[MediaKind] = []
    for item in items:
        if item.kind not in order:
            order.append(item.kind)
    batches = []
    for kind in order:
        members = [(n, it) for n, it in enumerate(items) if it.kind is kind]
        pres = [it.pre for _, it in members]
        fields = spec.wire.fields(kind)
        pixels = spec.wire.batch_pixels(kind, [p.pixel_values for p in pres])
        embed = model.token_ids.embed(kind)
        rows = {f: [_value(f, p, embed) for p in pres] for f in fields if f.value != PIXELS}
        # An optional field whose items' rows differ in length stays home.
        sent = [
            f
            for f in fields
            if f.value == PIXELS
            or not (f.optional and len({np.asarray(r).shape for r in rows[f]}) > 1)
        ]
        arrays = {
            f.key: _joined(f, rows[f], tensors.WIRE_DTYPES[f.dtype])
            for f in sent
            if f.value != PIXELS
        }
        pixel_key = next(f.key for f in fields if f.value == PIXELS)
        spans = [layout.spans[n] for n, _ in members]
        if any(s.embeds_all for s in spans) and not all(s.embeds_all for s in spans):
            raise InputError(
                f"the {kind.value} items of this request mark their embedding positions in "
                "two ways (one im_token_id per batch)"
            )
        if spans and spans[0].embeds_all:
            missing = [f.key for f in fields if f.value != PIXELS and f not in sent]
            if missing:
                raise InputError(
                    f"videos of different lengths cannot share a request with a worker that "
                    f"prunes video: vLLM's model reads {', '.join(missing)} per video, and the "
                    "wire holds one row per item",
                    hint="send each video in a request of its own",
                )
        batches.append(
            Batch(
                kind=kind,
                pixel_values=pixels,
                pixel_dtype=pres[0].pixel_format.value,
                tensors=arrays,
                im_token_id=None if spans and spans[0].embeds_all else embed,
                placeholders=[(s.offset, s.length) for s in spans],
                hashes=[it.content_hash for _, it in members],
                batched_keys=[f.key for f in sent if f.layout is FieldLayout.BATCHED],
                flat_keys={f.key: f.sizes for f in sent if f.sizes is not None},
                keep_on_cpu_keys=[f.key for f in sent if f.keep_on_cpu],
                encoder_input_key=None if pixel_key == PIXEL_KEY else pixel_key,
            )
        )
    return batches


def _joined(field: WireField, rows: list[object], dtype: np.dtype) -> np.ndarray:
    """A tensor of the batch: one row per item, a flat one's items one after another,
    or a shared one's single value."""
    if field.layout is FieldLayout.SHARED:
        return np.asarray(rows[:1], dtype=dtype)
    if field.layout is FieldLayout.FLAT:
        return np.concatenate([np.asarray(r, dtype=dtype) for r in rows])
    return np.asarray(rows, dtype=dtype)


def _value(field: WireField, pre: Preprocessed, embed: int) -> object:
    """One item's row of a batched tensor (``embed``: the batch's embedding token)."""
    if field.value == EMBED:
        return embed
    if field.key in pre.item_tensors:
        return pre.item_tensors[field.key]
    if field.value == GRID:
        return pre.grid_thw
    if field.value == ROWS:
        return pre.facts.rows
    if field.value not in pre.video_tensors:
        raise ValueError(f"{field.key} is a per-video value; this {pre.kind.value} item has none")
    value = pre.video_tensors[field.value]
    return value if field.item_shape else value[0]


def inline_placer(key: str, array: np.ndarray, dtype_name: str) -> None:
    return None  # inline


@dataclass(frozen=True)
class Encoded:
    """A request on the wire: ``data`` is what the worker parses; ``request``
    is the same message without a spliced tensor's bytes (read its other fields)."""

    request: engine_pb2.GenerateRequest
    data: bytes
    #: Bytes of the pixel tensor appended to ``data`` rather than held in ``request``.
    spliced: int = 0
    #: Seconds spent copying them into ``data`` (the inline hand-off).
    copy_s: float = 0.0


def new_request_id() -> str:
    return f"mmctl-{uuid.uuid4().hex[:16]}"


@dataclass
class RequestPlan:
    text: str
    input_ids: np.ndarray
    batches: list[Batch]
    sampling: Sampling = field(default_factory=Sampling)
    stream: bool = True
    request_id: str = field(default_factory=new_request_id)
    #: Media the worker preprocesses (:mod:`mmctl.request.refs`): (kind, URL), no tensors.
    media_refs: list[tuple[MediaKind, str]] = field(default_factory=list)

    def to_proto(
        self, place: Placer = inline_placer, pixels: Placer | None = None
    ) -> engine_pb2.GenerateRequest:
        """The message; ``pixels`` places the first batch's ``pixel_values``
        when it is not ``place``."""
        from mmctl.wire import proto

        engine = proto.engine_pb2
        req = engine.GenerateRequest(
            request_id=self.request_id,
            tokenized=engine.TokenizedInput(
                original_text=self.text, input_ids=self.input_ids.tolist()
            ),
            sampling_params=self.sampling.to_proto(),
            stream=self.stream,
        )
        if self.media_refs:
            req.media_refs.CopyFrom(
                engine.MediaRefs(
                    items=[
                        engine.MediaRef(modality=modality.to_wire(kind), url=url)
                        for kind, url in self.media_refs
                    ]
                )
            )
        for n, batch in enumerate(self.batches):
            msg = batch.to_proto(place, pixels if n == 0 else None)
            if n == 0:
                req.mm_inputs.CopyFrom(msg)
            else:
                req.extra_mm_inputs.append(msg)
        return req

    def encode(self, place: Placer = inline_placer) -> Encoded:
        """The serialized request, with one copy of a large inline pixel tensor.

        ``to_proto`` + ``SerializeToString`` copy a tensor twice (into the
        message, then into the output) — 0.95 + 0.56 s for 288 MB here. Instead
        the first batch's inline ``pixel_values`` stays out of the message and is
        appended as a second occurrence of ``mm_inputs`` holding only
        ``pixel_values.inline`` (:mod:`mmctl.wire.splice`): every worker reads
        the same message, and the join is the only copy.
        """
        spliced: list[np.ndarray] = []

        def pixels(key: str, array: np.ndarray, dtype_name: str) -> Any:
            td = place(key, array, dtype_name)
            if td is not None or array.nbytes < splice.MIN_BYTES:
                return td
            data = tensors.wire_array(array, dtype_name)
            spliced.append(data)
            from mmctl.wire import proto

            return proto.engine_pb2.TensorData(shape=list(data.shape), dtype=dtype_name)

        req = self.to_proto(place, pixels)
        head = req.SerializeToString()
        if not spliced:
            return Encoded(req, head)
        payload = spliced[0].data.cast("B")
        start = time.perf_counter()
        data = b"".join([head, splice.pixels_prefix(len(payload)), payload])
        return Encoded(req, data, len(payload), time.perf_counter() - start)
