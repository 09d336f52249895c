"""The Ray engine: the same job on a Ray cluster, for more cores than one machine has.

``--engine ray [--ray-address ADDR]`` in two calls:

* :func:`begin`, before the batch's set-up (as the local engine starts its
  pool): reach Ray (:mod:`.ray_connect`; a local instance's start-up is
  ``startup_s``, reported apart), start one send actor per node
  (:mod:`.ray_send`) and one warm-up task per CPU, so that processes and
  imports start while this process probes the workers and loads the
  tokenizer;
* :func:`run`: read the input here; preprocess as a Ray Data ``map`` of
  tasks, one CPU each, across the nodes (each task notes its node: the
  output line's ``mmctl.node``); hand each preprocessed block, by
  reference, to the send actor of the node that holds it, at most
  ``--max-concurrency`` items at once; write each line here as it comes
  back. Ray Data streams: its backpressure and this loop bound the items in
  flight, not the dataset.

Sizes are :mod:`.ray_plan`'s; the model files travel once per node
(:mod:`.ray_files`). A send actor that dies (its node lost) fails the items
it held with ``node_lost`` lines (``--resume`` retries them); the others go
on; Ray Data retries a preprocessing task whose node died. A reaper process
(:class:`~mmctl.run_batch.children.RayReaper`) stops a local instance if
this process is killed.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mmctl.dataset import Entry
from mmctl.errors import UsageError
from mmctl.run_batch import output
from mmctl.run_batch.local import Tally, skip_done, write_entry_error
from mmctl.run_batch.output import OutputFile
from mmctl.run_batch.ray_connect import Connection, address_wanted, connect
from mmctl.run_batch.ray_plan import Plan, plan
from mmctl.run_batch.work import Settings


def require() -> None:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise UsageError("--engine ray needs Ray Data", hint="pip install 'mmctl[ray]'") from None


# ---- in Ray's worker processes --------------------------------------------------------


def _warm() -> int:
    """A worker process's first task: the imports preprocessing needs, now."""
    import av  # noqa: F401
    import ray.data  # noqa: F401

    import mmctl.preprocessing.pipeline
    import mmctl.run_batch.work  # noqa: F401

    return os.getpid()


#: This worker process's preparer and the settings it was made for.
_PREPARER: tuple[Any, Any] | None = None


def _preprocess(row: dict[str, Any], settings: Settings, files: Any, digest: str) -> dict[str, Any]:
    """A Ray Data task: one item → its preprocessed media (or a failure), pickled."""
    global _PREPARER
    import ray

    from mmctl.run_batch.ray_files import node_settings
    from mmctl.run_batch.work import Preparer, Preprocessed

    if _PREPARER is None or _PREPARER[0] != (settings, digest):
        _PREPARER = ((settings, digest), Preparer(node_settings(settings, files, digest)))
    done = _PREPARER[1].preprocess(pickle.loads(row["item"]), row["number"])
    if isinstance(done, Preprocessed):
        done.node = str(ray.get_runtime_context().get_node_id())
    return {"number": row["number"], "done": pickle.dumps(done)}


# ---- in this process ------------------------------------------------------------------


@dataclass
class RayRun:
    """What :func:`begin` started; :meth:`close` stops it."""

    ray: Any
    layout: Plan
    connection: Connection | None
    reaper: Any
    #: node id → its send actor
    senders: dict[str, Any] = field(default_factory=dict)
    warm: list[Any] = field(default_factory=list)

    @property
    def startup_s(self) -> float:
        return self.connection.startup_s if self.connection is not None else 0.0

    def close(self) -> None:
        ray = self.ray
        try:
            for actor in self.senders.values():
                ray.kill(actor)
        except Exception:  # Ray is going away anyway: shutdown below
            pass
        finally:
            if self.connection is not None:
                ray.shutdown()
            if self.reaper is not None:
                self.reaper.close()


