"""``mmctl.Client``: one worker, one channel, one set-up, many requests.

The client connects, probes the worker and opens its model files once,
lazily, on the first call that needs them, and keeps them for every request
after it; it is safe to share between threads. It is the library behind
every ``mmctl`` command that talks to a worker::

    import mmctl

    with mmctl.Client("localhost:50051") as client:
        result = client.send("clip.mp4", prompt="Which colours appear, in order?")
        print(result.answer, result.timings["total_s"])

``send`` takes the request options as keywords (:class:`SendOptions` fields,
sampling values such as ``max_tokens``, vision values such as ``fps``), checks
them and the local files before any network call, and returns a
:class:`SendResult` whose timing rows add up to its total — set-up rows
included on the call that paid for the set-up.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from mmctl.checkpoint.source import ModelSource
from mmctl.checkpoint.source import resolve as resolve_source
from mmctl.client.channel import Target, open_channel, resolve_target
from mmctl.client.connection import Connection
from mmctl.client.negotiate import Decision
from mmctl.client.options import (
    Hooks,
    Inputs,
    SendOptions,
    headers_of,
    media_inputs,
    refuse,
    request_inputs,
)
from mmctl.client.probe import Health, WorkerFacts, probe, wait_healthy
from mmctl.client.run import Ready, Run, SendResult, generate, prepare
from mmctl.client.session import Session
from mmctl.errors import UsageError
from mmctl.models.model import Model, WorkerModel
from mmctl.request.pixel_cache import pixel_cache
from mmctl.timing import Timeline

#: Probing calls wait at most this long, whatever the client's deadline.
PROBE_TIMEOUT_S = 10.0
#: ``health()`` waits this long by default.
HEALTH_TIMEOUT_S = 5.0

Media = str | Path | Sequence[str | Path]
_END: Any = object()


@dataclass
class Built:
    """A request built for a worker, tensors inline, not sent."""

    request: Any  # GenerateRequest
    run: Run

    def write(self, path: str | Path) -> int:
        """Write it (binary protobuf) to exactly ``path``; returns the bytes."""
        from mmctl.request.view import write_request

        return write_request(self.request, Path(path))


class Client:
    """A worker at ``target`` (``host:port``; default ``$MMCTL_TARGET``, else
    ``localhost:50051``), reached as ``connection`` says
    (:class:`~mmctl.client.connection.Connection`; or its fields as keyword
    arguments: ``Client("gpu:50051", timeout=60, model_dir="Qwen3-VL-2B")``).
    """

    def __init__(
        self,
        target: str | Target | None = None,
        connection: Connection | None = None,
        **options: Any,
    ) -> None:
        if connection is not None and options:
            raise UsageError(f"give a Connection or its fields, not both: {', '.join(options)}")
        conn = self.connection = connection or Connection(**options)
        self.pixel_cache = pixel_cache(conn.pixel_cache_mb)
        if isinstance(target, Target):
            self.target = target
        else:
            self.target = resolve_target(
                target, tls=bool(conn.tls), ca_cert=conn.ca_cert, headers=headers_of(conn.headers)
            )
        self.timeout = conn.timeout
        self._model_dir, self._bundle = conn.model_dir, conn.bundle
        self._family, self._vision = conn.family, conn.vision
        self._refresh = conn.refresh_bundle
        self._pruning = conn.video_pruning
        self._lock = threading.RLock()
        self._channel: grpc.Channel | None = None
        self._facts: WorkerFacts | None = None
        self._source: ModelSource | None = None
        self._local_model: Model | WorkerModel | None = None
        self._session: Session | None = None

    # ---- lifetime ----

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel (a later call opens a new one)."""
        with self._lock:
            channel, self._channel = self._channel, None
            self._facts = self._session = None
        if channel is not None:
            channel.close()

    # ---- the set-up, once ----

    def _open_channel(self) -> grpc.Channel:
        with self._lock:
            if self._channel is None:
                self._channel = open_channel(self.target)
            return self._channel

    def local_source(self) -> ModelSource | None:
        """``model_dir`` / ``bundle`` opened (local: no worker needed), or ``None``."""
        with self._lock:
            if self._source is None and (self._model_dir or self._bundle):
                self._source = resolve_source(self._model_dir, self._bundle)
            return self._source

    def local_model(self) -> Model | WorkerModel | None:
        """The model of ``model_dir`` / ``bundle``, its settings resolved and checked
        before any network (a bad folder is exit 3 whatever the worker does; one
        no family handles waits for the worker's facts: it may preprocess it)."""
        from mmctl.models.model import load_any, with_pruning

        source = self.local_source()
        with self._lock:
            if self._local_model is None and source is not None:
                self._local_model = with_pruning(
                    load_any(source=source, family=self._family, overrides=self._vision),
                    self._pruning,
                )
            return self._local_model

    def facts(self, timeline: Timeline | None = None) -> WorkerFacts:
        """What the worker says about itself (probed once; ``probe_s`` lap)."""
        channel = self._open_channel()
        with self._lock:
            if self._facts is None:
                timeout = min(self.timeout or PROBE_TIMEOUT_S, PROBE_TIMEOUT_S)
                self._facts = probe(channel, self.target, timeout=timeout)
                if timeline is not None:
                    timeline.lap("probe_s")
            return self._facts

    def session(self, timeline: Timeline | None = None) -> Session:
        """The worker's facts and model files, set up on first use (laps on
        ``timeline``: one caller pays the whole set-up, the others wait for it)."""
        if self._session is not None:
            return self._session
        source = self.local_source()
        model = self.local_model()
        with self._lock:  # re-entrant: facts() takes it too
            if self._session is None:
                facts = self.facts(timeline)
                assert self._channel is not None
                self._session = Session.open(
                    self.target,
                    self._channel,
                    facts,
                    source=source,
                    model=model,
                    source_flag="--model-dir" if self._model_dir else "--bundle",
                    family=self._family,
                    vision=self._vision,
                    pruning=self._pruning,
                    refresh_bundle=self._refresh,
                    timeline=timeline,
                )
            return self._session

    # ---- the worker ----

    def health(
        self,
        timeout: float = HEALTH_TIMEOUT_S,
        wait: float = 0.0,
        on_try: Callable[[Health, float], None] | None = None,
    ) -> Health:
        """``HealthCheck`` and ``grpc.health.v1``; an unreachable worker is
        unhealthy, with the reason in ``error`` (nothing raised). ``wait``:
        seconds to keep asking until it serves (each try on a fresh channel,
        so a worker that starts meanwhile is seen at once; ``on_try`` after
        each try that was not healthy)."""
        return wait_healthy(self.target, wait, timeout, on_try)

    def info(self) -> dict[str, Any]:
        """Model, server info, /dev/shm sharing, proto capabilities and the
        model's resolved vision settings with their origins (``mmctl info``)."""
        doc = self.facts().as_dict(self.target)
        doc["vision"] = self.vision()
        return doc

    def vision(self) -> dict[str, Any]:
        """The vision settings the worker's model files resolve to (as
        transformers resolves them), each with the file it came from; or
        ``{"error": …}`` when the files cannot be had. Loads no tokenizer."""
        from mmctl.client.bundle import fetch_bundle
        from mmctl.errors import MmctlError
        from mmctl.models.model import load_model

        try:
            source = self.local_source()
            if source is None:
                facts = self.facts()
                source, _ = fetch_bundle(
                    self._open_channel(), self.target, facts.model, refresh=self._refresh
                )
            model = load_model(source=source, family=self._family, overrides=self._vision)
        except MmctlError as err:
            return {"error": err.message}
        return {
            "model": source.label,
            "family": model.spec.name,
            "settings": model.vision_settings(),
        }

    # ---- requests ----

    def send(
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
        """Preprocess ``media`` (a path or a list, in prompt order), send it
        with ``prompt`` and return the answer with its decisions, checks and
        timings. ``on_text`` receives the answer as it streams."""
        timeline = Timeline()
        opts = SendOptions.of(prompt=prompt, **options)
        inputs = media_inputs(media, opts.soundtrack)
        hooks = Hooks(on_text, on_frame, on_note, on_warning)
        return self.run(opts, inputs, hooks, timeline)

    def send_many(
        self,
        media: Iterable[Media],
        prompt: str | None = None,
        *,
        prefetch: int = 1,
        on_text: Callable[[str], None] | None = None,
        on_note: Callable[[str], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        **options: Any,
    ) -> Iterator[SendResult]:
        """Send each of ``media`` (a path, or a list of paths for one request)
        with the same ``prompt`` and options, in order, yielding each result.

        While the worker answers one request, the next ``prefetch`` are
        preprocessed and built on a helper thread, so the client's CPU work
        overlaps the worker's; the set-up (probe, model files, tokenizer) is
        paid once, by the first. Each result's ``timings`` has a
        ``queued_s`` phase: how long the built request waited for its turn.
        An error is raised at its item's turn; requests built ahead and not
        sent are released (their shared-memory files removed)."""
        if prefetch < 0:
            raise UsageError(f"prefetch must be 0 or more, got {prefetch}")
        opts = SendOptions.of(prompt=prompt, **options)
        hooks = Hooks(on_text, None, on_note, on_warning)
        items = iter(media)
        pending: deque[Future[Ready]] = deque()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmctl-prefetch")

        def fill(limit: int) -> None:
            while len(pending) < limit:
                item = next(items, _END)
                if item is _END:
                    return
                pending.append(pool.submit(self._built_ahead, opts, item, hooks))

        try:
            while True:
                if not pending:
                    fill(1)
                if not pending:
                    return
                ready = pending.popleft().result()
                fill(prefetch)  # the next ones build while this one is answered
                ready.run.timeline.lap("queued_s")
                yield generate(self.session(), ready, hooks, opts.timeout or self.timeout)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for future in pending:
                if future.done() and not future.cancelled() and future.exception() is None:
                    future.result().arena.close()

    def _built_ahead(self, opts: SendOptions, item: Media, hooks: Hooks) -> Ready:
        timeline = Timeline()
        return self._prepare(opts, media_inputs(item, opts.soundtrack), hooks, timeline)

    def send_request(
        self,
        request: Any,
        *,
        on_text: Callable[[str], None] | None = None,
        on_note: Callable[[str], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        **options: Any,
    ) -> SendResult:
        """Replay a recorded request (a ``GenerateRequest``, its bytes, or a
        file from ``mmctl build``). What can apply does — sampling values,
        ``stream``, ``timeout``, ``request_id``, the transport; options that
        would shape a new request are refused by name."""
        timeline = Timeline()
        opts = SendOptions.of(**options)
        refuse("--request replays a recorded request", opts.shaping_a_request())
        inputs = request_inputs(request)
        return self.run(opts, inputs, Hooks(on_text, None, on_note, on_warning), timeline)

    def build(self, media: Media, prompt: str | None = None, **options: Any) -> Built:
        """The request ``send`` would send, negotiated with this worker, tensors
        inline; not sent."""
        from mmctl.choices import Transport

        timeline = Timeline()
        opts = SendOptions.of(prompt=prompt, **options).but(transport=Transport.INLINE)
        ready = self._prepare(opts, media_inputs(media, opts.soundtrack), Hooks(), timeline)
        ready.arena.close()
        # Not "--transport inline": no one asked, and the reason is the file's.
        ready.run.decisions["transport"] = Decision(
            "inline", "a built request carries its tensors (a /dev/shm file would not outlive it)"
        )
        from mmctl.wire import proto

        # The whole message: ``ready.request`` lacks a spliced tensor's bytes.
        return Built(proto.engine_pb2.GenerateRequest.FromString(ready.data), ready.run)

    def _prepare(
        self, opts: SendOptions, inputs: Inputs, hooks: Hooks, timeline: Timeline
    ) -> Ready:
        """The request, placed and serialized: local files first (no network,
        the ``inputs_s`` lap), then the set-up and the preprocessing."""
        self.local_model()
        timeline.lap("inputs_s")
        session = self.session(timeline)
        return prepare(session, opts, inputs, hooks, timeline, self.pixel_cache)

    def run(
        self, opts: SendOptions, inputs: Inputs, hooks: Hooks, timeline: Timeline
    ) -> SendResult:
        """One request from checked options and inputs (what send and send_request
        and comparisons share); ``timeline`` gets every lap."""
        ready = self._prepare(opts, inputs, hooks, timeline)
        session = self.session()
        return generate(session, ready, hooks, opts.timeout or self.timeout)
