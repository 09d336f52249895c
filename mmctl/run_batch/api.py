"""``mmctl.batch(input, output, targets=…, engine=…)``: the whole job, used by the CLI.

Set-up happens once, in this process: each target is probed (one that does
not answer starts out of the fleet and is probed again while the batch
runs), the model files and tokenizer come from the first that answers, and
what every target must agree on is decided — the pixel dtype — along with
each target's transport (shared memory only where it shares this host's
``/dev/shm``). Then an engine runs the items: ``local`` (a process pool and
``grpc.aio``) or ``ray`` (a Ray Data pipeline).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmctl.choices import PixelFormat
from mmctl.client.client import Client
from mmctl.client.negotiate import pixel_dtype, transport
from mmctl.dataset import Items
from mmctl.errors import CheckFailed, UsageError, WorkerUnavailable
from mmctl.request.build import Sampling
from mmctl.request.limits import parse_item_limits
from mmctl.run_batch.fleet import Member
from mmctl.run_batch.output import OutputFile
from mmctl.run_batch.work import Settings
from mmctl.transport.shm import namespace_id

ENGINES = ("local", "ray")
#: ``--max-remote-mb`` default: a fetched medium larger than this is refused.
REMOTE_CAP_MB = 256


@dataclass
class BatchCounts:
    """What a batch did. ``exit_code`` follows the README's table."""

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

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class Fleetwide:
    """The set-up every engine shares."""

    settings: Settings
    members: list[Member]
    model: Any  # mmctl.models.model.Model, loaded once here
    model_name: str


def _setup(
    targets: Sequence[str],
    *,
    transport_mode: str,
    headers: Mapping[str, str] | Sequence[str] | None,
    tls: bool | str | Path | None,
    timeout: float | None,
    model_dir: Path | None,
    bundle: Path | None,
    family: str | None,
    prompt: str | None,
    sampling: Sampling,
    pixel: str | None,
) -> Fleetwide:
    if transport_mode not in ("auto", "inline", "shm"):
        raise UsageError(f"--transport is auto, inline or shm; got {transport_mode!r}")
    clients = [
        Client(t, headers=headers, tls=tls, timeout=timeout, model_dir=model_dir, bundle=bundle)
        for t in targets
    ]
    try:
        facts: list[Any] = []
        for client in clients:
            try:
                facts.append(client.facts())
            except WorkerUnavailable:
                facts.append(None)  # starts out of the fleet; probed again while running
        answering = [(c, f) for c, f in zip(clients, facts, strict=True) if f is not None]
        if not answering:
            raise WorkerUnavailable(
                f"no target answers ({', '.join(targets)})",
                hint="is `vllm serve … --grpc` (or `mmctl stub-worker`) listening there?",
            )
        first, first_facts = answering[0]
        session = first.session()
        fmts = {pixel_dtype(f, pixel).value for _, f in answering}
        if len(fmts) > 1:
            raise UsageError(
                f"the targets expect different pixel dtypes ({', '.join(sorted(fmts))})",
                hint="batch one kind of worker at a time",
            )
        limits: dict[str, int] = {}
        budgets = []
        for _, f in answering:
            for kind, n in parse_item_limits(f.server.mm_item_limits or "").items():
                limits[kind] = min(n, limits.get(kind, n))
            if f.server.mm_encoder_budget:
                budgets.append(int(f.server.mm_encoder_budget))
        members = []
        for client, f in zip(clients, facts, strict=True):
            shm = False
            if f is not None and transport_mode != "inline":
                from mmctl.client.run import shm_problem

                decision = transport("auto", f, namespace_id(), shm_problem())
                shm = decision.value == "shm"
                if transport_mode == "shm" and not shm:
                    raise CheckFailed(
                        f"--transport shm: {client.target.address}: {decision.reason}",
                        hint="--transport auto uses shared memory only where it works",
                    )
            namespace = f.server.shm_namespace_id if f is not None else ""
            members.append(Member(client.target, shm, up=f is not None, namespace=namespace))
        settings = Settings(
            source=session.model.source,
            family=session.model.spec.name,
            pixel_format=PixelFormat(fmts.pop()),
            item_limits=limits,
            encoder_budget=min(budgets) if budgets else 0,
            prompt=prompt,
            sampling=sampling,
        )
        model_name = first_facts.model.served_model_name or session.model.source.label
        return Fleetwide(settings, members, session.model, model_name)
    finally:
        for client in clients:
            client.close()