def begin(address: str | None, workers: int | None, max_concurrency: int) -> RayRun:
    """Reach Ray and start what can start before the set-up (see the module docstring)."""
    import ray

    from mmctl.run_batch.ray_send import Sender

    address = address_wanted(address)
    ours = not ray.is_initialized()
    reaper = None
    if ours and address is None:
        from mmctl.run_batch.children import RayReaper

        reaper = RayReaper()  # before Ray starts: a kill during its start-up is covered
    connection = None
    try:
        if ours:
            connection = connect(ray, address, workers or os.cpu_count() or 1)
            if reaper is not None and connection.session_dir:
                reaper.session(connection.session_dir)
        _quiet(ray)
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        layout = plan(ray.cluster_resources().get("CPU", 1), len(nodes), workers, max_concurrency)
        run = RayRun(ray, layout, connection, reaper)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = ray.remote(Sender)
        for node in nodes[: layout.send_actors]:
            run.senders[node] = remote.options(
                num_cpus=0,
                max_concurrency=layout.calls_per_send_actor + 2,
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote()
        warm = ray.remote(_warm).options(num_cpus=1)
        run.warm = [warm.remote() for _ in range(layout.preprocess_tasks)]
        return run
    except BaseException:
        if connection is not None:
            ray.shutdown()
        if reaper is not None:
            reaper.close()
        raise


def run(
    started: RayRun,
    fleetwide: Any,
    entries: Iterable[Entry],
    out: OutputFile,
    *,
    timeout: float | None,
    on_done: Callable[[bool], None],
) -> Tally:
    from mmctl.run_batch.ray_files import model_files

    ray = started.ray
    tally = Tally()
    tally.by_target = {m.target.address: {"answered": 0, "failed": 0} for m in fleetwide.members}
    settings = fleetwide.settings
    files, digest = model_files(settings)
    shipped = {"settings": settings, "files": ray.put(files), "digest": digest}
    for actor in started.senders.values():
        actor.configure.remote(
            **shipped, members=fleetwide.members, model_name=fleetwide.model_name,
            timeout=timeout,
        )  # fmt: skip
    rows = list(_rows(entries, out, tally, on_done))
    if not rows:
        return tally
    with warnings.catch_warnings():  # Ray's deprecation notices are not the user's
        warnings.simplefilter("ignore")
        ds = ray.data.from_items(rows, override_num_blocks=len(rows)).map(
            _preprocess,
            fn_kwargs=shipped,
            num_cpus=1,
            concurrency=started.layout.preprocess_tasks,
        )
        _Sending(started, out, tally, on_done).through(ds.iter_internal_ref_bundles())
    return tally


class _Sending:
    """Preprocessed blocks → the send actor on their node, at most ``in_flight`` items at once."""

    def __init__(
        self, started: RayRun, out: OutputFile, tally: Tally, on_done: Callable[[bool], None]
    ) -> None:
        self.ray, self.senders = started.ray, dict(started.senders)
        self.in_flight = started.layout.in_flight
        self.out, self.tally, self.on_done = out, tally, on_done
        #: a send's result ref → (the block ref, its node, its rows)
        self.pending: dict[Any, tuple[Any, str, int]] = {}
        self.turn = 0

    def through(self, bundles: Iterator[Any]) -> None:
        for bundle in bundles:
            where = bundle.get_preferred_object_locations()
            for entry, part in zip(bundle.blocks, bundle.slices, strict=True):
                rows = entry.metadata.num_rows or 0
                start, end = (part.start_offset, part.end_offset) if part else (0, rows)
                node = self._node(where)
                ref = self.senders[node].send.remote(entry.ref, start, end)
                self.pending[ref] = (entry.ref, node, end - start)
                while sum(n for _, _, n in self.pending.values()) >= self.in_flight:
                    self._collect()
        while self.pending:
            self._collect()

    def _node(self, where: dict[str, int]) -> str:
        """The node holding most of the block, if it has a sender; else the next one."""
        for node, _ in sorted(where.items(), key=lambda kv: -kv[1]):
            if node in self.senders:
                return node
        if not self.senders:
            from mmctl.errors import WorkerUnavailable

            raise WorkerUnavailable("every Ray node with a send actor was lost")
        self.turn += 1
        return list(self.senders)[self.turn % len(self.senders)]

    def _collect(self) -> None:
        ray = self.ray
        ready, _ = ray.wait(list(self.pending), num_returns=1)
        ref = ready[0]
        block, node, _ = self.pending.pop(ref)
        try:
            lines = ray.get(ref)
        except ray.exceptions.RayActorError:
            self.senders.pop(node, None)  # its node is gone: no more items go there
            lines = _lost(ray, block)
        for line in lines:
            doc = json.loads(line)
            self.out.write(doc)
            self.on_done(self.tally.count(doc))


def _lost(ray: Any, block: Any) -> list[str]:
    """Error lines for a block whose send actor died (none when the block went with it)."""
    from ray.data.block import BlockAccessor

    from mmctl.run_batch.work import Preprocessed

    try:
        rows = BlockAccessor.for_block(ray.get(block, timeout=10)).iter_rows(True)
        done = [pickle.loads(row["done"]) for row in rows]
        ids = [d.item.id if isinstance(d, Preprocessed) else d.id for d in done]
    except Exception:  # the block was lost with its node: --resume sends these items again
        return []
    message = "the Ray node sending it was lost; --resume sends it again"
    return [json.dumps(output.error_line(i, "node_lost", message, 503)) for i in ids]


def _rows(
    entries: Iterable[Entry], out: OutputFile, tally: Tally, on_done: Callable[[bool], None]
) -> Iterator[dict[str, Any]]:
    """The entries to send, as rows; the others' lines are written here."""
    seen: set[str] = set()
    for entry in entries:
        if skip_done(out, entry, tally):
            on_done(entry.id not in out.kept_failed)
        elif write_entry_error(out, entry, tally, seen):
            on_done(False)
        else:
            yield {"number": entry.number, "item": pickle.dumps(entry.item)}


def _quiet(ray: Any) -> None:
    with warnings.catch_warnings():  # Ray's deprecation notices are not the user's
        warnings.simplefilter("ignore")
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
