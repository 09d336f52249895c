"""Ownership of /dev/shm files across PID namespaces (``unshare --pid``, as root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from mmctl.transport.shm import ShmArena, leftovers, sweep_dead

needs_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for a second PID namespace",
)

HOLDER = textwrap.dedent(
    """
    import sys, numpy as np
    from pathlib import Path
    from mmctl.transport.shm import ShmArena
    with ShmArena(Path(sys.argv[1])) as arena:
        seg = arena.put(np.arange(1000, dtype=np.float32))
        print(seg.name, flush=True)
        sys.stdin.readline()  # hold the file until told to go
    """
)


def _in_new_pid_namespace(*argv: str) -> list[str]:
    # --kill-child: killing unshare kills the namespace's PID 1 (our holder) too
    return ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *argv]


def _holder(folder: Path, *, isolated: bool) -> tuple[subprocess.Popen, str]:
    argv = [sys.executable, "-c", HOLDER, str(folder)]
    proc = subprocess.Popen(
        _in_new_pid_namespace(*argv) if isolated else argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _gc_elsewhere(folder: Path) -> dict:
    env = {**os.environ, "MMCTL_SHM_DIR": str(folder)}
    argv = _in_new_pid_namespace(sys.executable, "-m", "mmctl", "shm", "gc", "--json")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_unshare
def test_a_sweep_in_another_pid_namespace_keeps_a_live_clients_files(tmp_path):
    proc, name = _holder(tmp_path, isolated=False)
    try:
        doc = _gc_elsewhere(tmp_path)
        assert doc["removed"] == []
        assert [(f["name"], f["alive"]) for f in doc["files"]] == [(name, True)]
        assert (tmp_path / name).exists()
    finally:
        proc.communicate("\n", timeout=30)
    assert proc.returncode == 0 and not (tmp_path / name).exists()  # removed by its owner


@needs_unshare
def test_files_of_a_live_client_in_another_namespace_are_kept_here(tmp_path):
    proc, name = _holder(tmp_path, isolated=True)
    try:
        assert name.startswith("mmctl-1-")  # PID 1 over there; a different process here
        assert sweep_dead(tmp_path) == [] and (tmp_path / name).exists()
    finally:
        proc.communicate("\n", timeout=30)


@needs_unshare
def test_a_dead_clients_file_is_removed_whatever_its_pid_names_here(tmp_path):
    proc, name = _holder(tmp_path, isolated=True)
    proc.kill()  # SIGKILL to unshare: the namespace's init dies, the holder with it
    proc.wait(timeout=30)
    # The holder was killed before its arena closed: its file is left over.
    # Its PID (1) is alive in this namespace (our init), which the old PID
    # rule read as "in use" forever.
    deadline = time.monotonic() + 10
    while sweep_dead(tmp_path) != [name] and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel drops the lock as the holder's files close
    assert not (tmp_path / name).exists()


def test_the_owner_lock_is_held_from_creation_to_close(tmp_path):
    with ShmArena(tmp_path) as arena:
        mapped = arena.create(64)
        written = arena.put(np.ones(8, np.uint8))
        assert {(i.name, i.alive) for i in leftovers(tmp_path)} == {
            (mapped.name, True),
            (written.name, True),
        }
        assert sweep_dead(tmp_path) == []
    assert list(leftovers(tmp_path)) == []


def test_files_that_are_not_ours_to_judge_are_kept(tmp_path):
    os.mkfifo(tmp_path / "mmctl-77-1-abcdef01")  # not a regular file
    (tmp_path / "other-tool-file").write_bytes(b"x")  # not an mmctl name
    assert sweep_dead(tmp_path) == []
    assert (tmp_path / "mmctl-77-1-abcdef01").exists() and (tmp_path / "other-tool-file").exists()


def test_a_closed_arena_creates_nothing(tmp_path):
    """A request cancelled while a helper thread builds it closes its arena;
    a file the thread asks for afterwards is refused, not leaked."""
    from mmctl.transport.shm import ShmUnavailable

    arena = ShmArena(tmp_path)
    arena.put(np.ones(8, np.uint8))
    assert len(arena.close()) == 1
    with pytest.raises(ShmUnavailable, match="already released"):
        arena.put(np.ones(8, np.uint8))
    assert list(tmp_path.iterdir()) == []
