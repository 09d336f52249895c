"""Reaching Ray the way Ray users do, or starting a local instance on loopback.

The address, in this order: ``--ray-address`` (``auto``, ``HOST:6379``,
``ray://HOST:10001`` for Ray Client), else ``$RAY_ADDRESS`` (what ``ray job
submit`` sets for the job's driver), else a local instance that mmctl starts
with ``cpus`` CPUs and stops at the end.

Loopback stays loopback. Ray turns ``127.0.0.1`` — in ``_node_ip_address``,
in an address, in the ``auto`` file — into the machine's external address
("a remotely reachable IP", ``services.resolve_ip_for_localhost``) unless
its single-host switch is on (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, the
default on macOS and Windows). So a local instance starts with that switch
(its GCS, raylet and workers then bind and advertise 127.0.0.1 only), and
a connection to a cluster on loopback (``ray start --head
--node-ip-address 127.0.0.1`` under the same switch, or a test cluster)
makes it for the time of ``ray.init``.

Token authentication (on by default since Ray 2.60 for ``ray start``): Ray
presents ``$RAY_AUTH_TOKEN``, ``$RAY_AUTH_TOKEN_PATH``'s file or
``~/.ray/auth_token`` — for ``auto`` whenever a token is there, for an
explicit address only with ``RAY_AUTH_MODE=token`` (Ray's rule; mmctl does
not widen it). Without a token Ray retries for half a minute and says
"Failed to connect", so an explicit address's GCS (or Ray Client server)
is asked first, with one bare gRPC call (2 s): refused for its token, or
not answering at all, is
:class:`~mmctl.errors.WorkerUnavailable` (exit 5) in one sentence with the
way to fix it, at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mmctl.errors import WorkerUnavailable

#: A local instance's address on this host: loopback only.
LOOPBACK = "127.0.0.1"
#: Ray's single-host switch (``ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR``).
SINGLE_HOST_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: The niceness Ray starts its worker processes with (``ray_constants.RAY_WORKER_NICENESS``).
WORKER_NICENESS_ENV = "RAY_worker_niceness"
#: What Ray prints when token authentication fails (``ray/_private/authentication``).
_AUTH_WORDS = ("authentication token", "token authentication", "unauthenticated")


@dataclass(frozen=True)
class Connection:
    """How this process reached Ray."""

    #: The address asked for (``None``: a local instance).
    address: str | None
    #: ``True`` when mmctl started the instance (it stops it at the end).
    local: bool
    #: Ray Client (``ray://``): this process is not a node of the cluster.
    client: bool
    startup_s: float
    session_dir: str | None


def address_wanted(address: str | None) -> str | None:
    """``--ray-address``, else ``$RAY_ADDRESS``, else ``None`` (a local instance)."""
    return address or os.environ.get("RAY_ADDRESS") or None


def connect(ray: Any, address: str | None, cpus: int) -> Connection:
    """``ray.init`` for ``address`` (see the module docstring); a local instance
    is tried twice: on a loaded machine its GCS or raylet can miss one of Ray's
    own start-up deadlines (seen in CI: "Timed out waiting for file
    …/gcs_server_port_…" (RuntimeError), "The current node timed out during
    startup" (a bare Exception, after Ray's hard-coded 30 s))."""
    started = time.perf_counter()
    client = address is not None and address.startswith("ray://")
    if address is not None and address != "auto":
        _ask(address)
    for attempt in (1, 2):
        try:
            with _loopback(ray, address):
                context = _init(ray, address, cpus, client)
            break
        except Exception as err:
            ray.shutdown()
            if address is not None:
                raise _unreachable(address, err) from None
            if attempt == 2:
                raise
    session = None
    info = getattr(context, "address_info", None)
    if isinstance(info, dict):
        session = info.get("session_dir")
    return Connection(address, address is None, client, time.perf_counter() - started, session)


#: The GCS method a bare probe calls (``ray.rpc.NodeInfoGcsService``); any answer but
#: UNAUTHENTICATED or UNAVAILABLE (an empty request may be refused otherwise) means
#: a GCS is there and lets this process in.
_GCS_PROBE = "/ray.rpc.NodeInfoGcsService/GetClusterId"
#: The same for a Ray Client server (``ray.rpc.RayletDriver``).
_CLIENT_PROBE = "/ray.rpc.RayletDriver/ClusterInfo"
_PROBE_S = 2.0


def _ask(address: str) -> None:
    """Refuse now, in one sentence, an address whose GCS (or Ray Client
    server) does not answer or wants a token this process will not present."""
    import grpc

    client = address.startswith("ray://")
    with grpc.insecure_channel(address.removeprefix("ray://")) as channel:
        call: Any = channel.unary_unary(_CLIENT_PROBE if client else _GCS_PROBE)
        try:
            call(b"", timeout=_PROBE_S, metadata=_token_metadata())
            return
        except grpc.RpcError as err:
            code = err.code()
    if code == grpc.StatusCode.UNAUTHENTICATED:
        raise _refused(address)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        raise WorkerUnavailable(
            f"--ray-address {address}: no Ray cluster answers there ({code.name.lower()})",
            hint=_NO_CLUSTER_HINT,
        )


def _token_metadata() -> tuple[tuple[str, str], ...]:
    """The token Ray itself would present for an explicit address (``RAY_AUTH_MODE=token``)."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return ()
    token = os.environ.get("RAY_AUTH_TOKEN")
    if token is None:
        path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
        try:
            with open(path) as f:
                token = f.read().strip()
        except OSError:
            return ()
    return (("authorization", f"Bearer {token}"),)


def is_loopback(ray: Any, address: str | None) -> bool:
    """Whether ``address`` (``None``: a local instance) is on this host's loopback."""
    if address is None:
        return True
    if address == "auto":  # what Ray will find: the address file, else a running GCS
        from ray._private.services import get_ray_address_from_environment

        try:
            address = get_ray_address_from_environment("auto", None) or ""
        except Exception:  # no cluster found: ray.init says so in its words
            return False
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


@contextlib.contextmanager
def _loopback(ray: Any, address: str | None) -> Iterator[None]:
    """While Ray connects: its single-host switch (loopback stays loopback), for
    this process and the processes it starts; for a local instance also
    ``RAY_worker_niceness=0`` — Ray runs its workers at niceness 15 unless
    told, and the batch's own preprocessing must not yield to every other
    process of the machine (the local engine's pool runs at 0)."""
    if not is_loopback(ray, address):
        yield
        return
    from ray._private import ray_constants

    wanted = {SINGLE_HOST_ENV: "0"} | ({WORKER_NICENESS_ENV: "0"} if address is None else {})
    saved_env = {k: os.environ.get(k) for k in wanted}
    saved = ray_constants.ENABLE_RAY_CLUSTER
    os.environ.update(wanted)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _init(ray: Any, address: str | None, cpus: int, client: bool) -> Any:
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    if client:
        return ray.init(address=address, **quiet)
    if address is None:
        return ray.init(
            num_cpus=cpus,
            include_dashboard=False,
            _node_ip_address=LOOPBACK,
            **quiet,
        )
    return ray.init(address=address, include_dashboard=False, **quiet)


_NO_CLUSTER_HINT = (
    "`ray start --head` starts one; without --ray-address (and RAY_ADDRESS) mmctl starts a "
    "local instance"
)


def _refused(address: str) -> WorkerUnavailable:
    return WorkerUnavailable(
        f"--ray-address {address}: the Ray cluster refused this process "
        "(token authentication: no token, or not the cluster's)",
        hint="export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the output of `ray get-auth-token` "
        "on the head> (or RAY_AUTH_TOKEN_PATH=<its file>)",
    )


def _unreachable(address: str, err: BaseException) -> WorkerUnavailable:
    text = f"{type(err).__name__}: {err}"
    if type(err).__name__ == "AuthenticationError" or any(w in text.lower() for w in _AUTH_WORDS):
        return _refused(address)
    return WorkerUnavailable(
        f"--ray-address {address}: no Ray cluster answers there ({first_sentence(err)})",
        hint=_NO_CLUSTER_HINT,
    )


def first_sentence(err: BaseException) -> str:
    """The first sentence of Ray's message (the rest is advice about its own flags)."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text.split(". ")[0].rstrip(".")
