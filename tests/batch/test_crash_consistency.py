"""Crash consistency, tested the way a database tests its journal: fifty
``mmctl batch --resume`` runs killed with SIGKILL at random points, then one
that finishes. Every id ends up exactly once, every line is valid JSON, and
no answered item is sent again (its line never changes once written).

Kill points: one run in five is killed at a random moment of its start-up;
the others once they have written a line, after a random 0–200 ms (mid-run,
items in flight). A kill lands inside a ``write`` too rarely to count on, so
after one kill in three the test leaves what such a kill leaves: a random
prefix of a line at the end of the file. Runs are forked from one process
that has imported mmctl (``_zygote.py``): fifty interpreter start-ups would
take most of the time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RUNS = int(os.environ.get("MMCTL_CRASH_RUNS", "50"))
#: Items in the input at first; more are appended whenever fewer than
#: ``SPARE`` are left, so that a fast machine does not run out of work to kill.
ITEMS = 200
SPARE = 60


class Zygote:
    def __init__(self, env: dict[str, str], model_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("_zygote.py")), str(model_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert self._read() == "ready"

    def _read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def _say(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._read()

    def run(self, argv: list[str]) -> int:
        return int(self._say("run " + json.dumps(argv)))

    def wait(self, pid: int) -> int:
        return int(self._say(f"wait {pid}"))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)


def _builtin_model_dir(folder: Path) -> Path:
    """The stub's built-in model as one folder (links to its files)."""
    from mmctl.checkpoint.source import builtin

    folder.mkdir()
    for source in builtin().folders:
        for f in source.iterdir():
            if f.is_file() and not (folder / f.name).exists():
                (folder / f.name).symlink_to(f)
    return folder


def _exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, /proc")
def test_random_sigkills_then_resume_leave_every_id_once_and_resend_nothing(
    make_stub, red_blue, tmp_path
):
    rng = random.Random(27)
    stub = make_stub(delay_ms=15)
    data = tmp_path / "in.jsonl"
    items = 0

    def add(n: int) -> None:
        nonlocal items
        with data.open("a") as f:
            for i in range(items, items + n):
                f.write(json.dumps({"id": f"n{i}", "media": [str(red_blue)]}) + "\n")
        items += n

    add(ITEMS)
    out = tmp_path / "out.jsonl"
    model_dir = _builtin_model_dir(tmp_path / "model")
    argv = ["batch", str(data), "-o", str(out), "-t", stub.running.address, "--resume",
            "--workers", "1", "--max-concurrency", "4", "--transport", "inline",
            "--model-dir", str(model_dir)]  # fmt: skip
    env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MMCTL_TARGET", None)
    zygote = Zygote(env, model_dir)
    first_line: dict[str, bytes] = {}  # each id's line as first written
    startup = 3.0  # seconds to a first line; learned as the runs go
    kills = torn = 0
    began = time.monotonic()
    try:
        for _ in range(RUNS):
            before = _count(out)
            start = time.monotonic()
            pid = zygote.run(argv)
            if rng.random() < 0.2:  # somewhere in start-up
                deadline = start + rng.uniform(0, startup)
                while time.monotonic() < deadline and not _exited(pid):
                    time.sleep(0.005)
            else:  # mid-run: after a line, a random moment later
                limit = start + 60
                while _count(out) <= before and not _exited(pid) and time.monotonic() < limit:
                    time.sleep(0.005)
                startup = 0.8 * startup + 0.2 * (time.monotonic() - start)
                time.sleep(rng.uniform(0, 0.2))
            if not _exited(pid):
                os.kill(pid, signal.SIGKILL)
                kills += 1
            zygote.wait(pid)
            raw = out.read_bytes() if out.exists() else b""
            whole = raw[: raw.rfind(b"\n") + 1]
            for line in whole.splitlines():
                doc = json.loads(line)  # every complete line is JSON
                key = doc["custom_id"]
                assert first_line.setdefault(key, line) == line, f"{key} was written again"
            if raw and rng.random() < 1 / 3:  # what a kill inside write() leaves
                cut = rng.randrange(1, len(whole.splitlines()[-1]) if whole else 2)
                with out.open("ab") as f:
                    f.write((whole.splitlines()[-1] if whole else b'{"custom_id"')[:cut])
                torn += 1
            if len(first_line) > items - SPARE:
                add(ITEMS // 2)
        res = subprocess.run(
            [sys.executable, "-m", "mmctl", *argv, "--json"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
    finally:
        zygote.close()
    assert res.returncode == 0, res.stderr
    lines = out.read_bytes().splitlines()
    docs = [json.loads(line) for line in lines]
    ids = [d["custom_id"] for d in docs]
    assert sorted(ids) == sorted(f"n{i}" for i in range(items))  # each exactly once
    assert all(d["error"] is None for d in docs)
    for line, doc in zip(lines, docs, strict=True):
        if doc["custom_id"] in first_line:
            assert first_line[doc["custom_id"]] == line  # never sent (or written) again
    assert not (tmp_path / "out.jsonl.lock").exists()
    print(f"{RUNS} runs, {kills} killed, {torn} torn tails, {len(first_line)} ids written "
          f"before the last run, {time.monotonic() - began:.0f} s")  # fmt: skip
    assert kills >= RUNS * 0.9  # runs were killed, not finished
