"""``mmctl.batch(input, output, targets=…, engine=…)``: the whole job, used by the CLI.

Set-up happens once, in this process: each target is probed (one that does
not answer starts out of the fleet and is probed again while the batch
runs), the model files and tokenizer come from the first that answers, and
what every target must agree on is decided — the pixel dtype — along with
each target's transport (shared memory only where it shares this host's
``/dev/shm``). Then an engine runs the items: ``local`` (a process pool and
``grpc.aio``) or ``ray`` (Ray tasks and one sender per node).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmctl.choices import (
    BATCH_MAX_CONCURRENCY,
    REMOTE_MEDIA_MAX_MB,
    MediaRef,
    PixelFormat,
    Processing,
)
from mmctl.client.client import Client
from mmctl.client.connection import Connection
from mmctl.client.negotiate import choose_pixels, takes_media_refs
from mmctl.client.options import Hooks, SendOptions
from mmctl.dataset import Items
from mmctl.errors import CheckFailed, UsageError, WorkerUnavailable
from mmctl.request.build import Sampling
from mmctl.request.limits import WorkerLimits
from mmctl.request.pixel_cache import pixel_cache
from mmctl.run_batch.fleet import Member
from mmctl.run_batch.output import OutputFile
from mmctl.run_batch.work import Settings

ENGINES = ("local", "ray")
#: ``--max-remote-mb`` default: a fetched medium larger than this is refused.


@dataclass
class BatchCounts:
    """What a batch did. ``exit_code`` follows docs/commands/index.md's table."""

    total: int
    succeeded: int
    failed: int
    skipped: int
    engine: str
    wall_s: float
    startup_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    interrupted_by: str | None = None
    output: str = ""
    #: Items of the input not finished when the run stopped (interrupted).
    not_started: int = 0
    #: Error lines of an earlier run dropped from OUT, their items tried again.
    retried: int = 0
    #: Error lines of an earlier run kept (``keep_failed``); counted in ``skipped``.
    kept_failed: int = 0
    #: Per target: the items this run sent it, answered and failed.
    by_target: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The Ray engine's sizes (``preprocess_tasks``, ``senders``,
    #: ``calls_per_sender``); empty for the local engine.
    pools: dict[str, int] = field(default_factory=dict)
    #: Ray: items tried again on other nodes after their node was lost.
    node_retries: int = 0
    #: The pixel cache's account (:class:`mmctl.request.pixel_cache.Stats`):
    #: media asked about again and served without decoding, bytes kept.
    pixel_cache: dict[str, Any] = field(default_factory=dict)
    #: ``/dev/shm`` files no live process owned, removed before sending (a
    #: killed run's, which ``--resume`` follows), as ``send``'s ``shm_swept``.
    shm_swept: list[str] = field(default_factory=list)

    @property
    def failed_in_output(self) -> int:
        """Error lines OUT holds for this input at the end (this run's and kept ones)."""
        return self.failed + self.kept_failed

    @property
    def answered_in_output(self) -> int:
        return self.succeeded + self.skipped - self.kept_failed

    def split_errors(self) -> tuple[dict[str, int], dict[str, int]]:
        """This run's failures by code: those a retry can fix (the worker's), and
        those it cannot (:data:`~mmctl.run_batch.output.INPUT_ERRORS`)."""
        from mmctl.run_batch.output import INPUT_ERRORS

        retry = {k: n for k, n in self.errors.items() if k not in INPUT_ERRORS}
        return retry, {k: n for k, n in self.errors.items() if k in INPUT_ERRORS}

    def as_dict(self) -> dict[str, Any]:
        doc = dict(vars(self))
        doc["in_output"] = {"answered": self.answered_in_output, "failed": self.failed_in_output}
        return doc


@dataclass
class Fleetwide:
    """The set-up every engine shares."""

    settings: Settings
    members: list[Member]
    model: Any  # mmctl.models.model.Model, loaded once here
    model_name: str
    #: Dead processes' /dev/shm files removed before the run (the shm route only).
    swept: list[str] = field(default_factory=list)


