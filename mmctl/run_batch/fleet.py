"""Sending prepared requests to several workers: round-robin, health, one retry elsewhere.

Each target is a :class:`Member` with its transport decided once: shared
memory only when the worker shares this host's ``/dev/shm`` (its
``shm_namespace_id`` equals ours), else inline. A request that fails because
its worker went away — ``UNAVAILABLE`` and the other connection codes, or a
stream that ends in ``abort`` or without a completion (a worker shutting
down) — takes that member out and is sent once more to another; a member
that is out is probed with ``HealthCheck`` every second and put back when it
answers. Any other failure is the item's own: an error line, no retry.

:class:`Fleet` does this on ``grpc.aio``: on the local engine's event loop, and
on each Ray send actor's.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import grpc

from mmctl.client.channel import (
    Malformed,
    Target,
    generate_method,
    open_aio_channel,
)
from mmctl.client.placement import THREAD_MIN_BYTES
from mmctl.client.route import Route
from mmctl.client.stream import TokenStream
from mmctl.request.build import new_request_id
from mmctl.run_batch import output
from mmctl.run_batch.work import Prepared
from mmctl.transport.shm import ShmArena
from mmctl.wire import proto

#: Codes that mean the worker went away, not that it refused the item.
GONE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}
PROBE_EVERY_S = 1.0
#: How long an item waits for some member to be up before it fails.
WAIT_FOR_MEMBER_S = 60.0


@dataclass
class Member:
    target: Target
    route: Route  # decided where the fleet was set up (``Route.from_here`` elsewhere)
    up: bool = True
    #: The worker's ``shm_namespace_id`` (a Ray actor re-decides the route on its own host).
    namespace: str = ""


class _Gone(Exception):
    """The worker went away mid-request (retry elsewhere)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class _Answer:
    received: TokenStream
    first_s: float | None = None

    @property
    def tokens(self) -> list[int]:
        return self.received.ids

    @property
    def complete(self) -> Any:
        return self.received.complete

    def feed(self, resp: Any, start: float) -> None:
        if self.first_s is None:
            self.first_s = time.perf_counter() - start
        if isinstance(resp, Malformed):
            raise _Gone("malformed", f"the worker sent {resp.size} bytes that are not a response")
        self.received.feed(resp)

    def check(self) -> None:
        if self.complete is None:
            raise _Gone("incomplete", "the stream ended without a completion")
        if self.complete.finish_reason == "abort":
            raise _Gone("aborted", "the worker aborted the generation (shutting down?)")


@dataclass
class _Wire:
    data: bytes
    request_id: str
    handoff_s: float
    shm_bytes: int


def _encode(prep: Prepared, member: Member, arena: ShmArena) -> _Wire:
    """The request on the wire, with a fresh request id (a retry is a new request)."""
    plan = replace(prep.plan, request_id=new_request_id())
    start = time.perf_counter()
    moved = {"shm": 0}
    encoded = member.route.encode(plan, arena, moved).encoded
    return _Wire(encoded.data, plan.request_id, time.perf_counter() - start, moved["shm"])


def _line(
    prep: Prepared,
    member: Member,
    wire: _Wire,
    answer: _Answer,
    tokenizer: Any,
    model_name: str,
    send_s: float,
    attempts: int,
) -> dict[str, Any]:
    complete = answer.complete
    timings = {"handoff_s": wire.handoff_s, "ttft_s": answer.first_s or 0.0, "send_s": send_s}
    sizes = {"request": len(wire.data), "shm": wire.shm_bytes}
    return output.success_line(
        prep.id,
        wire.request_id,
        model_name,
        tokenizer.decode(answer.tokens, skip_special_tokens=True),
        complete.finish_reason,
        complete.prompt_tokens or len(prep.plan.input_ids),
        len(answer.tokens),
        _extras(prep, member, timings, sizes, attempts),
    )


def _extras(
    prep: Prepared,
    member: Member | None,
    timings: dict[str, float],
    sizes: dict[str, int],
    attempts: int,
) -> dict[str, Any]:
    return ({"node": prep.node} if prep.node else {}) | {
        "worker": member.target.address if member else None,
        "transport": member.route.name if member else None,
        "attempts": attempts,
        "timings_s": {"preprocess_s": round(prep.preprocess_s, 6)}
        | {k: round(v, 6) for k, v in timings.items()},
        "bytes": {"payload": prep.payload_bytes, **sizes},
        "warnings": prep.warnings,
    }


def _failed(
    prep: Prepared, member: Member | None, code: str, message: str, attempts: int, status: int
) -> dict[str, Any]:
    return output.error_line(
        prep.id, code, message, status, _extras(prep, member, {}, {}, attempts)
    )


