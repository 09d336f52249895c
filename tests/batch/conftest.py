"""The batch tests' fixtures: a private bundle cache for every test, and Ray
clusters — private, on 127.0.0.1, gone at the end.

Each cluster lives in its own Ray temporary folder (``$RAY_TMPDIR``): its
session files and the ``ray_current_cluster`` address file that
``--ray-address auto`` reads stay there, so no test attaches to another
job's Ray on this machine, nor another job to ours. A *private* node runs in
its own mount namespace with a tmpfs on ``/tmp`` (``unshare -m``, root):
like a node of a real cluster it cannot see the driver's temporary folders.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mmctl.run_batch.children import descendants
from mmctl.run_batch.ray_connect import LOOPBACK, SINGLE_HOST_ENV

# Ray's own OOM killer counts the whole machine's memory (95%), and CI runs the engine
# check beside these tests: it killed Ray tasks for the engine's memory, not theirs.
# Every Ray process the tests start inherits this (the kernel's OOM killer still guards).
os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")

NODE_SCRIPT = Path(__file__).with_name("_ray_node.py")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    """Every batch test: a private bundle cache, no inherited target."""
    monkeypatch.setenv("MMCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MMCTL_TARGET", raising=False)


@dataclass
class RayCluster:
    cluster: Any  # ray.cluster_utils.Cluster
    #: Node ids: the head first, then the other nodes in the order they joined.
    nodes: list[str] = field(default_factory=list)
    #: Node ids of the nodes that cannot see this host's /tmp.
    private: list[str] = field(default_factory=list)
    _private_runs: list[subprocess.Popen[str]] = field(default_factory=list)
    #: Worker nodes started by ``Cluster.add_node`` (``remove_node`` takes one).
    added: list[Any] = field(default_factory=list)

    @property
    def address(self) -> str:
        return str(self.cluster.address)


def private_node_possible() -> str | None:
    """Why a node with a private /tmp cannot start here, or ``None``."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare(1)"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs x /tmp"],
        capture_output=True,
        text=True,
    )
    return None if probe.returncode == 0 else f"unshare -m failed: {probe.stderr.strip()}"


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


