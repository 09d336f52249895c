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

import functools
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

    import mmctl.models.qwen_vl.pipeline
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
    #: node id → its CPUs
    cpus: dict[str, int] = field(default_factory=dict)
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
        alive = [n for n in ray.nodes() if n.get("Alive")]
        nodes = [n["NodeID"] for n in alive]
        layout = plan(ray.cluster_resources().get("CPU", 1), len(nodes), workers, max_concurrency)
        run = RayRun(ray, layout, connection, reaper)
        run.cpus = {n["NodeID"]: int(n.get("Resources", {}).get("CPU", 0)) for n in alive}
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = ray.remote(Sender)
        here = None if connection is not None and connection.client else _this_node(ray)
        for node in nodes[: layout.senders]:
            if node == here:
                continue  # this process sends its own node's items (ray_send.HereSender)
            run.senders[node] = remote.options(
                num_cpus=0,
                max_concurrency=layout.calls_per_sender + 2,
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote()
        warm = ray.remote(_warm).options(num_cpus=1, scheduling_strategy="SPREAD")
        run.warm = [warm.remote() for _ in range(layout.preprocess_tasks)]
        return run
    except BaseException:
        if connection is not None:
            ray.shutdown()
        if reaper is not None:
            reaper.close()
        raise


def _this_node(ray: Any) -> str | None:
    try:
        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # a Ray Client driver is on no node
        return None


def run(
    started: RayRun,
    fleetwide: Any,
    entries: Iterable[Entry],
    out: OutputFile,
    *,
    timeout: float | None,
    on_done: Callable[[bool], None],
    on_skip: Callable[[bool], None] | None = None,
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
    task = ray.remote(_preprocess)
    shipped = (ray.put(settings), (files_ref,), digest)
    from mmctl.run_batch.ray_send import HereSender
    from mmctl.run_batch.work import Preparer

    here = Preparer(settings, fleetwide.model)
    node = None if started.connection is not None and started.connection.client else (
        _this_node(ray)
    )  # fmt: skip
    sender = None
    if node is not None:
        sender = HereSender(here, fleetwide.members, fleetwide.model_name, timeout)
    try:
        flow = _Flow(started, task, shipped, out, tally, on_done, here, node, sender)
        flow.through(_rows(entries, out, tally, on_done, on_skip or on_done, here))
    finally:
        if sender is not None:
            sender.close()
    return tally


@dataclass
class _Item:
    id: str
    #: Its preprocessed form: a ref (a Ray task's result) or the pickle itself.
    done: Any
    #: The node that holds it, once preprocessed.
    node: str = ""


class _Flow:
    """Items through preprocessing tasks and the senders, a bounded number at once.

    At most ``2 x preprocess_tasks`` items are preprocessing or waiting for a
    send slot (so the CPUs never wait for this loop) and ``in_flight`` are
    sending: the items alive at once are bounded by the plan, not by the
    dataset, and the input is read only as the flow drains (backpressure).
    Items on this process's node are sent by this process
    (:class:`~mmctl.run_batch.ray_send.HereSender`), the others by their
    node's actor.

    Until a warm-up or preprocessing task has finished (Ray's worker
    processes take seconds to start; ``BENCHMARKS.md``), this process also
    preprocesses one item at a time itself, with the model it holds
    already, so the first sends need not wait for the cluster's processes."""

    def __init__(
        self, started: RayRun, task: Any, shipped: tuple[Any, Any, str], out: OutputFile,
        tally: Tally, on_done: Callable[[bool], None], here: Any, node: str | None,
        sender: Any,
    ) -> None:  # fmt: skip
        self.ray, self.task, self.shipped = started.ray, task, shipped
        self.senders = dict(started.senders)
        self.ahead = 2 * started.layout.preprocess_tasks
        # Per node: twice its CPUs preprocessing at once; each item goes to the
        # node with the most free places (its CPUs kept busy, none starved).
        self.places = {node: 2 * cpus for node, cpus in started.cpus.items() if cpus > 0}
        self.taken = dict.fromkeys(self.places, 0)
        self.in_flight = started.layout.in_flight
        self.out, self.tally, self.on_done = out, tally, on_done
        self.preprocessing: dict[Any, _Item] = {}  # its node-id ref → item
        self.ready: list[_Item] = []
        self.sending: dict[Any, _Item] = {}  # its line's ref → item
        self.here_sending: dict[Any, _Item] = {}  # its line's future → item
        self.turn = 0
        #: The warm-up tasks (until one finishes); ``up``: some worker of the cluster is.
        self.warm = list(started.warm)
        self.up = False
        self.here, self.node, self.here_sender = here, node, sender
        self.bridge: Any = None  # this process's item being preprocessed: (future, entry)
        self.pool: Any = None

    def through(self, entries: Iterator[Entry]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(1, thread_name_prefix="mmctl-bridge")
        try:
            self._through(entries)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _through(self, entries: Iterator[Entry]) -> None:
        more = True
        while True:
            while more and len(self.preprocessing) + len(self.ready) < self.ahead:
                entry = next(entries, None)
                if entry is None:
                    more = False
                    break
                self._preprocess(entry)
            if more and not self.up and self.bridge is None:
                entry = next(entries, None)
                if entry is None:
                    more = False
                else:
                    job = self.pool.submit(self.here.preprocess, entry.item, entry.number)
                    self.bridge = (job, entry)
            while self.ready and len(self.sending) + len(self.here_sending) < self.in_flight:
                self._send(self.ready.pop(0))
            waiting = list(self.preprocessing) + list(self.sending) + self.warm
            local = self.bridge is not None or bool(self.here_sending)
            if not waiting and not local:
                return
            if waiting:
                done, _ = self.ray.wait(waiting, num_returns=1, timeout=0.01 if local else None)
                self._arrived(done)
            else:
                _first_done([self.bridge[0]] if self.bridge else [], self.here_sending)
            self._here_done()

    def _arrived(self, done: list[Any]) -> None:
        for ref in done:
            if ref in self.preprocessing:
                self.up = True
                item = self.preprocessing.pop(ref)
                if item.node in self.taken:
                    self.taken[item.node] -= 1
                item.node = self.ray.get(ref)
                self.ready.append(item)
            elif ref in self.sending:
                self._write(self.sending.pop(ref), functools.partial(self.ray.get, ref))
            else:
                self.warm = []  # a worker process is up: the cluster takes it from here
                self.up = True

    def _here_done(self) -> None:
        for future in [f for f in self.here_sending if f.done()]:
            self._write(self.here_sending.pop(future), future.result)
        if self.bridge is None or not self.bridge[0].done():
            return
        job, entry = self.bridge
        self.bridge = None
        from mmctl.run_batch.work import Preprocessed

        done = job.result()
        if isinstance(done, Preprocessed):
            done.node = self.node
        item = _Item(entry.id, pickle.dumps(done), self.node or "")
        if self.here_sender is None:  # a Ray Client driver: into the cluster's object store
            item.done = self.ray.put(item.done)
        self.ready.append(item)

    def _preprocess(self, entry: Entry) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        settings, files, digest = self.shipped
        options: dict[str, Any] = {"num_cpus": 1, "num_returns": 2}
        where = ""
        if self.places:
            where = max(self.places, key=lambda n: self.places[n] - self.taken[n])
            self.taken[where] += 1
            # soft: a node that went away hands its items to the others
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(where, soft=True)
        node, done = self.task.options(**options).remote(
            pickle.dumps(entry.item), entry.number, settings, files, digest
        )
        self.preprocessing[node] = _Item(entry.id, done, where)

    def _send(self, item: _Item) -> None:
        if self.here_sender is not None and item.node == self.node:
            done = item.done if isinstance(item.done, bytes) else self.ray.get(item.done)
            self.here_sending[self.here_sender.send(done)] = item
            return
        actor = self.senders.get(item.node) or self._any_sender()
        self.sending[actor.send.remote(item.done)] = item

    def _any_sender(self) -> Any:
        if not self.senders:
            from mmctl.errors import WorkerUnavailable

            raise WorkerUnavailable("every Ray node with a send actor was lost")
        self.turn += 1
        return list(self.senders.values())[self.turn % len(self.senders)]

    def _write(self, item: _Item, line_of: Callable[[], str]) -> None:
        ray = self.ray
        try:
            line = line_of()
        except ray.exceptions.RayActorError:  # its node is gone: no more items go there
            self.senders = {n: a for n, a in self.senders.items() if n != item.node}
            message = "the Ray node sending it was lost; --resume sends it again"
            line = json.dumps(output.error_line(item.id, "node_lost", message, 503))
        doc = json.loads(line)
        self.out.write(doc)
        self.on_done(self.tally.count(doc))


def _first_done(*groups: Any) -> None:
    from concurrent.futures import FIRST_COMPLETED, wait

    futures = [f for group in groups for f in group]
    if futures:
        wait(futures, return_when=FIRST_COMPLETED)


def _rows(
    entries: Iterable[Entry], out: OutputFile, tally: Tally, on_done: Callable[[bool], None],
    on_skip: Callable[[bool], None], here: Any,
) -> Iterator[Entry]:  # fmt: skip
    """The entries to send; the others' lines are written here as they are read
    (a prompt too long for the context among them: refused from its length)."""
    seen: set[str] = set()
    for entry in entries:
        if skip_done(out, entry, tally, seen):
            on_skip(entry.id not in out.kept_failed)
        elif write_entry_error(out, entry, tally, seen):
            on_done(False)
        elif (
            entry.item is not None
            and (refused := here.check_prompt(entry.item, entry.number)) is not None
        ):
            doc = output.error_line(refused.id, refused.code, refused.message, refused.status)
            out.write(doc)
            on_done(tally.count(doc))
        else:
            yield entry
