"""The pixel cache: a medium preprocessed once, however many requests ask about it.

Evaluation sets ask several questions of one clip, a bench repeats its items,
a notebook asks again about the clip it just sent: each ask would decode,
resize and patchify the same media again. The smg gateway keeps such a cache
(``--mm-pixel-cache-mb``), and so does mmctl, in memory, under a byte budget
in MiB as the gateway counts it, least recently used out first.

**The key is what determines the tensor** (:func:`key_of`): the medium's content
(sha256 of its bytes, :func:`mmctl.request.hashing.file_digest`), the media
kind, the family's name and every one of the model's resolved vision settings
(``Vision.settings()``: sizes, budgets, sampling, normalization), the pixel
dtype and the loader (:data:`LOADER`). A medium under another name, or read
again from another copy, is the same entry; another fps or pixel dtype is
another entry. The value keeps the item's content hash too, so the same item
carries the same ``mm_hashes`` and the worker's encoder cache can answer as
well.

**Asked twice at once, made once** (:meth:`PixelCache.claim`): the first
asker owns the key and preprocesses; the others wait on a future of the
result (a failure wakes them to try for themselves).

**Entries are read-only copies.** A value is frozen (``writeable = False``)
and never a mapping of a ``/dev/shm`` file: preprocessing that wrote straight
into a request's shared-memory file (the worker reads and unlinks each file
once) leaves a private copy here, and a later request places the cached
tensor in a new file of its own (:mod:`mmctl.client.placement`).

**Memory is the budget, not the dataset.** An entry over the budget is never
kept; inserting evicts the least recently used until the entries fit. The
budget is per *group*: one group for a client or a local batch, one per node
on Ray, where the values are references into that node's object store.

One implementation for ``Client``/``AsyncClient``, ``mmctl batch`` (both
engines) and ``mmctl bench``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mmctl.choices import DEFAULT_PIXEL_CACHE_MB
from mmctl.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

    from mmctl.choices import PixelFormat
    from mmctl.media.probe import MediaKind
    from mmctl.models.model import Model
    from mmctl.values.items import Preprocessed

DEFAULT_MB = DEFAULT_PIXEL_CACHE_MB
MIB = 1 << 20
#: What decodes and samples media, in the key (bumped when their output changes).
LOADER = "mmctl-pyav-pillow-1"
#: Bookkeeping an entry costs beside its arrays (the key, the dataclasses).
ENTRY_OVERHEAD = 512

V = TypeVar("V")


def budget_bytes(mb: int) -> int:
    """``--pixel-cache-mb`` in bytes (MiB, as the smg gateway counts); 0 turns it off."""
    if isinstance(mb, bool) or not isinstance(mb, int) or mb < 0:
        raise UsageError(f"--pixel-cache-mb must be 0 (off) or more MiB, got {mb!r}")
    return mb * MIB


def key_of(digest: str, kind: MediaKind, model: Model, pixel_format: PixelFormat) -> str:
    """The cache key of a medium with content ``digest`` for ``model``'s processing."""
    facts = {
        "loader": LOADER,
        "kind": kind.value,
        "family": model.spec.name,
        "settings": model.params.settings(),
        "pixels": pixel_format.value,
    }
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{text}\0{digest}".encode()).hexdigest()


@dataclass(frozen=True)
class Pixels:
    """One preprocessed medium as the cache keeps it (frozen arrays, no shm mapping)."""

    pre: Preprocessed
    content_hash: str

    @property
    def nbytes(self) -> int:
        return size_of(self.pre)

    def kept(self) -> Pixels:
        """A copy safe to keep and share: every array private and read-only."""
        from dataclasses import replace

        pre = self.pre
        return Pixels(
            replace(
                pre,
                pixel_values=_frozen(pre.pixel_values),
                frames=(),
                video_tensors={k: _frozen(v) for k, v in pre.video_tensors.items()},
                item_tensors={k: _frozen(v) for k, v in pre.item_tensors.items()},
            ),
            self.content_hash,
        )


def size_of(pre: Preprocessed) -> int:
    """The bytes an entry holds: its arrays and the bookkeeping."""
    arrays = [pre.pixel_values, pre.frame_indices, *pre.video_tensors.values()]
    arrays += list(pre.item_tensors.values())
    return sum(int(a.nbytes) for a in arrays) + ENTRY_OVERHEAD