def _setup(
    targets: Sequence[str],
    *,
    on_warning: Callable[[str], None],
    transport_mode: str,
    connection: Connection,
    prompt: str | None,
    sampling: Sampling,
    pixel: str | None,
    processing: Processing | str = Processing.AUTO,
    media_ref: MediaRef | str = MediaRef.DATA,
    on_note: Callable[[str], None] = lambda message: None,
) -> Fleetwide:
    if transport_mode not in ("auto", "inline", "shm"):
        raise UsageError(f"--transport is auto, inline or shm; got {transport_mode!r}")
    # send's options and their one validation (--media-ref with --processing client…)
    opts = SendOptions.of(processing=processing, media_ref=media_ref, pixel_dtype=pixel)
    clients = [Client(t, connection) for t in targets]
    try:
        facts: list[Any] = []
        for client in clients:
            try:
                facts.append(client.facts())
            except WorkerUnavailable as err:
                facts.append(None)  # starts out of the fleet; probed again while running
                if len(clients) > 1:
                    on_warning(
                        f"{client.target.address} does not answer ({err.message}); left out of "
                        "the fleet, probed again while the batch runs"
                    )
        answering = [(c, f) for c, f in zip(clients, facts, strict=True) if f is not None]
        if not answering:
            raise WorkerUnavailable(
                f"no target answers ({', '.join(targets)})",
                hint="is `vllm serve … --grpc` (or `mmctl stub-worker`) listening there?",
            )
        first, first_facts = answering[0]
        session = first.session()
        others = [f for _, f in answering[1:]]
        worker = session.processing(opts, Hooks(on_note=on_note), others).worker
        if worker:
            return _worker_fleet(
                session, clients, facts, transport_mode, opts.media_ref, prompt, sampling
            )
        model = session.family_model()
        fmts = {choose_pixels(f, pixel, family=model.spec).format for _, f in answering}
        if len(fmts) > 1:
            raise UsageError(
                f"the targets expect different pixel dtypes ({', '.join(sorted(f.value for f in fmts))})",
                hint="batch one kind of worker at a time",
            )
        limits = WorkerLimits.of(f for _, f in answering)
        from mmctl.client.route import choose, inline
        from mmctl.transport.shm import sweep_dead

        members = []
        for client, f in zip(clients, facts, strict=True):
            route = inline("--transport inline")
            if f is not None and transport_mode != "inline":
                route = choose("auto", f)
                if transport_mode == "shm" and not route.shm:
                    raise CheckFailed(
                        f"--transport shm: {client.target.address}: {route.decision.reason}",
                        hint="--transport auto uses shared memory only where it works",
                    )
            namespace = f.server.shm_namespace_id if f is not None else ""
            members.append(Member(client.target, route, up=f is not None, namespace=namespace))
        settings = Settings(
            source=model.source,
            family=model.spec.name,
            pixel_format=fmts.pop(),
            item_limits=limits.item_limits,
            encoder_budget=limits.encoder_budget,
            context_length=limits.context_length,
            prompt=prompt,
            sampling=sampling,
            # A line with sound is worker-processed as a whole, where every worker can.
            sound_ref=opts.media_ref
            if all(takes_media_refs(f, opts.media_ref) for _, f in answering)
            else None,
            pruning=model.pruning,
        )
        model_name = first_facts.model.served_model_name or model.source.label
        # A killed run (the one --resume follows) left its files: no one else removes them.
        swept = sweep_dead() if any(m.route.shm for m in members) else []
        return Fleetwide(settings, members, model, model_name, swept)
    finally:
        for client in clients:
            client.close()


def _worker_fleet(
    session: Any,
    clients: Sequence[Client],
    facts: Sequence[Any],
    transport_mode: str,
    media_ref: MediaRef,
    prompt: str | None,
    sampling: Sampling,
) -> Fleetwide:
    """The set-up where the workers preprocess: media_refs requests, inline (they
    carry no tensor to place in shared memory); the pixel cache does not apply."""
    from mmctl.client.route import for_media_refs

    route = for_media_refs(transport_mode)
    answering = [f for f in facts if f is not None]
    limits = WorkerLimits.of(answering)
    members = [
        Member(c.target, route, up=f is not None, namespace="")
        for c, f in zip(clients, facts, strict=True)
    ]
    model = session.model
    settings = Settings(
        source=model.source,
        family=None,
        pixel_format=PixelFormat.FLOAT32,  # unused: no pixels leave this process
        item_limits=limits.item_limits,
        encoder_budget=limits.encoder_budget,
        context_length=limits.context_length,
        prompt=prompt,
        sampling=sampling,
        media_ref=media_ref,
    )
    name = session.facts.model.served_model_name or model.source.label
    return Fleetwide(settings, members, model, name)


