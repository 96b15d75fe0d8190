"""One Ray mini-cluster per test module (ray.cluster_utils.Cluster): a head and
worker nodes on this machine, the GCS health check tuned so that a lost node is
declared dead in seconds. Imported by the tier-2 test modules only after their
own `ray` import (which skips them, or fails in CI, without Ray)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import psutil

HEALTH = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
    "health_check_initial_delay_ms": 1000,
}
NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}


class Nodes:
    """The module's cluster and a way to replace the worker nodes it loses."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.count = 0
        self.added: list[Any] = []

    def add(self) -> Any:
        """A fresh worker node, with a resource of its own (`w1`, `w2`, ...)."""
        self.count += 1
        node = self.cluster.add_node(resources={f"w{self.count}": 1}, **NODE)
        self.cluster.wait_for_nodes()
        self.added.append(node)
        return node

    def remove_all(self) -> None:
        """After a test: its worker nodes go (one cluster's memory at a time)."""
        for node in self.added:
            if node in self.cluster.worker_nodes:
                with contextlib.suppress(Exception):
                    self.cluster.remove_node(node, allow_graceful=False)
        self.added.clear()

    @staticmethod
    def pids(node: Any) -> list[int]:
        return [p.process.pid for procs in node.all_processes.values() for p in procs]


def module_cluster(prefix: str, health: dict[str, int] | None = HEALTH) -> Iterator[Nodes]:
    """The body of a module-scoped fixture: the cluster, Ray connected to it; at the
    end Ray shut down and every process any of its nodes ran killed. `health`: the
    GCS health check (None: Ray's own defaults)."""
    import ray
    from ray.cluster_utils import Cluster

    tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")  # short: AF_UNIX paths <= 107 bytes
    os.environ["RAY_TMPDIR"] = tmp
    os.makedirs(os.path.join(tmp, "ray"), exist_ok=True)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "include_dashboard": False,
            **({"_system_config": health} if health else {}),
            **NODE,
        },
    )
    recorded: set[int] = set()
    try:
        state = Nodes(cluster)
        ray.init(address=cluster.address, log_to_driver=False)
        yield state
        for node in [cluster.head_node, *cluster.worker_nodes]:
            if node is not None:
                recorded.update(state.pids(node))
    finally:
        ray.shutdown()
        cluster.shutdown()
        for pid in recorded:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