def _frozen(array: np.ndarray) -> np.ndarray:
    # A view (of a /dev/shm mapping, of a larger buffer) is copied: the cache
    # must own what it keeps, and a mapping dies with its request's arena.
    if array.base is not None or not array.flags.owndata:
        array = array.copy()
    array.flags.writeable = False
    return array


@dataclass
class Stats:
    """What a cache did (``--json``'s ``pixel_cache``)."""

    budget_bytes: int
    hits: int = 0
    #: Asks that waited for another ask of the same medium to finish it.
    shared: int = 0
    misses: int = 0
    #: Bytes of tensors served from the cache (hits and shared).
    hit_bytes: int = 0
    #: Entries made but not kept: each alone over the budget.
    too_large: int = 0
    evictions: int = 0
    entries: int = 0
    #: Bytes the entries hold now, and the most they ever held.
    bytes: int = 0
    peak_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class _Pending(Generic[V]):
    future: Future[V | None] = field(default_factory=Future)
    waiters: int = 0


@dataclass
class _Kept(Generic[V]):
    value: V
    nbytes: int
    group: Hashable


class Claim(Generic[V]):
    """One ask of :meth:`PixelCache.claim`: exactly one of ``value`` (a hit),
    ``future`` (another ask is making it: wait, then ask again when it
    resolves to ``None``) or ownership (make it, then :meth:`fill` or
    :meth:`fail`)."""

    def __init__(
        self,
        cache: PixelCache[V],
        key: Hashable,
        value: V | None = None,
        future: Future[V | None] | None = None,
    ) -> None:
        self.cache, self.key, self.value, self.future = cache, key, value, future
        self.owner = value is None and future is None
        self._open = self.owner

    def fill(self, value: V, nbytes: int, group: Hashable = None) -> V:
        """Keep ``value`` (when it fits) and wake the waiters; returns what they got."""
        if self._open:
            self._open = False
            return self.cache._fill(self.key, value, nbytes, group)
        return value

    def fail(self) -> None:
        """The owner could not make it: waiters ask again (one of them makes it)."""
        if self._open:
            self._open = False
            self.cache._fail(self.key)


