"""One request, as a plan and a run: prepare it, then generate.

:func:`prepare` does everything before the network call for the answer —
negotiate the pixel dtype and transport with the worker's facts, preprocess
(straight into shared memory when the tensor will travel that way), build
and check the request, place the tensors and serialize once. It returns a
:class:`Ready` request. Generating is the caller's: :func:`generate` on a
blocking channel, or ``mmctl.AsyncClient`` on ``grpc.aio``; both feed the
responses to one :class:`Answer` and end with :func:`finish`, which removes
every shared-memory file the worker did not consume.

Everything the run decides and checks is recorded on its :class:`Run` — each
decision with its reason, each :class:`Check` (ran or why not), the bytes
moved, and every phase as a lap of one timeline, so the timing rows add up.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mmctl.choices import (
    DEFAULT_MAX_TOKENS,
)
from mmctl.client.channel import as_error, generate_method, response
from mmctl.client.negotiate import Decision, choose_pixels
from mmctl.client.options import Hooks, Inputs, SendOptions, refuse
from mmctl.client.placement import ShmAllocator, inline_bytes
from mmctl.client.route import Route, choose, for_media_refs
from mmctl.client.session import Session
from mmctl.client.stream import TokenStream
from mmctl.errors import CheckFailed, GenerationIncomplete, MmctlError, WorkerRejected
from mmctl.media.probe import MediaKind
from mmctl.models.family import Family
from mmctl.models.model import Model, WorkerModel
from mmctl.request.build import new_request_id
from mmctl.request.compose import Composed, compose
from mmctl.request.limits import (
    check_context,
    check_encoder_budget,
    check_item_limits,
    check_prompt_length,
    parse_item_limits,
)
from mmctl.request.pixel_cache import PixelCache, Pixels, Stats, describe
from mmctl.timing import Timeline
from mmctl.transport.shm import ShmArena, sweep_dead


@dataclass(frozen=True)
class Check:
    """A safety check: whether it ran, passed, or why it did not run."""

    name: str
    ran: bool
    ok: bool | None = None
    reason: str | None = None  # why it did not run, or why it failed
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "ran": self.ran}
        if self.ok is not None:
            doc["ok"] = self.ok
        if self.reason is not None:
            doc["reason"] = self.reason
        return {**doc, **self.detail}


@dataclass
class Run:
    """One request's account, filled as it goes."""

    timeline: Timeline
    decisions: dict[str, Decision] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    moved: dict[str, int] = field(default_factory=lambda: {"inline": 0, "shm": 0})
    kinds: tuple[MediaKind, ...] = ()
    items: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Resize + normalize + patchify busy time, inside the ``decode_s`` lap.
    preprocess_busy_s: float = 0.0
    #: Files of dead mmctl processes removed from /dev/shm before sending.
    swept: list[str] = field(default_factory=list)
    #: This request's pixel-cache account (:func:`mmctl.request.pixel_cache.describe`).
    pixel_cache: dict[str, Any] = field(default_factory=dict)


@dataclass
class SendResult:
    request_id: str
    answer: str
    finish_reason: str
    output_ids: list[int]
    prompt_tokens: int
    completion_tokens: int
    #: Consecutive phases in the order they ran — ``inputs_s``, then the
    #: set-up when this call paid for it (``probe_s``, ``model_files_s``,
    #: ``tokenizer_s``), ``hash_s``, ``decode_s`` (``pixel_cache_s`` for
    #: media the pixel cache had), ``tokenize_s``,
    #: ``handoff_s`` (``queued_s`` when :meth:`Client.send_many` built it
    #: ahead), ``ttft_s``, ``generation_s`` — and ``total_s``, exactly their sum.
    timings: dict[str, float]
    decisions: dict[str, Decision]
    checks: list[Check]
    transport_bytes: dict[str, int]
    model: dict[str, Any]
    items: list[dict[str, Any]]
    shm_files: list[str] = field(default_factory=list)
    #: Files of dead mmctl processes this send removed from /dev/shm first.
    shm_swept: list[str] = field(default_factory=list)
    #: Resize + normalize + patchify busy time, inside ``decode_s``.
    preprocess_busy_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    #: ``hits``/``misses`` of this request's media and the ``bytes`` served from
    #: the pixel cache, with the cache's own account (``cache``; its
    #: ``budget_bytes`` 0 when off); empty for replays and worker processing.
    pixel_cache: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float | None:
        gen = self.timings.get("generation_s", 0.0)
        return self.completion_tokens / gen if gen > 0 and self.completion_tokens > 1 else None

    def partial(self) -> GenerationIncomplete | None:
        """The error a caller raises after showing an aborted answer (``finish_reason``
        abort: the worker stopped the generation, so the text is a prefix)."""
        if self.finish_reason != "abort":
            return None
        return GenerationIncomplete(
            f"the worker aborted the generation after {self.completion_tokens} tokens "
            "(finish_reason abort): the answer above is partial",
            hint="was the worker shutting down, or was the request aborted?",
        )

    def as_dict(self) -> dict[str, Any]:
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
            "checks": [c.as_dict() for c in self.checks],
            "bytes": self.transport_bytes,
            "model": self.model,
            "items": self.items,
            "shm_files": self.shm_files,
            "shm_swept": self.shm_swept,
            "warnings": self.warnings,
            "pixel_cache": self.pixel_cache,
        }


