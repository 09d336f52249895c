"""The bench run: prepared requests sent on ``grpc.aio``, one :class:`Record` each.

Per request, timed from the moment it may start (its arrival, and a free
concurrency slot): a fresh request id (and, by default, fresh content hashes,
so a real worker's encoder cache never answers for a request it did not
encode), the tensor placed — written to a new ``/dev/shm`` file for the shm
arm, spliced into the message for inline (``handoff``) — the message
assembled (``build``), then ``Generate``: the first streamed token (TTFT),
each next one (ITL), the completion (E2E). Large payloads are placed on a
worker thread so the event loop keeps timing the other requests.

Every shm file a request created is removed when it ends, whatever ends it
(an error, a deadline, Ctrl-C): the arena closes in ``finally``, and a
placement still running on its thread when the request is cancelled closes
it again when it finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import resource
import secrets
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import grpc

from mmctl.bench import floors, schedule
from mmctl.bench.workload import Prepared, WorkItem, prepare, prepare_refs
from mmctl.choices import (
    BENCH_BURSTINESS,
    BENCH_NUM_PROMPTS,
    BENCH_WARMUP,
    MediaRef,
    PixelFormat,
    Processing,
    Transport,
)
from mmctl.client.channel import Target, generate_method, open_aio_channel, response
from mmctl.client.client import Client
from mmctl.client.connection import Connection
from mmctl.client.negotiate import Decision, choose_pixels
from mmctl.client.options import Hooks, SendOptions
from mmctl.client.placement import THREAD_MIN_BYTES
from mmctl.client.route import Route, choose, fixed, for_media_refs
from mmctl.client.stream import TokenStream
from mmctl.errors import CheckFailed, MmctlError, UsageError
from mmctl.request.build import Sampling, new_request_id
from mmctl.request.limits import WorkerLimits
from mmctl.signals import stop_signals
from mmctl.transport.shm import ShmArena, own_files
from mmctl.values.pruning import NO_PRUNING


@dataclass(frozen=True)
class Arm:
    """One way of sending: a transport and a pixel dtype (``None``: ``media_refs``,
    the worker preprocesses). ``unpruned``: the twin arm sent to
    ``BenchConfig.baseline``, laid out for a worker that does not prune video."""

    transport: Transport
    fmt: PixelFormat | None
    unpruned: bool = False

    @property
    def name(self) -> str:
        name = f"{self.transport.value}/{self.fmt.value if self.fmt else MEDIA_REFS}"
        return f"{name}/{UNPRUNED}" if self.unpruned else name

    @property
    def route(self) -> Route:
        return fixed(self.transport, f"bench arm {self.name}")


#: The arm name's second half when the worker preprocesses.
MEDIA_REFS = "media_refs"
#: The arm name's third part on the baseline worker (``--baseline``).
UNPRUNED = "unpruned"


@dataclass
class Record:
    """One request's account (``--per-request`` writes one per line)."""

    index: int
    arm: str
    target: str
    item: str
    concurrency: int
    payload_bytes: int
    request_bytes: int = 0
    start_s: float = 0.0  # from the start of its run
    queue_s: float = 0.0  # waiting for a concurrency slot
    handoff_s: float = 0.0
    build_s: float = 0.0
    ttft_s: float | None = None
    latency_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str = ""
    text: str = ""
    error_code: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code is None

    def as_dict(self) -> dict[str, Any]:
        doc = dict(vars(self))
        for key in ("start_s", "queue_s", "handoff_s", "build_s", "ttft_s", "latency_s"):
            if doc[key] is not None:
                doc[key] = round(doc[key], 6)
        doc["itl_s"] = [round(x, 6) for x in self.itl_s]
        return doc


