"""The local engine: preprocessing in a process pool, sending on ``grpc.aio``, one process.

Decoding is CPU-bound and parts of it hold the GIL, so media are
preprocessed in ``--workers`` processes; the prompt (tokens, layout, checks:
milliseconds) is composed here, so those processes never load a tokenizer.
They are spawned, not forked — a forked copy of a process that has used
gRPC crashes or hangs — as soon as the batch starts (:func:`start_pool`),
so their start-up (importing PyAV and numpy) overlaps this process's own
set-up: probing the workers, their model files, the tokenizer. The event loop reads the
input lazily, hands items to the pool and prepared requests to the
:class:`~mmctl.run_batch.fleet.Fleet` (at most ``--max-concurrency`` in
flight), and appends each output line as it finishes. At most ``workers +
max_concurrency`` items exist at once — memory is bounded by that many
items and the pixel cache's budget, not by the dataset. Media that an
earlier item preprocessed come from the pixel cache, in this process
(:mod:`mmctl.request.pixel_cache`); only the others go to the pool.

Ctrl-C (or SIGTERM) stops reading the input and lets the items in flight
finish and be written; a second one cancels them (their shm files are
removed). The pool processes ignore SIGINT: the terminal sends it to them
too, and only this process decides; they die with this process
(:func:`~mmctl.run_batch.children.die_with_parent`), so a ``kill -9`` of
it leaves no pool behind. An output line that cannot be written stops the
run at once: the items in flight are cancelled, nothing more is sent.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from mmctl.dataset import Entry, Item, label
from mmctl.errors import MmctlError
from mmctl.models.model import Model
from mmctl.request.build import MediaItem
from mmctl.request.pixel_cache import Claim, PixelCache, Pixels, pixel_cache, size_of
from mmctl.run_batch import output
from mmctl.run_batch.fleet import Fleet, Member
from mmctl.run_batch.output import OutputFile
from mmctl.run_batch.work import (
    Failure,
    Preparer,
    Preprocessed,
    Settings,
    by_worker_line,
    media_keys,
    preprocess_in_process,
    warm,
)
from mmctl.signals import stop_signals


@dataclass
class Tally:
    """What a run did, item by item."""

    succeeded: int = 0
    failed: int = 0
    skipped: int = 0
    #: Of ``skipped``: error lines of an earlier run, kept (``--keep-failed``).
    kept_failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    interrupted_by: str | None = None
    #: Per target: ``{"answered": n, "failed": m}`` of the items it was sent.
    by_target: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Ray: tries again of items whose node was lost while it held them.
    node_retries: int = 0

    def count(self, doc: dict[str, Any]) -> bool:
        ok = doc["error"] is None
        worker = (doc.get("mmctl") or {}).get("worker")
        if worker is not None:
            counts = self.by_target.setdefault(worker, {"answered": 0, "failed": 0})
            counts["answered" if ok else "failed"] += 1
        if ok:
            self.succeeded += 1
            return True
        self.failed += 1
        code = str(doc["error"]["code"])
        self.errors[code] = self.errors.get(code, 0) + 1
        return False


def skip_done(out: OutputFile, entry: Entry, tally: Tally, seen: set[str]) -> bool:
    """Count an entry OUT already holds a line for; ``False`` when it does not.
    ``seen``: the ids this run took to send — OUT holds the first's line, and a
    later line with its id is a duplicate (:func:`write_entry_error`), not done."""
    if entry.id not in out.done or entry.id in seen:
        return False
    tally.skipped += 1
    if entry.id in out.kept_failed:
        tally.kept_failed += 1
    return True


def write_entry_error(out: OutputFile, entry: Entry, tally: Tally, seen: set[str]) -> bool:
    """Write the error line of an entry that cannot be sent; ``False`` when it can."""
    if entry.error is not None:
        doc = output.error_line(entry.custom_id, entry.code, entry.error)
    elif entry.id in seen:
        doc = output.error_line(
            entry.id, "duplicate_id", f"line {entry.number}: the id {entry.id!r} came before"
        )
    else:
        seen.add(entry.id)
        return False
    out.write(doc)
    tally.count(doc)
    return True


def _pool_process(parent: int) -> None:
    from mmctl.run_batch.children import die_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)


def start_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes, starting now (each gets a warm-up task)."""
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_pool_process,
        initargs=(os.getpid(),),
    )
    for _ in range(workers):
        pool.submit(warm)
    return pool