@dataclass
class Ready:
    """A request placed and serialized, waiting for ``Generate``."""

    run: Run
    request: Any  # GenerateRequest
    data: bytes
    arena: ShmArena
    shm_names: list[str]


# ---- prepare ------------------------------------------------------------------


def prepare(
    session: Session,
    opts: SendOptions,
    inputs: Inputs,
    hooks: Hooks,
    timeline: Timeline,
    cache: PixelCache[Pixels] | None = None,
) -> Ready:
    """Everything before ``Generate``; the arena's files are the caller's to
    remove (:func:`finish`) from here on. ``cache``: where preprocessed media
    are kept across requests (the client's)."""
    run = Run(timeline, kinds=inputs.kinds)
    sound = MediaKind.AUDIO in inputs.kinds
    choice = (
        None
        if inputs.request is not None
        else session.processing(opts, hooks, sound=sound, kinds=inputs.kinds)
    )
    replays_refs = inputs.request is not None and inputs.request.HasField("media_refs")
    if (choice is not None and choice.worker) or replays_refs:
        route = for_media_refs(opts.transport)
    else:
        route = choose(opts.transport, session.facts, opts.shm_min_bytes)
    run.decisions["transport"] = route.decision
    if route.shm:
        # Said in --json only: on a machine others share, their killed
        # clients' leftovers are not this command's news.
        run.swept = sweep_dead()
    arena = ShmArena()
    try:
        if choice is None:
            request, plan = _replay(session, opts, inputs, run), None
        elif choice.worker:
            run.decisions["processing"] = choice.decision
            request, plan = _worker_processing(session, opts, inputs, run), None
        else:
            run.decisions["processing"] = choice.decision
            single = all(n == 1 for n in Counter(inputs.kinds).values())
            allocator = route.allocator(arena, single)
            composed = _client_processing(session, opts, inputs, run, hooks, allocator, cache)
            request, plan = None, (composed, allocator)
        for warning in run.warnings:
            hooks.warn(warning)
        _check_modality_support(session, run, opts.skip_checks)
        timeline.lap("tokenize_s")
        request, data = _hand_off(route, run, arena, request, plan, hooks)
        run.moved["request"] = len(data)
        timeline.lap("handoff_s")
    except BaseException:
        arena.close()
        raise
    return Ready(run, request, data, arena, [s.name for s in arena.segments])


def _hand_off(
    route: Route,
    run: Run,
    arena: ShmArena,
    request: Any,
    plan: tuple[Composed, ShmAllocator | None] | None,
    hooks: Hooks,
) -> tuple[Any, bytes]:
    """Tensors into shm files (one copy, none when preprocessing wrote them
    there) or inline, as the route says; the message (without a spliced
    tensor's bytes) and the bytes the worker gets."""
    spliced = 0
    problems: list[str]
    if plan is not None:
        composed, allocator = plan
        encoding = route.encode(composed.plan, arena, run.moved, allocator)
        encoded = encoding.encoded
        request, data, spliced = encoded.request, encoded.data, encoded.spliced
        problems = list(encoding.problems)
    else:
        problems = route.place_recorded(request, arena, run.moved)
        data = request.SerializeToString()
    if problems:  # transport auto, /dev/shm filled up: those tensors went inline
        run.decisions["transport"] = Decision(
            "shm+inline" if run.moved["shm"] else "inline",
            f"auto: {problems[0]}; those tensors went inline",
        )
        hooks.note(f"shared memory: {problems[0]}; falling back to inline")
    run.moved["inline"] += inline_bytes(request) + spliced
    return request, data


