"""The Ray engine across nodes as a real cluster has them.

- A node that cannot see the driver's temporary folders (its own mount
  namespace, a private ``/tmp``): ``data:`` and remote media, and a model
  folder of the driver's, still reach it — by content, never by path.
- A node lost mid-run: its items are tried again on the others; each id is
  answered exactly once.
- The driver killed (SIGKILL) mid-run, then ``--resume``: each id once, no
  torn line.
- The pixel cache per node: three questions of one clip go to the node that
  preprocessed it, which decodes it once.
- ``ray job submit`` of a batch (Ray's job server: ``ray[default]``).

Every cluster is the ``ray_cluster`` fixture's: 127.0.0.1 only, its own Ray
temporary folder, gone at the end (tests/batch/conftest.py).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter

import pytest

import mmctl
from mmctl.media import synth

pytest.importorskip("ray")

PAIRS = [
    ("red", "blue"), ("green", "red"), ("blue", "green"), ("red", "green"),
    ("yellow", "blue"), ("white", "red"), ("black", "green"), ("blue", "yellow"),
]  # fmt: skip


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")
    return [
        synth.color_clip(folder / f"{a}-{b}.mp4", ((a, 1.0), (b, 1.0)), fps=8) for a, b in PAIRS
    ]


def _lines(path):
    """The complete lines of OUT (a line being written may be cut: not yet one)."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text.split("\n")[:-1]]


def _answer(doc):
    if doc["error"] is not None:
        return "error:" + doc["error"]["code"]
    return doc["response"]["body"]["choices"][0]["message"]["content"]


def _model_copy(builtin_model, folder):
    folder.mkdir()
    for name, path in builtin_model.source.files().items():
        shutil.copy(path, folder / name)
    return folder


def test_a_node_that_cannot_see_the_drivers_folders_gets_media_and_model_by_content(
    ray_cluster, make_stub, builtin_model, clips, http_files, tmp_path, no_leaks
):
    found = ray_cluster(cpus=1, private=1)
    (private,) = found.private
    www, base = http_files
    lines, want = [], {}
    for n, (clip, (a, b)) in enumerate(zip(clips, PAIRS, strict=True)):
        if n < 6:  # in the line itself
            url = "data:video/mp4;base64," + base64.b64encode(clip.read_bytes()).decode()
        else:  # fetched where it is preprocessed
            shutil.copy(clip, www / clip.name)
            url = f"{base}/{clip.name}"
        lines.append(json.dumps({"id": f"m{n}", "prompt": "Which colours?", "media": [url]}))
        want[f"m{n}"] = f"{a}, {b}"
    data = tmp_path / "in.jsonl"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    model = _model_copy(builtin_model, tmp_path / "model")  # a folder the private node lacks
    counts = mmctl.batch(
        data, out, targets=make_stub().running.address, engine="ray",
        ray_address=found.address, connection=mmctl.Connection(model_dir=model),
        allow_remote_media=True,
    )  # fmt: skip
    docs = _lines(out)
    assert {d["custom_id"]: _answer(d) for d in docs} == want, counts
    nodes = Counter(d["mmctl"]["node"] for d in docs)
    assert nodes[private] > 0, nodes  # the private node preprocessed some, and sent them


def test_the_items_of_a_lost_node_are_tried_again_elsewhere_each_id_once(
    ray_cluster, make_stub, red_blue, tmp_path
):
    found = ray_cluster(cpus=1, nodes=1)
    (lost,) = found.added
    # ~1 s an answer: when the node goes, its sender has requests in flight.
    stub = make_stub(delay_ms=250)
    data = tmp_path / "in.jsonl"
    ids = [f"n{i}" for i in range(16)]
    data.write_text("".join(json.dumps({"id": i, "media": [str(red_blue)]}) + "\n" for i in ids))
    out = tmp_path / "out.jsonl"
    seen_on_lost: list[int] = []

    def on_lost(docs: list[dict]) -> int:
        return sum(d["mmctl"]["node"] == lost.node_id for d in docs)

    def lose_a_node() -> None:
        # Once the node works (its worker processes take seconds to start).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and on_lost(_lines(out)) < 1:
            time.sleep(0.05)
        # Its first answers are in: its next items reach its sender within
        # milliseconds (a preprocessed clip) and take a second to answer.
        time.sleep(0.4)
        seen_on_lost.append(on_lost(_lines(out)))
        found.cluster.remove_node(lost, allow_graceful=False)

    killer = threading.Thread(target=lose_a_node)
    killer.start()
    counts = mmctl.batch(
        data, out, targets=stub.running.address, engine="ray", ray_address=found.address,
        max_concurrency=4, connection=mmctl.Connection(pixel_cache_mb=0),
    )  # fmt: skip
    killer.join()
    docs = _lines(out)
    assert sorted(d["custom_id"] for d in docs) == sorted(ids)  # each once
    assert [_answer(d) for d in docs] == ["red, blue"] * 16, counts
    assert counts.succeeded == 16 and counts.failed == 0
    assert seen_on_lost[0] >= 1 and on_lost(docs) < 16
    # Whether Ray retried a task of the node itself or mmctl an item its sender
    # held (counts.node_retries) depends on the moment; test_ray_parts drives
    # mmctl's retries one by one.


