"""Connecting to a worker: target, TLS, metadata, and gRPC errors as mmctl errors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import grpc

from mmctl import settings
from mmctl.errors import (
    GenerationIncomplete,
    InputError,
    MmctlError,
    UsageError,
    WorkerRejected,
    WorkerUnavailable,
)
from mmctl.wire.proto import UNLIMITED

#: Codes that mean "the worker is not there / did not answer in time".
UNAVAILABLE_CODES = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,
}


@dataclass(frozen=True)
class Target:
    address: str
    tls: bool = False
    ca_cert: Path | None = None
    headers: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def resolve_target(
    target: str | None,
    *,
    tls: bool = False,
    ca_cert: Path | None = None,
    headers: list[str] | None = None,
) -> Target:
    address = check_address(target or settings.target())
    if ca_cert is not None and not tls:
        tls = True
    return Target(address, tls, ca_cert, tuple(metadata(header) for header in headers or []))


def check_address(address: str) -> str:
    """``host:port`` (``[v6]:port``, or a ``unix:`` path) with a port gRPC can
    dial: checked here, since gRPC itself takes ``localhost:99999`` modulo 65536."""
    if address.startswith(("http://", "https://", "grpc://")):
        raise UsageError(f"--target is host:port, not a URL: {address!r}")
    if address.startswith(("unix:", "unix-abstract:")):
        return address
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise UsageError(f"--target needs a port: {address!r} (e.g. localhost:50051)")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UsageError(f"--target's port must be 1-65535, got {port!r} in {address!r}")
    return address


#: A metadata key as gRPC accepts it (HTTP/2 header names, lower case).
_KEY = re.compile(r"[0-9a-z_.-]+")


def metadata(header: str) -> tuple[str, str]:
    """One ``-H 'key: value'`` as the (key, value) pair gRPC sends, checked as
    gRPC checks it — otherwise its core refuses the call with a log line and
    INTERNAL, which reads as if the worker had refused the request."""
    key, sep, value = header.partition(":")
    key, value = key.strip().lower(), value.strip()
    if not sep or not key:
        raise UsageError(f"-H wants key:value, got {header!r}")
    if not _KEY.fullmatch(key):
        raise UsageError(
            f"-H {header!r}: a metadata key is lower-case letters, digits, '-', '_' and '.' "
            f"only, got {key!r}"
        )
    if key.startswith("grpc-"):
        raise UsageError(f"-H {header!r}: keys starting with 'grpc-' are reserved by gRPC")
    if key.endswith("-bin"):
        raise UsageError(f"-H {header!r}: binary (-bin) metadata cannot be given as text")
    if any(not " " <= ch <= "~" for ch in value):
        raise UsageError(f"-H {header!r}: a metadata value is printable ASCII only")
    return key, value


#: Most seconds to wait for a keepalive ping's answer (gRPC's own default).
KEEPALIVE_TIMEOUT_S = 20.0
#: Longest wait between two attempts to reconnect to a worker (gRPC's default: 120 s).
MAX_RECONNECT_BACKOFF_MS = 5000


def channel_options(address: str) -> list[tuple[str, str | int]]:
    """No message-size limits (like the worker's), keepalive pings, and the
    proxy (or none) for ``address`` as Go decides it (:mod:`mmctl.client.proxy`:
    loopback is never proxied).

    A frozen or vanished worker sends nothing, so without pings a Generate
    with no deadline waits forever. mmctl pings after ``MMCTL_KEEPALIVE_S``
    seconds of silence (default 330) and gives the worker
    ``min(20, keepalive)`` s to answer: a frozen worker fails the call
    within ~6 minutes (exit 5). Not sooner by default: a gRPC server's
    default policy refuses pings closer than 5 minutes apart and, after two
    such strikes, closes the connection with GOAWAY ``too_many_pings`` —
    which would kill healthy long generations. Workers that allow faster
    pings (the stub allows 1 s) can be watched closer with a lower value.
    """
    from mmctl.client import proxy

    keepalive = settings.keepalive_s()
    answer_ms = int(min(KEEPALIVE_TIMEOUT_S, keepalive) * 1000)
    return [
        *UNLIMITED,
        *proxy.choose(address).channel_options(),
        ("grpc.keepalive_time_ms", int(keepalive * 1000)),
        ("grpc.keepalive_timeout_ms", answer_ms),
        # grpcio 1.85 times keepalive pings out by this one (default 60 s), not the above.
        ("grpc.http2.ping_timeout_ms", answer_ms),
        ("grpc.keepalive_permit_without_calls", 0),
        # Keep pinging through a long silent generation (the default stops after two).
        ("grpc.http2.max_pings_without_data", 0),
        # A worker that comes back (restarted) is dialled again within 5 s,
        # not after a back-off grown to 2 minutes (a batch's fleet probes it).
        ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
    ]


def open_channel(target: Target) -> grpc.Channel:
    """A blocking channel to the worker (:func:`channel_options`)."""
    options = channel_options(target.address)
    if not target.tls:
        return grpc.insecure_channel(target.address, options=options)
    return grpc.secure_channel(target.address, _credentials(target), options=options)


def open_aio_channel(target: Target) -> grpc.aio.Channel:
    """The same on ``grpc.aio``, for many requests in flight from one event loop."""
    options = channel_options(target.address)
    if not target.tls:
        return grpc.aio.insecure_channel(target.address, options=options)
    return grpc.aio.secure_channel(target.address, _credentials(target), options=options)


#: ``VllmEngine.Generate``. Requests go as bytes: serialized once, by
#: ``RequestPlan.encode`` (a spliced tensor is never copied into a message).
GENERATE = "/vllm.grpc.engine.VllmEngine/Generate"


@overload
def generate_method(
    channel: grpc.aio.Channel,
) -> grpc.aio.UnaryStreamMultiCallable[bytes, Any]: ...
@overload
def generate_method(channel: grpc.Channel) -> grpc.UnaryStreamMultiCallable[bytes, Any]: ...
def generate_method(channel: Any) -> Any:
    """``Generate`` on a blocking or a ``grpc.aio`` channel: bytes in, responses
    out — each a ``GenerateResponse`` or a :class:`Malformed` (pass it through
    :func:`response`)."""
    return channel.unary_stream(
        GENERATE, request_serializer=None, response_deserializer=_parse_response
    )


@dataclass(frozen=True)
class Malformed:
    """Response bytes that are not a ``GenerateResponse``.

    Returned by the deserializer instead of raised: a raising deserializer
    makes grpcio log a traceback to stderr and end the call as INTERNAL, as
    if the worker had refused the request.
    """

    size: int
    reason: str


def _parse_response(data: bytes) -> Any:
    from google.protobuf.message import DecodeError

    from mmctl.wire import proto

    try:
        return proto.engine_pb2.GenerateResponse.FromString(data)
    except DecodeError as err:
        return Malformed(len(data), str(err))


def response(resp: Any, request_id: str) -> Any:
    """``resp`` if it is a ``GenerateResponse``; a malformed one ends the answer (exit 9)."""
    if isinstance(resp, Malformed):
        raise GenerationIncomplete(
            f"Generate {request_id}: the worker sent {resp.size} bytes that are not a "
            f"GenerateResponse ({resp.reason})"
        )
    return resp


def _credentials(target: Target) -> grpc.ChannelCredentials:
    root = None
    if target.ca_cert is not None:
        try:
            root = target.ca_cert.read_bytes()
        except OSError as err:
            raise InputError(f"cannot read --ca-cert {target.ca_cert}: {err.strerror}") from None
    return grpc.ssl_channel_credentials(root_certificates=root)


def as_error(err: grpc.RpcError, target: Target, what: str) -> MmctlError:
    """A gRPC failure as the mmctl error (and exit code) it means."""
    code = err.code() if hasattr(err, "code") else None
    details = (err.details() if hasattr(err, "details") else str(err)) or ""
    name = code.name if code is not None else "ERROR"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return WorkerUnavailable(f"{what}: the deadline passed before {target.address} answered")
    if code in UNAVAILABLE_CODES:
        first = details.splitlines()[0] if details else ""
        if (known := _diagnosis(first, target)) is not None:
            message, hint = known
            return WorkerUnavailable(f"{what}: {message}", hint=hint)
        return WorkerUnavailable(
            f"{what}: worker at {target.address} unavailable ({name}{': ' + first if first else ''})",
            hint=f"is `vllm serve … --grpc` (or `mmctl stub-worker`) listening there? --target / ${settings.TARGET}",
        )
    return WorkerRejected(f"{what}: the worker refused it ({name}): {details}")


def _diagnosis(details: str, target: Target) -> tuple[str, str] | None:
    """What a connection failure means, from gRPC's own words for it."""
    if "HTTP/2" in details or "http1.x" in details:
        # An HTTP/1 server answered the HTTP/2 preface (vLLM's OpenAI port, a proxy).
        return (
            f"something answers at {target.address}, but not gRPC — vLLM's HTTP port?",
            "`vllm serve MODEL --grpc` serves gRPC on its own port: --target HOST:GRPC_PORT",
        )
    if target.tls and ("handshake" in details.lower() or "SSL" in details):
        return (
            f"the TLS handshake with {target.address} failed: does it serve plaintext gRPC?",
            "leave out --tls/--ca-cert for a plaintext worker",
        )
    return None