def _client_processing(
    session: Session,
    opts: SendOptions,
    inputs: Inputs,
    run: Run,
    hooks: Hooks,
    allocator: ShmAllocator | None,
    cache: PixelCache[Pixels] | None,
) -> Composed:
    facts, model = session.facts, session.family_model()
    _check_limits(session, run, opts.skip_checks)
    pixels = choose_pixels(facts, opts.pixel_dtype, skip_checks=opts.skip_checks, family=model.spec)
    run.decisions["pixel_dtype"] = pixels.decision
    if pixels.decision.warning:
        run.warnings.append(pixels.decision.warning)
    if opts.vision.given():
        model = model.with_vision(opts.vision)
    limit = int(facts.model.max_context_length or 0)
    if limit and not opts.skip_checks:
        text = (opts.prompt or "") + (opts.system or "")
        check_prompt_length(
            model.tokenizer.least_tokens(text, limit),
            opts.sampling.max_tokens or DEFAULT_MAX_TOKENS,
            limit,
        )
    composed = compose(
        list(inputs.media),
        opts.prompt,
        model,
        pixel_format=pixels.format,
        system=opts.system,
        chat=opts.chat is not False,
        allow_special_tokens=opts.allow_special_tokens,
        sampling=opts.sampling,
        stream=opts.stream is not False,
        request_id=opts.request_id,
        strict=opts.strict,
        on_frame=hooks.on_frame,
        allocate=allocator,
        timeline=run.timeline,
        kinds=inputs.kinds,
        cache=cache,
    )
    run.pixel_cache = {
        **describe(composed.cached, composed.cached_bytes),
        "cache": cache.snapshot().as_dict() if cache is not None else Stats(0).as_dict(),
    }
    if allocator is not None:
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
        run.checks.append(Check("mm_encoder_budget", True, True, detail={"budget": budget}))
    _record_walk(run, model.spec, composed.check, opts.skip_checks)
    run.decisions["prompt"] = Decision(composed.rendered.how, "how the prompt text was made")
    run.items = [
        {
            "path": it.path,
            **it.pre.facts.as_dict(),
            "frames": len(it.pre.frame_indices),
            "content_hash": it.content_hash,
            "pixel_cache": how,
        }
        for it, how in zip(composed.items, composed.cached, strict=True)
    ]
    _check_context(session, run, len(composed.layout.ids), opts)
    run.preprocess_busy_s = composed.preprocess_busy_s
    run.warnings.extend(composed.warnings)
    return composed


def _check_context(session: Session, run: Run, prompt_tokens: int, opts: SendOptions) -> None:
    """The prompt and the tokens asked for must fit the worker's context:
    vLLM refuses the request only after the pixels were shipped."""
    limit = int(session.facts.model.max_context_length or 0)
    if not limit:
        run.checks.append(Check("context_length", False, reason="worker advertises none"))
        return
    if opts.skip_checks:
        run.checks.append(Check("context_length", False, reason="--skip-checks"))
        return
    wanted = opts.sampling.max_tokens or DEFAULT_MAX_TOKENS
    check_context(prompt_tokens, wanted, limit)
    detail = {"limit": limit, "prompt_tokens": prompt_tokens, "max_tokens": wanted}
    run.checks.append(Check("context_length", True, True, detail=detail))


def _check_limits(session: Session, run: Run, skip: bool) -> None:
    limits = parse_item_limits(session.facts.server.mm_item_limits or "")
    if not limits:
        run.checks.append(Check("mm_item_limits", False, reason="worker advertises none"))
    elif skip:
        run.checks.append(Check("mm_item_limits", False, reason="--skip-checks"))
    else:
        check_item_limits([k.value for k in run.kinds], limits, "the worker")
        run.checks.append(Check("mm_item_limits", True, True, detail={"limits": limits}))


def _record_walk(run: Run, family: Family, result: Any, skip: bool) -> None:
    """The family's layout check (Qwen's mrope walk) as one of the run's checks."""
    detail = {k: v for k, v in result.as_dict().items() if k not in ("ok", "reason")}
    run.checks.append(Check(family.prompt.check_name, True, result.ok, result.reason, detail))
    if not result.ok and not skip:
        raise CheckFailed(family.check_failed(result.reason), hint="--skip-checks sends it anyway")