def test_a_killed_driver_then_resume_answers_each_id_once(
    ray_cluster, make_stub, red_blue, tmp_path
):
    found = ray_cluster(cpus=2, nodes=0)
    slow = make_stub(delay_ms=40)  # ~0.2 s an item: the kill lands mid-run
    data = tmp_path / "in.jsonl"
    ids = [f"n{i}" for i in range(12)]
    data.write_text("".join(json.dumps({"id": i, "media": [str(red_blue)]}) + "\n" for i in ids))
    out = tmp_path / "out.jsonl"
    argv = [sys.executable, "-m", "mmctl", "batch", str(data), "-o", str(out), "-t",
            slow.running.address, "--engine", "ray", "--ray-address", found.address,
            "--max-concurrency", "1"]  # fmt: skip
    run = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_lines(out)) < 4 and run.poll() is None:
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.wait(10)
    answered = {d["custom_id"] for d in _lines(out)}
    assert 4 <= len(answered) < 12
    res = subprocess.run([*argv, "--resume", "--json"], capture_output=True, text=True,
                         timeout=180)  # fmt: skip
    assert res.returncode == 0, res.stderr
    counts = json.loads(res.stdout)
    assert counts["skipped"] == len(answered) and counts["succeeded"] == 12 - len(answered)
    text = out.read_text()
    assert text.endswith("\n")
    docs = [json.loads(line) for line in text.splitlines()]  # every line whole
    assert sorted(d["custom_id"] for d in docs) == sorted(ids)
    assert {_answer(d) for d in docs} == {"red, blue"}


def test_three_questions_of_a_clip_go_to_the_node_holding_its_pixels(
    ray_cluster, make_stub, clips, tmp_path, no_leaks
):
    found = ray_cluster(cpus=1, nodes=1)
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"c{n}q{q}", "prompt": f"Question {q}?", "media": [str(clip)]}) + "\n"
            for n, clip in enumerate(clips[:4])
            for q in range(3)
        )
    )
    out = tmp_path / "out.jsonl"
    counts = mmctl.batch(
        data, out, targets=make_stub().running.address, engine="ray",
        ray_address=found.address, max_concurrency=16,
    )  # fmt: skip
    assert counts.succeeded == 12, counts
    docs = {d["custom_id"]: d for d in _lines(out)}
    for n, (a, b) in enumerate(PAIRS[:4]):
        asks = [docs[f"c{n}q{q}"] for q in range(3)]
        how = Counter(d["mmctl"]["pixel_cache"][0] for d in asks)
        assert how["miss"] == 1 and how["hit"] + how["shared"] == 2, how
        assert {_answer(d) for d in asks} == {f"{a}, {b}"}
        assert len({d["mmctl"]["node"] for d in asks}) == 1  # where the pixels are
    cache = counts.pixel_cache
    assert (cache["misses"], cache["hits"] + cache["shared"]) == (4, 8), cache


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ray_job_submit_runs_a_batch(ray_cluster, make_stub, red_blue, tmp_path):
    pytest.importorskip("ray.dashboard.modules.job")  # ray[default]: the job server
    dashboard = _free_port()
    found = ray_cluster(cpus=2, nodes=0, dashboard=dashboard)
    url = f"http://127.0.0.1:{dashboard}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/version", timeout=2).read()
            break
        except urllib.error.HTTPError:
            # It answers. A 401: an earlier ray.init in this process turned
            # Ray's token authentication on (RAY_AUTH_MODE, ~/.ray/auth_token),
            # and `ray job submit` below reads the same token.
            break
        except OSError:
            assert time.monotonic() < deadline, "the job server did not come up"
            time.sleep(0.5)
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"j{i}", "media": [str(red_blue)]}) + "\n" for i in range(6))
    )
    out = tmp_path / "out.jsonl"
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    argv = [ray_cli, "job", "submit", "--address", url, "--", sys.executable, "-m", "mmctl",
            "batch", str(data), "-o", str(out), "-t", make_stub().running.address,
            "--engine", "ray", "--json"]  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        # The job server answers before the node's job agent has registered
        # (a loaded machine: seconds; the agent's port is the system's choice,
        # see ray_cluster); Ray's own answer is "try again later", and no job
        # was created.
        if "No available agent to submit job" not in res.stderr:
            break
        assert time.monotonic() < deadline, "the job agent did not come up"
        time.sleep(1)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "succeeded" in res.stdout + res.stderr
    docs = _lines(out)
    assert sorted(d["custom_id"] for d in docs) == [f"j{i}" for i in range(6)]
    assert {_answer(d) for d in docs} == {"red, blue"}
    assert {d["mmctl"]["node"] for d in docs} == {found.nodes[0]}  # the job's cluster