async def run(
    pool: ProcessPoolExecutor,
    settings: Settings,
    model: Model,
    entries: Iterable[Entry],
    out: OutputFile,
    members: list[Member],
    model_name: str,
    *,
    workers: int,
    max_concurrency: int,
    timeout: float | None,
    on_done: Callable[[bool], None],
    on_warning: Callable[[str], None] = lambda message: None,
    on_skip: Callable[[bool], None] | None = None,
    cache: PixelCache[Pixels] | None = None,
) -> Tally:
    fleet = Fleet(members, model.tokenizer, model_name, timeout, on_warning=on_warning)
    preparer = Preparer(settings, model)
    job = _Job(pool, preparer, fleet, out, on_done, workers + max_concurrency, max_concurrency)
    job.cache = cache or pixel_cache(0)
    job.on_skip = on_skip or on_done
    job.tally.by_target = {m.target.address: {"answered": 0, "failed": 0} for m in members}
    try:
        with stop_signals(asyncio.get_running_loop(), job.on_signal):
            await job.feed(entries)
    finally:
        await job.cancel()
        await fleet.close()
    return job.tally


class _Job:
    """The items of one local run: at most ``slots`` at once, ``sending`` of them sending."""

    def __init__(
        self,
        pool: ProcessPoolExecutor,
        preparer: Preparer,
        fleet: Fleet,
        out: OutputFile,
        on_done: Callable[[bool], None],
        slots: int,
        sending: int,
    ) -> None:
        self.pool, self.preparer, self.fleet = pool, preparer, fleet
        self.out, self.on_done = out, on_done
        #: Told of each item OUT answers already (``on_done`` unless given apart).
        self.on_skip = on_done
        self.slots = asyncio.Semaphore(slots)
        self.sending = asyncio.Semaphore(sending)
        self.tally = Tally()
        #: Media preprocessed for earlier items (this process's memory).
        self.cache: PixelCache[Pixels] = pixel_cache(0)
        self.stop = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()
        self.seen: set[str] = set()
        self.broken = False
        #: Why the run stopped early: the output failed, or a bug in mmctl.
        self.fault: BaseException | None = None

    def on_signal(self, sig: signal.Signals) -> None:
        if self.stop.is_set():  # the second: cancel what is in flight
            for task in self.tasks:
                task.cancel()
        if self.tally.interrupted_by is None:
            self.tally.interrupted_by = sig.name
        self.stop.set()

    async def feed(self, entries: Iterable[Entry]) -> None:
        """Hand the entries out until they end or a stop; then wait for those in flight."""
        for entry in entries:
            if self.stop.is_set():
                break
            if skip_done(self.out, entry, self.tally, self.seen):
                self.on_skip(entry.id not in self.out.kept_failed)
                continue
            if write_entry_error(self.out, entry, self.tally, self.seen):
                self.on_done(False)
                continue
            await self.slots.acquire()
            if self.stop.is_set():
                self.slots.release()
                break
            task = asyncio.create_task(self.one(entry))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        while self.tasks:
            await asyncio.wait(list(self.tasks))
        if self.fault is not None:
            raise self.fault
        if self.broken:
            raise MmctlError(
                "a preprocessing process died (out of memory?); the finished items are in "
                "the output",
                hint="--resume continues; fewer --workers use less memory",
            )

    async def one(self, entry: Entry) -> None:
        try:
            assert entry.item is not None
            # A prompt too long for the workers' context: its error line, from
            # its length, before its media are decoded or its text tokenized.
            refused = await asyncio.to_thread(self.preparer.check_prompt, entry.item, entry.number)
            try:
                if refused is not None:
                    done: Any = refused
                else:
                    done = await self.preprocessed(entry.item, entry.number)
            except BrokenProcessPool:
                self.broken = True  # no item can be prepared any more: stop, keep what is done
                self.stop.set()
                return
            prepared = done if isinstance(done, Failure) else self.preparer.compose(done)
            if isinstance(prepared, Failure):
                doc = output.error_line(
                    prepared.id, prepared.code, prepared.message, prepared.status
                )
            else:
                async with self.sending:
                    if self.fault is not None:
                        return  # the run is stopping: this item is not sent
                    doc = await self.fleet.send(prepared)
            if self.fault is not None:
                return  # OUT failed meanwhile: this answer has nowhere to go
            self.out.write(doc)
            self.on_done(self.tally.count(doc))
        except Exception as err:
            # OUT cannot be written (or a bug in mmctl, not an item's
            # failure): stop now; nothing more is sent.
            self._halt(err)
        finally:
            self.slots.release()

    async def preprocessed(self, item: Item, number: int) -> Preprocessed | Failure:
        """The item's media from the pixel cache where it has them (or another
        item is making them: then this one waits), the rest from the pool."""
        loop = asyncio.get_running_loop()
        settings = self.preparer.settings
        if not self.cache.enabled or by_worker_line(item, self.preparer.model) is not None:
            done = await loop.run_in_executor(
                self.pool, preprocess_in_process, settings, item, number
            )
            if isinstance(done, Preprocessed):
                done.cached = ["off"] * len(done.media)
            return done
        start = time.perf_counter()
        keys = await asyncio.to_thread(
            media_keys, item.media, self.preparer.family, settings.pixel_format
        )
        have, how, mine = await self._claims(keys)
        # The item's own share of the time: its keys, and waiting for a medium
        # another item was making (the pool's time comes back in ``done``).
        lookup_s = time.perf_counter() - start
        try:
            if len(have) == len(item.media):
                media = [
                    MediaItem(label(m), have[n].pre, have[n].content_hash)
                    for n, m in enumerate(item.media)
                ]
                done = self.preparer.known(item, number, media)
            else:
                skip = frozenset(have)
                done = await loop.run_in_executor(
                    self.pool, preprocess_in_process, settings, item, number, skip
                )
        except BaseException:
            for claim in mine.values():
                claim.fail()
            raise
        if isinstance(done, Failure):
            for claim in mine.values():
                claim.fail()
            return done
        if len(done.media) < len(item.media):
            made = iter(done.media)
            done.media = []
            for n, medium in enumerate(item.media):
                if n in have:
                    done.media.append(MediaItem(label(medium), have[n].pre, have[n].content_hash))
                    continue
                it = next(made)
                done.media.append(it)
                if n in mine:
                    mine[n].fill(Pixels(it.pre, it.content_hash), size_of(it.pre))
        else:
            for n, claim in mine.items():
                it = done.media[n]
                claim.fill(Pixels(it.pre, it.content_hash), size_of(it.pre))
        done.cached = [how.get(n, "miss") for n in range(len(item.media))]
        done.preprocess_s += lookup_s
        return done

    async def _claims(
        self, keys: list[str | None]
    ) -> tuple[dict[int, Pixels], dict[int, str], dict[int, Claim[Pixels]]]:
        """Per medium: the pixels the cache has (or another item is making:
        waited for), how, and the keys this item now makes. It waits only
        while it holds no claim of its own, so two items can never wait on
        each other; a medium another item is making meanwhile is made here too."""
        have: dict[int, Pixels] = {}
        how: dict[int, str] = {}
        mine: dict[int, Claim[Pixels]] = {}
        for n, key in enumerate(keys):
            while key is not None:
                claim = self.cache.claim(key)
                if claim.value is not None:
                    have[n], how[n] = claim.value, "hit"
                elif claim.future is not None:
                    if mine:
                        break
                    value = await asyncio.wrap_future(claim.future)
                    if value is None:
                        continue  # its maker failed: try for ourselves
                    self.cache.served(value.nbytes)
                    have[n], how[n] = value, "shared"
                else:
                    mine[n] = claim
                break
        return have, how, mine

    def _halt(self, err: BaseException) -> None:
        if self.fault is None:
            self.fault = err
        self.stop.set()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()

    async def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*list(self.tasks), return_exceptions=True)