def _check_modality_support(session: Session, run: Run, skip: bool) -> None:
    """A worker without ``MultimodalInputs.modality`` reads video as an image.
    Reflection shows the field; without reflection, the 0.4.28 capability
    fields in ``GetServerInfo`` (which came after ``modality``) prove a new
    enough worker; without either, video is refused unless ``--skip-checks``."""
    facts = session.facts
    caps = facts.caps
    if MediaKind.VIDEO not in run.kinds:
        run.checks.append(Check("modality_field", False, reason="no video in the request"))
        return
    if not caps.reflection:
        if facts.knows_capabilities:
            run.checks.append(
                Check(
                    "modality_field",
                    True,
                    True,
                    detail={"by": "GetServerInfo capability fields (newer than `modality`)"},
                )
            )
            return
        reason = f"worker offers no reflection ({caps.error}) and no capability fields"
        run.checks.append(Check("modality_field", False, reason=reason))
        if not skip:
            raise CheckFailed(
                f"cannot tell whether the worker knows video: {reason}; an older worker "
                "would treat the video as an image",
                hint="check -H/--tls reach the worker's reflection, or --skip-checks",
            )
        return
    ok = bool(caps.modality)
    run.checks.append(Check("modality_field", True, ok, detail={"by": "reflection"}))
    if not ok and not skip:
        raise CheckFailed(
            "the worker's MultimodalInputs has no `modality` field (reflection): it predates video "
            "support and would treat the video as an image",
            hint="upgrade the worker (smg-grpc-servicer ≥ the modality change), or --skip-checks",
        )


def _worker_processing(session: Session, opts: SendOptions, inputs: Inputs, run: Run) -> Any:
    from mmctl.request.refs import media_refs

    model = session.model
    _check_limits(session, run, opts.skip_checks)
    refs = media_refs(inputs.media, inputs.kinds, opts.media_ref)
    plan = opts.refs_plan(refs, model)
    check = "placeholders" if isinstance(model, WorkerModel) else model.spec.prompt.check_name
    run.checks.append(Check(check, False, reason="the worker expands the prompt"))
    run.items = [
        {"path": str(p), "kind": k.value, "url_bytes": len(url)}
        for p, (k, url) in zip(inputs.media, refs, strict=True)
    ]
    return plan.to_proto()


def _replay(session: Session, opts: SendOptions, inputs: Inputs, run: Run) -> Any:
    """A recorded request, with what can apply to it: request id, sampling,
    streaming (the transport placement follows in the hand-off)."""
    from mmctl.request.view import batches, layout_of

    refuse("a replayed request is recorded", opts.shaping_a_request())
    req = inputs.request
    if opts.request_id:
        req.request_id = opts.request_id
    elif not req.request_id:
        req.request_id = new_request_id()
    opts.sampling.apply_to(req.sampling_params)
    if opts.stream is not None:
        req.stream = opts.stream
    applied = opts.sampling.given() + (["stream"] if opts.stream is not None else [])
    run.decisions["replay"] = Decision(
        f"changed {', '.join(applied)}" if applied else "as recorded", inputs.request_label
    )
    facts = session.facts
    # Read by the worker's family first: a file built for another family's
    # worker is said as that, not as a pixel type to rebuild with.
    model = session.family_model()
    layout, items = layout_of(req, model)
    dtypes = {b.pixel_values.dtype for b in batches(req) if b.HasField("pixel_values")}
    want = choose_pixels(facts, None).decision
    normalizes = facts.server.mm_device_do_normalize
    for dtype in dtypes:
        # Only a mismatch in normalization is wrong; float widths the worker casts.
        if not opts.skip_checks and normalizes != (dtype == "uint8"):
            raise CheckFailed(
                f"the request carries {dtype} pixels; this worker wants {want.value} "
                f"({want.reason})",
                hint="rebuild it with --pixel-dtype " + want.value,
            )
    run.decisions["pixel_dtype"] = Decision(",".join(sorted(dtypes)) or "none", "as recorded")
    _record_walk(run, model.spec, model.spec.prompt.check(layout, items, model), opts.skip_checks)
    run.items = [item.as_dict() for item in items]
    return req


# ---- generate -----------------------------------------------------------------


