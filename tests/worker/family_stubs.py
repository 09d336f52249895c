"""What the family stub tests share: the fixture folders, a client and a built
request for one of them, a refusal's message, the CLI in a subprocess and a
``mmctl batch`` run's answers, a stub started as ``vllm serve`` would start the family."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
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


def batch_answers(tmp_path: Path, target: str, lines: list[dict]) -> tuple[Path, dict[str, str]]:
    """``mmctl batch`` on ``lines`` (a dataset written under ``tmp_path``) against
    ``target``: the dataset's path and each line's answer by its id."""
    dataset = tmp_path / "in.jsonl"
    dataset.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    done = run_mmctl("batch", str(dataset), "-o", str(out), "--target", target)
    assert done.returncode == 0, done.stderr
    answers = {}
    for line in out.read_text().splitlines():
        doc = json.loads(line)
        answers[doc["custom_id"]] = doc["response"]["body"]["choices"][0]["message"]["content"]
    return dataset, answers


def served(model_type: str) -> Iterator[Stub]:
    """A module fixture's body: a stub for the family's folder, closed after."""
    running = _stub(load_model(model_dir=FAMILIES / model_type))
    try:
        yield running
    finally:
        running.close()


def default_stub(model_type: str) -> Stub:
    from mmctl.worker import checks

    model = load_model(model_dir=FAMILIES / model_type)
    return _stub(model, device_normalize=checks.device_normalize_for(model.spec, None))
