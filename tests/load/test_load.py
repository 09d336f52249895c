"""1,000 video requests at concurrency 32 against a stub worker process, in CI:
0 errors, every answer right, fds and /dev/shm
unchanged, peak RSS within its bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REQUESTS, CONCURRENCY = 1000, 32
#: Each request in flight holds its serialized bytes (1.2 MB: a 4 s 128x96
#: clip, float32), its arrays and gRPC's buffers — about 3x that — so 32 in
#: flight may add ~115 MB to the warm client; 150 MB leaves room for the
#: allocator's slack.
RSS_GROWTH_BOUND_MB = 150
ROOT = Path(__file__).resolve().parents[2]


def _proc_status(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return int(next(x for x in status if x.startswith(key)).split()[1]) // 1024


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts fds in /proc")
def test_a_thousand_requests_at_concurrency_32(tmp_path):
    stub = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "stub-worker", "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert stub.stdout is not None
        address = json.loads(stub.stdout.readline())["address"]
        stub_fds = len(os.listdir(f"/proc/{stub.pid}/fd"))
        env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path / "cache")}
        argv = [sys.executable, "-m", "tests.load.load_run", address, str(tmp_path),
                "--requests", str(REQUESTS), "--concurrency", str(CONCURRENCY)]  # fmt: skip
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        stub_fds_after = len(os.listdir(f"/proc/{stub.pid}/fd"))
        stub_peak = _proc_status(stub.pid, "VmHWM:")
    finally:
        stub.terminate()
        stub.wait(30)
    print(
        f"\nload: {doc['requests']} requests at concurrency {doc['concurrency']} in "
        f"{doc['seconds']} s, {doc['error_count']} errors, {doc['wrong_count']} wrong; "
        f"client fds {doc['fds']}, shm files {doc['shm_files']}, RSS {doc['rss_warm_mb']} MB "
        f"warm -> {doc['peak_rss_mb']} MB peak (bound +{RSS_GROWTH_BOUND_MB}); "
        f"stub fds {stub_fds} -> {stub_fds_after}, stub peak RSS {stub_peak} MB"
    )
    assert doc["error_count"] == 0, doc["errors"]
    assert doc["wrong_count"] == 0, doc["wrong"]
    assert doc["fds"][1] <= doc["fds"][0] and doc["shm_files"] == [0, 0]
    assert stub_fds_after <= stub_fds + 2  # its listening socket's accepted connection
    assert doc["peak_rss_mb"] - doc["rss_warm_mb"] <= RSS_GROWTH_BOUND_MB
