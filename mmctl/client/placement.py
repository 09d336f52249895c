"""Where a request's tensors travel: shared-memory files or inline bytes.

Three ways into ``/dev/shm``, one copy at most: preprocessing writes pixels
straight into a mapped file (:class:`ShmAllocator`, no copy at hand-off);
otherwise :class:`ShmPlacer` writes a planned tensor with one ``pwrite``;
a replayed request's inline bytes move with :func:`move_inline_to_shm`.
Tensors under the size threshold stay inline. With transport ``auto``, a
``/dev/shm`` that fills up sends the rest inline and says so (``problems``)
instead of failing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from mmctl.request import tensors
from mmctl.transport.shm import Segment, ShmArena, ShmUnavailable
from mmctl.wire import proto

#: An event loop hands tensors at least this large to a thread to place and
#: encode (``mmctl bench``, ``mmctl batch``), so it keeps serving the others.
THREAD_MIN_BYTES = 1 << 20


def shm_or_none(make: Callable[[], Segment], fallback: bool, problems: list[str]) -> Segment | None:
    """``make()``'s segment; ``None`` — the reason added to ``problems`` — when
    ``/dev/shm`` cannot take it and ``fallback`` lets the tensor travel inline."""
    try:
        return make()
    except ShmUnavailable as err:
        if not fallback:
            raise
        problems.append(err.message)
        return None


class ShmAllocator:
    """Pixel tensors written straight into shm segments (the one copy is the write itself)."""

    def __init__(self, arena: ShmArena, min_bytes: int, fallback: bool = False) -> None:
        self.arena, self.min_bytes, self.fallback = arena, min_bytes, fallback
        self.by_array: dict[int, tuple[Segment, np.ndarray]] = {}
        self.problems: list[str] = []

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if nbytes < self.min_bytes:
            return np.empty(shape, dtype=dtype)
        segment = shm_or_none(lambda: self.arena.create(nbytes), self.fallback, self.problems)
        if segment is None:
            return np.empty(shape, dtype=dtype)
        array = segment.array(dtype, shape)
        self.by_array[id(array)] = (segment, array)
        return array

    def segment_of(self, array: np.ndarray) -> Segment | None:
        entry = self.by_array.get(id(array))
        return entry[0] if entry and entry[1] is array else None

    def release_except(self, keep: list[np.ndarray]) -> None:
        """Remove the files of allocations that ``keep`` does not hold (a video
        decoded twice leaves the first pass's file: ours, never the worker's)."""
        kept = {id(a) for a in keep}
        for key, (segment, _array) in list(self.by_array.items()):
            if key not in kept:
                del self.by_array[key]
                self.arena.discard(segment)


class ShmPlacer:
    """A request plan's placer: tensors of at least ``min_bytes`` to shm, the rest inline."""

    def __init__(
        self,
        arena: ShmArena,
        min_bytes: int,
        allocator: ShmAllocator | None,
        moved: dict[str, int],
        fallback: bool = False,
    ) -> None:
        self.arena, self.min_bytes, self.allocator, self.moved = arena, min_bytes, allocator, moved
        self.fallback = fallback
        self.problems: list[str] = list(allocator.problems) if allocator else []

    def __call__(self, key: str, array: np.ndarray, dtype: str) -> Any:
        """The shm handle; ``None`` (inline, the builder's way) under the threshold."""
        data = tensors.wire_array(array, dtype)
        if data.nbytes < self.min_bytes:
            return None
        segment = self.allocator.segment_of(array) if self.allocator else None
        if segment is None:
            segment = shm_or_none(lambda: self.arena.put(data), self.fallback, self.problems)
            if segment is None:
                return None
        self.moved["shm"] += segment.nbytes
        return handle(segment, data.shape, dtype)


def handle(segment: Segment, shape: tuple[int, ...], dtype: str) -> Any:
    """The ``TensorData`` naming a segment (``owner_id``: this process)."""
    engine, common = proto.engine_pb2, proto.common_pb2
    return engine.TensorData(
        shape=list(shape),
        dtype=dtype,
        shm=common.ShmHandle(
            name=segment.name, offset=0, nbytes=segment.nbytes, owner_id=str(os.getpid())
        ),
    )


def move_inline_to_shm(
    req: Any, arena: ShmArena, min_bytes: int, moved: dict[str, int], fallback: bool = False
) -> list[str]:
    """Move a replayed request's large inline tensors into shm; returns problems
    (``fallback``: a tensor that no longer fits stays inline)."""
    from mmctl.request.view import batches, tensor_fields

    problems: list[str] = []
    for batch in batches(req):
        for _, td in tensor_fields(batch):
            if td.WhichOneof("payload") != "inline" or len(td.inline) < min_bytes:
                continue
            raw = np.frombuffer(td.inline, dtype=np.uint8)
            segment = shm_or_none(partial(arena.put, raw), fallback, problems)
            if segment is None:
                continue
            moved["shm"] += segment.nbytes
            td.CopyFrom(handle(segment, tuple(td.shape), td.dtype))
    return problems


def inline_bytes(req: Any) -> int:
    """Bytes carried inline by all of a request's tensors."""
    from mmctl.request.view import batches, tensor_fields

    return sum(
        len(td.inline)
        for batch in batches(req)
        for _, td in tensor_fields(batch)
        if td.WhichOneof("payload") == "inline"
    )
