"""What a worker says about itself: model, server info, proto capabilities.

Fields an older worker does not know arrive empty; :class:`Capabilities`
keeps "unknown" apart from "no". Reflection, when offered, tells whether its
``MultimodalInputs`` has ``modality`` (field 10): a worker without it treats
every batch as an image, which for video is silent garbage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import grpc

from mmctl.client.channel import Target, as_error
from mmctl.wire import proto

if TYPE_CHECKING:
    from google.protobuf.message import Message

if TYPE_CHECKING:
    from mmctl.wire.proto import engine_pb2


@dataclass(frozen=True)
class Capabilities:
    reflection: bool
    services: tuple[str, ...] = ()
    multimodal_fields: frozenset[str] = frozenset()
    request_fields: frozenset[str] = frozenset()
    error: str = ""

    @property
    def modality(self) -> bool | None:
        """Whether ``MultimodalInputs.modality`` exists; ``None`` when unknown."""
        return "modality" in self.multimodal_fields if self.reflection else None

    def as_dict(self) -> dict:
        return {
            "reflection": self.reflection,
            "services": list(self.services),
            "multimodal_inputs_fields": sorted(self.multimodal_fields),
            "modality_field": self.modality,
            "extra_mm_inputs": "extra_mm_inputs" in self.request_fields
            if self.reflection
            else None,
            "media_refs": "media_refs" in self.request_fields if self.reflection else None,
            "error": self.error or None,
        }


def capabilities(
    channel: grpc.Channel, timeout: float = 5.0, metadata: Sequence[tuple[str, str]] = ()
) -> Capabilities:
    """Ask the server's reflection (v1alpha) for its services and message fields
    (with the same metadata as every other call: an auth interceptor sees it)."""
    from google.protobuf import descriptor_pb2
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="vllm.grpc.engine.MultimodalInputs"
        ),
    ]
    try:
        responses = list(
            stub.ServerReflectionInfo(iter(requests), timeout=timeout, metadata=list(metadata))
        )
    except grpc.RpcError as err:
        return Capabilities(False, error=f"{err.code().name}: {err.details()}")
    services: tuple[str, ...] = ()
    fields: dict[str, set[str]] = {}
    for resp in responses:
        if resp.HasField("list_services_response"):
            services = tuple(s.name for s in resp.list_services_response.service)
        elif resp.HasField("file_descriptor_response"):
            for raw in resp.file_descriptor_response.file_descriptor_proto:
                fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
                if fdp.package != "vllm.grpc.engine":
                    continue
                for message in fdp.message_type:
                    fields[message.name] = {f.name for f in message.field}
        elif resp.HasField("error_response"):
            return Capabilities(True, services, error=resp.error_response.error_message)
    return Capabilities(
        True,
        services,
        frozenset(fields.get("MultimodalInputs", ())),
        frozenset(fields.get("GenerateRequest", ())),
    )


@dataclass
class WorkerFacts:
    server: engine_pb2.GetServerInfoResponse
    model: engine_pb2.GetModelInfoResponse
    caps: Capabilities = field(default_factory=lambda: Capabilities(False))

    @property
    def knows_capabilities(self) -> bool:
        """A 0.4.28-era worker fills model_dtype; an older one leaves it empty."""
        return bool(self.server.model_dtype or self.server.mm_item_limits)

    def as_dict(self, target: Target) -> dict:
        """What ``mmctl info`` shows: model, server info, /dev/shm sharing, capabilities."""
        from google.protobuf.json_format import MessageToDict

        from mmctl.transport.shm import namespace_id

        def doc(message: Message) -> dict:
            return MessageToDict(
                message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
            )

        local, remote = namespace_id(), self.server.shm_namespace_id
        return {
            "target": target.address,
            "model": doc(self.model),
            "server": doc(self.server),
            "shm": {
                "local_namespace_id": local,
                "worker_namespace_id": remote,
                "shared": bool(remote) and remote == local,
            },
            "capabilities": self.caps.as_dict(),
            "advertises_capabilities": self.knows_capabilities,
        }


def probe(
    channel: grpc.Channel, target: Target, timeout: float = 10.0, with_caps: bool = True
) -> WorkerFacts:
    engine = proto.engine_pb2
    stub = proto.engine_grpc.VllmEngineStub(channel)
    meta = list(target.headers)
    try:
        server = stub.GetServerInfo(engine.GetServerInfoRequest(), timeout=timeout, metadata=meta)
    except grpc.RpcError as err:
        raise as_error(err, target, "GetServerInfo") from None
    try:
        model = stub.GetModelInfo(engine.GetModelInfoRequest(), timeout=timeout, metadata=meta)
    except grpc.RpcError as err:
        raise as_error(err, target, "GetModelInfo") from None
    caps = capabilities(channel, timeout, meta) if with_caps else Capabilities(False)
    return WorkerFacts(server, model, caps)


@dataclass(frozen=True)
class Health:
    """``VllmEngine.HealthCheck`` and the standard ``grpc.health.v1`` answer, or why none came."""

    target: str
    healthy: bool
    message: str
    grpc_health: str
    latency_ms: float | None
    #: The failure (unreachable, deadline, refused) when there was no answer.
    error: str | None = None
    #: How many times it was asked, and for how long (:func:`wait_healthy`).
    tries: int = 1
    waited_s: float = 0.0

    @property
    def serving(self) -> bool:
        return self.error is None and self.healthy

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "healthy": self.healthy,
            "message": self.message,
            "grpc_health": self.grpc_health,
            "latency_ms": self.latency_ms,
            "error": self.error,
            "tries": self.tries,
            "waited_s": round(self.waited_s, 3),
        }


def health(channel: grpc.Channel, target: Target, timeout: float) -> Health:
    """Ask both health services; a worker that does not answer is unhealthy, with the reason."""
    import time

    from grpc_health.v1 import health_pb2, health_pb2_grpc

    meta = list(target.headers)
    began = time.perf_counter()
    try:
        engine = proto.engine_grpc.VllmEngineStub(channel).HealthCheck(
            proto.engine_pb2.HealthCheckRequest(), timeout=timeout, metadata=meta
        )
    except grpc.RpcError as err:
        failure = as_error(err, target, "HealthCheck")
        return Health(target.address, False, "", "unknown", None, failure.message)
    latency = round((time.perf_counter() - began) * 1000, 3)
    try:
        std = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=timeout, metadata=meta
        )
        standard = health_pb2.HealthCheckResponse.ServingStatus.Name(std.status)
    except grpc.RpcError as err:
        standard = f"unavailable ({err.code().name})"
    return Health(target.address, engine.healthy, engine.message, standard, latency)


#: Seconds between two tries while waiting for a worker to serve.
WAIT_POLL_S = 0.1


def wait_healthy(
    target: Target,
    wait_s: float,
    timeout: float,
    on_try: Callable[[Health, float], None] | None = None,
) -> Health:
    """Ask until the worker answers healthy, or ``wait_s`` has passed (0: ask
    once); the last answer, with ``tries`` and ``waited_s``. ``on_try(answer,
    seconds left)`` after each try that was not healthy.

    Each try opens a channel of its own: a channel whose connection failed
    waits out gRPC's reconnect back-off (1 s, growing 1.6-fold to 2 min)
    before it dials again, so one channel polled while a worker starts saw it
    serve minutes late. A fresh channel dials at once.
    """
    import time

    from mmctl.client.channel import open_channel

    start = time.monotonic()
    deadline = start + max(0.0, wait_s)
    tries = 0
    while True:
        tries += 1
        left = deadline - time.monotonic()
        channel = open_channel(target)
        try:
            answer = health(channel, target, min(timeout, left) if left > 0.05 else timeout)
        finally:
            channel.close()
        answer = replace(answer, tries=tries, waited_s=time.monotonic() - start)
        left = deadline - time.monotonic()
        if answer.serving or left <= 0:
            return answer
        if on_try is not None:
            on_try(answer, left)
        time.sleep(min(WAIT_POLL_S, left))