@dataclass(frozen=True)
class BenchConfig:
    targets: tuple[str, ...]
    items: tuple[WorkItem, ...]
    #: ``None``: inline and shm, inline alone where the worker preprocesses
    #: (a ``media_refs`` request has no tensor to place in shared memory).
    transports: tuple[Transport, ...] | None = None
    #: ``None``: what each worker expects (as ``send`` negotiates it).
    pixel_dtypes: tuple[PixelFormat | None, ...] = (None,)
    num_prompts: int = BENCH_NUM_PROMPTS
    max_concurrency: tuple[int, ...] = (1,)
    request_rate: float = math.inf
    burstiness: float = BENCH_BURSTINESS
    warmup: int = BENCH_WARMUP
    seed: int = 0
    prompt: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    percentiles: tuple[float, ...] = (50.0, 90.0, 99.0)
    floors: bool = True
    floor_runs: int = 5
    unique_hashes: bool = True
    processing: Processing = Processing.AUTO
    media_ref: MediaRef = MediaRef.DATA
    #: How the workers are reached and whose files describe their model; items
    #: that share media preprocess them once (its ``pixel_cache_mb``).
    connection: Connection = field(default_factory=Connection)
    #: A worker of the same model that does not prune video (``--baseline``):
    #: every arm gets a twin sent to it, laid out without pruning, in the same
    #: interleaved blocks, so each request to the pruning workers has its pair.
    baseline: str | None = None

    def __post_init__(self) -> None:
        if not self.targets:
            raise UsageError("--target: at least one worker")
        if not self.items:
            raise UsageError("one workload: --video/--audio, --dataset or --sizes")
        if self.num_prompts < 1:
            raise UsageError(f"--num-prompts must be at least 1, got {self.num_prompts}")
        if any(c < 1 for c in self.max_concurrency) or not self.max_concurrency:
            raise UsageError("--max-concurrency: positive whole numbers")
        if not self.request_rate > 0:
            raise UsageError(f"--request-rate must be positive or inf, got {self.request_rate}")
        if not self.burstiness > 0:
            raise UsageError(f"--burstiness must be positive, got {self.burstiness}")
        if self.warmup < 0:
            raise UsageError(f"--warmup must not be negative, got {self.warmup}")
        if any(not 0 < p < 100 for p in self.percentiles):
            raise UsageError("--percentiles: values between 0 and 100 (exclusive)")
        if self.transports is not None and not self.transports:
            raise UsageError("--transport: inline, shm or both")
        if any(t not in (Transport.INLINE, Transport.SHM) for t in self.transports or ()):
            raise UsageError("--transport: each arm is inline or shm (auto picks one of them)")
        if self.baseline is not None:
            if not self.connection.video_pruning.enabled:
                raise UsageError(
                    "--baseline compares pruning workers with one that does not prune: "
                    "give the --target workers' --video-pruning-rate"
                )
            if self.baseline in self.targets:
                raise UsageError(
                    f"--baseline {self.baseline} is also a --target: one worker either "
                    "prunes video or does not"
                )
        self.options()

    def options(self) -> SendOptions:
        """The run's processing options, checked as ``send`` checks them."""
        fmt = next((f for f in self.pixel_dtypes if f is not None), None)
        return SendOptions.of(processing=self.processing, media_ref=self.media_ref, pixel_dtype=fmt)


@dataclass
class Level:
    """The requests of one ``--max-concurrency`` value."""

    concurrency: int
    records: list[Record]
    duration_s: float
    cpu_s: float
    cancelled: int = 0


@dataclass
class Resources:
    fds_before: int
    fds_after: int = 0
    shm_files_before: int = 0
    shm_files_after: int = 0
    peak_rss_mb: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class BenchResult:
    config: BenchConfig
    arms: list[Arm]
    prepared: dict[tuple[int, PixelFormat | None], Prepared]
    levels: list[Level]
    floors: dict[str, dict[str, Any]]
    resources: Resources
    model: dict[str, Any]
    #: The signal that stopped the run early (SIGINT, SIGTERM), if one did.
    interrupted_by: str | None = None
    #: Who preprocessed (client: mmctl's tensors; worker: media_refs), and why.
    processing: Decision | None = None
    #: The pixel cache's account of the preparation (``Stats.as_dict``).
    pixel_cache: dict[str, Any] = field(default_factory=dict)
    #: The same items laid out for ``--baseline`` (no pruning); empty without one.
    unpruned: dict[tuple[int, PixelFormat | None], Prepared] = field(default_factory=dict)

    @property
    def interrupted(self) -> bool:
        return self.interrupted_by is not None


class Progress(Protocol):
    """What the runner reports as it goes (the CLI draws it): a stage with its
    total, or one more step of it; each request's record when it ends; a
    choice mmctl made by itself (``note``: the worker preprocesses)."""

    def stage(self, text: str, total: int | None = None) -> None: ...

    def done(self, record: Record) -> None: ...

    def note(self, message: str) -> None: ...


class _Quiet:
    def stage(self, text: str, total: int | None = None) -> None:
        pass

    def done(self, record: Record) -> None:
        pass

    def note(self, message: str) -> None:
        pass


# ---- preparing ----------------------------------------------------------------


def _clients(cfg: BenchConfig) -> list[Client]:
    """The targets' clients, then the baseline's (its layout without pruning)."""
    clients = [Client(t, cfg.connection) for t in cfg.targets]
    if cfg.baseline is not None:
        clients.append(Client(cfg.baseline, replace(cfg.connection, video_pruning=NO_PRUNING)))
    return clients


