"""The Ray engine across two Ray nodes on this machine, all on 127.0.0.1.

``ray.cluster_utils.Cluster`` starts a head and a second node (one CPU each),
each with its own raylet and object store: items must be preprocessed on
both (each output line's ``mmctl.node``), and the answers must equal the
local engine's. Bounded: the cluster is shut down at the end, and no
raylet or GCS that the test started outlives it.
"""

from __future__ import annotations

import json
import os
import time

import pytest

import mmctl
from mmctl.run_batch.children import descendants
from mmctl.run_batch.ray_connect import SINGLE_HOST_ENV

pytest.importorskip("ray")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MMCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MMCTL_TARGET", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


@pytest.fixture
def two_nodes(monkeypatch, tmp_path):
    """A head and one more node, both binding and advertising 127.0.0.1."""
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    # Ray's single-host switch: 127.0.0.1 stays 127.0.0.1 (ray_connect's docstring).
    monkeypatch.setenv(SINGLE_HOST_ENV, "0")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    before = set(descendants(os.getpid()))
    loopback = {"node_ip_address": "127.0.0.1", "num_cpus": 1}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**loopback, "include_dashboard": False},
    )
    try:
        cluster.add_node(**loopback)
        cluster.wait_for_nodes(timeout=60)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        deadline = time.monotonic() + 30
        while (left := _ray_processes(before)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not left, f"left running: {left}"


def _ray_processes(before: set[int]) -> list[str]:
    found = []
    for pid in set(descendants(os.getpid())) - before:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "raylet" in cmd or "gcs_server" in cmd:
            found.append(f"{pid}: {cmd[:80]}")
    return found


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_two_nodes_both_preprocess_and_answer_as_the_local_engine(
    two_nodes, stub, red_blue, tmp_path, no_leaks
):
    import ray

    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"n{i}", "prompt": "Which colours?", "media": [str(red_blue)]}) + "\n"
            for i in range(24)
        )
    )
    local, on_ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    target = stub.running.address
    assert mmctl.batch(data, local, targets=target, workers=1).succeeded == 24
    counts = mmctl.batch(data, on_ray, targets=target, engine="ray", ray_address=two_nodes.address)
    assert counts.succeeded == 24, counts
    assert counts.pools == {"preprocess_tasks": 2, "senders": 2, "calls_per_sender": 4}
    lines = _lines(on_ray)
    answers = {d["custom_id"]: d["response"]["body"]["choices"][0]["message"]["content"]
               for d in lines}  # fmt: skip
    want = {d["custom_id"]: d["response"]["body"]["choices"][0]["message"]["content"]
            for d in _lines(local)}  # fmt: skip
    assert answers == want
    nodes = {node.node_id for node in two_nodes.list_all_nodes()}
    assert len(nodes) == 2
    import collections

    print(
        "NODES", collections.Counter(d["mmctl"]["node"][:8] for d in lines), [n[:8] for n in nodes]
    )
    assert {d["mmctl"]["node"] for d in lines} == nodes  # both nodes preprocessed items
    assert not ray.is_initialized()  # mmctl disconnected; the cluster is the fixture's