def batch(
    input: str | Path,
    output: str | Path,
    *,
    targets: str | Sequence[str] | None = None,
    engine: str = "local",
    workers: int | None = None,
    max_concurrency: int = BATCH_MAX_CONCURRENCY,
    resume: bool = False,
    overwrite: bool = False,
    keep_failed: bool = False,
    transport: str = "auto",
    prompt: str | None = None,
    max_tokens: int | None = None,
    pixel_dtype: str | None = None,
    processing: Processing | str = Processing.AUTO,
    media_ref: MediaRef | str = MediaRef.DATA,
    allow_remote_media: bool = False,
    max_remote_mb: int = REMOTE_MEDIA_MAX_MB,
    connection: Connection | None = None,
    ray_address: str | None = None,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[bool], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    on_skip: Callable[[bool], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> BatchCounts:
    """Run every line of ``input`` (JSONL: OpenAI batch or short form) through
    the workers at ``targets`` (``"host:port,host:port"`` or a list; default
    ``$MMCTL_TARGET``); append one output line per input line to ``output``.

    ``resume`` skips the ids ``output`` already answers and tries its failed
    ones again (``keep_failed``: skips those too); without it an ``output``
    that holds results is refused unless ``overwrite``. One run writes an
    ``output`` at a time (a second is refused, :class:`UsageError`); it is
    never the input. A line that cannot be written stops the run
    (:class:`~mmctl.errors.OutputFailed`). ``on_start(total)`` and
    ``on_done(succeeded)`` report progress (``on_skip(answered)``, when given,
    the items ``output`` holds already, which cost no time), ``on_warning(message)`` a target
    taken out of the fleet or put back, ``on_note(message)`` a choice mmctl made
    by itself (the workers preprocess a model no mmctl family handles: said
    once). ``processing`` and ``media_ref`` are ``send``'s (``auto``: mmctl
    preprocesses the families it has, the workers any other model, through
    ``media_refs``; the pixel cache does not apply to those). ``connection``: how
    the workers are reached and whose files describe their model
    (:class:`~mmctl.client.connection.Connection`); its ``pixel_cache_mb``:
    MiB of preprocessed media kept for items that ask about the same media
    again (on Ray, per node; 0 turns it off).

    The local engine spawns its preprocessing processes, which import the
    calling script again (Python's ``spawn``): call it from under
    ``if __name__ == "__main__":``.
    """
    from mmctl import settings as env

    start = time.perf_counter()
    if engine not in ENGINES:
        raise UsageError(f"--engine is local or ray; got {engine!r}")
    if isinstance(targets, str):
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    targets = list(targets or [env.target()])
    if (workers is not None and workers < 1) or max_concurrency < 1:
        raise UsageError("--workers and --max-concurrency must be at least 1")
    if max_remote_mb < 1:
        raise UsageError("--max-remote-mb must be at least 1")
    if ray_address is not None and engine != "ray":
        raise UsageError("--ray-address needs --engine ray")
    if keep_failed and not resume:
        raise UsageError("--keep-failed goes with --resume")
    connection = connection or Connection()
    SendOptions.of(processing=processing, media_ref=media_ref, pixel_dtype=pixel_dtype)
    warn = on_warning or (lambda message: None)
    source_path, out_path = Path(input), Path(output)
    if not source_path.is_file():
        raise UsageError(f"no such input file: {source_path}")
    # OUT first: a second run on it, or OUT being the input, is refused
    # before anything starts; the lock is held until the end.
    out = OutputFile(
        out_path, input=source_path, resume=resume, overwrite=overwrite, keep_failed=keep_failed
    )
    try:
        remote_cap = max_remote_mb * 10**6 if allow_remote_media else None
        if engine == "ray":
            from mmctl.run_batch.ray_engine import require

            require()
        if out.done and not _left_to_send(source_path, out, remote_cap):
            return _finish_unsent(source_path, out, engine, remote_cap, start,
                                  on_start=on_start, on_done=on_done, on_skip=on_skip)  # fmt: skip
        return _run(
            source_path,
            out,
            targets=targets,
            engine=engine,
            workers=workers,
            max_concurrency=max_concurrency,
            transport=transport,
            prompt=prompt,
            max_tokens=max_tokens,
            pixel_dtype=pixel_dtype,
            processing=processing,
            media_ref=media_ref,
            remote_cap=remote_cap,
            connection=connection,
            ray_address=ray_address,
            on_start=on_start,
            on_done=on_done,
            on_skip=on_skip,
            on_warning=warn,
            on_note=on_note or (lambda message: None),
            start=start,
        )
    finally:
        out.close()


def _left_to_send(source: Path, out: OutputFile, remote_cap: int | None) -> bool:
    """Whether a line of ``source`` is still to be sent: one that can be sent
    and OUT does not answer. Read up to the first such line, media untouched."""
    with Items(source, remote_cap=remote_cap) as items:
        return any(e.error is None and e.id not in out.done for e in items.entries())


def _finish_unsent(
    source: Path,
    out: OutputFile,
    engine: str,
    remote_cap: int | None,
    start: float,
    *,
    on_start: Callable[[int], None] | None,
    on_done: Callable[[bool], None] | None,
    on_skip: Callable[[bool], None] | None,
) -> BatchCounts:
    """A resumed run with nothing to send ends here, before any worker is
    probed or any process (or Ray) started: the lines that cannot be sent get
    their error lines again, as the engines write them."""
    from mmctl.run_batch.local import Tally, skip_done, write_entry_error

    tally, seen = Tally(), set[str]()
    done = on_done or (lambda ok: None)
    skip = on_skip or done
    with Items(source, remote_cap=remote_cap) as items:
        total = items.count()
        if on_start is not None:
            on_start(total)
        for entry in items.entries():
            if skip_done(out, entry, tally, seen):
                skip(entry.id not in out.kept_failed)
            elif write_entry_error(out, entry, tally, seen):
                done(False)
    return _counts(tally, total, engine, out, start)


def _run(
    source_path: Path,
    out: OutputFile,
    *,
    targets: list[str],
    engine: str,
    workers: int | None,
    max_concurrency: int,
    transport: str,
    prompt: str | None,
    max_tokens: int | None,
    pixel_dtype: str | None,
    processing: Processing | str,
    media_ref: MediaRef | str,
    remote_cap: int | None,
    connection: Connection,
    ray_address: str | None,
    on_start: Callable[[int], None] | None,
    on_done: Callable[[bool], None] | None,
    on_skip: Callable[[bool], None] | None,
    on_warning: Callable[[str], None],
    on_note: Callable[[str], None],
    start: float,
) -> BatchCounts:
    pool = None
    ray_run = None
    cache_mb = connection.pixel_cache_mb
    cache = pixel_cache(cache_mb)
    timeout = connection.timeout
    if engine == "ray":
        from mmctl.run_batch import ray_engine

        ray_engine.require()
        # Ray, its send actors and warm-up tasks start before the set-up below.
        ray_run = ray_engine.begin(ray_address, workers, max_concurrency)
    else:
        from mmctl.run_batch.local import start_pool

        pool = start_pool(workers or os.cpu_count() or 1)  # starting while the set-up runs
    try:
        fleetwide = _setup(
            targets,
            on_warning=on_warning,
            transport_mode=transport,
            connection=connection,
            prompt=prompt,
            sampling=Sampling(max_tokens=max_tokens),
            pixel=pixel_dtype,
            processing=processing,
            media_ref=media_ref,
            on_note=on_note,
        )
        if fleetwide.settings.media_ref is not None:
            # The workers preprocess: no pixels are made here to keep.
            cache, cache_mb = pixel_cache(0), 0
        with Items(source_path, remote_cap=remote_cap) as items:
            total = items.count()
            if on_start is not None:
                on_start(total)
            done = on_done or (lambda ok: None)
            startup = 0.0
            pools: dict[str, int] = {}
            if pool is not None:
                from mmctl.run_batch import local

                tally = asyncio.run(
                    local.run(
                        pool,
                        fleetwide.settings,
                        fleetwide.model,
                        items.entries(),
                        out,
                        fleetwide.members,
                        fleetwide.model_name,
                        workers=workers or os.cpu_count() or 1,
                        max_concurrency=max_concurrency,
                        timeout=timeout,
                        on_done=done,
                        on_warning=on_warning,
                        on_skip=on_skip,
                        cache=cache,
                    )
                )
                cache_doc = cache.snapshot().as_dict()
            else:
                assert ray_run is not None
                startup = ray_run.startup_s
                pools = {k: int(v) for k, v in vars(ray_run.layout).items()}
                tally, cache_doc = ray_engine.run(
                    ray_run, fleetwide, items.entries(), out, timeout=timeout, on_done=done,
                    on_skip=on_skip, pixel_cache_mb=cache_mb,
                )  # fmt: skip
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if ray_run is not None:
            ray_run.close()
    return _counts(
        tally, total, engine, out, start, startup_s=startup, pools=pools, pixel_cache=cache_doc,
        shm_swept=fleetwide.swept,
    )  # fmt: skip


def _counts(
    tally: Any, total: int, engine: str, out: OutputFile, start: float, **more: Any
) -> BatchCounts:
    """What a run did (``tally``: the engine's :class:`~mmctl.run_batch.local.Tally`)."""
    return BatchCounts(
        total=total,
        succeeded=tally.succeeded,
        failed=tally.failed,
        skipped=tally.skipped,
        engine=engine,
        wall_s=time.perf_counter() - start,
        errors=tally.errors,
        interrupted_by=tally.interrupted_by,
        output=str(out.path),
        not_started=max(0, total - tally.succeeded - tally.failed - tally.skipped),
        retried=out.retried,
        kept_failed=tally.kept_failed,
        by_target=tally.by_target,
        node_retries=tally.node_retries,
        **more,
    )