class PixelCache(Generic[V]):
    """A byte-budgeted LRU of preprocessed media, safe to share between threads.

    ``budget_mb`` is MiB per group (0: off — :meth:`claim` always makes the
    caller the owner and nothing is kept). ``copy`` turns a value into what
    may be kept and shared (:meth:`Pixels.kept` for pixels); it runs only
    when the value is kept or someone waits for it."""

    def __init__(self, budget_mb: int = DEFAULT_MB, copy: Callable[[V], V] | None = None) -> None:
        self.budget = budget_bytes(budget_mb)
        self._copy = copy or (lambda value: value)
        self._lock = threading.Lock()
        self._kept: OrderedDict[Hashable, _Kept[V]] = OrderedDict()
        self._pending: dict[Hashable, _Pending[V]] = {}
        self._bytes: dict[Hashable, int] = {}
        self.stats = Stats(self.budget)

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    def claim(self, key: Hashable) -> Claim[V]:
        with self._lock:
            if not self.enabled:
                self.stats.misses += 1
                return Claim(self, key)
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                self.stats.hits += 1
                self.stats.hit_bytes += kept.nbytes
                return Claim(self, key, value=kept.value)
            pending = self._pending.get(key)
            if pending is not None:
                pending.waiters += 1
                return Claim(self, key, future=pending.future)
            self._pending[key] = _Pending()
            self.stats.misses += 1
            return Claim(self, key)

    def get(self, key: Hashable, make: Callable[[], tuple[V, int]]) -> tuple[V, str]:
        """The value for ``key``, made by ``make() -> (value, nbytes)`` when
        no one has it; and how it came: ``hit``, ``shared`` (waited for
        another ask) or ``miss`` (made here; the caller gets ``make``'s own
        value, the cache keeps a copy)."""
        while True:
            claim = self.claim(key)
            if claim.value is not None:
                return claim.value, "hit"
            if claim.future is not None:
                value = claim.future.result()
                if value is not None:
                    return value, "shared"
                continue  # its owner failed: try for ourselves
            try:
                value, nbytes = make()
            except BaseException:
                claim.fail()
                raise
            claim.fill(value, nbytes)
            return value, "miss"

    def served(self, nbytes: int) -> None:
        """Count a waiter's value (``shared``) once it has it."""
        with self._lock:
            self.stats.shared += 1
            self.stats.hit_bytes += nbytes

    def drop_group(self, group: Hashable) -> int:
        """Forget every entry of ``group`` (a Ray node that went away); how many."""
        with self._lock:
            gone = [k for k, kept in self._kept.items() if kept.group == group]
            for k in gone:
                self._remove(k)
            return len(gone)

    def groups(self) -> dict[Hashable, int]:
        """Bytes held per group."""
        with self._lock:
            return dict(self._bytes)

    def where(self, key: Hashable) -> Hashable | None:
        """The group holding ``key`` (no hit counted), or ``None``."""
        with self._lock:
            kept = self._kept.get(key)
            return kept.group if kept is not None else None

    def snapshot(self) -> Stats:
        with self._lock:
            return Stats(**vars(self.stats))

    # ---- inside the lock ----

    def _fill(self, key: Hashable, value: V, nbytes: int, group: Hashable) -> V:
        fits = self.enabled and 0 < nbytes <= self.budget
        with self._lock:
            pending = self._pending.get(key)
            copied = fits or (pending is not None and pending.waiters > 0)
        shared = self._copy(value) if copied else value
        with self._lock:
            pending = self._pending.pop(key, None)
            if pending is not None and pending.waiters and not copied:
                shared, copied = self._copy(value), True  # a waiter came meanwhile
            if fits and key not in self._kept:
                self._evict(group, nbytes)  # room first: never over the budget
                self._kept[key] = _Kept(shared, nbytes, group)
                self._bytes[group] = self._bytes.get(group, 0) + nbytes
                self.stats.entries += 1
                self.stats.bytes += nbytes
                self.stats.peak_bytes = max(self.stats.peak_bytes, self.stats.bytes)
            elif not fits and self.enabled:
                self.stats.too_large += 1
        if pending is not None:
            pending.future.set_result(shared if copied and pending.waiters else None)
        return shared

    def _fail(self, key: Hashable) -> None:
        with self._lock:
            pending = self._pending.pop(key, None)
        if pending is not None:
            pending.future.set_result(None)

    def _evict(self, group: Hashable, room: int) -> None:
        while self._bytes.get(group, 0) + room > self.budget:
            oldest = next(k for k, kept in self._kept.items() if kept.group == group)
            self._remove(oldest)
            self.stats.evictions += 1

    def _remove(self, key: Hashable) -> None:
        kept = self._kept.pop(key)
        self._bytes[kept.group] -= kept.nbytes
        self.stats.entries -= 1
        self.stats.bytes -= kept.nbytes


def pixel_cache(budget_mb: int = DEFAULT_MB) -> PixelCache[Pixels]:
    """A cache of preprocessed media (``Client``, the local batch, ``bench``)."""
    return PixelCache(budget_mb, copy=Pixels.kept)


def lookup(
    cache: PixelCache[Pixels] | None,
    digest: str,
    kind: MediaKind,
    model: Model,
    pixel_format: PixelFormat,
    make: Callable[[], Pixels],
    strict: bool = False,
) -> tuple[Pixels, str]:
    """The medium's pixels from ``cache`` or ``make()``; and ``hit``,
    ``shared``, ``miss`` or ``off``. A hit of a truncated video is refused
    under ``strict`` as its first making would have been."""
    if cache is None or not cache.enabled:
        return make(), "off"

    def made() -> tuple[Pixels, int]:
        pixels = make()
        return pixels, pixels.nbytes

    pixels, how = cache.get(key_of(digest, kind, model, pixel_format), made)
    if how == "shared":
        cache.served(pixels.nbytes)
    if strict and how != "miss" and pixels.pre.warnings:
        from mmctl.errors import InputError

        raise InputError(
            pixels.pre.warnings[0], hint="without --strict mmctl uses the frames that decode"
        )
    return pixels, how


def describe(outcomes: list[str], nbytes: int) -> dict[str, Any]:
    """A request's own account: how many of its media came from the cache."""
    return {
        "hits": sum(o in ("hit", "shared") for o in outcomes),
        "misses": sum(o in ("miss", "off") for o in outcomes),
        "bytes": nbytes,
    }
