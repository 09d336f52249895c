"""The main job: media → worker → answer, with every decision and timing recorded.

One :func:`send` call: probe the worker, get its model files, negotiate pixel
dtype / transport / limits, preprocess (straight into shared memory when the
tensor will travel that way), build and check the request, ship it, stream
the answer. Every shared-memory file the worker did not consume is removed on
the way out, whatever ended the call (error, deadline, Ctrl-C).
"""

from __future__ import annotations

import base64
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from mmctl.client.bundle import fetch_bundle
from mmctl.client.channel import Target, as_error, open_channel
from mmctl.client.negotiate import Decision, pixel_dtype, processing_schemes, transport
from mmctl.client.worker import WorkerFacts, probe
from mmctl.errors import CheckFailed, InputError, UsageError
from mmctl.media.probe import MediaKind, check_readable, media_kind
from mmctl.models.model import Model, load_model
from mmctl.models.source import ModelSource
from mmctl.models.source import resolve as resolve_source
from mmctl.preprocess.pixels import PixelFormat
from mmctl.request import tensors
from mmctl.request.build import Sampling, new_request_id
from mmctl.request.compose import check_layout, compose
from mmctl.request.limits import check_encoder_budget, check_item_limits, parse_item_limits
from mmctl.transport.shm import ShmArena, ShmUnavailable, namespace_id, shm_dir, sweep_dead
from mmctl.wire import proto

GENERATE = "/vllm.grpc.engine.VllmEngine/Generate"


@dataclass
class SendOptions:
    target: Target
    media: list[Path] = field(default_factory=list)
    prompt: str = ""
    request_file: Path | None = None
    transport: str = "auto"  # auto | inline | shm
    shm_min_bytes: int = 64 * 1024
    pixel_dtype: str | None = None
    processing: str = "client"  # client | worker
    media_ref: str = "data"  # data | file: how --processing worker names the media
    sampling: Sampling = field(default_factory=Sampling)
    stream: bool = True
    timeout: float | None = None
    request_id: str | None = None
    model_dir: Path | None = None
    bundle: Path | None = None
    refresh_bundle: bool = False
    family: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    system: str | None = None
    chat: bool = True
    skip_checks: bool = False
    on_text: Callable[[str], None] | None = None  # streamed answer text, as it arrives
    on_frame: Callable[[int, int], None] | None = None
    on_note: Callable[[str], None] | None = None


@dataclass
class SendResult:
    request_id: str
    answer: str
    finish_reason: str
    output_ids: list[int]
    prompt_tokens: int
    completion_tokens: int
    timings: dict[str, float]
    decisions: dict[str, Decision]
    checks: list[dict]
    transport_bytes: dict[str, int]
    model: dict
    items: list[dict]
    shm_files: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float | None:
        gen = self.timings.get("generation_s", 0.0)
        return self.completion_tokens / gen if gen > 0 and self.completion_tokens > 1 else None

    def as_dict(self) -> dict:
        return {
            "request_id": self.request_id,
            "answer": self.answer,
            "finish_reason": self.finish_reason,
            "output_ids": self.output_ids,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens_per_s": self.tokens_per_s,
            "timings_s": {k: round(v, 6) for k, v in self.timings.items()},
            "decisions": {k: v.as_dict() for k, v in self.decisions.items()},
            "checks": self.checks,
            "bytes": self.transport_bytes,
            "model": self.model,
            "items": self.items,
            "shm_files": self.shm_files,
        }


class _ShmAllocator:
    """Pixel tensors written straight into shm segments (the one copy is the write itself).

    ``fallback`` (transport auto): when ``/dev/shm`` fills up, keep going in
    ordinary memory and say so (``problems``) instead of failing.
    """

    def __init__(self, arena: ShmArena, min_bytes: int, fallback: bool = False) -> None:
        self.arena, self.min_bytes, self.fallback = arena, min_bytes, fallback
        self.by_array: dict[int, object] = {}
        self.problems: list[str] = []

    def __call__(self, shape, dtype) -> np.ndarray:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if nbytes < self.min_bytes:
            return np.empty(shape, dtype=dtype)
        segment = _shm_or_none(lambda: self.arena.create(nbytes), self.fallback, self.problems)
        if segment is None:
            return np.empty(shape, dtype=dtype)
        array = segment.array(dtype, shape)
        self.by_array[id(array)] = (segment, array)
        return array

    def segment_of(self, array: np.ndarray):
        entry = self.by_array.get(id(array))
        return entry[0] if entry and entry[1] is array else None


