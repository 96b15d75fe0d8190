"""One Ray mini-cluster per test module (ray.cluster_utils.Cluster): a head and
worker nodes on this machine, the GCS health check tuned so that a lost node is
declared dead in seconds. Imported by the tier-2 test modules only after their
own `ray` import (which skips them, or fails in CI, without Ray).

A worker node is either Ray's in-process kind (`Nodes.add()`, fast, sharing this
machine's process table) or one of its own (`Nodes.add(namespaced=True)`: `ray
start --block` in a PID and mount namespace of its own, `NsNode`), which sees and
can kill only its own processes, as a real host. The head stays in this namespace;
this machine's /proc sees every node's processes (by their pids here)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
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
NS_INIT = os.path.join(os.path.dirname(__file__), "ns_init.py")
NS_START = 60.0  # seconds for a namespaced node to join


class NsNode:
    """A worker node in PID and mount namespaces of its own (`unshare --pid --fork
    --mount-proc --kill-child`, as root): PID 1 there is tests/support/ns_init.py,
    which runs `ray start --address=HEAD --block`. Killing the `unshare` process
    kills the namespace's init, and with it every process of the node."""

    def __init__(self, address: str, resource: str, log: str) -> None:
        self.resource = resource
        ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
        argv = [
            shutil.which("unshare") or "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            sys.executable,
            NS_INIT,
            ray_cli,
            "start",
            f"--address={address}",
            f"--num-cpus={NODE['num_cpus']}",
            f"--object-store-memory={NODE['object_store_memory']}",
            f"--resources={json.dumps({resource: 1})}",
            "--disable-usage-stats",
            "--block",
        ]
        self.log = log
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        self.node_id = ""
        self.namespace = ""

    def join(self, deadline: float) -> None:
        """Wait until the node is in the namespace and Ray lists it alive."""
        import ray

        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"namespaced node {self.resource} exited ({self.process.returncode}); "
                    f"`unshare --pid --mount-proc` needs root (CI runs as root). "
                    f"Its output ({self.log}) ends: {self._tail()!r}"
                )
            if not self.namespace:
                self.namespace = _namespace_of_child(self.process.pid)
            for node in ray.nodes():
                if node["Alive"] and node["Resources"].get(self.resource):
                    self.node_id = node["NodeID"]
            if self.node_id and self.namespace:
                return
            time.sleep(0.1)  # polling Ray's node table; no event to wait on
        raise TimeoutError(f"namespaced node {self.resource} did not join in {NS_START}s")

    def _tail(self) -> str:
        try:
            with open(self.log, "rb") as f:
                return f.read()[-500:].decode(errors="replace")
        except OSError:
            return ""

    def pids(self) -> list[int]:
        """Every process of the node, by its pid in this (the host's) namespace."""
        if not self.namespace:
            return []
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry.name}/ns/pid") == self.namespace:
                        found.append(int(entry.name))
        return found

    def named(self, name: str) -> list[int]:
        """The node's processes called `name` (e.g. "raylet")."""
        return [pid for pid in self.pids() if _name(pid) == name]

    def host_pid(self, pid: int) -> int | None:
        """The pid here of the node's process `pid` (its pid in its own namespace)."""
        for mine in self.pids():
            if _ns_pids(mine)[-1:] == [pid]:
                return mine
        return None

    def kill(self) -> None:
        """The whole node at once (its init's death ends the namespace)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)
        deadline = time.monotonic() + 30
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)  # the kernel ends the namespace's processes


class Nodes:
    """The module's cluster and a way to replace the worker nodes it loses."""

    def __init__(self, cluster: Any, tmp: str = "") -> None:
        self.cluster = cluster
        self.tmp = tmp or tempfile.gettempdir()
        self.count = 0
        self.added: list[Any] = []

    def add(self, *, namespaced: bool = False) -> Any:
        """A fresh worker node, with a resource of its own (`w1`, `w2`, ...): Ray's
        in-process kind, or an `NsNode` with `namespaced`."""
        self.count += 1
        resource = f"w{self.count}"
        if namespaced:
            node = NsNode(self.cluster.address, resource, os.path.join(self.tmp, f"{resource}.log"))
            self.added.append(node)
            node.join(time.monotonic() + NS_START)
            return node
        node = self.cluster.add_node(resources={resource: 1}, **NODE)
        self.cluster.wait_for_nodes()
        self.added.append(node)
        return node

    def remove_all(self) -> None:
        """After a test: its worker nodes go (one cluster's memory at a time)."""
        for node in self.added:
            if isinstance(node, NsNode):
                node.kill()
            elif node in self.cluster.worker_nodes:
                with contextlib.suppress(Exception):
                    self.cluster.remove_node(node, allow_graceful=False)
        self.added.clear()

    @staticmethod
    def pids(node: Any) -> list[int]:
        if isinstance(node, NsNode):
            return node.pids()
        return [p.process.pid for procs in node.all_processes.values() for p in procs]


def _die_with_parent() -> None:
    """In the forked `unshare`: killed if the test process dies (then --kill-child
    takes the node's namespace with it), so no node outlives its test run."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _namespace_of_child(pid: int) -> str:
    """The PID namespace of `pid`'s child (unshare's forked init), once it has one."""
    with contextlib.suppress(psutil.Error, OSError):
        for child in psutil.Process(pid).children():
            mine = os.readlink("/proc/self/ns/pid")
            theirs = os.readlink(f"/proc/{child.pid}/ns/pid")
            if theirs != mine:
                return theirs
    return ""


def _ns_pids(pid: int) -> list[int]:
    """`pid`'s pids, from this namespace's to its own (NSpid in /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(p) for p in line.split()[1:]]
    except OSError:
        pass
    return []


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


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
    state = Nodes(cluster, tmp)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        yield state
        for node in [cluster.head_node, *cluster.worker_nodes]:
            if node is not None:
                recorded.update(state.pids(node))
    finally:
        state.remove_all()
        ray.shutdown()
        cluster.shutdown()
        for pid in recorded:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
