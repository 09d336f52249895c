"""`mmctl health --wait SECONDS`: "start the worker, wait until it serves"."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import mmctl
from mmctl.client import probe as worker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_health_wait_returns_once_a_worker_starts_listening(tmp_path):
    port = _free_port()
    started = time.monotonic()
    waiting = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "health", "-t", f"127.0.0.1:{port}", "--wait", "120",
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    stub = None
    try:
        time.sleep(3)  # it has been refused for a while: a channel would be backing off now
        assert waiting.poll() is None
        stub = subprocess.Popen(
            [sys.executable, "-m", "mmctl", "stub-worker", "--port", str(port), "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert json.loads(stub.stdout.readline())["event"] == "ready"
        # Far less than a backed-off channel's next try, far more than a try takes.
        out, err = waiting.communicate(timeout=10)
        took = time.monotonic() - started
    finally:
        waiting.kill()
        if stub is not None:
            stub.terminate()
            stub.wait(10)
    assert waiting.returncode == 0, err
    doc = json.loads(out)
    assert doc["healthy"] is True and doc["error"] is None
    # Its wait starts after its imports (their time is the machine's), so it
    # waited less than the test did, and it tried while the port was closed.
    assert doc["tries"] > 2 and 0 < doc["waited_s"] <= took


def test_health_wait_gives_up_with_exit_5_naming_the_reason(cli):
    port = _free_port()
    res = cli("health", "-t", f"127.0.0.1:{port}", "--wait", "1", "--json")
    assert res.code == 5
    doc = json.loads(res.out)
    assert doc["healthy"] is False and doc["tries"] > 1 and doc["waited_s"] >= 1
    (line,) = [x for x in res.err.splitlines() if x.startswith("Error: ")]
    assert line.startswith("Error: after ") and f"127.0.0.1:{port} unavailable" in line


def test_health_wait_must_be_seconds(cli):
    for bad in ("-1", "nan", "inf"):
        res = cli("health", "-t", "127.0.0.1:1", "--wait", bad)
        assert res.code == 2 and "--wait" in res.err, (bad, res.err)


def test_each_try_is_on_a_fresh_channel(monkeypatch):
    opened = []
    real = worker.health

    def counting(channel, target, timeout):
        opened.append(channel)
        return real(channel, target, timeout)

    monkeypatch.setattr(worker, "health", counting)
    with mmctl.Client(f"127.0.0.1:{_free_port()}") as client:
        answer = client.health(timeout=1, wait=0.5)
    assert not answer.serving and answer.tries == len(opened) > 1
    assert len({id(ch) for ch in opened}) == len(opened)