def _shm_or_none(make, fallback: bool, problems: list[str]):
    """``make()``'s segment; ``None`` — the reason added to ``problems`` — when
    ``/dev/shm`` cannot take it and ``fallback`` (transport auto) lets the
    tensor travel inline instead."""
    try:
        return make()
    except ShmUnavailable as err:
        if not fallback:
            raise
        problems.append(err.message)
        return None


def _shm_problem() -> str | None:
    folder = shm_dir()
    if not folder.is_dir():
        return f"{folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    return None


def send(opts: SendOptions) -> SendResult:
    note = opts.on_note or (lambda _msg: None)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    channel = open_channel(opts.target)
    try:
        facts = probe(channel, opts.target, timeout=min(opts.timeout or 10.0, 10.0))
        timings["probe_s"] = time.perf_counter() - started
        model, model_doc = _model(opts, channel, facts)
        return _send(opts, channel, facts, model, model_doc, timings, started, note)
    finally:
        channel.close()


def _model(opts: SendOptions, channel, facts: WorkerFacts) -> tuple[Model, dict]:
    begin = time.perf_counter()
    if opts.model_dir is not None or opts.bundle is not None:
        source: ModelSource = resolve_source(opts.model_dir, opts.bundle)
        origin = {"source": source.label, "from": "--model-dir" if opts.model_dir else "--bundle"}
    else:
        source, bundle = fetch_bundle(
            channel, opts.target, facts.model, refresh=opts.refresh_bundle
        )
        origin = {"source": source.label, "from": "worker GetTokenizer", "bundle": bundle}
    model = load_model(source=source, family=opts.family, overrides=opts.params)
    model.tokenizer  # noqa: B018 - loading it is model set-up, not the request's tokenize time
    origin.update(
        family=model.spec.name,
        served_model_name=facts.model.served_model_name,
        load_s=round(time.perf_counter() - begin, 6),
    )
    return model, origin


@dataclass
class _Prepared:
    """A request ready for the hand-off: a plan (client processing) or a message."""

    kinds: list[MediaKind]
    items: list[dict]
    plan: Any = None  # RequestPlan
    message: Any = None  # GenerateRequest (replay, worker processing)
    allocator: _ShmAllocator | None = None


def _send(opts, channel, facts, model, model_doc, timings, started, note) -> SendResult:
    decisions: dict[str, Decision] = {}
    checks: list[dict] = []
    problem = _shm_problem()
    decisions["transport"] = transport(opts.transport, facts, namespace_id(), problem)
    use_shm = decisions["transport"].value == "shm"
    if use_shm:
        if problem:
            raise ShmUnavailable(
                f"--transport shm: {problem}", hint="use --transport auto or inline"
            )
        swept = sweep_dead()
        if swept:
            note(f"removed {len(swept)} shm file(s) left by dead mmctl processes")
    limits = parse_item_limits(facts.server.mm_item_limits or "")
    with ShmArena() as arena:
        if opts.request_file is not None:
            prepared = _replay(opts, facts, model, decisions, checks)
        elif opts.processing == "worker":
            prepared = _worker_processing(opts, facts, model, decisions, checks, limits, timings)
        else:
            prepared = _client_processing(
                opts, facts, model, decisions, checks, limits, arena, use_shm, timings
            )
        _check_modality_support(prepared.kinds, facts, checks, opts.skip_checks)
        # The hand-off: tensors into shm files (one copy, none when preprocessing
        # wrote them there) or inline, and the request serialized once.
        begin = time.perf_counter()
        moved = {"inline": 0, "shm": 0}
        if prepared.plan is not None:
            place = (
                _ShmPlacer(
                    arena,
                    opts.shm_min_bytes,
                    prepared.allocator,
                    moved,
                    fallback=opts.transport == "auto",
                )
                if use_shm
                else None
            )
            req = prepared.plan.to_proto(place) if place else prepared.plan.to_proto()
            problems = place.problems if place is not None else []
        else:
            req = prepared.message
            problems = (
                _move_inline_to_shm(
                    req, arena, opts.shm_min_bytes, moved, fallback=opts.transport == "auto"
                )
                if use_shm
                else []
            )
        if problems:  # transport auto, /dev/shm filled up: those tensors went inline
            decisions["transport"] = Decision(
                "shm+inline" if moved["shm"] else "inline",
                f"auto: {problems[0]}; those tensors went inline",
            )
            note(f"shared memory: {problems[0]}; falling back to inline")
        moved["inline"] += _inline_bytes(req)
        data = req.SerializeToString()
        moved["request"] = len(data)
        timings["handoff_s"] = time.perf_counter() - begin
        shm_names = [s.name for s in arena.segments]
        result = _generate(opts, channel, req, data, model, timings, started)
        leftover = arena.close()
        if leftover:
            note(f"removed {len(leftover)} shm file(s) the worker did not read")
    result.decisions, result.checks, result.transport_bytes = decisions, checks, moved
    result.model, result.items, result.shm_files = model_doc, prepared.items, shm_names
    return result


