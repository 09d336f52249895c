"""The Ray engine's senders: one per node, an asyncio loop each, the local engine's fleet.

On the driver's own node the sender is a thread of the driver
(:class:`HereSender`); on every other node an actor, started as soon as Ray
is reached (before the batch's set-up, so their
start-up overlaps it); :meth:`Sender.configure` gives them the set-up's
result (the model files, the fleet), and :meth:`Sender.send` takes one
preprocessed item — by reference, from the object store of the actor's
own node — composes its prompt (the tokenizer, loaded once per node),
sends it on ``grpc.aio`` and returns the output line. Many sends run at
once on the actor's loop (``max_concurrency``); it holds no CPU, since it
waits on the network. Shared memory only where this actor's host shares
the worker's ``/dev/shm`` (the namespace is checked here, where it runs).
"""

from __future__ import annotations

import asyncio
import json
import pickle
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from mmctl.run_batch import output


class Sender:
    """One node's sender (a Ray async actor: ``ray.remote(Sender)``)."""

    def __init__(self) -> None:
        # What the set-up has not decided yet can already be imported.
        import grpc  # noqa: F401

        import mmctl.request.compose  # noqa: F401
        from mmctl.run_batch import fleet  # noqa: F401

        self.ready = asyncio.Event()
        self.preparer: Any = None
        self.fleet: Any = None

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    async def configure(
        self, settings: Any, files: Any, digest: str, members: Any, model_name: str,
        timeout: float | None,
    ) -> str:  # fmt: skip
        from mmctl.run_batch.ray_files import node_settings
        from mmctl.run_batch.work import Preparer

        preparer = await asyncio.to_thread(Preparer, node_settings(settings, files, digest))
        await asyncio.to_thread(lambda: preparer.model.tokenizer)
        await self.adopt(preparer, members, model_name, timeout)
        return self.node()

    async def adopt(
        self, preparer: Any, members: Any, model_name: str, timeout: float | None
    ) -> None:
        """Send with ``preparer`` (its model's tokenizer loaded) from now on."""
        from mmctl.run_batch.fleet import Fleet

        # Shared memory only where this host shares the worker's /dev/shm.
        members = [replace(m, route=m.route.from_here(m.namespace)) for m in members]
        self.preparer = preparer
        self.fleet = Fleet(members, preparer.model.tokenizer, model_name, timeout)
        self.ready.set()

    async def send(self, done: bytes, cached: str = "off", as_item: bytes | None = None) -> str:
        """The output line (JSON text) of one preprocessed item (pickled).
        ``cached``: how the pixel cache answered; with ``as_item`` (an item
        and its number, pickled) ``done`` is another item's, whose media this
        one shares: its pixels, this item's id and prompt."""
        from mmctl.run_batch.work import Failure

        await self.ready.wait()
        item = pickle.loads(done)
        if not isinstance(item, Failure):
            if as_item is not None:
                asked, number = pickle.loads(as_item)
                item = replace(item, item=asked, number=number, preprocess_s=0.0)
            item.cached = [cached] * len(item.media)
        prepared = item if isinstance(item, Failure) else self.preparer.compose(item)
        if isinstance(prepared, Failure):
            doc = output.error_line(prepared.id, prepared.code, prepared.message, prepared.status)
        else:
            doc = await self.fleet.send(prepared)
        return json.dumps(doc, separators=(",", ":"))

    async def close(self) -> None:
        if self.fleet is not None:
            await self.fleet.close()


class HereSender:
    """The sender of the node this process runs on: a :class:`Sender` on an
    event loop in a thread of this process, which holds the model and the
    tokenizer already — no actor to start, nothing loaded twice."""

    def __init__(self, preparer: Any, members: Any, model_name: str, timeout: float | None) -> None:
        import threading

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mmctl-send", daemon=True)
        self.thread.start()
        self.sender = Sender()
        self._call(self.sender.adopt(preparer, members, model_name, timeout)).result()

    def _call(self, coro: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def send(self, done: bytes, cached: str = "off", as_item: bytes | None = None) -> Future[str]:
        return self._call(self.sender.send(done, cached, as_item))

    def close(self) -> None:
        try:
            self._call(self.sender.close()).result(timeout=5)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            self.loop.close()
