"""What the family stub tests share: the fixture folders, a client and a built
request for one of them, a refusal's message, the CLI in a subprocess, a stub
started as ``vllm serve`` would start the family."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import mmctl
from mmctl.models.model import load_model
from tests.conftest import Stub, _stub

FAMILIES = Path(__file__).resolve().parents[1] / "fixtures" / "families"


def client_for(stub: Stub, model_type: str) -> mmctl.Client:
    return mmctl.Client(stub.running.address, model_dir=FAMILIES / model_type)


def built(stub: Stub, model_type: str, paths: list[Path]):
    with client_for(stub, model_type) as client:
        return client.build(paths, "Colour?").request


def refused(stub: Stub, req) -> str:
    import grpc

    with pytest.raises(grpc.RpcError) as info:
        stub.generate(req)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return str(info.value.details())


def run_mmctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mmctl", *args], capture_output=True, text=True, timeout=180
    )


def default_stub(model_type: str) -> Stub:
    from mmctl.worker import checks

    model = load_model(model_dir=FAMILIES / model_type)
    return _stub(model, device_normalize=checks.device_normalize_for(model.spec, None))