def _processing(cfg: BenchConfig, clients: Sequence[Client], progress: Progress) -> Decision:
    """Who preprocesses, as ``send`` decides it (every target able to), said once a run."""
    from mmctl.bench.workload import has_sound, media_kinds

    session = clients[0].session()
    others = [c.facts() for c in clients[1:]]
    hooks = Hooks(on_note=progress.note)
    kinds = media_kinds(cfg.items)
    return session.processing(cfg.options(), hooks, others, has_sound(cfg.items), kinds).decision


def arm_transports(requested: tuple[Transport, ...] | None, worker: bool) -> tuple[Transport, ...]:
    """``--transport``'s arms (``None``: not given): inline and shm, inline alone
    where the worker preprocesses (a media_refs request has no tensor to place)."""
    if not worker:
        return requested or (Transport.INLINE, Transport.SHM)
    for mode in requested or ():
        for_media_refs(mode)  # refuses shm
    return (Transport.INLINE,)


def _arms(cfg: BenchConfig, clients: Sequence[Client], worker: bool) -> list[Arm]:
    """Every transport × pixel dtype, each checked against every target; where the
    worker preprocesses, one arm: media_refs, inline."""
    transports = arm_transports(cfg.transports, worker)
    if worker:
        return [Arm(t, None) for t in transports]
    fmts: list[PixelFormat] = []
    for client in clients:
        facts = client.facts()
        for wanted in cfg.pixel_dtypes:
            decided = choose_pixels(facts, wanted).format
            if decided not in fmts:
                fmts.append(decided)
        if Transport.SHM in transports:
            decision = choose(Transport.AUTO, facts).decision
            if decision.value != "shm":
                raise CheckFailed(
                    f"--transport shm: {client.target.address}: {decision.reason}",
                    hint="shared memory works only with a worker on this host; use inline",
                )
    return [Arm(t, f) for f in fmts for t in transports]


def _prepare_all(
    cfg: BenchConfig,
    clients: Sequence[Client],
    fmts: Sequence[PixelFormat | None],
    progress: Progress,
    layout: Client | None = None,
) -> dict[tuple[int, PixelFormat | None], Prepared]:
    """Every item in every pixel dtype, laid out as ``layout``'s worker expects
    (default: the first target's), within every worker's limits."""
    session = (layout or clients[0]).session()
    limits = WorkerLimits.of(c.facts() for c in clients)
    prepared: dict[tuple[int, PixelFormat | None], Prepared] = {}
    progress.stage("preparing", len(cfg.items) * len(fmts))
    for n, item in enumerate(cfg.items):
        for fmt in fmts:
            if fmt is None:
                prepared[(n, fmt)] = prepare_refs(
                    item, session.model, cfg.media_ref, cfg.prompt, cfg.sampling, limits
                )
            else:
                prepared[(n, fmt)] = prepare(
                    item, session.family_model(), fmt, cfg.prompt, cfg.sampling, limits,
                    clients[0].pixel_cache,
                )  # fmt: skip
            progress.stage("preparing")
    return prepared


# ---- one request ----------------------------------------------------------------


def _fresh(prep: Prepared, unique: bool) -> Any:
    plan = replace(prep.plan, request_id=new_request_id())
    if unique:
        plan.batches = [
            replace(b, hashes=[h[:32] + secrets.token_hex(16) for h in b.hashes])
            for b in plan.batches
        ]
    return plan


def assemble(prep: Prepared, arm: Arm, arena: ShmArena, unique: bool) -> tuple[bytes, float, float]:
    """(wire bytes, hand-off seconds, build seconds) of one request."""
    plan = _fresh(prep, unique)
    start = time.perf_counter()
    encoding = arm.route.encode(plan, arena, {"shm": 0})
    total = time.perf_counter() - start
    return encoding.encoded.data, encoding.handoff_s, total - encoding.handoff_s


