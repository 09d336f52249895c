"""`mmctl batch` loses no data: one writer per OUT, never the input,
a failed write stops the run, no line aborts it, failed items retried, no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmctl.run_batch.output import OutputFile


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _dataset(path: Path, clip: Path, n: int, prefix: str = "n") -> Path:
    path.write_text(
        "".join(json.dumps({"id": f"{prefix}{i}", "media": [str(clip)]}) + "\n" for i in range(n))
    )
    return path


def _generate_calls(stub) -> int:
    return sum(" ok " in line for line in stub.log.getvalue().splitlines() if "Generate" in line)


def _mmctl(tmp_path: Path, *args, fsize: int | None = None) -> subprocess.Popen:
    """``mmctl batch ARGS`` in a process of its own; ``fsize``: its RLIMIT_FSIZE."""
    env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MMCTL_TARGET", None)
    argv = [sys.executable, "-m", "mmctl", "batch", *map(str, args)]
    if fsize is not None:  # set in a wrapper that execs: no fork of this (gRPC) process
        argv = [sys.executable, "-c", "import os, resource, sys; "
                f"resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, {fsize})); "
                "os.execv(sys.executable, sys.argv[1:])", *argv]  # fmt: skip
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _wait_for(predicate, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


# ---- OUT is never the input -------------------------------------------------


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
def test_the_input_as_output_is_refused_and_left_whole(cli, stub, red_blue, tmp_path, how):
    data = _dataset(tmp_path / "in.jsonl", red_blue, 3)
    before = data.read_bytes()
    out = {"same": data, "symlink": tmp_path / "link.jsonl", "hardlink": tmp_path / "hard.jsonl"}
    if how == "symlink":
        out[how].symlink_to(data)
    elif how == "hardlink":
        os.link(data, out[how])
    for flag in ("--overwrite", "--resume"):
        res = cli("batch", data, "-o", out[how], "-t", stub.running.address, flag)
        assert res.code == 2, res.err
        assert res.err.splitlines()[0].startswith(f"Error: -o {out[how]} is the input file")
        assert data.read_bytes() == before  # not truncated, nothing appended


# ---- one writer per OUT -----------------------------------------------------


def test_a_second_run_on_the_same_output_is_refused_naming_the_holder(
    cli, make_stub, red_blue, tmp_path
):
    slow = make_stub(delay_ms=40)
    data = _dataset(tmp_path / "in.jsonl", red_blue, 16)
    out = tmp_path / "out.jsonl"
    first = _mmctl(tmp_path, data, "-o", out, "-t", slow.running.address, "--workers", "1",
                   "--max-concurrency", "2")  # fmt: skip
    try:
        _wait_for(lambda: _count_lines(out) >= 2)
        for flags in ((), ("--resume",), ("--overwrite",)):
            res = cli("batch", data, "-o", out, "-t", slow.running.address, *flags)
            assert res.code == 2, res.err
            assert f"pid {first.pid}" in res.err.splitlines()[0], res.err
        _, stderr = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 0, stderr
    ids = [d["custom_id"] for d in _lines(out)]
    assert sorted(ids) == sorted(f"n{i}" for i in range(16))  # each once, every line whole
    assert not (tmp_path / "out.jsonl.lock").exists()  # the holder removed it


def test_a_stale_lock_file_of_a_killed_run_is_taken_over(cli, stub, red_blue, tmp_path):
    data = _dataset(tmp_path / "in.jsonl", red_blue, 2)
    (tmp_path / "out.jsonl.lock").write_text("999999999\n")  # nobody holds it
    res = cli("batch", data, "-o", tmp_path / "out.jsonl", "-t", stub.running.address,
              "--workers", "1")  # fmt: skip
    assert res.code == 0, res.err
    assert len(_lines(tmp_path / "out.jsonl")) == 2


@pytest.mark.parametrize("planted", ["symlink", "hardlink", "fifo"])
def test_a_planted_lock_is_refused_and_its_target_untouched(cli, stub, red_blue, tmp_path,
                                                            planted):  # fmt: skip
    data = _dataset(tmp_path / "in.jsonl", red_blue, 2)
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    lock = tmp_path / "out.jsonl.lock"
    if planted == "symlink":
        lock.symlink_to(victim)
    elif planted == "hardlink":
        os.link(victim, lock)
    else:
        os.mkfifo(lock)
    res = cli("batch", data, "-o", tmp_path / "out.jsonl", "-t", stub.running.address,
              "--workers", "1")  # fmt: skip
    assert res.code == 10, res.err
    (line,) = [x for x in res.err.splitlines() if x.startswith("Error: ")]
    assert str(lock) in line and "not the lock file mmctl makes" in line
    assert victim.read_text() == "keep me\n" and os.path.lexists(
        lock
    )  # neither written nor removed
    assert not (tmp_path / "out.jsonl").exists()


def test_the_lock_is_exclusive_within_one_process_too(tmp_path):
    out = tmp_path / "out.jsonl"
    held = OutputFile(out)
    try:
        with pytest.raises(Exception, match=f"pid {os.getpid()}"):
            OutputFile(out, resume=True)
    finally:
        held.close()
    OutputFile(out).close()  # free again


# ---- a write that fails stops the run ----------------------------------------


def test_dev_full_stops_at_the_first_line_with_exit_10(cli, stub, red_blue, tmp_path):
    data = _dataset(tmp_path / "in.jsonl", red_blue, 6)
    calls = _generate_calls(stub)
    res = cli("batch", data, "-o", "/dev/full", "-t", stub.running.address, "--workers", "1",
              "--max-concurrency", "1")  # fmt: skip
    assert res.code == 10, res.err
    errors = [line for line in res.err.splitlines() if line.startswith("Error:")]
    assert errors == [
        "Error: cannot write /dev/full: No space left on device (after 0 lines); "
        "the run stopped, nothing more was sent"
    ]
    assert "Traceback" not in res.err and "OSError" not in res.err
    assert _generate_calls(stub) - calls <= 2  # the first answer, at most one more in flight


def test_a_full_disk_mid_run_stops_it_then_resume_completes_without_duplicates(
    make_stub, red_blue, tmp_path
):
    """RLIMIT_FSIZE stands in for a full file system: a write over it fails
    with EFBIG after writing what fits (a torn line), as ENOSPC does."""
    slow = make_stub(delay_ms=10)
    warm = _dataset(tmp_path / "warm.jsonl", red_blue, 1, prefix="w")
    first = _mmctl(tmp_path, warm, "-o", tmp_path / "warm-out.jsonl", "-t", slow.running.address,
                   "--workers", "1")  # fmt: skip
    first.communicate(timeout=120)  # fills the model cache, so the limited run writes only OUT
    line = len((tmp_path / "warm-out.jsonl").read_bytes())
    data = _dataset(tmp_path / "in.jsonl", red_blue, 30)
    out = tmp_path / "out.jsonl"
    limit = int(line * 4.5)
    before = _generate_calls(slow)
    run = _mmctl(tmp_path, data, "-o", out, "-t", slow.running.address, "--workers", "1",
                 "--max-concurrency", "2", "--transport", "inline", fsize=limit)  # fmt: skip
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 10, stderr
    assert "Task exception" not in stderr and "Traceback" not in stderr
    assert [x for x in stderr.splitlines() if x.startswith("Error:")] == [
        f"Error: cannot write {out}: File too large (after 4 lines); "
        "the run stopped, nothing more was sent"
    ]
    raw = out.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 4  # cut back to the last whole line
    assert all(json.loads(x)["error"] is None for x in raw.splitlines())
    sent = _generate_calls(slow) - before
    assert sent <= 4 + 2 + 1  # written, in flight, the one that failed: not the other 24
    time.sleep(0.5)
    res = _mmctl(tmp_path, data, "-o", out, "-t", slow.running.address, "--workers", "1",
                 "--resume", "--json")  # fmt: skip
    stdout, stderr = res.communicate(timeout=120)
    assert res.returncode == 0, stderr
    assert json.loads(stdout)["skipped"] == 4
    ids = [d["custom_id"] for d in _lines(out)]
    assert sorted(ids) == sorted(f"n{i}" for i in range(30))


# ---- no input line aborts the run --------------------------------------------


def test_odd_lines_are_their_own_errors_and_the_rest_is_answered(cli, stub, red_blue, tmp_path):
    good = json.dumps({"id": "first", "media": [str(red_blue)]})
    data = tmp_path / "in.jsonl"
    data.write_bytes(
        b"\xef\xbb\xbf" + good.encode() + b"\n"  # a BOM before the first line
        + b"[" * 100_000 + b"]" * 100_000 + b"\n"  # nested 100,000 deep
        + json.dumps({"id": None, "media": [str(red_blue)]}).encode() + b"\n"
        + json.dumps({"custom_id": {"a": 1}, "body": {"messages": []}}).encode() + b"\n"
        + json.dumps({"id": 7, "media": [str(red_blue)]}).encode() + b"\n"
        + b'{"id": "latin1", "prompt": "caf\xe9"}\n'  # not UTF-8
        + json.dumps({"id": "last", "media": [str(red_blue)]}).encode() + b"\n"
    )  # fmt: skip
    out = tmp_path / "out.jsonl"
    res = cli("batch", data, "-o", out, "-t", stub.running.address, "--workers", "1", "--json")
    assert res.code == 7, res.err
    lines = {json.dumps(d["custom_id"]): d for d in _lines(out)}
    assert set(lines) == {'"first"', '"line-2"', "null", '{"a": 1}', "7", '"line-6"', '"last"'}
    assert lines['"first"']["error"] is None and lines['"last"']["error"] is None
    assert lines['"line-2"']["error"]["code"] == "invalid_line"
    assert "nested too deep" in lines['"line-2"']["error"]["message"]
    for key in ("null", '{"a": 1}', "7"):
        assert lines[key]["error"]["code"] == "invalid_id", lines[key]
    assert "not UTF-8" in lines['"line-6"']["error"]["message"]
    assert json.loads(res.out)["in_output"] == {"answered": 2, "failed": 5}


# ---- --resume and failed items --------------------------------------------------


def test_resume_retries_failed_items_and_the_exit_code_follows_out(cli, stub, red_blue, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text(
        json.dumps({"id": "ok", "media": [str(red_blue)]})
        + "\n"
        + json.dumps({"id": "later", "media": ["later.mp4"]})
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    args = ("-t", stub.running.address, "--workers", "1", "--json")
    assert cli("batch", data, "-o", out, *args).code == 7
    (tmp_path / "later.mp4").write_bytes(red_blue.read_bytes())  # the cause is fixed
    kept = cli("batch", data, "-o", out, *args, "--resume", "--keep-failed")
    assert kept.code == 7, kept.err  # OUT still holds the error line
    assert kept.json()["kept_failed"] == 1 and kept.json()["succeeded"] == 0
    res = cli("batch", data, "-o", out, *args, "--resume")
    assert res.code == 0, res.err
    counts = res.json()
    assert (counts["retried"], counts["succeeded"], counts["skipped"]) == (1, 1, 1)
    lines = _lines(out)
    assert sorted(d["custom_id"] for d in lines) == ["later", "ok"]  # the error line is gone
    assert all(d["error"] is None for d in lines)


def test_resume_cuts_a_torn_last_line(cli, stub, red_blue, tmp_path):
    data = _dataset(tmp_path / "in.jsonl", red_blue, 3)
    out = tmp_path / "out.jsonl"
    args = ("-t", stub.running.address, "--workers", "1", "--json")
    assert cli("batch", data, "-o", out, *args).code == 0
    raw = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(raw[0] + raw[1] + raw[2][: len(raw[2]) // 2])  # killed mid-write
    res = cli("batch", data, "-o", out, *args, "--resume")
    assert res.code == 0, res.err
    assert res.json()["skipped"] == 2
    assert sorted(d["custom_id"] for d in _lines(out)) == ["n0", "n1", "n2"]


# ---- children die with their parent ---------------------------------------------


def _children(pid: int) -> list[int]:
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")[:200]
    except OSError:
        return "?"


def _semaphores(pid: int) -> set[int]:
    """Inodes of the /dev/shm files ``pid`` maps: its semaphores. (Not names:
    glibc maps a semaphore under a temporary name, since deleted.)"""
    dev = os.stat("/dev/shm").st_dev
    device = f"{os.major(dev):02x}:{os.minor(dev):02x}"
    fields = [line.split(None, 5) for line in Path(f"/proc/{pid}/maps").read_text().splitlines()]
    return {int(f[4]) for f in fields if len(f) >= 5 and f[3] == device}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_a_batch_leaves_no_pool_process_and_no_semaphore(make_stub, red_blue, tmp_path):
    slow = make_stub(delay_ms=40)
    data = _dataset(tmp_path / "in.jsonl", red_blue, 40)
    out = tmp_path / "out.jsonl"
    run = _mmctl(tmp_path, data, "-o", out, "-t", slow.running.address, "--workers", "2")
    try:
        _wait_for(lambda: _count_lines(out) >= 2)
        kids = _children(run.pid)
        sems = _semaphores(run.pid)
        named = {e.inode() for e in os.scandir("/dev/shm") if e.name.startswith("sem.mp-")}
        assert len(kids) >= 3 and sems & named  # two pool processes, the resource tracker
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.1)
    assert not [k for k in kids if _alive(k)]
    left = [e.name for e in os.scandir("/dev/shm") if e.name.startswith("sem.mp-")
            and e.inode() in sems]  # fmt: skip
    assert not left


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_a_ray_batch_leaves_no_ray_process(make_stub, red_blue, tmp_path):
    """Ray's dashboard and runtime-env agents outlived a killed batch by 30 s
    and more; the reaper kills what the batch started. Killed once Ray's
    agents run (start-up is slow; the reaper covers it too)."""
    pytest.importorskip("ray.data")
    slow = make_stub(delay_ms=200)
    data = _dataset(tmp_path / "in.jsonl", red_blue, 8)
    run = _mmctl(tmp_path, data, "-o", tmp_path / "out.jsonl", "-t", slow.running.address,
                 "--workers", "1", "--engine", "ray")  # fmt: skip
    from mmctl.run_batch.children import descendants

    def agents() -> dict[int, str]:
        return {
            pid: Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            for pid in descendants(run.pid)
            if Path(f"/proc/{pid}/cmdline").exists()
        }

    try:
        _wait_for(lambda: any("Agent" in c for c in agents().values()), seconds=240)
        time.sleep(1.5)  # the reaper looks twice a second
        started = [pid for pid, cmd in agents().items() if "mmctl.run_batch.children" not in cmd]
        assert len(started) >= 3  # GCS, raylet, agents
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(p) for p in started):
        time.sleep(0.2)
    left = {p: _cmdline(p) for p in started if _alive(p)}
    assert not left


def test_ray_address_without_a_cluster_is_exit_5_in_mmctls_words(cli, stub, red_blue, tmp_path,
                                                                 monkeypatch):  # fmt: skip
    pytest.importorskip("ray.data")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    data = _dataset(tmp_path / "in.jsonl", red_blue, 1)
    res = cli("batch", data, "-o", tmp_path / "out.jsonl", "-t", stub.running.address,
              "--engine", "ray", "--ray-address", "auto")  # fmt: skip
    assert res.code == 5, res.err
    first = res.err.splitlines()[0]
    assert first.startswith("Error: --ray-address auto: no Ray cluster answers there")
    assert "unexpected" not in res.err and "Traceback" not in res.err
    assert not (tmp_path / "out.jsonl").exists()  # a run that wrote nothing leaves no file


def test_ray_address_without_the_ray_engine_is_refused(cli, stub, red_blue, tmp_path):
    data = _dataset(tmp_path / "in.jsonl", red_blue, 1)
    res = cli("batch", data, "-o", tmp_path / "out.jsonl", "-t", stub.running.address,
              "--ray-address", "auto")  # fmt: skip
    assert res.code == 2
    assert res.err.splitlines()[0] == "Error: --ray-address needs --engine ray"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_shm_gc_removes_pool_semaphores_no_process_maps(cli, tmp_path, monkeypatch):
    import mmap

    monkeypatch.setenv("MMCTL_SHM_DIR", str(tmp_path))
    for name in ("sem.mp-dead", "sem.mp-live", "sem.other"):
        (tmp_path / name).write_bytes(b"\0" * 32)
    with (tmp_path / "sem.mp-live").open("r+b") as f, mmap.mmap(f.fileno(), 32):
        dry = cli("shm", "gc", "--dry-run", "--json").json()
        assert dry["semaphores"] == [
            {"name": "sem.mp-dead", "in_use": False},
            {"name": "sem.mp-live", "in_use": True},  # this process maps it
        ]
        assert dry["semaphores_removed"] == [] and (tmp_path / "sem.mp-dead").exists()
        res = cli("shm", "gc", "--json").json()
        assert res["semaphores_removed"] == ["sem.mp-dead"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sem.mp-live", "sem.other"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_shm_gc_keeps_a_live_pools_semaphores(cli):
    # glibc maps a semaphore under a temporary name and links it after: in
    # /proc/PID/maps a live one reads "/dev/shm/sem.XXXXXX (deleted)". Judged by
    # name, gc took every running pool's semaphores (its finalizer's sem_unlink
    # then failed: FileNotFoundError, a PytestUnraisableExceptionWarning).
    import multiprocessing

    lock = multiprocessing.get_context("spawn").Lock()
    name = "sem." + lock._semlock.name.lstrip("/")
    listed = cli("shm", "gc", "--dry-run", "--json").json()  # the real /dev/shm: look only
    assert {"name": name, "in_use": True} in listed["semaphores"]
    del lock


def _line(custom_id, ok=True) -> str:
    error = None if ok else {"code": "invalid_input", "message": "x"}
    return json.dumps({"id": "l", "custom_id": custom_id, "response": {}, "error": error}) + "\n"


def test_resume_drops_error_lines_through_a_rename_and_keeps_the_order(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text(_line("a") + _line("b", ok=False) + _line("c") + _line(None, ok=False) + '{"cu')
    (tmp_path / "out.jsonl.resume-part").write_text("left by a killed rewrite")
    kept = OutputFile(out, resume=True, keep_failed=True)
    kept.close()
    assert kept.kept_failed == {"b", "\0null"} and kept.retried == 0
    assert out.read_text().count("\n") == 4  # only the torn tail cut
    retry = OutputFile(out, resume=True)
    try:
        assert retry.done == {"a", "c"} and retry.retried == 2
        retry.write({"custom_id": "b", "error": None})
    finally:
        retry.close()
    assert [d["custom_id"] for d in _lines(out)] == ["a", "c", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no part, no lock


def test_a_device_is_written_as_it_is_and_cannot_be_resumed(tmp_path):
    with pytest.raises(Exception, match="not a regular file"):
        OutputFile(Path("/dev/null"), resume=True)
    out = OutputFile(Path("/dev/null"))
    out.write({"custom_id": "a", "error": None})
    out.close()
    assert out.lines == 1


def test_a_foreign_file_is_refused_by_resume_with_exit_3(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text("not json\n")
    with pytest.raises(Exception, match="not a batch output line") as err:
        OutputFile(out, resume=True)
    assert err.value.exit_code == 3
    assert out.read_text() == "not json\n"


def test_an_id_again_after_its_answer_is_written_is_a_duplicate_not_done(tmp_path):
    """The engines read the input as they go: a line whose id this run already
    answered (OUT holds it now) gets its duplicate_id line, as one read sooner does."""
    from mmctl.dataset import Entry, Item
    from mmctl.run_batch import output
    from mmctl.run_batch.local import Tally, skip_done, write_entry_error

    out = OutputFile(tmp_path / "out.jsonl")
    try:
        tally, seen = Tally(), set[str]()
        first, again = (Entry(n, "a", Item("a", "?", [])) for n in (1, 2))
        assert not skip_done(out, first, tally, seen)
        assert not write_entry_error(out, first, tally, seen)  # to be sent
        out.write(output.error_line("a", "check_failed", "its answer, written"))
        assert not skip_done(out, again, tally, seen)
        assert write_entry_error(out, again, tally, seen)
        assert tally.skipped == 0 and tally.errors == {"duplicate_id": 1}
    finally:
        out.close()
