"""`mmctl health` and `mmctl info`: is the worker there, and what does it offer."""

from __future__ import annotations

from mmctl.cli._options import CaCertOpt, HeaderOpt, JsonOpt, TargetOpt, TimeoutOpt, TlsOpt

HEALTH_EXAMPLES = """
Examples:

  mmctl health                          # $MMCTL_TARGET or localhost:50051
  mmctl health --target gpu-box:50051 --json

Exit codes: 0 healthy, 5 unreachable or unhealthy.
"""

INFO_EXAMPLES = """
Examples:

  mmctl info
  mmctl info --json | jq .server.mm_device_do_normalize

Exit codes: 0, 5 unreachable.
"""


def health(
    target: TargetOpt = None,
    timeout: TimeoutOpt = 5.0,
    header: HeaderOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Check VllmEngine.HealthCheck and the standard grpc.health.v1 service."""
    import time

    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from mmctl.cli._output import Output
    from mmctl.client.channel import as_error, open_channel, resolve_target
    from mmctl.errors import WorkerUnavailable
    from mmctl.wire import proto

    output = Output(json_mode=json_out)
    tgt = resolve_target(target, tls=tls, ca_cert=ca_cert, headers=header)
    meta = list(tgt.headers)
    channel = open_channel(tgt)
    try:
        began = time.perf_counter()
        try:
            engine = (
                proto.engine_grpc()
                .VllmEngineStub(channel)
                .HealthCheck(proto.engine().HealthCheckRequest(), timeout=timeout, metadata=meta)
            )
        except grpc.RpcError as err:
            raise as_error(err, tgt, "HealthCheck") from None
        latency = time.perf_counter() - began
        try:
            std = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout, metadata=meta
            )
            standard = health_pb2.HealthCheckResponse.ServingStatus.Name(std.status)
        except grpc.RpcError as err:
            standard = f"unavailable ({err.code().name})"
    finally:
        channel.close()
    doc = {
        "target": tgt.address,
        "healthy": engine.healthy,
        "message": engine.message,
        "grpc_health": standard,
        "latency_ms": round(latency * 1000, 3),
    }
    output.result(
        doc,
        human=lambda console: console.print(
            f"{tgt.address}: {'healthy' if engine.healthy else 'UNHEALTHY'} ({engine.message or 'no message'}); "
            f"grpc.health.v1 {standard}; {doc['latency_ms']:.1f} ms",
            markup=False,
        ),
    )
    if not engine.healthy:
        raise WorkerUnavailable(f"worker at {tgt.address} reports unhealthy: {engine.message}")


health.__doc__ = (health.__doc__ or "") + "\n" + HEALTH_EXAMPLES


def info(
    target: TargetOpt = None,
    timeout: TimeoutOpt = 10.0,
    header: HeaderOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show the worker's model, server info, /dev/shm sharing and proto capabilities."""
    from google.protobuf.json_format import MessageToDict

    from mmctl.cli._output import Output
    from mmctl.client.channel import open_channel, resolve_target
    from mmctl.client.worker import probe
    from mmctl.transport.shm import namespace_id

    output = Output(json_mode=json_out)
    tgt = resolve_target(target, tls=tls, ca_cert=ca_cert, headers=header)
    channel = open_channel(tgt)
    try:
        facts = probe(channel, tgt, timeout=timeout or 10.0)
    finally:
        channel.close()
    local = namespace_id()
    remote = facts.server.shm_namespace_id
    as_dict = lambda m: MessageToDict(  # noqa: E731
        m, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    doc = {
        "target": tgt.address,
        "model": as_dict(facts.model),
        "server": as_dict(facts.server),
        "shm": {
            "local_namespace_id": local,
            "worker_namespace_id": remote,
            "shared": bool(remote) and remote == local,
        },
        "capabilities": facts.caps.as_dict(),
        "advertises_capabilities": facts.knows_capabilities,
    }
    output.result(doc, human=lambda console: _render_info(console, doc))


info.__doc__ = (info.__doc__ or "") + "\n" + INFO_EXAMPLES


def _render_info(console, doc: dict) -> None:
    from rich.table import Table

    m, s, caps = doc["model"], doc["server"], doc["capabilities"]
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("target", doc["target"])
    table.add_row(
        "model",
        f"{m.get('served_model_name')} ({m.get('model_type')}, {', '.join(m.get('architectures', []))})",
    )
    table.add_row("vision", str(m.get("supports_vision")))
    table.add_row(
        "server",
        f"{s.get('server_type')}, {s.get('active_requests')} active, up {s.get('uptime_seconds', 0):.0f} s",
    )
    if doc["advertises_capabilities"]:
        table.add_row(
            "dtype", f"model {s.get('model_dtype')}, encoder {s.get('multimodal_encoder_dtype')}"
        )
        table.add_row(
            "pixels",
            "uint8 (normalized on device)"
            if s.get("mm_device_do_normalize")
            else "normalized floats",
        )
        table.add_row(
            "limits",
            f"{s.get('mm_item_limits') or 'none'}; encoder budget {s.get('mm_encoder_budget') or 'unknown'}",
        )
        table.add_row(
            "media_refs",
            f"{s.get('mm_processor') or 'no'} ({s.get('mm_media_ref_schemes') or '-'})",
        )
    else:
        table.add_row("capabilities", "not advertised (an older worker): mmctl sends float32")
    shm = doc["shm"]
    table.add_row(
        "/dev/shm",
        "shared with this host"
        if shm["shared"]
        else f"not shared (worker {shm['worker_namespace_id'] or 'unknown'})",
    )
    if caps["reflection"]:
        table.add_row("reflection", ", ".join(caps["services"]))
        table.add_row(
            "modality field",
            "yes" if caps["modality_field"] else "NO — video would be read as an image",
        )
    else:
        table.add_row("reflection", f"not offered ({caps['error']})")
    console.print(table)
