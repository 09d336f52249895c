"""Sending prepared requests to several workers: health probes, the least busy, retries elsewhere.

Each target is a :class:`Member` with its transport decided once: shared
memory only when the worker shares this host's ``/dev/shm`` (its
``shm_namespace_id`` equals ours), else inline.

A member is judged by probes of its own, not only by its calls: every
second each one is asked ``HealthCheck``. One that does not answer healthy
within :data:`PROBE_TIMEOUT_S` (frozen, gone, unhealthy) is taken out of the
fleet, and its calls in flight are cancelled and sent to the others — a
frozen worker (SIGSTOP) accepts connections and answers nothing, so its
calls alone would hold their items, and with them the batch, for as long
as it stays frozen. It is put back when a probe answers again.

An item goes to the member that is up with the fewest calls in flight (ties
in turn). A request that fails because its worker went away — ``UNAVAILABLE``
and the other connection codes, a stream that ends in ``abort`` or without a
completion (a worker shutting down), or a failed probe — takes that member
out and is sent again to another that is up and that it has not tried
(each member at most once per item); any other failure is the item's own:
an error line, no retry.

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
#: Each member is asked ``HealthCheck`` this often.
PROBE_EVERY_S = 1.0
#: A member whose probe is not answered (healthy) within this long is taken out.
PROBE_TIMEOUT_S = 5.0
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
        "pixel_cache": prep.cached,
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
        #: Each member's Generate calls in flight.
        self.in_flight: list[set[Any]] = [set() for _ in self.members]
        #: Calls cancelled because their member failed its probe (sent elsewhere).
        self._lost: set[Any] = set()
        self._turn = itertools.count()
        self._changed = asyncio.Event()
        self._watches = [asyncio.create_task(self._watch(i)) for i in range(len(self.members))]

    async def close(self) -> None:
        for watch in self._watches:
            watch.cancel()
        for channel in self.channels:
            await channel.close()

    async def send(self, prep: Prepared) -> dict[str, Any]:
        """The item's output line (answered, or an error line)."""
        tried: set[int] = set()
        gone: tuple[int, _Gone] | None = None
        for attempt in itertools.count(1):
            index = await self._pick(tried)
            if index is None:
                if gone is not None:
                    last, why = gone
                    return _failed(
                        prep, self.members[last], why.code, why.message, attempt - 1, 503
                    )
                return _failed(prep, None, "unavailable", "no worker is up", attempt, 503)
            member = self.members[index]
            try:
                return await self._attempt(prep, index, attempt)
            except _Gone as err:
                if err.code != "probe":  # a failed probe took it out already
                    self._take_out(index, f"{err.code}: {err.message or 'no detail'}")
                tried.add(index)
                gone = (index, err)
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
            if not member.up:  # it failed a probe while this was encoded
                raise _Gone("probe", f"{member.target.address} was taken out meanwhile")
            sent = time.perf_counter()
            answer = _Answer(TokenStream(prep.plan.stream))
            call = self.calls[index](
                wire.data, timeout=self.timeout, metadata=member.target.headers
            )
            self.in_flight[index].add(call)
            try:
                async for resp in call:
                    answer.feed(resp, sent)
            except grpc.aio.AioRpcError as err:
                if err.code() in GONE:
                    raise _Gone(err.code().name.lower(), err.details() or "") from None
                raise
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if call in self._lost and task is not None and not task.cancelling():
                    raise _Gone(
                        "probe", f"{member.target.address} did not answer its health probe"
                    ) from None
                raise
            finally:
                self.in_flight[index].discard(call)
                self._lost.discard(call)
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
        """The member that is up, not in ``exclude``, with the fewest calls in
        flight (ties in turn); waits for one to come up (None: none will)."""
        deadline = time.monotonic() + WAIT_FOR_MEMBER_S
        while True:
            n = len(self.members)
            first = next(self._turn) % n
            ready = [
                (len(self.in_flight[i]), k, i)
                for k in range(n)
                if self.members[i := (first + k) % n].up and i not in exclude
            ]
            if ready:
                return min(ready)[2]
            if len(exclude) >= n:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, PROBE_EVERY_S))

    def _take_out(self, index: int, why: str, *, cancel: bool = False) -> None:
        """Member ``index`` is out until a probe answers; with ``cancel`` its
        calls in flight end now and their items go to the others."""
        member = self.members[index]
        calls = list(self.in_flight[index]) if cancel else []
        if member.up:
            member.up = False
            moved = f"its {len(calls)} in flight and the next items" if calls else "its items"
            self.on_warning(
                f"{member.target.address} stopped answering ({why}); taken out of the fleet, "
                f"{moved} go to the others; probed again every second"
            )
        for call in calls:
            self._lost.add(call)
            call.cancel()
        self._changed.set()

    async def _watch(self, index: int) -> None:
        """Probe member ``index`` every second, for as long as the fleet runs."""
        member = self.members[index]
        while True:
            began = time.monotonic()
            why = await self._probe(index)
            if why is None and not member.up:
                member.up = True
                self.on_warning(f"{member.target.address} answers again; back in the fleet")
                self._changed.set()
            elif why is not None and member.up:
                self._take_out(index, why, cancel=True)
            await asyncio.sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - began)))

    async def _probe(self, index: int) -> str | None:
        """None when the member answers healthy in time; else why not."""
        member = self.members[index]
        try:
            reply = await self.health[index](
                proto.engine_pb2.HealthCheckRequest(),
                timeout=PROBE_TIMEOUT_S,
                metadata=member.target.headers,
            )
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return f"its health probe: no answer within {PROBE_TIMEOUT_S:g} s"
            return f"its health probe: {err.code().name}"
        if not reply.healthy:
            return f"its health probe: unhealthy ({reply.message or 'no message'})"
        return None