def batch(
    input: str | Path,
    output: str | Path,
    *,
    targets: str | Sequence[str] | None = None,
    engine: str = "local",
    workers: int | None = None,
    max_concurrency: int = 8,
    resume: bool = False,
    overwrite: bool = False,
    transport: str = "auto",
    prompt: str | None = None,
    max_tokens: int | None = None,
    pixel_dtype: str | None = None,
    allow_remote_media: bool = False,
    max_remote_mb: int = REMOTE_CAP_MB,
    headers: Mapping[str, str] | Sequence[str] | None = None,
    tls: bool | str | Path | None = None,
    timeout: float | None = None,
    model_dir: str | Path | None = None,
    bundle: str | Path | None = None,
    family: str | None = None,
    ray_address: str | None = None,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[bool], None] | None = None,
) -> BatchCounts:
    """Run every line of ``input`` (JSONL: OpenAI batch or short form) through
    the workers at ``targets`` (``"host:port,host:port"`` or a list; default
    ``$MMCTL_TARGET``); append one output line per input line to ``output``.

    ``resume`` skips the ids already in ``output``; without it an ``output``
    that holds results is refused unless ``overwrite``. ``on_start(total)``
    and ``on_done(succeeded)`` report progress.

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
    workers = workers or os.cpu_count() or 1
    if workers < 1 or max_concurrency < 1:
        raise UsageError("--workers and --max-concurrency must be at least 1")
    if max_remote_mb < 1:
        raise UsageError("--max-remote-mb must be at least 1")
    source_path, out_path = Path(input), Path(output)
    if not source_path.is_file():
        raise UsageError(f"no such input file: {source_path}")
    pool = None
    if engine == "ray":
        from mmctl.run_batch.ray_engine import require

        require()
    else:
        from mmctl.run_batch.local import start_pool

        pool = start_pool(workers)  # starting while the set-up below runs
    try:
        fleetwide = _setup(
            targets,
            transport_mode=transport,
            headers=headers,
            tls=tls,
            timeout=timeout,
            model_dir=Path(model_dir) if model_dir else None,
            bundle=Path(bundle) if bundle else None,
            family=family,
            prompt=prompt,
            sampling=Sampling(max_tokens=max_tokens),
            pixel=pixel_dtype,
        )
        cap = max_remote_mb * 10**6 if allow_remote_media else None
        out = OutputFile(out_path, resume=resume, overwrite=overwrite)
        try:
            with Items(source_path, remote_cap=cap) as items:
                total = items.count()
                if on_start is not None:
                    on_start(total)
                done = on_done or (lambda ok: None)
                startup = 0.0
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
                            workers=workers,
                            max_concurrency=max_concurrency,
                            timeout=timeout,
                            on_done=done,
                        )
                    )
                else:
                    from mmctl.run_batch import ray_engine

                    tally, startup = ray_engine.run(
                        fleetwide,
                        items.entries(),
                        out,
                        workers=workers,
                        max_concurrency=max_concurrency,
                        timeout=timeout,
                        address=ray_address,
                        on_done=done,
                    )
        finally:
            out.close()
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return BatchCounts(
        total=total,
        succeeded=tally.succeeded,
        failed=tally.failed,
        skipped=tally.skipped,
        engine=engine,
        wall_s=time.perf_counter() - start,
        startup_s=startup,
        errors=tally.errors,
        interrupted_by=tally.interrupted_by,
        output=str(out_path),
    )