def _client_processing(opts, facts, model, decisions, checks, limits, arena, use_shm, timings):
    if not opts.media:
        raise UsageError("give MEDIA files (or --request FILE)")
    kinds = []
    for path in opts.media:
        check_readable(path)
        kinds.append(media_kind(path))
    _check_limits(kinds, limits, checks, opts.skip_checks)
    decisions["pixel_dtype"] = pixel_dtype(facts, opts.pixel_dtype, opts.skip_checks)
    fmt = PixelFormat(decisions["pixel_dtype"].value)
    one_per_kind = all(n == 1 for n in Counter(kinds).values())
    allocator = (
        _ShmAllocator(arena, opts.shm_min_bytes, fallback=opts.transport == "auto")
        if use_shm and one_per_kind
        else None
    )
    composed = compose(
        opts.media,
        opts.prompt,
        model,
        pixel_format=fmt,
        system=opts.system,
        chat=opts.chat,
        sampling=opts.sampling,
        stream=opts.stream,
        request_id=opts.request_id,
        on_frame=opts.on_frame,
        allocate=allocator,
    )
    timings.update(composed.timings)
    budget = int(facts.server.mm_encoder_budget or 0)
    if budget and not opts.skip_checks:
        check_encoder_budget(
            [
                (f"{it.kind.value} {n + 1} ({it.path})", it.pre.num_tokens)
                for n, it in enumerate(composed.items)
            ],
            budget,
            "the worker",
        )
        checks.append({"name": "mm_encoder_budget", "ran": True, "ok": True, "budget": budget})
    _record_walk(composed.check, checks, opts.skip_checks)
    decisions["prompt"] = Decision(composed.rendered.how, "how the prompt text was made")
    items = [
        {
            "path": it.path,
            "kind": it.kind.value,
            "grid_thw": list(it.pre.grid_thw),
            "num_tokens": it.pre.num_tokens,
            "frames": len(it.pre.frame_indices),
            "content_hash": it.content_hash,
        }
        for it in composed.items
    ]
    return _Prepared(kinds, items, plan=composed.plan, allocator=allocator)


def _check_limits(kinds, limits, checks, skip: bool) -> None:
    if not limits:
        checks.append({"name": "mm_item_limits", "ran": False, "reason": "worker advertises none"})
    elif skip:
        checks.append({"name": "mm_item_limits", "ran": False, "reason": "--skip-checks"})
    else:
        check_item_limits([k.value for k in kinds], limits, "the worker")
        checks.append({"name": "mm_item_limits", "ran": True, "ok": True, "limits": limits})


def _record_walk(result, checks, skip: bool) -> None:
    checks.append({"name": "mrope_walk", "ran": True, **result.as_dict()})
    if not result.ok and not skip:
        raise CheckFailed(
            f"mrope walk failed: {result.reason}", hint="--skip-checks sends it anyway"
        )


def _check_modality_support(kinds, facts: WorkerFacts, checks, skip: bool) -> None:
    caps = facts.caps
    if MediaKind.VIDEO not in kinds:
        checks.append({"name": "modality_field", "ran": False, "reason": "no video in the request"})
        return
    if not caps.reflection:
        checks.append(
            {
                "name": "modality_field",
                "ran": False,
                "reason": f"worker offers no reflection ({caps.error})",
            }
        )
        return
    ok = bool(caps.modality)
    checks.append({"name": "modality_field", "ran": True, "ok": ok})
    if not ok and not skip:
        raise CheckFailed(
            "the worker's MultimodalInputs has no `modality` field (reflection): it predates video "
            "support and would treat the video as an image",
            hint="upgrade the worker (smg-grpc-servicer ≥ the modality change), or --skip-checks",
        )


