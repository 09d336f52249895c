"""One Ray worker node, joined to the cluster at ``argv[1]``, until stdin closes.

Run by ``tests/batch/test_ray_nodes.py`` inside ``unshare -m`` with a private
tmpfs on ``/tmp``: a node that cannot see the driver's temporary folders (its
model folder, files it wrote), as a node of a real cluster cannot. It binds
and advertises 127.0.0.1 (Ray's single-host switch, as the test cluster's
other nodes) and prints its node id when it is up.
"""

from __future__ import annotations

import os
import sys

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray reads it at import

from ray._private.node import Node
from ray._private.parameter import RayParams


def main() -> None:
    gcs, temp_dir = sys.argv[1], sys.argv[2]
    params = RayParams(
        gcs_address=gcs,
        node_ip_address="127.0.0.1",
        num_cpus=1,
        num_gpus=0,
        object_store_memory=150 * 2**20,
        min_worker_port=0,
        max_worker_port=0,
        include_log_monitor=False,
        node_manager_port=0,
        temp_dir=temp_dir,
    )
    params.dashboard_agent_listen_port = None
    node = Node(params, head=False, shutdown_at_exit=True, spawn_reaper=True)
    print(node.node_id, flush=True)
    sys.stdin.read()  # until the test closes our stdin (or dies)
    node.kill_all_processes(check_alive=False, allow_graceful=True)


if __name__ == "__main__":
    main()
