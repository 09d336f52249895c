"""The stub worker's gRPC server: ``vllm.grpc.engine.VllmEngine`` + health + reflection.

A ``grpc.aio`` server on an event loop of its own thread (RELIABILITY.md):
a client that stalls mid-message or a slow generation holds no thread, so
nothing a client does can starve ``HealthCheck`` or ``grpc.health.v1``.
CPU work (decoding tensors, reading shm, media refs, the answer) runs on a
small thread pool; at most ``max_concurrent_requests`` Generates are admitted
(the rest get ``RESOURCE_EXHAUSTED``) and no message may exceed
``max_message_mb``, so memory is bounded by their product. Streaming
``Generate`` waits ``--delay-ms`` between tokens on an event that ``Abort``
sets. Everything a client sends goes through :mod:`mmctl.worker.checks`; a
refusal is ``INVALID_ARGUMENT`` with its sentence, anything unexpected
``INTERNAL`` — the server itself never goes down for a request.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent import futures
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from mmctl.errors import UsageError
from mmctl.models.model import Model
from mmctl.values.pruning import NO_PRUNING
from mmctl.wire import proto
from mmctl.worker.descriptors import reflection_pool

if TYPE_CHECKING:
    from collections.abc import Sequence


from mmctl.worker.handlers import Incoming, StubConfig, StubServicer


class _Handlers:
    """Collects the generated handler table instead of registering it."""

    def __init__(self) -> None:
        self.table: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass

    def add_registered_method_handlers(
        self, service: str, table: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        self.table = dict(table)


def _add_engine(servicer: StubServicer, server: grpc.aio.Server) -> None:
    """The generated ``VllmEngine`` handlers, ``Generate`` parsed by :meth:`Incoming.parse`."""
    handlers = _Handlers()
    proto.engine_grpc.add_VllmEngineServicer_to_server(servicer, handlers)
    handlers.table["Generate"] = grpc.unary_stream_rpc_method_handler(
        servicer.Generate,
        request_deserializer=Incoming.parse,
        response_serializer=proto.engine_pb2.GenerateResponse.SerializeToString,
    )
    generic = grpc.method_handlers_generic_handler(proto.SERVICE_NAME, handlers.table)
    server.add_generic_rpc_handlers((generic,))
    server.add_registered_method_handlers(proto.SERVICE_NAME, handlers.table)


class Running:
    """A started stub: its ``grpc.aio`` server runs on an event loop in its own thread."""

    def __init__(
        self,
        server: grpc.aio.Server,
        port: int,
        servicer: StubServicer,
        loop: asyncio.AbstractEventLoop,
        thread: threading.Thread,
    ) -> None:
        self.server, self.port, self.servicer = server, port, servicer
        self._loop, self._thread = loop, thread
        self._stopped = threading.Event()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait(self) -> None:
        """Block until the server stops (short waits, so signals still arrive)."""
        while not self._stopped.wait(0.5):
            pass

    def stop(self, grace: float = 1.0) -> None:
        if self._stopped.is_set():
            return

        async def shut() -> None:
            # In-flight generations end now (finish_reason "abort"), not after their delays.
            self.servicer.requests.abort_all()
            await self.server.stop(grace)

        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(grace + 10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self.servicer.work.shutdown(wait=False, cancel_futures=True)
            self._stopped.set()


def check_bindable(host: str, port: int) -> None:
    """Refuse a port out of range, or one that is taken, before gRPC tries it
    (gRPC's own failure is a C-core log line and a bare 0)."""
    import socket

    if not 0 <= port <= 65535:
        raise UsageError(f"port must be 0-65535, got {port}")
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as err:
        raise UsageError(f"cannot listen on {host}:{port}: {err.strerror}") from None
    with socket.socket(family, kind) as probe:
        # Port 0 too: binding it fails only for an address this host does not have.
        # As gRPC does: a port in TIME_WAIT is free; one with a listener is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as err:
            raise UsageError(f"cannot listen on {host}:{port}: {_why(err)}") from None


def tls_files(cert: Path | None, key: Path | None) -> tuple[bytes, bytes] | None:
    """``--tls-cert PEM --tls-key PEM`` as :func:`start` takes them (key, chain);
    ``None``: plain text."""
    if (cert is None) != (key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    if cert is None or key is None:
        return None
    try:
        return key.read_bytes(), cert.read_bytes()
    except OSError as err:
        raise UsageError(f"cannot read the TLS files: {err.strerror}") from None


def ready_event(cfg: StubConfig, running: Running, host: str, tls: bool) -> dict[str, Any]:
    """The line a script waits for: where the stub listens and what it serves."""
    return {
        "event": "ready",
        "address": f"{host}:{running.port}",
        "port": running.port,
        "model": cfg.model.source.label,
        "family": cfg.model.name,
        "device_normalize": cfg.policy.device_normalize,
        "legacy_proto": cfg.policy.legacy_proto,
        "tls": tls,
        "video_pruning": (
            cfg.model.pruning.as_dict() if isinstance(cfg.model, Model) else NO_PRUNING.as_dict()
        ),
    }


def _why(err: OSError) -> str:
    import errno

    if err.errno == errno.EADDRNOTAVAIL:
        return "this host has no such address (--host takes one of its own, e.g. 127.0.0.1)"
    return err.strerror or str(err)


def server_options(cfg: StubConfig) -> list[tuple[str, int]]:
    """The message-size bound, and a ping policy under which clients can
    detect a frozen worker quickly (tests use 1 s keepalives; gRPC's default
    server policy allows one ping per 5 minutes)."""
    limit = cfg.max_message_mb * 1024 * 1024
    return [
        ("grpc.max_receive_message_length", limit),
        ("grpc.max_send_message_length", limit),
        ("grpc.so_reuseport", 0),
        ("grpc.http2.min_ping_interval_without_data_ms", 1000),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.keepalive_permit_without_calls", 1),
    ]


def start(
    cfg: StubConfig,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: tuple[bytes, bytes] | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> Running:
    """Bind and start; ``port=0`` picks a free port (see ``Running.port``).

    ``tls``: (private key PEM, certificate chain PEM) to serve over TLS.
    ``interceptors``: ``grpc.aio`` server interceptors (tests put an auth
    check there). A port another process listens on is refused: no
    ``SO_REUSEPORT`` sharing, where two servers would split one port's
    connections between them.
    """
    check_bindable(host, port)
    if cfg.record_dir is not None:
        try:
            cfg.record_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UsageError(f"--record {cfg.record_dir}: {err.strerror or err}") from None
    loop = asyncio.new_event_loop()
    ready: futures.Future[tuple[grpc.aio.Server, int, StubServicer]] = futures.Future()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            ready.set_result(loop.run_until_complete(_serve(cfg, host, port, tls, interceptors)))
        except BaseException as err:  # handed to the starting thread
            ready.set_exception(err)
            loop.close()
            return
        loop.run_forever()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    thread = threading.Thread(target=run, name="stub-worker", daemon=True)
    thread.start()
    server, bound, servicer = ready.result()
    return Running(server, bound, servicer, loop, thread)


async def _serve(
    cfg: StubConfig,
    host: str,
    port: int,
    tls: tuple[bytes, bytes] | None,
    interceptors: Sequence[grpc.aio.ServerInterceptor],
) -> tuple[grpc.aio.Server, int, StubServicer]:
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection

    server = grpc.aio.server(options=server_options(cfg), interceptors=list(interceptors))
    servicer = StubServicer(cfg)
    _add_engine(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (proto.SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(
        names, server, pool=reflection_pool(cfg.policy.legacy_proto)
    )
    try:
        if tls is None:
            bound = server.add_insecure_port(f"{host}:{port}")
        else:
            creds = grpc.ssl_server_credentials([tls])
            bound = server.add_secure_port(f"{host}:{port}", creds)
    except RuntimeError:
        bound = 0
    if not bound:
        raise UsageError(f"cannot listen on {host}:{port} (in use or not a local address)")
    await server.start()
    for name in ("", proto.SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, bound, servicer
