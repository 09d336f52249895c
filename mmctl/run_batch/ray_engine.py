"""The Ray engine: the same job on a Ray cluster, for more cores than one machine has.

``--engine ray [--ray-address ADDR]`` in two calls:

* :func:`begin`, before the batch's set-up (as the local engine starts its
  pool): reach Ray (:mod:`.ray_connect`; a local instance's start-up is
  ``startup_s``, reported apart), start one send actor per node
  (:mod:`.ray_send`) and one warm-up task per CPU, so that processes and
  imports start while this process probes the workers and loads the
  tokenizer;
* :func:`run`: read the input here, lazily; preprocess each item as a Ray
  task holding one CPU, anywhere in the cluster (it notes its node: the
  output line's ``mmctl.node``); hand the result, by reference, to the send
  actor of the node that holds it; write each line here as it comes back.
  :class:`_Flow` keeps at most ``2 x preprocess_tasks`` items preprocessing
  or waiting and ``--max-concurrency`` sending, and reads the next input
  line only when one leaves: memory is bounded by the plan, not by the
  dataset.

Why tasks and not a Ray Data pipeline (what this engine was first):
``BENCHMARKS.md`` measures Ray Data's actor pools and executor costing
start-up inside the run that plain tasks on warmed workers do not, and a
Ray Data source built from the driver's items holds them all at once.

Sizes are :mod:`.ray_plan`'s; the model files travel once per node
(:mod:`.ray_files`). Ray retries a preprocessing task whose node died; a
send actor that dies (its node lost) fails the item it held with a
``node_lost`` line (``--resume`` retries it) and the others go on. A reaper
process (:class:`~mmctl.run_batch.children.RayReaper`) stops a local
instance if this process is killed.
"""

from __future__ import annotations

import json
import os
import pickle
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
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise UsageError("--engine ray needs Ray", hint="pip install 'mmctl[ray]'")


# ---- in Ray's worker processes --------------------------------------------------------


def _warm() -> int:
    """A worker process's first task: the imports preprocessing needs, now."""
    import av  # noqa: F401

    import mmctl.preprocessing.pipeline
    import mmctl.run_batch.work  # noqa: F401

    return os.getpid()


#: This worker process's preparer and the settings it was made for.
_PREPARER: tuple[Any, Any] | None = None


def _preprocess(
    item: bytes, number: int, settings: Settings, files: tuple[Any], digest: str
) -> tuple[str, bytes]:
    """A Ray task: one item → (this node's id, its preprocessed media or failure, pickled).

    The node id comes back to the driver, which picks the send actor by it;
    the pickled item stays in this node's object store until that actor reads it."""
    global _PREPARER
    import ray

    from mmctl.run_batch.ray_files import node_settings
    from mmctl.run_batch.work import Preparer, Preprocessed

    if _PREPARER is None or _PREPARER[0] != (settings, digest):
        _PREPARER = ((settings, digest), Preparer(node_settings(settings, files[0], digest)))
    node = str(ray.get_runtime_context().get_node_id())
    done = _PREPARER[1].preprocess(pickle.loads(item), number)
    if isinstance(done, Preprocessed):
        done.node = node
    return node, pickle.dumps(done)


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
    files_ref = ray.put(files)
    for actor in started.senders.values():
        actor.configure.remote(
            settings, files_ref, digest, fleetwide.members, fleetwide.model_name, timeout
        )
    # The files' ref travels inside a tuple: Ray resolves only top-level refs,
    # and a task fetches the files only where the model folder is missing.
    task = ray.remote(_preprocess).options(num_cpus=1, num_returns=2)
    shipped = (ray.put(settings), (files_ref,), digest)
    flow = _Flow(started, task, shipped, out, tally, on_done)
    flow.through(_rows(entries, out, tally, on_done))
    return tally


@dataclass
class _Item:
    id: str
    #: The preprocessed item's ref; the node that holds it, once preprocessed.
    done: Any
    node: str = ""


class _Flow:
    """Items through preprocessing tasks and the send actors, a bounded number at once.

    At most ``2 x preprocess_tasks`` items are preprocessing or waiting for a
    send slot (so the CPUs never wait for this loop) and ``in_flight`` are
    sending: the items alive at once are bounded by the plan, not by the
    dataset, and the input is read only as the flow drains (backpressure)."""

    def __init__(
        self, started: RayRun, task: Any, shipped: tuple[Any, Any, str], out: OutputFile,
        tally: Tally, on_done: Callable[[bool], None],
    ) -> None:  # fmt: skip
        self.ray, self.task, self.shipped = started.ray, task, shipped
        self.senders = dict(started.senders)
        self.ahead = 2 * started.layout.preprocess_tasks
        self.in_flight = started.layout.in_flight
        self.out, self.tally, self.on_done = out, tally, on_done
        self.preprocessing: dict[Any, _Item] = {}  # its node-id ref → item
        self.ready: list[_Item] = []
        self.sending: dict[Any, _Item] = {}  # its line's ref → item
        self.turn = 0

    def through(self, entries: Iterator[Entry]) -> None:
        more = True
        while True:
            while more and len(self.preprocessing) + len(self.ready) < self.ahead:
                entry = next(entries, None)
                if entry is None:
                    more = False
                    break
                self._preprocess(entry)
            while self.ready and len(self.sending) < self.in_flight:
                self._send(self.ready.pop(0))
            waiting = list(self.preprocessing) + list(self.sending)
            if not waiting:
                return
            done, _ = self.ray.wait(waiting, num_returns=1)
            for ref in done:
                if ref in self.preprocessing:
                    item = self.preprocessing.pop(ref)
                    item.node = self.ray.get(ref)
                    self.ready.append(item)
                else:
                    self._write(self.sending.pop(ref), ref)

    def _preprocess(self, entry: Entry) -> None:
        settings, files, digest = self.shipped
        node, done = self.task.remote(
            pickle.dumps(entry.item), entry.number, settings, files, digest
        )
        self.preprocessing[node] = _Item(entry.id, done)

    def _send(self, item: _Item) -> None:
        actor = self.senders.get(item.node) or self._any_sender()
        self.sending[actor.send.remote(item.done)] = item

    def _any_sender(self) -> Any:
        if not self.senders:
            from mmctl.errors import WorkerUnavailable

            raise WorkerUnavailable("every Ray node with a send actor was lost")
        self.turn += 1
        return list(self.senders.values())[self.turn % len(self.senders)]

    def _write(self, item: _Item, ref: Any) -> None:
        ray = self.ray
        try:
            line = ray.get(ref)
        except ray.exceptions.RayActorError:  # its node is gone: no more items go there
            self.senders = {n: a for n, a in self.senders.items() if n != item.node}
            message = "the Ray node sending it was lost; --resume sends it again"
            line = json.dumps(output.error_line(item.id, "node_lost", message, 503))
        doc = json.loads(line)
        self.out.write(doc)
        self.on_done(self.tally.count(doc))


def _rows(
    entries: Iterable[Entry], out: OutputFile, tally: Tally, on_done: Callable[[bool], None]
) -> Iterator[Entry]:
    """The entries to send; the others' lines are written here as they are read."""
    seen: set[str] = set()
    for entry in entries:
        if skip_done(out, entry, tally):
            on_done(entry.id not in out.kept_failed)
        elif not write_entry_error(out, entry, tally, seen):
            yield entry
        else:
            on_done(False)
