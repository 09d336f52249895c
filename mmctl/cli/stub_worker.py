"""`mmctl stub-worker`: a strict VllmEngine gRPC server for GPU-less tests and CI."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from mmctl.choices import (
    DEFAULT_PRUNING_METHOD,
    DEFAULT_PRUNING_RATE,
    STUB_ENCODER_BUDGET,
    STUB_ITEM_LIMITS,
    STUB_PORT,
)
from mmctl.cli._options import (
    BundleOpt,
    FamilyOpt,
    JsonOpt,
    ModelDirOpt,
    VideoPruningMethodOpt,
    VideoPruningRateOpt,
    default_text,
)
from mmctl.worker.limits import MAX_CONCURRENT_REQUESTS, MAX_MESSAGE_MB

HELP = """Serve vllm.grpc.engine.VllmEngine (plus grpc.health.v1 and reflection) without a GPU.

A strict stand-in for `vllm serve MODEL --grpc` in tests and CI: it checks
every request as the real worker would and answers with the dominant colour
of each temporal patch it received (or, with --answer echo, what arrived).

Prints one ready line (the bound address) on stdout, then one log line per
request on stderr. SIGINT/SIGTERM stop it cleanly (exit 0).

Examples:

\b
  mmctl stub-worker                        # 127.0.0.1:50051, as vllm serve: uint8 pixels
  mmctl stub-worker --port 0 --json        # a free port; a JSON ready line
  mmctl stub-worker --no-device-normalize  # wants normalized floats (model dtype)
  mmctl stub-worker --legacy-proto         # predates the modality field
  mmctl stub-worker --answer echo --delay-ms 50
  mmctl stub-worker --record requests/     # each accepted request as a .pb file
  mmctl stub-worker --video-pruning-rate 0.5   # as vllm serve --video-pruning-rate 0.5