def _worker_processing(opts, facts, model, decisions, checks, limits, timings) -> _Prepared:
    from mmctl.prompt.chat import render

    if not opts.media:
        raise UsageError("--processing worker needs MEDIA files")
    if not facts.server.mm_processor:
        raise CheckFailed(
            "--processing worker: this worker does not process media itself (mm_processor is empty)",
            hint="use --processing client",
        )
    schemes = processing_schemes(facts)
    if opts.media_ref not in schemes:
        raise CheckFailed(
            f"--processing worker: the worker accepts {', '.join(schemes) or 'no'} URL schemes, "
            f"not {opts.media_ref}:",
            hint="file: needs a worker started with --allowed-local-media-path on this host",
        )
    begin = time.perf_counter()
    kinds = []
    for path in opts.media:
        check_readable(path)
        kinds.append(media_kind(path))
    _check_limits(kinds, limits, checks, opts.skip_checks)
    engine, common = proto.engine(), proto.common()
    refs = []
    for path, kind in zip(opts.media, kinds, strict=True):
        if opts.media_ref == "file":
            url = path.resolve().as_uri()  # the worker must see this path (same host)
        else:
            mime = _MIME.get(path.suffix.lower(), "application/octet-stream")
            url = f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()
        refs.append(
            engine.MediaRef(
                modality=common.VIDEO if kind is MediaKind.VIDEO else common.IMAGE, url=url
            )
        )
    parts: list = [*kinds, opts.prompt] if opts.prompt else list(kinds)
    rendered = render(
        parts,
        tokenizer=model.tokenizer,
        token_ids=model.token_ids,
        source=model.source,
        system=opts.system,
        default_system=model.spec.default_system,
        chat=opts.chat,
    )
    ids = model.tokenizer.encode(rendered.text)
    req = engine.GenerateRequest(
        request_id=opts.request_id or new_request_id(),
        tokenized=engine.TokenizedInput(original_text=rendered.text, input_ids=ids),
        sampling_params=opts.sampling.to_proto(),
        stream=opts.stream,
        media_refs=engine.MediaRefs(items=refs),
    )
    timings["tokenize_s"] = time.perf_counter() - begin
    decisions["processing"] = Decision(
        "worker", f"media_refs as {opts.media_ref}: URLs ({facts.server.mm_processor})"
    )
    checks.append({"name": "mrope_walk", "ran": False, "reason": "the worker expands the prompt"})
    items = [
        {"path": str(p), "kind": k.value, "url_bytes": len(r.url)}
        for p, k, r in zip(opts.media, kinds, refs, strict=True)
    ]
    return _Prepared(kinds, items, message=req)


_MIME = {
    ".mp4": "video/mp4",
    ".webm": "video/webm",
    ".mkv": "video/x-matroska",
    ".mov": "video/quicktime",
    ".gif": "image/gif",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
}


def _replay(opts, facts, model, decisions, checks) -> _Prepared:
    from mmctl.request.view import batch_kind, batches, layout_of, read_request

    req = read_request(opts.request_file)
    if opts.request_id:
        req.request_id = opts.request_id
    elif not req.request_id:
        req.request_id = new_request_id()
    kinds = [batch_kind(b) for b in batches(req) for _ in b.mm_placeholders]
    dtypes = {b.pixel_values.dtype for b in batches(req) if b.HasField("pixel_values")}
    want = pixel_dtype(facts, None)
    normalizes = facts.server.mm_device_do_normalize
    for dtype in dtypes:
        # Only a mismatch in normalization is wrong; float widths the worker casts.
        if not opts.skip_checks and normalizes != (dtype == "uint8"):
            raise CheckFailed(
                f"the request file carries {dtype} pixels; this worker wants {want.value} "
                f"({want.reason})",
                hint="rebuild it with --pixel-dtype " + want.value,
            )
    decisions["pixel_dtype"] = Decision(",".join(sorted(dtypes)) or "none", "from the request file")
    layout, grids = layout_of(req)
    _record_walk(check_layout(model, layout, grids), checks, opts.skip_checks)
    items = [
        {"kind": s.kind.value, "grid_thw": list(g)}
        for s, g in zip(layout.spans, grids, strict=True)
    ]
    return _Prepared(kinds, items, message=req)


