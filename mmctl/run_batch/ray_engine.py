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
(:mod:`.ray_files`); ``data:`` media travel inside their items and remote
ones are fetched by the node that preprocesses them (no medium by a path of
the driver's). Items asking about media another item preprocessed go to the
node holding them (the pixel cache per node, :class:`_Flow`). Ray retries a
preprocessing task whose node died; the items a lost node held otherwise
(its send actor's, its preprocessed ones) are made again on the other nodes
(:data:`NODE_RETRIES`). A reaper process
(:class:`~mmctl.run_batch.children.RayReaper`) stops a local instance if this
process is killed.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mmctl.dataset import Entry, Item
from mmctl.errors import UsageError
from mmctl.request.pixel_cache import Claim, PixelCache
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
) -> tuple[tuple[str, int], bytes]:
    """A Ray task: one item → ((this node's id, its pixels' bytes), its
    preprocessed media or failure, pickled).

    The node id comes back to the driver, which picks the send actor by it;
    the pickled item stays in this node's object store until that actor
    reads it (and, for the pixel cache, while the driver keeps its ref).
    ``data:`` media came inside the item; remote ones are fetched here."""
    global _PREPARER
    import ray

    from mmctl.request.pixel_cache import size_of
    from mmctl.run_batch.ray_files import node_settings
    from mmctl.run_batch.work import Preparer, Preprocessed

    if _PREPARER is None or _PREPARER[0] != (settings, digest):
        _PREPARER = ((settings, digest), Preparer(node_settings(settings, files[0], digest)))
    node = str(ray.get_runtime_context().get_node_id())
    done = _PREPARER[1].preprocess(pickle.loads(item), number)
    nbytes = 0
    if isinstance(done, Preprocessed):
        done.node = node
        nbytes = sum(size_of(it.pre) for it in done.media)
    return (node, nbytes), pickle.dumps(done)


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
    pixel_cache_mb: int = 0,
) -> tuple[Tally, dict[str, Any]]:
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
    cache: PixelCache[Held] = PixelCache(pixel_cache_mb)
    try:
        flow = _Flow(started, task, shipped, out, tally, on_done, here, node, sender, cache)
        flow.through(_rows(entries, out, tally, on_done, on_skip or on_done, here))
    finally:
        if sender is not None:
            sender.close()
    return tally, cache.snapshot().as_dict()


#: How often an item is tried again after the Ray node preprocessing or sending it
#: was lost (its worker died, its object went with its node).
NODE_RETRIES = 3


@dataclass(frozen=True)
class Held:
    """A preprocessed item kept for the pixel cache: the node holding it, its
    pickle (a ref into that node's object store), its pixels' bytes."""

    node: str
    done: Any
    nbytes: int


@dataclass
class _Item:
    entry: Entry
    #: Its preprocessed form: a ref (a Ray task's result) or the pickle itself.
    done: Any = None
    #: The node that holds it, once preprocessed.
    node: str = ""
    #: Its media's key in the pixel cache (``None``: not cached) and this item's
    #: claim on it while it preprocesses them for the others.
    key: str | None = None
    claim: Claim[Held] | None = None
    #: How the pixel cache answered: ``off``, ``miss``, or — another item's
    #: pixels, this item's id and prompt swapped in by the sender — ``hit``
    #: (kept) or ``shared`` (waited for).
    how: str = "off"
    #: The node whose sender has it (its own, or another's when its node is gone).
    via: str = ""
    #: Tries after a lost node.
    retries: int = 0

    @property
    def id(self) -> str:
        return self.entry.id


