"""``mmctl.AsyncClient``: the :class:`~mmctl.Client` surface on ``grpc.aio``.

For many requests in flight from one process (load tests, batches). The
CPU work of a request — decoding, preprocessing, building it — runs in a
worker thread (``asyncio.to_thread``) so the event loop stays free, and the
set-up is the wrapped :class:`~mmctl.Client`'s, paid once. ``Generate`` runs
on a ``grpc.aio`` channel: a request waiting for its answer holds no thread.

    async with mmctl.AsyncClient("localhost:50051") as client:
        results = await asyncio.gather(*(client.send(p) for p in clips))
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from mmctl.client.channel import Target, generate_method, open_aio_channel
from mmctl.client.client import Built, Client, Media
from mmctl.client.connection import Connection
from mmctl.client.options import Hooks, Inputs, SendOptions, media_inputs, refuse, request_inputs
from mmctl.client.probe import Health
from mmctl.client.run import Answer, SendResult, finish, generate_error, prepare
from mmctl.request.pixel_cache import PixelCache, Pixels
from mmctl.timing import Timeline


class AsyncClient:
    """The same arguments and methods as :class:`~mmctl.Client`, awaitable."""

    def __init__(
        self,
        target: str | Target | None = None,
        connection: Connection | None = None,
        **options: Any,
    ) -> None:
        self.sync = Client(target, connection, **options)
        self.target = self.sync.target
        self._channel: grpc.aio.Channel | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()
        self.sync.close()

    def _aio(self) -> grpc.aio.Channel:
        # Created inside the running loop: a grpc.aio channel belongs to one loop.
        if self._channel is None:
            self._channel = open_aio_channel(self.target)
        return self._channel

    async def health(self, timeout: float = 5.0) -> Health:
        return await asyncio.to_thread(self.sync.health, timeout)

    async def info(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.info)

    async def send(
        self,
        media: Media,
        prompt: str | None = None,
        *,
        on_text: Callable[[str], None] | None = None,
        on_frame: Callable[[int, int], None] | None = None,
        on_note: Callable[[str], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        **options: Any,
    ) -> SendResult:
        timeline = Timeline()
        opts = SendOptions.of(prompt=prompt, **options)
        inputs = await asyncio.to_thread(media_inputs, media, opts.soundtrack)
        return await self._send(
            opts, inputs, Hooks(on_text, on_frame, on_note, on_warning), timeline
        )

    async def send_request(
        self,
        request: Any,
        *,
        on_text: Callable[[str], None] | None = None,
        on_note: Callable[[str], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        **options: Any,
    ) -> SendResult:
        timeline = Timeline()
        opts = SendOptions.of(**options)
        refuse("--request replays a recorded request", opts.shaping_a_request())
        inputs = await asyncio.to_thread(request_inputs, request)
        return await self._send(opts, inputs, Hooks(on_text, None, on_note, on_warning), timeline)

    async def build(self, media: Media, prompt: str | None = None, **options: Any) -> Built:
        return await asyncio.to_thread(self.sync.build, media, prompt, **options)

    async def _send(
        self, opts: SendOptions, inputs: Inputs, hooks: Hooks, timeline: Timeline
    ) -> SendResult:
        await asyncio.to_thread(self.sync.local_source)
        timeline.lap("inputs_s")
        session = await asyncio.to_thread(self.sync.session, timeline)
        ready = await _prepared(session, opts, inputs, hooks, timeline, self.sync.pixel_cache)
        call = generate_method(self._aio())(
            ready.data,
            timeout=opts.timeout or self.sync.timeout,
            metadata=self.target.headers,
        )
        answer = Answer(session, ready, hooks)
        try:
            try:
                async for resp in call:
                    answer.feed(resp)
            except grpc.RpcError as err:
                raise generate_error(err, session, ready) from None
            finally:
                call.cancel()
        finally:
            leftover = ready.arena.close()
        return finish(session, ready, answer, hooks, leftover)


async def _prepared(
    session: Any,
    opts: SendOptions,
    inputs: Inputs,
    hooks: Hooks,
    timeline: Timeline,
    cache: PixelCache[Pixels],
) -> Any:
    """:func:`prepare` in a thread. Cancelled while it runs, the thread still
    finishes: its shared-memory files are then removed, never left behind."""
    work = asyncio.ensure_future(
        asyncio.to_thread(prepare, session, opts, inputs, hooks, timeline, cache)
    )
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        work.add_done_callback(_close_abandoned)
        raise


def _close_abandoned(work: asyncio.Future) -> None:
    if not work.cancelled() and work.exception() is None:
        work.result().arena.close()