def _status(code: grpc.StatusCode) -> int:
    return {
        grpc.StatusCode.INVALID_ARGUMENT: 400,
        grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
        grpc.StatusCode.INTERNAL: 500,
        grpc.StatusCode.UNIMPLEMENTED: 501,
    }.get(code, 503 if code in GONE else 500)


# ---- asyncio (the local engine) ------------------------------------------------


class Fleet:
    """The members on ``grpc.aio`` channels (create it inside the running loop)."""

    def __init__(
        self,
        members: Sequence[Member],
        tokenizer: Any,
        model_name: str,
        timeout: float | None = None,
        on_warning: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.members = list(members)
        self.tokenizer, self.model_name, self.timeout = tokenizer, model_name, timeout
        self.on_warning = on_warning
        self.channels = [open_aio_channel(m.target) for m in self.members]
        self.calls = [generate_method(ch) for ch in self.channels]
        engine = proto.engine_pb2
        self.health = [
            ch.unary_unary(
                "/vllm.grpc.engine.VllmEngine/HealthCheck",
                request_serializer=engine.HealthCheckRequest.SerializeToString,
                response_deserializer=engine.HealthCheckResponse.FromString,
            )
            for ch in self.channels
        ]
        self._turn = itertools.count()
        self._changed = asyncio.Event()
        self._watch = asyncio.create_task(self._probe_down())

    async def close(self) -> None:
        self._watch.cancel()
        for channel in self.channels:
            await channel.close()

    async def send(self, prep: Prepared) -> dict[str, Any]:
        """The item's output line (answered, or an error line)."""
        tried: set[int] = set()
        for attempt in (1, 2):
            index = await self._pick(tried)
            if index is None:
                member = self.members[next(iter(tried))] if tried else None
                return _failed(prep, member, "unavailable", "no worker is up", attempt, 503)
            member = self.members[index]
            try:
                return await self._attempt(prep, index, attempt)
            except _Gone as gone:
                if member.up:
                    member.up = False
                    self.on_warning(
                        f"{member.target.address} stopped answering ({gone.code}: "
                        f"{gone.message or 'no detail'}); taken out of the fleet, its items "
                        "go to the others; probed again every second"
                    )
                self._changed.set()
                tried.add(index)
                if attempt == 2:
                    return _failed(prep, member, gone.code, gone.message, attempt, 503)
            except grpc.aio.AioRpcError as err:
                return _failed(
                    prep, member, err.code().name.lower(), err.details() or "", attempt,
                    _status(err.code()),
                )  # fmt: skip
        raise AssertionError("unreachable")

    async def _attempt(self, prep: Prepared, index: int, attempts: int) -> dict[str, Any]:
        member = self.members[index]
        arena = ShmArena()
        work: asyncio.Future[_Wire] | None = None
        start = time.perf_counter()
        try:
            if prep.payload_bytes >= THREAD_MIN_BYTES:
                work = asyncio.ensure_future(asyncio.to_thread(_encode, prep, member, arena))
                wire = await asyncio.shield(work)
            else:
                wire = _encode(prep, member, arena)
            sent = time.perf_counter()
            answer = _Answer(TokenStream(prep.plan.stream))
            call = self.calls[index](
                wire.data, timeout=self.timeout, metadata=member.target.headers
            )
            try:
                async for resp in call:
                    answer.feed(resp, sent)
            except grpc.aio.AioRpcError as err:
                if err.code() in GONE:
                    raise _Gone(err.code().name.lower(), err.details() or "") from None
                raise
            finally:
                call.cancel()
            answer.check()
        except asyncio.CancelledError:
            if work is not None and not work.done():
                work.add_done_callback(lambda _f: arena.close())
            raise
        finally:
            arena.close()
        send_s = time.perf_counter() - start
        return _line(prep, member, wire, answer, self.tokenizer, self.model_name, send_s, attempts)

    async def _pick(self, exclude: set[int]) -> int | None:
        """The next member that is up (round-robin), waiting for one if none is."""
        deadline = time.monotonic() + WAIT_FOR_MEMBER_S
        while True:
            n = len(self.members)
            for _ in range(n):
                index = next(self._turn) % n
                if self.members[index].up and index not in exclude:
                    return index
            if len(exclude) >= n:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, PROBE_EVERY_S))

    async def _probe_down(self) -> None:
        engine = proto.engine_pb2
        while True:
            await asyncio.sleep(PROBE_EVERY_S)
            for index, member in enumerate(self.members):
                if member.up:
                    continue
                try:
                    reply = await self.health[index](
                        engine.HealthCheckRequest(), timeout=2, metadata=member.target.headers
                    )
                except grpc.aio.AioRpcError:
                    continue
                if reply.healthy:
                    member.up = True
                    self.on_warning(f"{member.target.address} answers again; back in the fleet")
                    self._changed.set()
