"""The Ray engine: the same job as a Ray Data pipeline, for more cores than one machine has.

``--engine ray [--ray-address ADDR]``: read the input here, then two Ray Data
stages — preprocess (actors with one CPU each, across the cluster's nodes,
each loading the model's settings once from files shipped with the job) and
send (up to ``--max-concurrency`` actors that hold no CPU: they compose the
prompt, wait on the network and build the line) — and write the same output
lines here as rows come back. Prepared requests
travel between nodes through Ray's object store, so tensors reach the
workers inline; a send actor uses shared memory only where its own host
shares the worker's ``/dev/shm`` (the namespace is checked where it runs).

Ray Data is an optional extra (``pip install 'mmctl[ray]'``). Without an
address mmctl starts a local Ray instance with ``--workers`` CPUs and stops
it at the end; its start-up time is reported apart (``startup_s``). A
reaper process (:class:`~mmctl.run_batch.children.RayReaper`) stops that
instance if this process is killed. An address where no cluster answers is
:class:`~mmctl.errors.WorkerUnavailable` (exit 5).
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from mmctl.dataset import Entry
from mmctl.errors import UsageError, WorkerUnavailable
from mmctl.run_batch import output
from mmctl.run_batch.local import Tally, skip_done, write_entry_error
from mmctl.run_batch.output import OutputFile


def require() -> None:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise UsageError("--engine ray needs Ray Data", hint="pip install 'mmctl[ray]'") from None


class _Preprocess:
    """A Ray Data stage on CPU actors: items → preprocessed media (decode,
    resize, patchify, hash). It needs the model's vision settings, not its
    tokenizer."""

    def __init__(self, settings: Any) -> None:
        from mmctl.run_batch.work import Preparer

        self.preparer = Preparer(settings)

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        done = self.preparer.preprocess(pickle.loads(row["item"]), row["number"])
        return {"number": row["number"], "done": pickle.dumps(done)}


class _Send:
    """A Ray Data stage on actors that hold no CPU (they wait on the network):
    compose the prompt (milliseconds, with the tokenizer), send, build the line."""

    def __init__(self, settings: Any, members: Any, model_name: str, timeout: float | None) -> None:
        from mmctl.client.transport import shm_problem
        from mmctl.run_batch.fleet import BlockingFleet
        from mmctl.run_batch.work import Preparer
        from mmctl.transport.shm import namespace_id

        here = namespace_id()
        problem = shm_problem()
        # Shared memory only where this actor's host shares the worker's /dev/shm.
        members = [
            replace(m, shm=m.shm and problem is None and m.namespace == here) for m in members
        ]
        self.preparer = Preparer(settings)
        self.fleet = BlockingFleet(members, self.preparer.model.tokenizer, model_name, timeout)

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        from mmctl.run_batch.work import Failure

        done = pickle.loads(row["done"])
        prepared = done if isinstance(done, Failure) else self.preparer.compose(done)
        if isinstance(prepared, Failure):
            doc = output.error_line(prepared.id, prepared.code, prepared.message, prepared.status)
        else:
            doc = self.fleet.send(prepared)
        return {"number": row["number"], "line": json.dumps(doc, separators=(",", ":"))}


def run(
    fleetwide: Any,
    entries: Iterable[Entry],
    out: OutputFile,
    *,
    workers: int,
    max_concurrency: int,
    timeout: float | None,
    address: str | None,
    on_done: Callable[[bool], None],
) -> tuple[Tally, float]:
    import ray
    import ray.data

    tally = Tally()
    tally.by_target = {m.target.address: {"answered": 0, "failed": 0} for m in fleetwide.members}
    seen: set[str] = set()
    rows = []
    for entry in entries:
        if skip_done(out, entry, tally):
            on_done(entry.id not in out.kept_failed)
        elif write_entry_error(out, entry, tally, seen):
            on_done(False)
        else:
            rows.append({"number": entry.number, "item": pickle.dumps(entry.item)})
    started = time.perf_counter()
    ours = not ray.is_initialized()
    reaper = None
    if ours and address is None:
        from mmctl.run_batch.children import RayReaper

        reaper = RayReaper()  # before Ray starts: a kill during its start-up is covered
    try:
        if ours:
            context = _start(ray, address, workers)
            if reaper is not None:
                with contextlib.suppress(AttributeError, KeyError, TypeError):
                    reaper.session(context.address_info["session_dir"])
        with warnings.catch_warnings():  # Ray's deprecation notices are not the user's
            warnings.simplefilter("ignore")
            context = ray.data.DataContext.get_current()
            context.enable_progress_bars = False
            context.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        startup = time.perf_counter() - started
        if not rows:
            return tally, startup
        settings = fleetwide.settings.shippable()
        with warnings.catch_warnings():  # Ray's deprecation notices are not the user's
            warnings.simplefilter("ignore")
            ds = _pipeline(ray, rows, settings, fleetwide, workers, max_concurrency, timeout)
            for row in ds.iter_rows():
                doc = json.loads(row["line"])
                out.write(doc)
                on_done(tally.count(doc))

        return tally, startup
    finally:
        if ours:
            ray.shutdown()
        if reaper is not None:
            reaper.close()


def _start(ray: Any, address: str | None, workers: int) -> Any:
    """``ray.init``; a local instance is tried twice: on a loaded machine its
    GCS or raylet can miss one of Ray's own start-up deadlines (seen in CI:
    "Timed out waiting for file …/gcs_server_port_…" (RuntimeError), "The
    current node timed out during startup" (a bare Exception, after Ray's
    hard-coded 30 s))."""
    for attempt in (1, 2):
        try:
            return ray.init(
                address=address,
                num_cpus=workers if address is None else None,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,
            )
        except ConnectionError as err:
            ray.shutdown()
            if address is not None:
                raise WorkerUnavailable(
                    f"--ray-address {address}: no Ray cluster answers there ({_first(err)})",
                    hint="`ray start --head` starts one; without --ray-address mmctl starts "
                    "a local instance",
                ) from None
            if attempt == 2:
                raise
        except Exception:
            ray.shutdown()
            if attempt == 2 or address is not None:
                raise
    raise AssertionError("unreachable")


def _first(err: BaseException) -> str:
    """The first sentence of Ray's message (the rest is advice about its own flags)."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text.split(". ")[0].rstrip(".")


def _pipeline(
    ray: Any,
    rows: list[dict[str, Any]],
    settings: Any,
    fleetwide: Any,
    workers: int,
    max_concurrency: int,
    timeout: float | None,
) -> Any:
    """read → preprocess (CPU actors) → send (actors that wait on the network)."""
    ds = ray.data.from_items(rows, override_num_blocks=len(rows))
    # max_restarts 0: an actor that dies fails its rows rather than being
    # rebuilt from constructor arguments that may be gone.
    ds = ds.map(
        _Preprocess,
        fn_constructor_kwargs={"settings": settings},
        concurrency=(1, workers),
        num_cpus=1,
        max_restarts=0,
    )
    ds = ds.map(
        _Send,
        fn_constructor_kwargs={
            "settings": settings,
            "members": fleetwide.members,
            "model_name": fleetwide.model_name,
            "timeout": timeout,
        },
        concurrency=(1, max_concurrency),
        num_cpus=0,
        max_restarts=0,
    )
    return ds