class _ShmPlacer:
    """Tensors of at least ``min_bytes`` go to shm, the rest inline.

    ``fallback`` (transport auto): a tensor that no longer fits in ``/dev/shm``
    travels inline, and ``problems`` says so.
    """

    def __init__(
        self,
        arena: ShmArena,
        min_bytes: int,
        allocator: _ShmAllocator | None,
        moved: dict,
        fallback: bool = False,
    ):
        self.arena, self.min_bytes, self.allocator, self.moved = arena, min_bytes, allocator, moved
        self.fallback = fallback
        self.problems: list[str] = list(allocator.problems) if allocator else []

    def __call__(self, key: str, array: np.ndarray, dtype: str):
        data = tensors.wire_array(array, dtype)
        if data.nbytes < self.min_bytes:
            return tensors.inline(data, dtype)
        segment = self.allocator.segment_of(array) if self.allocator else None
        if segment is None:
            segment = _shm_or_none(lambda: self.arena.put(data), self.fallback, self.problems)
            if segment is None:
                return tensors.inline(data, dtype)
        self.moved["shm"] += segment.nbytes
        return _handle(segment, data.shape, dtype)


def _handle(segment, shape, dtype: str):
    engine, common = proto.engine(), proto.common()
    return engine.TensorData(
        shape=list(shape),
        dtype=dtype,
        shm=common.ShmHandle(
            name=segment.name, offset=0, nbytes=segment.nbytes, owner_id=str(os.getpid())
        ),
    )


def _move_inline_to_shm(
    req, arena: ShmArena, min_bytes: int, moved: dict, fallback: bool = False
) -> list[str]:
    """Move a replayed request's large inline tensors into shm; returns problems
    (``fallback``: a tensor that no longer fits stays inline)."""
    from mmctl.request.view import batches, tensor_fields

    problems: list[str] = []
    for batch in batches(req):
        for _, td in tensor_fields(batch):
            if td.WhichOneof("payload") != "inline" or len(td.inline) < min_bytes:
                continue
            raw = np.frombuffer(td.inline, dtype=np.uint8)
            segment = _shm_or_none(lambda raw=raw: arena.put(raw), fallback, problems)
            if segment is None:
                continue
            moved["shm"] += segment.nbytes
            td.CopyFrom(_handle(segment, td.shape, td.dtype))
    return problems


def _inline_bytes(req) -> int:
    from mmctl.request.view import batches, tensor_fields

    return sum(
        len(td.inline)
        for batch in batches(req)
        for _, td in tensor_fields(batch)
        if td.WhichOneof("payload") == "inline"
    )


def _generate(opts, channel, req, data: bytes, model: Model, timings, started) -> SendResult:
    engine = proto.engine()
    call_fn = channel.unary_stream(
        GENERATE, request_serializer=None, response_deserializer=engine.GenerateResponse.FromString
    )
    tok = model.tokenizer
    tokens: list[int] = []
    shown = ""
    complete = None
    first = None
    begin = time.perf_counter()
    call = call_fn(data, timeout=opts.timeout, metadata=list(opts.target.headers))
    try:
        for resp in call:
            now = time.perf_counter()
            if first is None:
                first = now
            if resp.HasField("chunk"):
                tokens.extend(resp.chunk.token_ids)
                if opts.on_text is not None:
                    text = tok.decode(tokens, skip_special_tokens=True)
                    if text.startswith(shown) and len(text) > len(shown):
                        opts.on_text(text[len(shown) :])
                        shown = text
            else:
                complete = resp.complete
                if not req.stream:
                    tokens.extend(complete.output_ids)
    except grpc.RpcError as err:
        raise as_error(err, opts.target, f"Generate {req.request_id}") from None
    finally:
        call.cancel()  # no-op when done; on Ctrl-C it stops the worker's work
    end = time.perf_counter()
    if complete is None:
        raise InputError(f"Generate {req.request_id}: the stream ended without a completion")
    answer = tok.decode(tokens, skip_special_tokens=True)
    if opts.on_text is not None and answer.startswith(shown) and len(answer) > len(shown):
        opts.on_text(answer[len(shown) :])
    timings["ttft_s"] = (first or end) - begin
    timings["generation_s"] = end - (first or end)
    timings["total_s"] = end - started
    return SendResult(
        request_id=req.request_id,
        answer=answer,
        finish_reason=complete.finish_reason,
        output_ids=tokens,
        prompt_tokens=complete.prompt_tokens or len(req.tokenized.input_ids),
        completion_tokens=len(tokens),
        timings=timings,
        decisions={},
        checks=[],
        transport_bytes={},
        model={},
        items=[],
    )
