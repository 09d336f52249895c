"""The stub worker the bench scripts measure against: its own process, a free port."""

from __future__ import annotations

import json
import subprocess
import sys


def stub_worker() -> tuple[subprocess.Popen[str], str]:
    """``mmctl stub-worker --port 0`` started; (the process, its address)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "stub-worker", "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["address"]