@pytest.fixture
def ray_cluster(monkeypatch, tmp_path_factory) -> Iterator[Callable[..., RayCluster]]:
    """``make(cpus=1, nodes=1, private=0, dashboard=0)``: a head with ``cpus``
    CPUs (and Ray's dashboard and job server on port ``dashboard``), ``nodes``
    more with one CPU each, and ``private`` more with a private /tmp."""
    pytest.importorskip("ray")
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    # Short: Ray's socket paths live under it (108 bytes at most).
    temp = Path(tempfile.mkdtemp(prefix="mmctl-ray-", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(temp))
    # And the system temp of the processes Ray starts: its job server leaves a
    # multiprocessing folder (pymp-*) behind in /tmp when the cluster stops.
    monkeypatch.setenv("TMPDIR", str(temp))
    # Ray's single-host switch: 127.0.0.1 stays 127.0.0.1 (ray_connect's docstring).
    monkeypatch.setenv(SINGLE_HOST_ENV, "0")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    before = set(descendants(os.getpid()))
    made: list[RayCluster] = []

    def make(cpus: int = 1, nodes: int = 1, private: int = 0, dashboard: int = 0) -> RayCluster:
        loopback = {"node_ip_address": "127.0.0.1"}
        # The agent's HTTP port (the job agent's) chosen by the system: Ray's
        # fixed default (52365) is taken whenever another Ray runs on the machine
        # (the other test process's, a user's), and then the agent serves no HTTP
        # and `ray job submit` answers "No available agent" until it gives up.
        head: dict[str, Any] = {**loopback, "num_cpus": cpus, "include_dashboard": False,
                                "dashboard_agent_listen_port": 0}  # fmt: skip
        if dashboard:  # the job server (ray[default]) on this port
            head.update(include_dashboard=True, dashboard_host=LOOPBACK, dashboard_port=dashboard)
        cluster = _patiently(lambda: Cluster(initialize_head=True, head_node_args=head), before)
        found = RayCluster(cluster)
        made.append(found)
        for _ in range(nodes):
            found.added.append(_patiently(lambda: cluster.add_node(**loopback, num_cpus=1), None))
        cluster.wait_for_nodes(timeout=60)  # the nodes it started (it counts no others)
        for _ in range(private):
            why = private_node_possible()
            if why is not None:
                (pytest.fail if os.environ.get("CI") else pytest.skip)(f"a private node {why}")
            hidden = _driver_folders(temp, tmp_path_factory.getbasetemp())
            found.private.append(_private_node(found, cluster.address, hidden, temp / "node"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            alive = [n["NodeID"] for n in cluster.global_state.node_table() if n["Alive"]]
            if len(alive) == 1 + nodes + private:
                break
            time.sleep(0.2)
        head = cluster.head_node.node_id
        found.nodes = [head] + [n.node_id for n in found.added] + found.private
        return found

    try:
        yield make
    finally:
        ray.shutdown()
        for found in made:
            for run in found._private_runs:
                if run.stdin is not None:
                    run.stdin.close()
                try:
                    run.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(run.pid, 9)  # our own group (start_new_session)
                    run.wait(10)
            found.cluster.shutdown()
        deadline = time.monotonic() + 30
        while (left := _ray_processes(before)) and time.monotonic() < deadline:
            time.sleep(0.5)
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"left running: {left}"


#: Ray 2.60 gives a starting raylet 30 s to register (``raylet_start_wait_time_s``,
#: a constant in ray/_private/node.py, no setting): a machine loaded by the engine
#: check beside the suite can miss it. Starting again is what a person would do.
STARTUP_TRIES = 3


def _patiently(start: Callable[[], Any], before: set[int] | None) -> Any:
    """``start()`` (a Ray head or node), again after Ray's own startup timeout.
    ``before``: the processes that were ours before a head start — a head that
    timed out leaves its GCS running, which is stopped by its PID first."""
    for attempt in range(1, STARTUP_TRIES + 1):
        try:
            return start()
        except Exception as err:
            if "timed out during startup" not in str(err) or attempt == STARTUP_TRIES:
                raise
            if before is not None:
                for line in _ray_processes(before):
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(line.split(":")[0]), signal.SIGKILL)
    raise AssertionError("unreachable")


def _driver_folders(ray_temp: Path, basetemp: Path) -> list[Path]:
    """The driver's folders a node elsewhere would not see: its Ray session
    folder, the tests' temp folders (model copies, clips, fetched media), and
    the system temp folder too unless the code under test lives in it (a
    checkout under /tmp: the node must still import mmctl and Ray)."""
    system = Path(tempfile.gettempdir()).resolve()
    ours = (Path(sys.prefix).resolve(), NODE_SCRIPT.resolve())
    folders = [ray_temp, basetemp]
    if not any(path.is_relative_to(system) for path in ours):
        folders.append(system)
    return sorted({f.resolve() for f in folders}, key=lambda f: len(f.parts))


def _private_node(found: RayCluster, gcs: str, hidden: list[Path], temp: Path) -> str:
    """A node in its own mount namespace, each of the driver's folders
    (``hidden``) an empty tmpfs there, its own temp under ``temp``; its node id."""
    mounts = " && ".join(f"mkdir -p {f} && mount -t tmpfs mmctl-private {f}" for f in hidden)
    script = (
        f"{mounts} && mkdir -p {temp} && exec env TMPDIR={temp} RAY_TMPDIR={temp} "
        f"{sys.executable} {NODE_SCRIPT} {gcs} {temp}/ray"
    )
    run = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    found._private_runs.append(run)
    assert run.stdout is not None
    ready, _, _ = select.select([run.stdout], [], [], 90)
    node = run.stdout.readline().strip() if ready else ""
    assert len(node) == 56, f"the private node did not start: {node!r}"
    return node