class _Flow:
    """Items through preprocessing tasks and the senders, a bounded number at once.

    At most ``2 x preprocess_tasks`` items are preprocessing, waiting for
    another item's pixels or waiting for a send slot (so the CPUs never wait
    for this loop) and ``in_flight`` are sending: the items alive at once are
    bounded by the plan, not by the dataset, and the input is read only as
    the flow drains (backpressure). Items on this process's node are sent by
    this process (:class:`~mmctl.run_batch.ray_send.HereSender`), the others
    by their node's actor.

    **The pixel cache, per node.** A preprocessed item stays in its node's
    object store while the cache holds its ref (``--pixel-cache-mb`` per
    node, least recently used out first). An item whose media another item
    has (:func:`route_key`) goes to the node holding them when that node's
    sender has room, and is composed and sent there without decoding; one
    whose media are being preprocessed waits for them; otherwise it is
    preprocessed where the places are.

    **A node lost** (its sender actor dies, a task's worker or object goes
    with it): its items are tried again on the remaining nodes — preprocessed
    again where their pixels went with it — up to :data:`NODE_RETRIES` times,
    and its cached items are forgotten. Every item gets exactly one line.

    Until a warm-up or preprocessing task has finished (Ray's worker
    processes take seconds to start; ``BENCHMARKS.md``), this process also
    preprocesses one item at a time itself, with the model it holds
    already, so the first sends need not wait for the cluster's processes."""

    def __init__(
        self, started: RayRun, task: Any, shipped: tuple[Any, Any, str], out: OutputFile,
        tally: Tally, on_done: Callable[[bool], None], here: Any, node: str | None,
        sender: Any, cache: PixelCache[Held],
    ) -> None:  # fmt: skip
        self.ray, self.task, self.shipped = started.ray, task, shipped
        self.senders = dict(started.senders)
        self.ahead = 2 * started.layout.preprocess_tasks
        # Per node: twice its CPUs preprocessing at once; each item goes to the
        # node with the most free places (its CPUs kept busy, none starved).
        self.places = {node: 2 * cpus for node, cpus in started.cpus.items() if cpus > 0}
        self.taken = dict.fromkeys(self.places, 0)
        self.in_flight = started.layout.in_flight
        #: Sends one node takes at once: what "room" on a node means.
        self.per_node = started.layout.calls_per_sender
        self.out, self.tally, self.on_done = out, tally, on_done
        self.cache = cache
        self.preprocessing: dict[Any, _Item] = {}  # its (node, bytes) ref → item
        self.ready: list[_Item] = []
        self.parked = 0  # items waiting for another item's pixels
        self.sending: dict[Any, _Item] = {}  # its line's ref → item
        self.here_sending: dict[Any, _Item] = {}  # its line's future → item
        self.turn = 0
        #: The warm-up tasks (until one finishes); ``up``: some worker of the cluster is.
        self.warm = list(started.warm)
        self.up = False
        self.here, self.node, self.here_sender = here, node, sender
        self.bridge: Any = None  # this process's item being preprocessed: (future, item)
        self.pool: Any = None
        self.lost: set[str] = set()

    def through(self, entries: Iterator[Entry]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(1, thread_name_prefix="mmctl-bridge")
        try:
            self._through(entries)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _alive(self) -> int:
        return len(self.preprocessing) + len(self.ready) + self.parked

    def _through(self, entries: Iterator[Entry]) -> None:
        more = True
        while True:
            while more and self._alive() < self.ahead:
                entry = next(entries, None)
                if entry is None:
                    more = False
                    break
                self._start(_Item(entry))
            if more and not self.up and self.bridge is None:
                entry = next(entries, None)
                if entry is None:
                    more = False
                else:
                    self._start(_Item(entry), bridge=True)
            self._send_ready()
            waiting = list(self.preprocessing) + list(self.sending) + self.warm
            local = self.bridge is not None or bool(self.here_sending)
            if not waiting and not local:
                if self.ready or self.parked:
                    raise RuntimeError("mmctl: Ray items left with nothing running (a bug)")
                return
            if waiting:
                done, _ = self.ray.wait(waiting, num_returns=1, timeout=0.01 if local else None)
                self._arrived(done)
            else:
                _first_done([self.bridge[0]] if self.bridge else [], self.here_sending)
            self._here_done()

    # ---- an item's way in ----

    def _start(self, item: _Item, bridge: bool = False) -> None:
        """Take the cache's pixels (its holder has room), wait for another
        item's, or preprocess the item — for the others too, holding the
        claim on its key — on the cluster or (``bridge``) in this process."""
        assert item.entry.item is not None
        make = self._bridge if bridge else self._preprocess
        if item.key is None and self.cache.enabled:
            item.key = route_key(item.entry.item)
        if item.key is None:
            make(item)
            return
        item.how = "miss"
        holder = self.cache.where(item.key)
        if holder is not None and holder not in self.lost and not self._room(str(holder)):
            make(item)  # its node is full: made again where the places are
            return
        claim = self.cache.claim(item.key)
        if claim.value is not None:
            self._reuse(item, claim.value, "hit")
        elif claim.future is not None:
            self.parked += 1
            claim.future.add_done_callback(lambda f: self._woken(item, f.result()))
        else:
            item.claim = claim
            make(item)

    def _woken(self, item: _Item, held: Held | None) -> None:
        # Called where the claim is filled or failed: in this loop's thread.
        self.parked -= 1
        if held is None:
            self._start(item)  # its maker failed or was lost: try again
        else:
            self.cache.served(held.nbytes)
            self._reuse(item, held, "shared")

    def _reuse(self, item: _Item, held: Held, how: str) -> None:
        item.done, item.node, item.how = held.done, held.node, how
        self.ready.append(item)

    def _room(self, node: str) -> bool:
        busy = sum(i.node == node for i in [*self.sending.values(), *self.here_sending.values()])
        waiting = sum(i.node == node for i in self.ready)
        return busy + waiting < self.per_node

    def _bridge(self, item: _Item) -> None:
        job = self.pool.submit(self.here.preprocess, item.entry.item, item.entry.number)
        self.bridge = (job, item)

    def _preprocess(self, item: _Item) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        settings, files, digest = self.shipped
        options: dict[str, Any] = {"num_cpus": 1, "num_returns": 2}
        where = ""
        if self.places:
            where = max(self.places, key=lambda n: self.places[n] - self.taken[n])
            self.taken[where] += 1
            # soft: a node that went away hands its items to the others
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(where, soft=True)
        entry = item.entry
        facts, done = self.task.options(**options).remote(
            pickle.dumps(entry.item), entry.number, settings, files, digest
        )
        item.done, item.node = done, where
        self.preprocessing[facts] = item

    # ---- arrivals ----

    def _arrived(self, done: list[Any]) -> None:
        for ref in done:
            if ref in self.preprocessing:
                self.up = True
                item = self.preprocessing.pop(ref)
                if item.node in self.taken:
                    self.taken[item.node] -= 1
                try:
                    node, nbytes = self.ray.get(ref)
                except self.ray.exceptions.RayError as err:
                    if not _lost(self.ray, err):
                        raise
                    self._retry(item, item.node, err)
                    continue
                item.node = node
                self._keep(item, nbytes)
                self.ready.append(item)
            elif ref in self.sending:
                item = self.sending.pop(ref)
                self._write(item, functools.partial(self.ray.get, ref))
            else:
                self.warm = []  # a worker process is up: the cluster takes it from here
                self.up = True

    def _keep(self, item: _Item, nbytes: int) -> None:
        """Its pixels for the items that ask about the same media (none for a failure)."""
        claim, item.claim = item.claim, None
        if claim is None:
            return
        if nbytes > 0:
            claim.fill(Held(item.node, item.done, nbytes), nbytes, group=item.node)
        else:
            claim.fail()

    def _here_done(self) -> None:
        for future in [f for f in self.here_sending if f.done()]:
            self._write(self.here_sending.pop(future), future.result)
        if self.bridge is None or not self.bridge[0].done():
            return
        job, item = self.bridge
        self.bridge = None
        from mmctl.request.pixel_cache import size_of
        from mmctl.run_batch.work import Preprocessed

        done = job.result()
        nbytes = 0
        if isinstance(done, Preprocessed):
            done.node = self.node
            nbytes = sum(size_of(it.pre) for it in done.media)
        item.done, item.node = pickle.dumps(done), self.node or ""
        if self.here_sender is None:  # a Ray Client driver: into the cluster's object store
            item.done = self.ray.put(item.done)
        self._keep(item, nbytes)
        self.ready.append(item)

    # ---- sending ----

    def _send_ready(self) -> None:
        """Ready items to their node's sender while it has room (another's
        when their node is gone), in the order they became ready."""
        for item in list(self.ready):
            if len(self.sending) + len(self.here_sending) >= self.in_flight:
                return
            if item.node not in self.lost and not self._sendable(item.node):
                continue
            self.ready.remove(item)
            self._send(item)

    def _sendable(self, node: str) -> bool:
        busy = sum(i.node == node for i in [*self.sending.values(), *self.here_sending.values()])
        return busy < self.per_node

    def _send(self, item: _Item) -> None:
        reused = item.how in ("hit", "shared")
        as_item = pickle.dumps((item.entry.item, item.entry.number)) if reused else None
        item.via = item.node if item.node in self._places_to_send() else self._any_sender()
        if item.via == self.node and self.here_sender is not None:
            # Its node's own, or (rarely: more nodes than senders) fetched here.
            done = item.done if isinstance(item.done, bytes) else self.ray.get(item.done)
            self.here_sending[self.here_sender.send(done, item.how, as_item)] = item
            return
        actor = self.senders[item.via]
        self.sending[actor.send.remote(item.done, item.how, as_item)] = item

    def _places_to_send(self) -> list[str]:
        """The nodes with a sender: the actors', and this process's node."""
        here = [self.node] if self.here_sender is not None and self.node else []
        return here + list(self.senders)

    def _any_sender(self) -> str:
        """The node of a sender, in turns (for items whose own node has none)."""
        nodes = self._places_to_send()
        if not nodes:
            from mmctl.errors import WorkerUnavailable

            raise WorkerUnavailable("every Ray node with a sender was lost")
        self.turn += 1
        return nodes[self.turn % len(nodes)]

    def _write(self, item: _Item, line_of: Callable[[], str]) -> None:
        try:
            line = line_of()
        except self.ray.exceptions.RayError as err:
            if not _lost(self.ray, err):
                raise
            self._retry(item, item.via or item.node, err)
            return
        doc = json.loads(line)
        self.out.write(doc)
        self.on_done(self.tally.count(doc))

    def _retry(self, item: _Item, node: str, err: BaseException) -> None:
        """``node`` (or what it held) went away with ``item``: forget the node,
        and try the item again elsewhere, or write its ``node_lost`` line."""
        self._lose(node, err)
        claim, item.claim = item.claim, None
        if claim is not None:
            claim.fail()  # its waiters try for themselves
        if item.retries < NODE_RETRIES:
            item.retries += 1
            self.tally.node_retries += 1
            item.done, item.how, item.node = None, "off", ""
            self._start(item)
            return
        message = f"the Ray node preprocessing or sending it was lost {item.retries + 1} times"
        doc = output.error_line(item.id, "node_lost", f"{message}: {_said(err)}", 503)
        self.out.write(doc)
        self.on_done(self.tally.count(doc))

    def _lose(self, node: str, err: BaseException) -> None:
        if not node or node in self.lost:
            return
        self.cache.drop_group(node)  # what it held is gone, or may be
        if isinstance(err, self.ray.exceptions.RayActorError) or not self._node_alive(node):
            self.lost.add(node)
            self.senders.pop(node, None)
            self.places.pop(node, None)
            self.taken.pop(node, None)
            # Its items waiting to be sent went with it: made again elsewhere.
            for item in [i for i in self.ready if i.node == node]:
                self.ready.remove(item)
                self._retry(item, node, err)

    def _node_alive(self, node: str) -> bool:
        try:
            return any(n["NodeID"] == node and n.get("Alive") for n in self.ray.nodes())
        except Exception:  # the GCS is busy or gone: the send error decides
            return True


def route_key(item: Item) -> str | None:
    """What the driver knows of an item's media without reading them: a
    file's path, size and change time (shared storage; its path alone where
    this process cannot see it), a ``data:`` medium's content, a remote one's
    URL. Items with equal keys preprocess to the same pixels (the batch's
    settings are one), so they share them."""
    import hashlib
    import os

    from mmctl.dataset import Embedded, Remote
    from mmctl.run_batch.work import has_sound

    if not item.media or has_sound(item):  # worker-processed: no pixels to share
        return None
    parts: list[Any] = []
    for medium in item.media:
        if isinstance(medium, Embedded):
            parts.append(["data", hashlib.sha256(medium.data).hexdigest()])
        elif isinstance(medium, Remote):
            parts.append(["url", medium.url])
        else:
            try:
                st = os.stat(medium)
                parts.append(["file", str(medium), st.st_size, st.st_mtime_ns])
            except OSError:
                parts.append(["file", str(medium)])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _lost(ray: Any, err: BaseException) -> bool:
    """Whether ``err`` says a node, a worker or an object went away (not an item's fault)."""
    exc = ray.exceptions
    gone = (
        exc.RayActorError, exc.ObjectLostError, exc.WorkerCrashedError, exc.NodeDiedError,
        exc.TaskUnschedulableError, exc.ActorUnschedulableError, exc.LocalRayletDiedError,
        exc.OwnerDiedError,
    )  # fmt: skip
    if isinstance(err, gone):
        return True
    cause = getattr(err, "cause", None)
    return isinstance(err, exc.RayTaskError) and isinstance(cause, gone)


def _said(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else type(err).__name__


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
