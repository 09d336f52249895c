"""This process's /dev/shm files are the ones its arenas made and have not
removed — never a name that merely carries its PID (another PID namespace's
process may have the same number), never another process's."""

from __future__ import annotations

import os

import numpy as np

from mmctl.transport.shm import ShmArena, own_files


def test_own_files_are_what_this_process_made(tmp_path):
    impostor = tmp_path / f"mmctl-{os.getpid()}-1-deadbeef"  # our PID, not our file
    impostor.write_bytes(b"x")
    (tmp_path / "mmctl-1-1-cafe0000").write_bytes(b"x")
    with ShmArena(tmp_path) as arena:
        kept = arena.put(np.zeros(8, np.uint8))
        consumed = arena.put(np.ones(8, np.uint8))
        consumed.path.unlink()  # a worker read it
        assert own_files(tmp_path) == [kept.name]
    assert own_files(tmp_path) == []
    assert impostor.exists()


def test_the_stop_watchdog_removes_only_its_own_files(tmp_path, monkeypatch):
    from mmctl import signals

    monkeypatch.setenv("MMCTL_SHM_DIR", str(tmp_path))
    impostor = tmp_path / f"mmctl-{os.getpid()}-9-deadbeef"
    impostor.write_bytes(b"x")
    arena = ShmArena(tmp_path)
    mine = arena.put(np.zeros(8, np.uint8))
    signals._remove_own_shm_files()  # what a stop whose clean-up hangs runs last
    assert not mine.path.exists() and impostor.exists()
    arena.close()


def test_a_forked_child_owns_none_of_its_parents_files(tmp_path):
    with ShmArena(tmp_path) as arena:
        arena.put(np.zeros(8, np.uint8))
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write, str(len(own_files(tmp_path))).encode())
            os._exit(0)
        os.close(write)
        seen = os.read(read, 16)
        os.close(read)
        os.waitpid(pid, 0)
        assert seen == b"0" and len(own_files(tmp_path)) == 1