class _Sender:
    """Requests of one run, on the targets' ``grpc.aio`` channels."""

    def __init__(
        self,
        cfg: BenchConfig,
        targets: Sequence[Target],
        tokenizer: Any,
        progress: Progress,
    ) -> None:
        self.cfg, self.targets, self.tokenizer, self.progress = cfg, targets, tokenizer, progress
        #: The targets the arms share round-robin; the baseline, last, takes only its twins.
        self.shared = len(targets) - (1 if cfg.baseline is not None else 0)
        self.channels = [open_aio_channel(t) for t in targets]
        self.calls = [generate_method(ch) for ch in self.channels]

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()

    async def one(self, rec: Record, prep: Prepared, arm: Arm, target: int) -> Record:
        arena = ShmArena()
        start = time.perf_counter()
        work: asyncio.Future[tuple[bytes, float, float]] | None = None
        try:
            if prep.payload_bytes >= THREAD_MIN_BYTES:
                work = asyncio.ensure_future(
                    asyncio.to_thread(assemble, prep, arm, arena, self.cfg.unique_hashes)
                )
                data, rec.handoff_s, rec.build_s = await asyncio.shield(work)
            else:
                data, rec.handoff_s, rec.build_s = assemble(
                    prep, arm, arena, self.cfg.unique_hashes
                )
            rec.request_bytes = len(data)
            await self._generate(rec, data, target, start)
        except asyncio.CancelledError:
            if work is not None and not work.done():
                work.add_done_callback(lambda _f: arena.close())
            raise
        except grpc.aio.AioRpcError as err:
            rec.error_code, rec.error = err.code().name, err.details() or ""
        except MmctlError as err:
            rec.error_code, rec.error = type(err).__name__, err.message
        finally:
            arena.close()
        self.progress.done(rec)
        return rec

    async def _generate(self, rec: Record, data: bytes, target: int, start: float) -> None:
        call = self.calls[target](
            data, timeout=self.cfg.connection.timeout, metadata=self.targets[target].headers
        )
        received = TokenStream(stream=True)  # the workload's requests stream (ITL)
        last: float | None = None
        try:
            async for resp in call:
                now = time.perf_counter()
                if rec.ttft_s is None:
                    rec.ttft_s = now - start
                if received.feed(response(resp, f"#{rec.index}")) == "chunk":
                    if last is not None:
                        rec.itl_s.append(now - last)
                    last = now
        finally:
            call.cancel()
        rec.latency_s = time.perf_counter() - start
        complete, tokens = received.complete, received.ids
        if complete is None:
            rec.error_code, rec.error = "NO_COMPLETION", "the stream ended without a completion"
            return
        rec.output_tokens = len(tokens)
        rec.prompt_tokens = complete.prompt_tokens
        rec.finish_reason = complete.finish_reason
        rec.text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        if complete.finish_reason == "abort":
            rec.error_code, rec.error = "ABORTED", "the worker aborted the generation"


# ---- a run ------------------------------------------------------------------


async def _level(
    sender: _Sender,
    slots: Sequence[schedule.Slot],
    gaps: Sequence[float],
    concurrency: int,
    arms: Sequence[Arm],
    prepared: dict[tuple[int, PixelFormat | None], Prepared],
    items: Sequence[WorkItem],
    stop: asyncio.Event,
    unpruned: dict[tuple[int, PixelFormat | None], Prepared],
) -> Level:
    slot_free = asyncio.Semaphore(concurrency)
    begin = time.perf_counter()
    cpu = _cpu()

    async def limited(slot: schedule.Slot) -> Record:
        arrived = time.perf_counter()
        arm = arms[slot.arm]
        prep = (unpruned if arm.unpruned else prepared)[(slot.item, arm.fmt)]
        target = sender.shared if arm.unpruned else slot.index % sender.shared
        rec = Record(
            index=slot.index,
            arm=arm.name,
            target=sender.targets[target].address,
            item=items[slot.item].label,
            concurrency=concurrency,
            payload_bytes=prep.payload_bytes,
        )
        async with slot_free:
            rec.start_s = time.perf_counter() - begin
            rec.queue_s = time.perf_counter() - arrived
            return await sender.one(rec, prep, arm, target)

    tasks: list[asyncio.Task[Record]] = []
    for slot, gap in zip(slots, gaps, strict=True):
        if gap > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), gap)
        if stop.is_set():
            break
        tasks.append(asyncio.create_task(limited(slot)))
    stopping = asyncio.create_task(stop.wait())
    if tasks:
        await asyncio.wait([stopping, *tasks], return_when=asyncio.FIRST_COMPLETED)
        pending = [t for t in tasks if not t.done()]
        while pending and not stop.is_set():
            await asyncio.wait([stopping, *pending], return_when=asyncio.FIRST_COMPLETED)
            pending = [t for t in pending if not t.done()]
    stopping.cancel()
    for task in tasks:
        if not task.done():
            task.cancel()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    records = [r for r in outcomes if isinstance(r, Record)]
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    return Level(
        concurrency,
        sorted(records, key=lambda r: r.index),
        time.perf_counter() - begin,
        _cpu() - cpu,
        cancelled=len(tasks) - len(records) + (len(slots) - len(tasks)),
    )


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def shm_files() -> int:
    """This process's files in /dev/shm (another process's come and go meanwhile)."""
    return len(own_files())


