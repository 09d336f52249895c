"""`mmctl batch` over a fleet whose workers freeze and die mid-run.

A frozen worker (SIGSTOP) accepts connections and answers nothing: without
probes of its own, its calls held their items — and with them the batch —
for as long as it stayed frozen, and a retry after a killed worker could
land on it. Each target is now judged by a HealthCheck probe every second;
one that fails it is taken out and its items go to the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: The bound asked for 90 items over three targets, one frozen and one
#: killed and restarted mid-run (the stuck batch took 120 s and more).
BOUND_S = 90


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MMCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MMCTL_TARGET", raising=False)


def _stub(port: int = 0) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "stub-worker", "--port", str(port), "--json",
         "--delay-ms", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    ready = json.loads(proc.stdout.readline())
    assert ready["event"] == "ready"
    return proc, int(ready["port"])


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP, /proc")
def test_ninety_items_with_one_worker_frozen_and_one_killed_and_restarted(red_blue, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(
        json.dumps({"id": f"n{i}", "media": [str(red_blue)]}) + "\n" for i in range(90)
    ))  # fmt: skip
    out = tmp_path / "out.jsonl"
    stubs = [_stub() for _ in range(3)]
    (killed, killed_port), (frozen, _), _ = stubs
    procs = [p for p, _ in stubs]
    targets = ",".join(f"127.0.0.1:{port}" for _, port in stubs)
    began = time.monotonic()
    run = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "batch", str(data), "-o", str(out), "-t", targets,
         "--workers", "2", "--max-concurrency", "9", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MMCTL_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    try:
        while len(_lines(out)) < 10 and run.poll() is None and time.monotonic() - began < BOUND_S:
            time.sleep(0.05)
        assert run.poll() is None, "the batch ended before the faults: nothing was tested"
        frozen.send_signal(signal.SIGSTOP)
        killed.kill()
        killed.wait(10)
        time.sleep(2)
        procs.append(_stub(killed_port)[0])  # the same address, back
        stdout, stderr = run.communicate(timeout=max(1, BOUND_S - (time.monotonic() - began)))
    finally:
        run.kill()
        frozen.send_signal(signal.SIGCONT)
        for proc in procs:
            proc.kill()
            proc.wait(10)
    assert run.returncode == 0, stderr
    lines = _lines(out)
    assert sorted(d["custom_id"] for d in lines) == sorted(f"n{i}" for i in range(90))
    assert all(d["error"] is None for d in lines)
    assert "did not answer" in stderr or "its health probe" in stderr, stderr
    summary = json.loads(stdout)
    assert summary["succeeded"] == 90 and summary["failed"] == 0
