"""`mmctl batch` against stub workers: both formats, per-line errors, resume, failover, Ray."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import mmctl


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _answers(path):
    """custom_id → answer text, or the error code."""
    out = {}
    for doc in _lines(path):
        if doc["error"] is None:
            out[doc["custom_id"]] = doc["response"]["body"]["choices"][0]["message"]["content"]
        else:
            out[doc["custom_id"]] = "error:" + doc["error"]["code"]
    return out


def _chat(custom_id, url, text="Which colours?", **body):
    content = [{"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": text}]
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "qwen", "messages": [{"role": "user", "content": content}], **body},
    }


@pytest.fixture
def mixed(tmp_path, red_blue):
    """Two good short-form items, two OpenAI lines (one with max_tokens 2, one a
    data: URL), and five that must fail: a missing file, a text file named
    .mp4, three videos (the stub allows 2), malformed JSON, an unknown field."""
    (tmp_path / "clip.mp4").write_bytes(red_blue.read_bytes())
    (tmp_path / "notes.mp4").write_text("not a video at all")
    data_url = "data:video/mp4;base64," + base64.b64encode(red_blue.read_bytes()).decode()
    lines = [
        json.dumps({"id": "short", "prompt": "Which colours?", "media": ["clip.mp4"]}),
        json.dumps(_chat("chat", "clip.mp4", max_tokens=2)),
        json.dumps({"id": "missing", "media": ["nowhere.mp4"]}),
        json.dumps({"id": "text-as-mp4", "media": ["notes.mp4"]}),
        json.dumps({"id": "too-many", "media": ["clip.mp4"] * 3}),
        '{"id": "broken", "media": [',
        json.dumps({"custom_id": "logprobs", "body": {"messages": [], "logprobs": True}}),
        json.dumps(_chat("inline-data", data_url)),
        json.dumps({"id": "absolute", "media": [str(tmp_path / "clip.mp4")]}),
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


EXPECTED = {
    "short": "red, blue",
    "chat": "red,",
    "inline-data": "red, blue",
    "absolute": "red, blue",
    "missing": "error:invalid_input",
    "text-as-mp4": "error:invalid_input",
    "too-many": "error:invalid_input",
    "line-6": "error:invalid_line",
    "logprobs": "error:invalid_line",
}


def test_both_formats_and_exactly_the_bad_lines_fail(cli, stub, mixed, tmp_path, no_leaks):
    out = tmp_path / "out.jsonl"
    res = cli("batch", mixed, "-o", out, "-t", stub.running.address, "--workers", "2", "--json")
    assert res.code == 7, res.err  # some failed
    assert _answers(out) == EXPECTED
    counts = json.loads(res.out)
    assert (counts["total"], counts["succeeded"], counts["failed"]) == (9, 4, 5)
    good = next(d for d in _lines(out) if d["custom_id"] == "short")
    assert good["response"]["status_code"] == 200
    assert good["response"]["body"]["object"] == "chat.completion"
    assert good["response"]["body"]["usage"]["completion_tokens"] == 4
    assert good["mmctl"]["transport"] == "shm" and good["mmctl"]["worker"] == stub.running.address
    bad = next(d for d in _lines(out) if d["custom_id"] == "too-many")
    assert bad["response"]["status_code"] == 400 and "allows 2" in bad["error"]["message"]
    assert "5 of 9 items failed" in res.err


def test_output_that_holds_results_needs_resume_or_overwrite(cli, stub, mixed, tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text('{"custom_id": "x"}\n')
    res = cli("batch", mixed, "-o", out, "-t", stub.running.address)
    assert res.code == 2 and "--resume" in res.err


def test_all_succeeded_and_the_python_api(stub, red_blue, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"n{i}", "media": [str(red_blue)]}) + "\n" for i in range(6))
    )
    counts = mmctl.batch(data, tmp_path / "out.jsonl", targets=stub.running.address, workers=1)
    assert (counts.succeeded, counts.failed, counts.skipped) == (6, 0, 0)
    assert set(_answers(tmp_path / "out.jsonl").values()) == {"red, blue"}
    again = mmctl.batch(
        data, tmp_path / "out.jsonl", targets=stub.running.address, workers=1, resume=True
    )
    assert (again.succeeded, again.skipped) == (0, 6)


def _generate_calls(stub) -> int:
    return sum(" ok " in line for line in stub.log.getvalue().splitlines() if "Generate" in line)


def test_resume_after_a_killed_run_sends_no_answered_item_again(make_stub, red_blue, tmp_path):
    slow = make_stub(delay_ms=40)  # ~0.2 s an item: the kill lands mid-run
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"n{i}", "media": [str(red_blue)]}) + "\n" for i in range(12))
    )
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "batch", str(data), "-o", str(out), "-t",
         slow.running.address, "--workers", "1", "--max-concurrency", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(_lines(out)) < 4):
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.wait(10)
    time.sleep(1)  # anything in flight at the kill reaches the stub's log now
    answered = {d["custom_id"] for d in _lines(out)}
    assert 4 <= len(answered) < 12
    before = _generate_calls(slow)
    res = subprocess.run(
        [sys.executable, "-m", "mmctl", "batch", str(data), "-o", str(out), "-t",
         slow.running.address, "--workers", "1", "--resume", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    counts = json.loads(res.stdout)
    assert counts["skipped"] == len(answered) and counts["succeeded"] == 12 - len(answered)
    assert _generate_calls(slow) - before == 12 - len(answered)  # nothing answered is resent
    ids = [d["custom_id"] for d in _lines(out)]
    assert sorted(ids) == sorted(f"n{i}" for i in range(12))  # each once


def test_a_worker_stopping_mid_run_loses_no_item(cli, make_stub, red_blue, tmp_path, no_leaks):
    first, second = make_stub(delay_ms=20), make_stub(delay_ms=20)
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"n{i}", "media": [str(red_blue)]}) + "\n" for i in range(16))
    )
    out = tmp_path / "out.jsonl"

    def stop_second_when_started() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or len(_lines(out)) < 3):
            time.sleep(0.02)
        second.running.stop(grace=0)

    stopper = threading.Thread(target=stop_second_when_started)
    stopper.start()
    targets = f"{first.running.address},{second.running.address}"
    res = cli("batch", data, "-o", out, "-t", targets, "--workers", "2", "--max-concurrency",
              "4", "--json")  # fmt: skip
    stopper.join()
    assert res.code == 0, res.err
    lines = _lines(out)
    assert sorted(d["custom_id"] for d in lines) == sorted(f"n{i}" for i in range(16))
    assert all(d["error"] is None for d in lines)
    workers = {d["mmctl"]["worker"] for d in lines}
    assert workers == {first.running.address, second.running.address}
    late = [d for d in lines if d["mmctl"]["worker"] == first.running.address]
    assert len(late) > 8  # the second one's share went to the first
    assert f"Warning: {second.running.address} stopped answering" in res.err
    by_target = json.loads(res.out)["by_target"]
    assert by_target[first.running.address]["answered"] == len(late)


def test_the_ray_engine_gives_the_local_answers(cli, stub, mixed, tmp_path, no_leaks):
    local, ray_out = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    args = ("-t", stub.running.address, "--workers", "2", "--json")
    assert cli("batch", mixed, "-o", local, *args).code == 7
    res = cli("batch", mixed, "-o", ray_out, "--engine", "ray", *args)
    assert res.code == 7, res.err
    assert _answers(ray_out) == _answers(local) == EXPECTED
    assert json.loads(res.out)["startup_s"] > 0


def test_the_ray_engine_without_ray_says_how_to_install_it(cli, stub, mixed, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    res = cli("batch", mixed, "-o", tmp_path / "o.jsonl", "-t", stub.running.address,
              "--engine", "ray")  # fmt: skip
    assert res.code == 2
    assert res.err.splitlines() == [
        "Error: --engine ray needs Ray",
        "Hint: pip install 'mmctl[ray]'",
    ]


def test_what_a_person_sees(terminal, stub, red_blue, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"n{i}", "media": [str(red_blue)]}) + "\n" for i in range(4))
    )
    screen = terminal("batch", data, "-o", tmp_path / "out.jsonl", "-t", stub.running.address,
                      "--workers", "1")  # fmt: skip
    assert screen.code == 0, screen.text
    # The summary names OUT, whose length is the temp folder's: it may wrap.
    assert any(x.startswith("4 items: 4 answered, 0 failed") for x in screen.text.splitlines())
    assert "/s, " not in screen.text  # the progress bar (its rate) cleared itself
    assert b"probing the workers" in screen.raw  # the set-up's status line ran…
    assert "probing the workers" not in screen.text  # …and left no trace


def test_ctrl_c_finishes_the_items_in_flight_and_keeps_them(make_stub, red_blue, tmp_path):
    slow = make_stub(delay_ms=40)
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"n{i}", "media": [str(red_blue)]}) + "\n" for i in range(30))
    )
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "batch", str(data), "-o", str(out), "-t",
         slow.running.address, "--workers", "1", "--max-concurrency", "2", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(_lines(out)) < 3):
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 130, stderr
    counts = json.loads(stdout)
    lines = _lines(out)
    assert counts["interrupted_by"] == "SIGINT" and counts["succeeded"] == len(lines) < 30
    assert all(d["error"] is None for d in lines)  # in-flight items finished, not cut
    assert counts["not_started"] == 30 - len(lines)
    assert f"{30 - len(lines)} of 30 items not started" in stderr and "--resume continues" in stderr
    assert not [p for p in os.listdir("/dev/shm") if p.startswith(f"mmctl-{run.pid}-")]


def test_a_target_that_never_answers_is_named_and_counted(cli, stub, red_blue, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"n{i}", "media": [str(red_blue)]}) + "\n" for i in range(4))
    )
    targets = f"127.0.0.1:1,{stub.running.address}"
    res = cli("batch", data, "-o", tmp_path / "out.jsonl", "-t", targets, "--workers", "1",
              "--json")  # fmt: skip
    assert res.code == 0, res.err
    assert res.err.startswith("Warning: 127.0.0.1:1 does not answer")
    assert json.loads(res.out)["by_target"] == {
        "127.0.0.1:1": {"answered": 0, "failed": 0},
        stub.running.address: {"answered": 4, "failed": 0},
    }
    human = cli("batch", data, "-o", tmp_path / "again.jsonl", "-t", targets, "--workers", "1")
    assert human.out == ""  # the product is the output file; the summary is stderr's
    assert "  127.0.0.1:1: 0 answered, 0 failed" in human.err.splitlines()


def test_vllm_run_batch_spellings(cli, stub, red_blue, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "media": [str(red_blue)]}) + "\n")
    out = tmp_path / "out.jsonl"
    res = cli("batch", "-i", data, "--output-file", out, "-t", stub.running.address,
              "--workers", "1")  # fmt: skip
    assert res.code == 0, res.err
    assert _answers(out) == {"a": "red, blue"}
    both = cli("batch", data, "-i", tmp_path / "other.jsonl", "-o", out)
    assert both.code == 2 and "give the input once" in both.err
    assert cli("batch", "-o", out).code == 2
    assert cli("batch", data, "-o", out, "--keep-failed").code == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="wait4's peak RSS")
def test_a_50_mb_prompt_line_is_its_own_error_in_seconds_and_bounded_memory(stub, red_blue,
                                                                             tmp_path):  # fmt: skip
    # It was tokenized and sent: 102-131 s, 3.7-6.2 GB peak, exit 0. Refused from
    # its length now (the stub serves a 262,144-token context).
    data = tmp_path / "in.jsonl"
    big = "hello world " * (50_000_000 // 12)
    with data.open("w") as f:
        for i, prompt in enumerate(["Which colours?", big, "Which colours?"]):
            f.write(json.dumps({"id": f"n{i}", "prompt": prompt, "media": [str(red_blue)]}) + "\n")
    del big
    out = tmp_path / "out.jsonl"
    run = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "batch", str(data), "-o", str(out), "-t",
         stub.running.address, "--workers", "1", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "MMCTL_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    deadline = time.monotonic() + 30  # the bound asked for
    peak_kib = 0  # VmHWM: ru_maxrss would carry this test process's peak over fork and exec
    while run.poll() is None:
        if time.monotonic() > deadline:
            run.kill()
            pytest.fail("the 50 MB prompt line was not answered within 30 s")
        peak_kib = max([peak_kib, *map(_peak_kib, [run.pid, *_children_of(run.pid)])])
        time.sleep(0.05)
    stderr = run.stderr.read().decode()
    run.stdout.close()
    run.stderr.close()
    assert run.returncode == 7, stderr
    assert 0 < peak_kib < 1.5 * 2**20  # 1.5 GB, the batch process and its pool alike
    answers = _answers(out)
    assert answers == {"n0": "red, blue", "n1": "error:check_failed", "n2": "red, blue"}
    (error,) = [d["error"]["message"] for d in _lines(out) if d["error"]]
    assert "too long for the worker's max_context_length 262,144" in error


def _peak_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0  # it ended
    return next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM:")), 0)


def _children_of(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += map(int, (task / "children").read_text().split())
        except OSError:
            continue
    return kids


def test_a_medium_that_is_a_device_or_a_fifo_fails_its_line_at_once(stub, red_blue, tmp_path):
    # Issue 44: the local engine hashed each medium for its pixel-cache key
    # before the regular-file check: /dev/zero was read for ever and a FIFO
    # with no writer never opened; the batch never finished.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    named = tmp_path / "pipe.mp4"
    os.mkfifo(named)
    data = tmp_path / "in.jsonl"
    media = {"zero": "/dev/zero", "fifo": str(fifo), "named": str(named), "good": str(red_blue)}
    data.write_text("".join(json.dumps({"id": k, "media": [v]}) + "\n" for k, v in media.items()))
    out = tmp_path / "out.jsonl"
    argv = ["batch", data, "-o", out, "-t", stub.running.address, "--workers", "1"]
    try:
        run = subprocess.run([sys.executable, "-m", "mmctl", *map(str, argv)],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("the batch did not finish")
    assert run.returncode == 7, (run.stderr, out.read_text())
    answers = _answers(out)
    assert answers.pop("good") == "red, blue"
    assert answers == dict.fromkeys(("zero", "fifo", "named"), "error:invalid_input")
    said = {d["custom_id"]: d["error"]["message"] for d in _lines(out) if d["error"]}
    assert all("not a regular file" in message for message in said.values()), said


def test_resume_removes_the_shm_files_a_killed_run_left(cli, stub, red_blue, tmp_path,
                                                         monkeypatch):  # fmt: skip
    # Issue 44: a run killed mid-request leaves its placed tensors in /dev/shm
    # (no process of its own is left to remove them), and --resume left them too.
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setenv("MMCTL_SHM_DIR", str(folder))
    killed = "mmctl-424242-3-abcd1234"  # a dead run's: nobody holds its lock
    (folder / killed).write_bytes(b"x" * 4096)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"n{i}", "media": [str(red_blue)]}) + "\n"
                            for i in range(2)))  # fmt: skip
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"custom_id": "n0", "response": {"status_code": 200},
                               "error": None}) + "\n")  # fmt: skip
    res = cli("batch", data, "-o", out, "-t", stub.running.address, "--workers", "1",
              "--resume", "--transport", "shm", "--json")  # fmt: skip
    assert res.code == 0, res.err
    counts = res.json()
    assert (counts["skipped"], counts["succeeded"]) == (1, 1)
    assert counts["shm_swept"] == [killed]
    assert list(folder.iterdir()) == []