def run(cfg: BenchConfig, progress: Progress | None = None) -> BenchResult:
    """The whole bench: prepare, floors, warm-up, then one interleaved run per
    concurrency. Ctrl-C (SIGINT) or SIGTERM stops it: in-flight requests are
    cancelled, their shm files removed, and the result holds what finished
    (``interrupted``)."""
    progress = progress or _Quiet()
    clients = _clients(cfg)
    try:
        processing = _processing(cfg, clients, progress)
        arms = _arms(cfg, clients, processing.value == "worker")
        fmts = list(dict.fromkeys(a.fmt for a in arms))
        prepared = _prepare_all(cfg, clients, fmts, progress)
        unpruned: dict[tuple[int, PixelFormat | None], Prepared] = {}
        if cfg.baseline is not None:
            arms += [replace(a, unpruned=True) for a in arms]
            unpruned = _prepare_all(cfg, clients, fmts, progress, layout=clients[-1])
        session = clients[0].session()
        # The floors are a tensor's (memcpy, a /dev/shm file): none without pixels here.
        measured_floors = _floors(cfg, prepared, progress) if None not in fmts else {}
        result = asyncio.run(
            _run_async(cfg, clients, arms, prepared, measured_floors, session, progress, unpruned)
        )
        result.processing = processing
        result.unpruned = unpruned
        result.pixel_cache = clients[0].pixel_cache.snapshot().as_dict()
        return result
    finally:
        for client in clients:
            client.close()


def _floors(
    cfg: BenchConfig, prepared: dict[tuple[int, PixelFormat | None], Prepared], progress: Progress
) -> dict[str, dict[str, Any]]:
    if not cfg.floors:
        return {}
    sizes = sorted({p.payload_bytes for p in prepared.values()})
    progress.stage("machine floors", len(sizes))
    sink = floors.Sink()
    try:
        out = {}
        for size in sizes:
            out[str(size)] = floors.measure(size, cfg.floor_runs, sink)
            progress.stage("machine floors")
        return out
    finally:
        sink.close()


async def _measure(
    cfg: BenchConfig,
    sender: _Sender,
    arms: list[Arm],
    prepared: dict[tuple[int, PixelFormat | None], Prepared],
    progress: Progress,
    stop: asyncio.Event,
    unpruned: dict[tuple[int, PixelFormat | None], Prepared],
) -> tuple[list[Level], Resources]:
    """Warm-up, then one interleaved run per concurrency; fds and shm files around them."""
    items = list(cfg.items)
    levels: list[Level] = []
    if cfg.warmup:
        warm = schedule.interleaved(cfg.warmup * len(arms), len(arms), len(items), cfg.seed)
        progress.stage("warm-up", len(warm))
        await _level(
            sender, warm, [0.0] * len(warm), min(cfg.max_concurrency), arms, prepared, items,
            stop, unpruned,
        )  # fmt: skip
    resources = Resources(open_fds(), shm_files_before=shm_files())
    slots = schedule.interleaved(cfg.num_prompts, len(arms), len(items), cfg.seed)
    gaps = schedule.arrival_gaps(cfg.num_prompts, cfg.request_rate, cfg.burstiness, cfg.seed)
    for concurrency in cfg.max_concurrency:
        if stop.is_set():
            break
        progress.stage(f"max concurrency {concurrency}", len(slots))
        levels.append(
            await _level(sender, slots, gaps, concurrency, arms, prepared, items, stop, unpruned)
        )
    # Counted with the channels still open, as "before" was: equal means nothing leaked.
    resources.fds_after = open_fds()
    resources.shm_files_after = shm_files()
    return levels, resources


async def _run_async(
    cfg: BenchConfig,
    clients: Sequence[Client],
    arms: list[Arm],
    prepared: dict[tuple[int, PixelFormat | None], Prepared],
    measured_floors: dict[str, dict[str, Any]],
    session: Any,
    progress: Progress,
    unpruned: dict[tuple[int, PixelFormat | None], Prepared],
) -> BenchResult:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    stopped_by: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        stopped_by.append(sig.name)
        stop.set()

    sender = _Sender(cfg, [c.target for c in clients], session.model.tokenizer, progress)
    try:
        with stop_signals(loop, on_signal):
            levels, resources = await _measure(
                cfg, sender, arms, prepared, progress, stop, unpruned
            )
    finally:
        await sender.close()
    resources.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return BenchResult(
        cfg, arms, prepared, levels, measured_floors, resources, session.model_doc,
        interrupted_by=stopped_by[0] if stopped_by else None,
    )  # fmt: skip
