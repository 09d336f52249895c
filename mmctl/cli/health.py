"""`mmctl health` and `mmctl info`: is the worker there, and what does it offer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmctl.cli import _inputs
from mmctl.cli._options import (
    CaCertOpt,
    HeaderOpt,
    JsonOpt,
    TargetOpt,
    TlsOpt,
    default_text,
    timeout_opt,
)

if TYPE_CHECKING:
    from rich.console import Console

HEALTH_HELP = """Check a worker's VllmEngine.HealthCheck and the standard grpc.health.v1 service.

Examples:

\b
  mmctl health                          # $MMCTL_TARGET or localhost:50051
  mmctl health --target gpu-box:50051 --json
  vllm serve MODEL --grpc & mmctl health --wait 600 && mmctl send clip.mp4

--wait SECONDS asks until the worker serves (every 0.1 s, each time on a new
connection, so a worker that starts is seen at once) and gives up after
SECONDS: exit 5, naming the last reason. With --json a document is printed
whether or not the worker answers (healthy: false and the error when it does
not; tries and waited_s say how long it took).

Exit codes: 0 healthy; 2 usage; 5 unreachable, deadline passed, or unhealthy
(with --wait: still so after SECONDS).
"""

INFO_HELP = """Show the worker's model, server info, /dev/shm sharing and proto capabilities.

Also the vision settings the worker's model files resolve to, as transformers
resolves them when the worker loads them (budgets, fps, frame bounds, patch
sizes), each with the file it came from.

Examples:

\b
  mmctl info
  mmctl info --json | jq .server.mm_device_do_normalize
  mmctl info --json | jq .vision.settings.video_max_pixels

Exit codes: 0 shown; 2 usage; 5 unreachable or deadline passed.
"""


def health(
    target: TargetOpt = None,
    timeout: Annotated[float, timeout_opt("5")] = 5.0,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            metavar="SECONDS",
            help="Keep asking until the worker serves, for up to SECONDS (0 asks once)."
            + default_text("0"),
            show_default=False,
        ),
    ] = 0.0,
    header: HeaderOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli._output import Output
    from mmctl.client.client import Client
    from mmctl.errors import UsageError, WorkerUnavailable

    if not wait >= 0 or wait == float("inf"):
        raise UsageError(f"--wait must be a number of seconds, 0 or more; got {wait:g}")
    output = Output(json_mode=json_out, schema="health")
    with Client(
        target, _inputs.connection(header=header, tls=tls, ca_cert=ca_cert, timeout=timeout)
    ) as client:
        address = client.target.address

        def waiting(answer: Any, left: float) -> None:
            reason = answer.error or answer.message
            output.status(f"waiting for {address} to serve ({left:.0f} s left): {reason}")

        report = client.health(timeout, wait=wait, on_try=waiting)
    output.end_progress()
    tgt = client.target
    if report.error is None or json_out:
        output.result(
            report.as_dict(),
            human=lambda console: console.print(
                f"{tgt.address}: {'healthy' if report.healthy else 'UNHEALTHY'} "
                f"({report.message or 'no message'}); grpc.health.v1 {report.grpc_health}; "
                f"{report.latency_ms:.1f} ms",
                markup=False,
                highlight=False,
            ),
        )
    still = f"after {report.waited_s:.1f} s and {report.tries} tries, " if wait else ""
    if report.error is not None:
        raise WorkerUnavailable(
            still + report.error,
            hint="is `vllm serve … --grpc` (or `mmctl stub-worker`) listening there? "
            "--target / $MMCTL_TARGET",
        )
    if not report.healthy:
        raise WorkerUnavailable(
            f"{still}worker at {tgt.address} reports unhealthy: {report.message}"
        )


health.__doc__ = HEALTH_HELP


def info(
    target: TargetOpt = None,
    timeout: Annotated[float, timeout_opt("10")] = 10.0,
    header: HeaderOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli._output import Output
    from mmctl.client.client import Client

    output = Output(json_mode=json_out, schema="info")
    with Client(
        target, _inputs.connection(header=header, tls=tls, ca_cert=ca_cert, timeout=timeout)
    ) as client:
        doc = client.info()
    output.result(doc, human=lambda console: _render_info(console, doc))


info.__doc__ = INFO_HELP


def _render_info(console: Console, doc: dict[str, Any]) -> None:
    from mmctl.cli._render import kv_table, vision_rows

    m, s, caps = doc["model"], doc["server"], doc["capabilities"]
    table = kv_table()
    table.add_row("target", doc["target"])
    table.add_row(
        "model",
        f"{m.get('served_model_name')} ({m.get('model_type')}, {', '.join(m.get('architectures', []))})",
    )
    table.add_row(
        "context",
        f"{int(m.get('max_context_length') or 0):,} tokens (max_context_length), "
        + ("vision input" if m.get("supports_vision") else "text only (supports_vision false)"),
    )
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
    vision = doc.get("vision") or {}
    if "error" in vision:
        table.add_row("vision", f"unknown: {vision['error']}")
    elif vision:
        table.add_row("model files", f"{vision['model']} ({vision['family']})")
        vision_rows(table, vision["settings"])
    console.print(table)
