"""The main job: media → worker → answer, with every decision and timing recorded.

:func:`send` is one call: check the local inputs (before the worker is
contacted, so a missing file is exit 3 whatever the network does), open a
:class:`Session` — connect, probe the worker, get its model files, load the
tokenizer — then negotiate pixel dtype / transport / limits, preprocess
(straight into shared memory when the tensor will travel that way), build
and check the request, ship it and stream the answer. A :class:`Session`
serves many requests on one set-up (``mmctl demo`` sends inline and shm
side by side on one). Every phase is a lap of one
:class:`~mmctl.timing.Timeline`, so the timing rows sum to the total. Every
shared-memory file the worker did not consume is removed on the way out,
whatever ended the call (error, deadline, Ctrl-C).
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from mmctl.choices import DEFAULT_PROMPT, MediaRef, PixelFormat, Processing, Transport
from mmctl.client.bundle import fetch_bundle
from mmctl.client.channel import Target, as_error, open_channel
from mmctl.client.negotiate import Decision, pixel_dtype, processing_schemes, transport
from mmctl.client.worker import WorkerFacts, probe
from mmctl.errors import CheckFailed, UsageError, WorkerUnavailable
from mmctl.media.probe import MediaKind, check_media
from mmctl.models.base import VisionOverrides
from mmctl.models.model import Model, load_model
from mmctl.models.source import ModelSource
from mmctl.models.source import resolve as resolve_source
from mmctl.request import tensors
from mmctl.request.build import Sampling, new_request_id
from mmctl.request.compose import check_layout, compose
from mmctl.request.limits import check_encoder_budget, check_item_limits, parse_item_limits
from mmctl.timing import Timeline
from mmctl.transport.shm import ShmArena, ShmUnavailable, namespace_id, shm_dir, sweep_dead
from mmctl.wire import proto

GENERATE = "/vllm.grpc.engine.VllmEngine/Generate"
#: Probing calls wait at most this long, whatever the request's own deadline.
PROBE_TIMEOUT_S = 10.0


@dataclass
class SendOptions:
    target: Target
    media: list[Path] = field(default_factory=list)
    prompt: str | None = None  # None: DEFAULT_PROMPT for new requests
    request_file: Path | None = None
    transport: Transport = Transport.AUTO
    shm_min_bytes: int = 64 * 1024
    pixel_dtype: PixelFormat | None = None  # None: negotiated with the worker
    processing: Processing = Processing.CLIENT
    media_ref: MediaRef = MediaRef.DATA  # how --processing worker names the media
    sampling: Sampling = field(default_factory=Sampling)
    stream: bool | None = None  # None: stream new requests, keep a replay's choice
    timeout: float | None = None
    request_id: str | None = None
    model_dir: Path | None = None
    bundle: Path | None = None
    refresh_bundle: bool = False
    family: str | None = None
    vision: VisionOverrides = field(default_factory=VisionOverrides)
    system: str | None = None
    chat: bool | None = None  # None: the chat format
    allow_special_tokens: bool = False
    strict: bool = False
    skip_checks: bool = False
    on_text: Callable[[str], None] | None = None  # streamed answer text, as it arrives
    on_frame: Callable[[int, int], None] | None = None
    on_note: Callable[[str], None] | None = None
    on_warning: Callable[[str], None] | None = None


@dataclass
class SendResult:
    request_id: str
    answer: str
    finish_reason: str
    output_ids: list[int]
    prompt_tokens: int
    completion_tokens: int
    #: Consecutive phases in the order they ran — ``inputs_s``, ``probe_s``,
    #: ``model_files_s``, ``tokenizer_s`` (set-up, when this call opened the
    #: session), ``decode_s``, ``hash_s``, ``tokenize_s``, ``handoff_s``,
    #: ``ttft_s``, ``generation_s`` — and ``total_s``, exactly their sum.
    timings: dict[str, float]
    decisions: dict[str, Decision]
    checks: list[dict]
    transport_bytes: dict[str, int]
    model: dict
    items: list[dict]
    shm_files: list[str] = field(default_factory=list)
    #: Resize + normalize + patchify busy time, inside ``decode_s``.
    preprocess_busy_s: float = 0.0
    warnings: list[str] = field(default_factory=list)

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
            "overlapped_s": {"preprocess_s": round(self.preprocess_busy_s, 6)},
            "decisions": {k: v.as_dict() for k, v in self.decisions.items()},
            "checks": self.checks,
            "bytes": self.transport_bytes,
            "model": self.model,
            "items": self.items,
            "shm_files": self.shm_files,
            "warnings": self.warnings,
        }


@dataclass
class Inputs:
    """The local inputs of one send, checked before any network call."""

    kinds: list[MediaKind]
    request: Any = None  # GenerateRequest read from --request
    source: ModelSource | None = None  # --model-dir / --bundle


def check_inputs(opts: SendOptions) -> Inputs:
    """Everything about a send that can be checked without the worker.

    Options that cannot apply are refused by name rather than ignored.
    """
    if bool(opts.media) == (opts.request_file is not None):
        raise UsageError("give MEDIA files or --request FILE (one of the two)")
    if opts.timeout is not None and not opts.timeout > 0:
        raise UsageError(f"--timeout must be positive, got {opts.timeout}")
    if opts.shm_min_bytes < 0:
        raise UsageError(f"--shm-min-bytes must not be negative, got {opts.shm_min_bytes}")
    if opts.request_file is not None:
        _refuse("--request replays a recorded request", _request_shapers(opts))
    elif opts.processing is Processing.WORKER:
        shaping = [f"--{n.replace('_', '-')}" for n in opts.vision.given()]
        shaping += ["--pixel-dtype"] if opts.pixel_dtype is not None else []
        shaping += ["--strict"] if opts.strict else []
        _refuse("--processing worker leaves preprocessing to the worker", shaping)
    if opts.processing is not Processing.WORKER and opts.media_ref is not MediaRef.DATA:
        raise UsageError("--media-ref applies only with --processing worker")
    if opts.refresh_bundle and (opts.model_dir is not None or opts.bundle is not None):
        raise UsageError(
            "--refresh-bundle fetches the worker's files; it cannot apply with "
            "--model-dir or --bundle"
        )
    kinds = [check_media(path) for path in opts.media]
    request = None
    if opts.request_file is not None:
        from mmctl.request.view import batch_kind, batches, read_request

        request = read_request(opts.request_file)
        kinds = [batch_kind(b) for b in batches(request) for _ in b.mm_placeholders]
    source = None
    if opts.model_dir is not None or opts.bundle is not None:
        source = resolve_source(opts.model_dir, opts.bundle)
    return Inputs(kinds, request, source)


def _request_shapers(opts: SendOptions) -> list[str]:
    """The options given that shape a new request (a recorded one is fixed)."""
    given = [
        ("--prompt", opts.prompt is not None),
        ("--system", opts.system is not None),
        ("--chat/--no-chat", opts.chat is not None),
        ("--allow-special-tokens", opts.allow_special_tokens),
        ("--pixel-dtype", opts.pixel_dtype is not None),
        ("--processing worker", opts.processing is Processing.WORKER),
        ("--strict", opts.strict),
    ]
    names = [name for name, set_ in given if set_]
    return names + [f"--{n.replace('_', '-')}" for n in opts.vision.given()]


def _refuse(why: str, names: list[str]) -> None:
    if names:
        raise UsageError(
            f"{why}; it cannot apply {', '.join(names)}",
            hint="drop those options (sampling, --timeout, --request-id and the transport apply)"
            if why.startswith("--request")
            else "drop those options",
        )


class Session:
    """One worker connection, its facts and its model: set up once, many sends.

    ``setup`` holds the laps of the set-up (``probe_s``, ``model_files_s``,
    ``tokenizer_s``).
    """

    def __init__(self, target: Target, channel, facts: WorkerFacts, model: Model, model_doc):
        self.target, self.channel, self.facts = target, channel, facts
        self.model, self.model_doc = model, model_doc
        self.setup: dict[str, float] = {}

    @classmethod
    def open(
        cls, opts: SendOptions, source: ModelSource | None = None, timeline: Timeline | None = None
    ) -> Session:
        """Connect and probe, get the model files (``source`` or the worker's
        bundle) and load the tokenizer, each a lap of ``timeline``."""
        timeline = timeline or Timeline()
        setup: dict[str, float] = {}
        channel = open_channel(opts.target)
        try:
            probe_timeout = min(opts.timeout or PROBE_TIMEOUT_S, PROBE_TIMEOUT_S)
            facts = probe(channel, opts.target, timeout=probe_timeout)
            setup["probe_s"] = timeline.lap("probe_s")
            if source is not None:
                origin = {
                    "source": source.label,
                    "from": "--model-dir" if opts.model_dir else "--bundle",
                }
            else:
                source, bundle = fetch_bundle(
                    channel, opts.target, facts.model, refresh=opts.refresh_bundle
                )
                origin = {"source": source.label, "from": "worker GetTokenizer", "bundle": bundle}
            model = load_model(source=source, family=opts.family, overrides=opts.vision)
            setup["model_files_s"] = timeline.lap("model_files_s")
            model.tokenizer  # noqa: B018 - loading it is set-up, not the request's tokenize time
            setup["tokenizer_s"] = timeline.lap("tokenizer_s")
        except BaseException:
            channel.close()
            raise
        origin.update(family=model.spec.name, served_model_name=facts.model.served_model_name)
        session = cls(opts.target, channel, facts, model, origin)
        session.setup = setup
        return session

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(
        self, opts: SendOptions, inputs: Inputs | None = None, timeline: Timeline | None = None
    ) -> SendResult:
        """One request on this session; ``timeline`` gets its laps."""
        timeline = timeline or Timeline()
        if inputs is None:
            inputs = check_inputs(opts)
            timeline.lap("inputs_s")
        result = _send(opts, inputs, self, timeline)
        result.timings = timeline.rows()
        return result


def send(opts: SendOptions) -> SendResult:
    """One request on its own session: every row from local checks to the
    last token, summing to ``total_s``."""
    timeline = Timeline()
    inputs = check_inputs(opts)
    timeline.lap("inputs_s")
    with Session.open(opts, inputs.source, timeline) as session:
        return session.send(opts, inputs, timeline)


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

    def release_except(self, keep: list[np.ndarray]) -> None:
        """Remove the files of allocations that ``keep`` does not hold."""
        kept = {id(a) for a in keep}
        for key, (segment, _array) in list(self.by_array.items()):
            if key not in kept:
                del self.by_array[key]
                self.arena.discard(segment)


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


@dataclass
class _Prepared:
    """A request ready for the hand-off: a plan (client processing) or a message."""

    kinds: list[MediaKind]
    items: list[dict]
    plan: Any = None  # RequestPlan
    message: Any = None  # GenerateRequest (replay, worker processing)
    allocator: _ShmAllocator | None = None
    preprocess_busy_s: float = 0.0
    warnings: list[str] = field(default_factory=list)


def _send(opts: SendOptions, inputs: Inputs, session: Session, timeline: Timeline) -> SendResult:
    note = opts.on_note or (lambda _msg: None)
    facts, model = session.facts, session.model
    decisions: dict[str, Decision] = {}
    checks: list[dict] = []
    problem = _shm_problem()
    decisions["transport"] = transport(opts.transport.value, facts, namespace_id(), problem)
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
        if inputs.request is not None:
            prepared = _replay(opts, inputs.request, facts, model, decisions, checks)
        elif opts.processing is Processing.WORKER:
            prepared = _worker_processing(opts, inputs, facts, model, decisions, checks, limits)
        else:
            prepared = _client_processing(
                opts, inputs, facts, model, decisions, checks, limits, arena, use_shm, timeline
            )
        for warning in prepared.warnings:
            if opts.on_warning is not None:
                opts.on_warning(warning)
        _check_modality_support(prepared.kinds, facts, checks, opts.skip_checks)
        timeline.lap("tokenize_s")
        # The hand-off: tensors into shm files (one copy, none when preprocessing
        # wrote them there) or inline, and the request serialized once.
        moved = {"inline": 0, "shm": 0}
        fallback = opts.transport is Transport.AUTO
        if prepared.plan is not None:
            place = (
                _ShmPlacer(arena, opts.shm_min_bytes, prepared.allocator, moved, fallback)
                if use_shm
                else None
            )
            req = prepared.plan.to_proto(place) if place else prepared.plan.to_proto()
            problems = place.problems if place is not None else []
        else:
            req = prepared.message
            problems = (
                _move_inline_to_shm(req, arena, opts.shm_min_bytes, moved, fallback)
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
        timeline.lap("handoff_s")
        shm_names = [s.name for s in arena.segments]
        result = _generate(opts, session, req, data, timeline)
        leftover = arena.close()
        if leftover:
            note(f"removed {len(leftover)} shm file(s) the worker did not read")
    result.decisions, result.checks, result.transport_bytes = decisions, checks, moved
    result.model, result.items, result.shm_files = session.model_doc, prepared.items, shm_names
    result.preprocess_busy_s, result.warnings = prepared.preprocess_busy_s, prepared.warnings
    return result


def _client_processing(
    opts: SendOptions,
    inputs: Inputs,
    facts: WorkerFacts,
    model: Model,
    decisions: dict[str, Decision],
    checks: list[dict],
    limits: dict[str, int],
    arena: ShmArena,
    use_shm: bool,
    timeline: Timeline,
) -> _Prepared:
    kinds = inputs.kinds
    _check_limits(kinds, limits, checks, opts.skip_checks)
    decisions["pixel_dtype"] = pixel_dtype(
        facts, opts.pixel_dtype.value if opts.pixel_dtype else None, opts.skip_checks
    )
    fmt = PixelFormat(decisions["pixel_dtype"].value)
    one_per_kind = all(n == 1 for n in Counter(kinds).values())
    allocator = (
        _ShmAllocator(arena, opts.shm_min_bytes, fallback=opts.transport is Transport.AUTO)
        if use_shm and one_per_kind
        else None
    )
    composed = compose(
        opts.media,
        DEFAULT_PROMPT if opts.prompt is None else opts.prompt,
        model,
        pixel_format=fmt,
        system=opts.system,
        chat=opts.chat is not False,
        allow_special_tokens=opts.allow_special_tokens,
        sampling=opts.sampling,
        stream=opts.stream is not False,
        request_id=opts.request_id,
        strict=opts.strict,
        on_frame=opts.on_frame,
        allocate=allocator,
        timeline=timeline,
    )
    if allocator is not None:
        # A video whose frame count was mispredicted was decoded twice; the
        # first pass's file is ours to drop, never the worker's to read.
        allocator.release_except([it.pre.pixel_values for it in composed.items])
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
    return _Prepared(
        kinds,
        items,
        plan=composed.plan,
        allocator=allocator,
        preprocess_busy_s=composed.preprocess_busy_s,
        warnings=composed.warnings,
    )


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


def _worker_processing(
    opts: SendOptions,
    inputs: Inputs,
    facts: WorkerFacts,
    model: Model,
    decisions: dict[str, Decision],
    checks: list[dict],
    limits: dict[str, int],
) -> _Prepared:
    from mmctl.prompt.chat import render

    if not facts.server.mm_processor:
        raise CheckFailed(
            "--processing worker: this worker does not process media itself (mm_processor is empty)",
            hint="use --processing client",
        )
    schemes = processing_schemes(facts)
    if opts.media_ref.value not in schemes:
        raise CheckFailed(
            f"--processing worker: the worker accepts {', '.join(schemes) or 'no'} URL schemes, "
            f"not {opts.media_ref.value}:",
            hint="file: needs a worker started with --allowed-local-media-path on this host",
        )
    kinds = inputs.kinds
    _check_limits(kinds, limits, checks, opts.skip_checks)
    engine, common = proto.engine(), proto.common()
    refs = []
    for path, kind in zip(opts.media, kinds, strict=True):
        if opts.media_ref is MediaRef.FILE:
            url = path.resolve().as_uri()  # the worker must see this path (same host)
        else:
            mime = _MIME.get(path.suffix.lower(), "application/octet-stream")
            url = f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()
        refs.append(
            engine.MediaRef(
                modality=common.VIDEO if kind is MediaKind.VIDEO else common.IMAGE, url=url
            )
        )
    prompt = DEFAULT_PROMPT if opts.prompt is None else opts.prompt
    parts: list = [*kinds, prompt] if prompt else list(kinds)
    rendered = render(
        parts,
        tokenizer=model.tokenizer,
        token_ids=model.token_ids,
        source=model.source,
        system=opts.system,
        default_system=model.spec.default_system,
        chat=opts.chat is not False,
        allow_special_tokens=opts.allow_special_tokens,
    )
    ids = model.tokenizer.encode(rendered.text)
    req = engine.GenerateRequest(
        request_id=opts.request_id or new_request_id(),
        tokenized=engine.TokenizedInput(original_text=rendered.text, input_ids=ids),
        sampling_params=opts.sampling.to_proto(),
        stream=opts.stream is not False,
        media_refs=engine.MediaRefs(items=refs),
    )
    decisions["processing"] = Decision(
        "worker", f"media_refs as {opts.media_ref.value}: URLs ({facts.server.mm_processor})"
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


def _replay(
    opts: SendOptions,
    req,
    facts: WorkerFacts,
    model: Model,
    decisions: dict[str, Decision],
    checks: list[dict],
) -> _Prepared:
    """A recorded request, with what can apply to it: request id, sampling,
    streaming (the transport placement follows in the hand-off)."""
    from mmctl.request.view import batch_kind, batches, layout_of

    if opts.request_id:
        req.request_id = opts.request_id
    elif not req.request_id:
        req.request_id = new_request_id()
    opts.sampling.apply_to(req.sampling_params)
    if opts.stream is not None:
        req.stream = opts.stream
    applied = opts.sampling.given() + (["stream"] if opts.stream is not None else [])
    decisions["replay"] = Decision(
        f"changed {', '.join(applied)}" if applied else "as recorded",
        f"request file {opts.request_file}",
    )
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


def _generate(
    opts: SendOptions, session: Session, req, data: bytes, timeline: Timeline
) -> SendResult:
    engine = proto.engine()
    call_fn = session.channel.unary_stream(
        GENERATE, request_serializer=None, response_deserializer=engine.GenerateResponse.FromString
    )
    tok = session.model.tokenizer
    tokens: list[int] = []
    shown = ""
    complete = None
    first = True
    call = call_fn(data, timeout=opts.timeout, metadata=list(session.target.headers))
    try:
        for resp in call:
            if first:
                timeline.lap("ttft_s")
                first = False
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
        raise as_error(err, session.target, f"Generate {req.request_id}") from None
    finally:
        call.cancel()  # no-op when done; on Ctrl-C it stops the worker's work
    if first:
        timeline.lap("ttft_s")
    if complete is None:
        raise WorkerUnavailable(f"Generate {req.request_id}: the stream ended without a completion")
    answer = tok.decode(tokens, skip_special_tokens=True)
    if opts.on_text is not None and answer.startswith(shown) and len(answer) > len(shown):
        opts.on_text(answer[len(shown) :])
    timeline.lap("generation_s")
    return SendResult(
        request_id=req.request_id,
        answer=answer,
        finish_reason=complete.finish_reason,
        output_ids=tokens,
        prompt_tokens=complete.prompt_tokens or len(req.tokenized.input_ids),
        completion_tokens=len(tokens),
        timings={},
        decisions={},
        checks=[],
        transport_bytes={},
        model={},
        items=[],
    )