class Answer:
    """The answer as ``GenerateResponse`` messages arrive (blocking or asyncio alike)."""

    def __init__(self, session: Session, ready: Ready, hooks: Hooks) -> None:
        self.tokenizer = session.model.tokenizer
        self.ready, self.hooks = ready, hooks
        self.received = TokenStream(bool(ready.request.stream))
        self.shown = ""
        self.first = True

    @property
    def tokens(self) -> list[int]:
        return self.received.ids

    @property
    def complete(self) -> Any:
        return self.received.complete

    def feed(self, resp: Any) -> None:
        if self.first:
            self.ready.run.timeline.lap("ttft_s")
            self.first = False
        kind = self.received.feed(response(resp, self.ready.request.request_id))
        if kind == "chunk" and self.hooks.on_text is not None:
            # Only whole characters: a token may end inside a multi-byte one,
            # which decodes as U+FFFD until the tokens that finish it arrive
            # (then the same bytes read as the character: not a prefix of what
            # was shown). The last text is shown whole, in ``finish``.
            text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
            self.show(text.rstrip("\ufffd"))

    def show(self, text: str) -> None:
        if text.startswith(self.shown) and len(text) > len(self.shown):
            assert self.hooks.on_text is not None
            self.hooks.on_text(text[len(self.shown) :])
            self.shown = text


def generate_error(err: Any, session: Session, ready: Ready) -> MmctlError:
    """A failed ``Generate`` as its mmctl error; a refused request with video, for
    a family whose vLLM model can prune, gets a hint at the pruning flags: no
    worker says its rate, and one laid out for another refuses or misreads it."""
    failure = as_error(err, session.target, f"Generate {ready.request.request_id}")
    model = session.model
    if (
        isinstance(failure, WorkerRejected)
        and failure.hint is None
        and MediaKind.VIDEO in ready.run.kinds
        and isinstance(model, Model)
        and model.spec.pruning_methods(model.model_type)
    ):
        laid = (
            f"a worker pruning video at {model.pruning.describe()}"
            if model.pruning.enabled
            else "a worker that does not prune video"
        )
        failure.hint = (
            f"its videos were laid out for {laid}; a worker started with another "
            "--video-pruning-rate (or --video-pruning-method) expects its own: give mmctl "
            "the worker's"
        )
    return failure


def generate(session: Session, ready: Ready, hooks: Hooks, timeout: float | None) -> SendResult:
    """``Generate`` on the session's blocking channel; then :func:`finish`."""
    import grpc

    call_fn = generate_method(session.channel)
    answer = Answer(session, ready, hooks)
    try:
        call = call_fn(ready.data, timeout=timeout, metadata=session.target.headers)
        try:
            for resp in call:
                answer.feed(resp)
        except grpc.RpcError as err:
            raise generate_error(err, session, ready) from None
        finally:
            call.cancel()  # no-op when done; on Ctrl-C it stops the worker's work
    finally:
        leftover = ready.arena.close()
    return finish(session, ready, answer, hooks, leftover)


def finish(
    session: Session, ready: Ready, answer: Answer, hooks: Hooks, leftover: list[str]
) -> SendResult:
    """The result, once the stream ended and the arena is closed (``leftover``:
    the files the worker did not read, now removed)."""
    run, req = ready.run, ready.request
    if leftover:
        hooks.note(f"removed {len(leftover)} shm file(s) the worker did not read")
    if answer.first:
        run.timeline.lap("ttft_s")
    if answer.complete is None:
        raise GenerationIncomplete(
            f"Generate {req.request_id}: the stream ended without a completion "
            f"after {len(answer.tokens)} tokens"
        )
    text = answer.tokenizer.decode(answer.tokens, skip_special_tokens=True)
    if hooks.on_text is not None:
        answer.show(text)
    run.timeline.lap("generation_s")
    return SendResult(
        request_id=req.request_id,
        answer=text,
        finish_reason=answer.complete.finish_reason,
        output_ids=answer.tokens,
        prompt_tokens=answer.complete.prompt_tokens or len(req.tokenized.input_ids),
        completion_tokens=len(answer.tokens),
        timings=run.timeline.rows(),
        decisions=run.decisions,
        checks=run.checks,
        transport_bytes=run.moved,
        model=session.model_doc,
        items=run.items,
        shm_files=ready.shm_names,
        shm_swept=run.swept,
        preprocess_busy_s=run.preprocess_busy_s,
        warnings=run.warnings,
        pixel_cache=run.pixel_cache,
    )
