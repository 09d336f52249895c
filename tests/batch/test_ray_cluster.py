"""The Ray engine across two Ray nodes on this machine, all on 127.0.0.1.

``ray.cluster_utils.Cluster`` starts a head and a second node (one CPU each),
each with its own raylet and object store: items must be preprocessed on
both (each output line's ``mmctl.node``), and the answers must equal the
local engine's. Bounded: the cluster is shut down at the end, and no
raylet or GCS that the test started outlives it.
"""

from __future__ import annotations

import json

import pytest

import mmctl

pytest.importorskip("ray")


@pytest.fixture
def two_nodes(ray_cluster):
    """A head and one more node, both binding and advertising 127.0.0.1."""
    return ray_cluster(cpus=1, nodes=1).cluster


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
    # The same clip each time: without the pixel cache, so both nodes preprocess.
    counts = mmctl.batch(
        data, on_ray, targets=target, engine="ray", ray_address=two_nodes.address,
        pixel_cache_mb=0,
    )  # fmt: skip
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