Exit codes: 0 stopped by SIGINT/SIGTERM; 2 usage (a port out of range or
already taken, bad limits, unreadable TLS files, a --record folder that
cannot be made); 3 bad model files.
"""


class Answer(StrEnum):
    colors = "colors"
    echo = "echo"


_HostOpt = Annotated[str, typer.Option("--host", metavar="ADDRESS", help="Address to listen on.")]
_PortOpt = Annotated[
    int, typer.Option("--port", metavar="PORT", help="Port to listen on; 0 picks a free one.")
]
_AnswerOpt = Annotated[
    Answer,
    typer.Option(
        "--answer",
        metavar="[colors|echo]",
        help="colors: the dominant colour of each temporal patch; echo: what arrived.",
    ),
]
_DelayMsOpt = Annotated[
    int,
    typer.Option("--delay-ms", metavar="MS", help="Delay before each generated token."),
]
_DeviceNormalizeOpt = Annotated[
    bool | None,
    typer.Option(
        "--device-normalize/--no-device-normalize",
        help="Advertise mm_device_do_normalize and accept only raw uint8 pixels (or, --no-: "
        "only normalized floats)."
        + default_text(
            "as a default `vllm serve MODEL --grpc` for the family: on for qwen3-vl, qwen3.5, "
            "qwen2.5-vl, glm4v and glm5-next"
        ),
        show_default=False,
    ),
]
_LegacyProtoOpt = Annotated[
    bool,
    typer.Option(
        "--legacy-proto",
        help="Behave like a worker from before the modality and capability fields.",
    ),
]
_MmItemLimitsOpt = Annotated[
    str,
    typer.Option(
        "--mm-item-limits",
        metavar="image=N,video=M",
        help="Most media items of each kind per request (advertised and enforced).",
    ),
]
_MmEncoderBudgetOpt = Annotated[
    int,
    typer.Option(
        "--mm-encoder-budget",
        metavar="TOKENS",
        help="Most feature tokens per item (advertised and enforced; 0: no limit).",
    ),
]
_AllowedLocalMediaPathOpt = Annotated[
    Path | None,
    typer.Option(
        "--allowed-local-media-path",
        metavar="DIR",
        help="Accept file:// media_refs under this folder." + default_text("none"),
        show_default=False,
    ),
]
_MaxMessageMbOpt = Annotated[
    int,
    typer.Option(
        "--max-message-mb",
        metavar="MB",
        help="Largest request accepted, in MiB (larger: RESOURCE_EXHAUSTED). The default "
        "holds a 30 s 720p clip's float32 pixels inline 3 times over.",
    ),
]
_MaxConcurrentRequestsOpt = Annotated[
    int,
    typer.Option(
        "--max-concurrent-requests",
        metavar="N",
        help="Generates run at once; more get RESOURCE_EXHAUSTED (memory is bounded by "
        "N × --max-message-mb).",
    ),
]
_ShmAllowedUidOpt = Annotated[
    list[int] | None,
    typer.Option(
        "--shm-allowed-uid",
        metavar="UID",
        help="Read /dev/shm files owned by this uid (repeatable)." + default_text("own uid"),
        show_default=False,
    ),
]
_RecordDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--record",
        metavar="DIR",
        help="Write each accepted GenerateRequest to DIR as <n>-<request id>.pb, /dev/shm "
        "tensors inline (mmctl inspect-tokens --request, mmctl send --request read them)."
        + default_text("off"),
        show_default=False,
    ),
]
_ServedModelNameOpt = Annotated[
    str | None,
    typer.Option(
        "--served-model-name",
        metavar="NAME",
        help="The model name GetModelInfo reports, as vLLM's --served-model-name (the smg "
        "gateway picks its image processor by it); mmctl-stub/<family> when not given.",
        show_default=False,
    ),
]
_TlsCertOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-cert",
        metavar="PEM",
        help="Serve TLS with this certificate chain." + default_text("plain text"),
        show_default=False,
    ),
]
_TlsKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-key", metavar="PEM", help="The private key for --tls-cert.", show_default=False
    ),
]


def stub_worker(
    host: _HostOpt = "127.0.0.1",
    port: _PortOpt = STUB_PORT,
    answer: _AnswerOpt = Answer.colors,
    delay_ms: _DelayMsOpt = 0,
    device_normalize: _DeviceNormalizeOpt = None,
    legacy_proto: _LegacyProtoOpt = False,
    mm_item_limits: _MmItemLimitsOpt = STUB_ITEM_LIMITS,
    mm_encoder_budget: _MmEncoderBudgetOpt = STUB_ENCODER_BUDGET,
    allowed_local_media_path: _AllowedLocalMediaPathOpt = None,
    max_message_mb: _MaxMessageMbOpt = MAX_MESSAGE_MB,
    max_concurrent_requests: _MaxConcurrentRequestsOpt = MAX_CONCURRENT_REQUESTS,
    shm_allowed_uid: _ShmAllowedUidOpt = None,
    record_dir: _RecordDirOpt = None,
    served_model_name: _ServedModelNameOpt = None,
    tls_cert: _TlsCertOpt = None,
    tls_key: _TlsKeyOpt = None,
    model_dir: ModelDirOpt = None,
    bundle: BundleOpt = None,
    family: FamilyOpt = None,
    video_pruning_rate: VideoPruningRateOpt = DEFAULT_PRUNING_RATE,
    video_pruning_method: VideoPruningMethodOpt = DEFAULT_PRUNING_METHOD,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli import _inputs
    from mmctl.cli._output import Output
    from mmctl.errors import Interrupted
    from mmctl.values.pruning import VideoPruning
    from mmctl.worker import checks
    from mmctl.worker.handlers import StubConfig, load_served
    from mmctl.worker.server import check_bindable, ready_event, start, tls_files

    output = Output(json_mode=json_out, schema="stub-worker")
    pruning = VideoPruning(video_pruning_rate, video_pruning_method)
    check_bindable(host, port)  # before the model loads: a taken port fails at once
    tls = tls_files(tls_cert, tls_key)
    model, device_normalize = load_served(
        model_dir, bundle, family, device_normalize, record_dir is not None, pruning
    )
    policy = checks.Policy(
        device_normalize=device_normalize,
        legacy_proto=legacy_proto,
        item_limits=_inputs.item_limits(mm_item_limits) or {},
        encoder_budget=mm_encoder_budget,
        shm_owners=frozenset(shm_allowed_uid or [os.getuid()]),
    )
    cfg = StubConfig(
        model=model,
        policy=policy,
        answer=answer.value,
        delay_ms=delay_ms,
        allowed_local_media_path=allowed_local_media_path,
        max_message_mb=max_message_mb,
        max_concurrent_requests=max_concurrent_requests,
        record_dir=record_dir,
        served_model_name=served_model_name,
    )
    running = start(cfg, host, port, tls=tls)
    # From here on a stop signal is the normal way out (exit 0), even one that
    # arrives right after the ready line a script was waiting for.
    try:
        for warning in model.warnings:
            output.warn(warning)
        doc = ready_event(cfg, running, host, tls is not None)
        extras = [
            f
            for f, on in (("device-normalize", device_normalize), ("legacy proto", legacy_proto))
            if on
        ]
        if pruning.enabled:
            extras.append(f"video pruning {pruning.describe()}")
        output.result(
            doc,
            human=lambda console: console.print(
                f"mmctl stub-worker listening on {doc['address']} "
                f"({', '.join([model.name, model.source.label, *extras])})"
            ),
        )
        running.wait()
    except Interrupted as stop:
        output.note(f"[stub] {stop.signal_name}: shutting down")
    finally:
        running.stop(grace=1.0)


stub_worker.__doc__ = HELP
