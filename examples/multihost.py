"""One tree across "hosts": a subtree placed on a second Ray node, that node killed,
the subtree restarted on a third. Needs the ray extra: pip install "nannytree[ray]".

    root (one_for_one)                  in this process
    ├── api                             a local worker
    └── ingest (placement: node b, fallback c)
        ├── reader                      on node b, then on node c
        └── parser

It starts a local mini-cluster (ray.cluster_utils.Cluster: a head and two worker
nodes, all on this machine, with the health check tuned to declare a lost node
dead in about 2 s), removes node b as a crash would, and prints what the tree
saw: the subtree on node b, node_down, the subtree on node c, and that none of
node b's processes is left.

    python examples/multihost.py
"""

from __future__ import annotations

import os
import tempfile
import time

import psutil
import ray
from ray.cluster_utils import Cluster

from actors import Tree
from actors.ray import RayEngine
from supervision import ChildSpec, Placement, SupervisorSpec

HEALTH = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
    "health_check_initial_delay_ms": 1000,
}
MEMORY = 80 * 1024 * 1024


def wait_for(condition: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("the tree did not recover in time")
        time.sleep(0.1)


def main() -> None:
    tmp = tempfile.mkdtemp(prefix="ntx", dir="/tmp")  # Ray's sockets want a short path
    os.environ["RAY_TMPDIR"] = tmp
    os.makedirs(os.path.join(tmp, "ray"), exist_ok=True)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            "_system_config": HEALTH,
            "object_store_memory": MEMORY,
        },
    )
    try:
        node_b = cluster.add_node(num_cpus=1, object_store_memory=MEMORY)
        node_c = cluster.add_node(num_cpus=1, object_store_memory=MEMORY)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        names = {node_b.node_id: "b", node_c.node_id: "c"}

        spec = SupervisorSpec(
            id="root",
            children=[
                ChildSpec(id="api", command=["sleep", "600"]),
                SupervisorSpec(
                    id="ingest",
                    placement=Placement(node=node_b.node_id, fallback=[node_c.node_id]),
                    children=[
                        ChildSpec(id="reader", command=["sleep", "600"]),
                        ChildSpec(id="parser", command=["sleep", "600"]),
                    ],
                ),
            ],
        )
        with Tree(spec, engine=RayEngine(lease_timeout=None)) as tree:

            def ingest() -> object:
                return tree.nanny.which_child("ingest").get()

            def show(title: str) -> list[int]:
                child = ingest()
                remote = tree.nanny.child_nanny("ingest").get().proxy()
                kids = remote.which_children().get()
                print(
                    f"{title}: ingest on node {names.get(child.node, child.node)}, "
                    f"state {child.state}, restarts {child.restarts}, "
                    f"remote pids {[k.pid for k in kids]}"
                )
                return [child.pid, *(k.pid for k in kids)]

            before = show("started")
            killed_at = time.monotonic()
            cluster.remove_node(node_b, allow_graceful=False)  # as if host b died
            print("node b removed")
            wait_for(lambda: ingest().node == node_c.node_id and ingest().state == "running")
            print(f"recovered after {time.monotonic() - killed_at:.1f} s: {ingest().last_exit}")
            show("now")
            left = [
                p
                for p in before
                if p is not None
                and psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
            ]
            print(f"processes of node b left behind: {left}")
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
