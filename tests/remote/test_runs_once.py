"""Tier 2: a remote child never runs twice (issue: "no remote child runs twice, ever").

A Ray mini-cluster (ray.cluster_utils.Cluster, its health check tuned as in
tests/remote/test_cluster.py) whose worker nodes b and c each run in a PID and
mount namespace of their own (`NsNode`): each sees and can kill only its own
processes, as real hosts (a new incarnation's cleanup on c cannot reach a copy
left on b). A remote subtree with one command child runs on node b (fallback c).
A fault makes the parent restart it: a frozen raylet, a whole frozen node
(SIGSTOP of every process of its namespace, then SIGCONT), a hung remote
supervisor found by the liveness check, and a killed remote host. Throughout,
from this machine's namespace (which sees every node's processes), `Copies` watches the
OS for the child's command line: when each copy started (the kernel's start
time) and when it was last seen alive (its pidfd, polled every few ms; a stopped
process is alive), and the test asserts that no copy started while another was
alive. No timing is asserted; the gap between the old copy's end and the new
one's start is printed.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import select
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pykka
import pytest

from tests.support import import_ray

ray = import_ray()

from actors import Tree  # noqa: E402
from actors._remote._marks import MARK  # noqa: E402
from actors.ray import RayEngine  # noqa: E402
from actors.testing import wait_gone  # noqa: E402
from supervision import ChildSpec, ExitKind, Placement, SupervisorSpec  # noqa: E402
from tests.support import wait_until  # noqa: E402
from tests.support.ray_cluster import Nodes, NsNode, module_cluster  # noqa: E402

pytestmark = pytest.mark.ray


class Copies:
    """Every process of this machine whose argv is `argv`, watched by pidfd: when each
    began (the kernel's start time, to the clock tick), when it was last seen alive
    (every few ms) and when its end was noticed, all on CLOCK_BOOTTIME (the start
    time's own clock). Two overlap for sure when one began before the other was
    last seen alive (a stopped process is alive)."""

    GRAIN = 1 / os.sysconf("SC_CLK_TCK")  # a start time is floored to the tick

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.lives: dict[int, list[float]] = {}  # pid -> [start, last seen alive, end]
        self._fds: dict[int, int] = {}  # pidfd -> pid
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._scan, daemon=True),
            threading.Thread(target=self._watch, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def __enter__(self) -> Copies:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        for fd in self._fds:
            os.close(fd)

    def alive(self) -> list[int]:
        with self._lock:
            return [pid for pid, life in self.lives.items() if life[2] == math.inf]

    def most(self) -> int:
        """The most copies surely alive at one instant."""
        with self._lock:
            spans = [(s + self.GRAIN, seen) for s, seen, _ in self.lives.values()]
        edges = sorted([(s, 1) for s, _ in spans] + [(seen, -1) for _, seen in spans])
        most = alive = 0
        for _, step in edges:  # at a tie the end comes first
            alive += step
            most = max(most, alive)
        return most

    def report(self) -> str:
        with self._lock:
            lives = sorted(self.lives.values())
        t0 = lives[0][0] if lives else 0.0
        spans = [f"[{s - t0:.3f}, seen {seen - t0:.3f}, end {e - t0:.3f}]" for s, seen, e in lives]
        gaps = [f"{b[0] - a[2]:+.3f}s" for a, b in itertools.pairwise(lives)]
        return f"copies {', '.join(spans)}; gaps (next start - previous end) {gaps}"

    def _scan(self) -> None:
        while not self._stop.is_set():
            for proc in psutil.process_iter(["cmdline"]):
                if proc.info["cmdline"] != self.argv or proc.pid in self.lives:
                    continue
                try:
                    seen = _now()
                    fd = os.pidfd_open(proc.pid)
                    born = _started(proc.pid)
                except (OSError, ValueError):
                    continue  # gone already: missed, so never counted (it lived < 20 ms)
                with self._lock:
                    self.lives[proc.pid] = [born, seen, math.inf]
                    self._fds[fd] = proc.pid
            self._stop.wait(0.02)

    def _watch(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                fds = list(self._fds)
            if not fds:
                self._stop.wait(0.005)
                continue
            before = _now()
            ready, _, _ = select.select(fds, [], [], 0.005)
            now = _now()
            with self._lock:
                for fd in fds:
                    pid = self._fds[fd]
                    if fd in ready:
                        self.lives[pid][2] = now
                        del self._fds[fd]
                        os.close(fd)
                    else:
                        self.lives[pid][1] = before  # not ended then: alive at `before`


def _now() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _started(pid: int) -> float:
    """When `pid` started, on CLOCK_BOOTTIME (its /proc stat field 22, in ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Nodes]:
    yield from module_cluster("ntd")


@pytest.fixture
def nodes(cluster: Nodes) -> Iterator[Nodes]:
    yield cluster
    cluster.remove_all()


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Overrides conftest's: the cluster's processes stay for the module; remote pids
    are checked per test."""
    yield
    actors = pykka.ActorRegistry.get_all()
    if actors:
        pykka.ActorRegistry.stop_all()
        pytest.fail(f"test left actors running: {actors}")


def start(engine: RayEngine, argv: list[str], b: Any, c: Any) -> Tree:
    spec = SupervisorSpec(
        id="root",
        intensity=5,
        children=[
            SupervisorSpec(
                id="ingest",
                placement=Placement(node=b.node_id, fallback=[c.node_id]),
                children=[ChildSpec(id="reader", command=argv)],
            )
        ],
    )
    return Tree.start(spec, engine=engine)


def info(tree: Tree) -> Any:
    return tree.nanny.which_child("ingest").get()


def host_of(tree: Tree, node: NsNode) -> int:
    """The remote host's pid here (the subtree shows its pid on its own node)."""
    pid = node.host_pid(info(tree).pid)
    assert pid is not None, f"no process {info(tree).pid} on {node.resource}"
    return pid


def remote_processes(node: NsNode, host: int) -> list[int]:
    """The remote host's launcher, guardian and children (marked with its pid on its
    node), by their pids here."""
    mark = f"|{_ns_pid(host)}"
    found = []
    for pid in node.pids():
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).environ().get(MARK, "").endswith(mark):
                found.append(pid)
    return found


def _ns_pid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[-1]) for line in f if line.startswith("NSpid:"))


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def restarted_on(tree: Tree, node: Any) -> bool:
    child = info(tree)
    return child.node == node.node_id and child.state == "running" and child.restarts == 1


@pytest.mark.parametrize("lease", [4.0, None], ids=["lease-4s", "lease-off"])
def test_a_frozen_raylet_never_leaves_two_copies(nodes: Nodes, lease: float | None) -> None:
    """The raylet of b stops answering; Ray declares b dead while the remote host and
    its child still run there. They fence themselves (Ray says their node is dead)
    before the parent starts the subtree on c."""
    b, c = nodes.add(namespaced=True), nodes.add(namespaced=True)
    argv = ["sleep", "7001" if lease else "7002"]
    with Copies(argv) as copies:
        tree = start(RayEngine(lease_timeout=lease), argv, b, c)
        try:
            wait_until(lambda: len(copies.alive()) == 1, 30, "the first copy")
            host = host_of(tree, b)
            old = [host, *remote_processes(b, host)]
            raylet = b.named("raylet")
            signal_all(raylet, signal.SIGSTOP)
            try:
                wait_until(lambda: restarted_on(tree, c), 60, "the restart on c")
            finally:
                signal_all(raylet, signal.SIGCONT)
            assert info(tree).last_exit.kind is ExitKind.NODE_DOWN
            assert wait_gone(old, timeout=30) == []
            wait_until(lambda: len(copies.lives) == 2, 10, "the new copy seen")
        finally:
            tree.stop(timeout=60)
        print(copies.report())
        assert copies.most() == 1, copies.report()


def test_a_frozen_node_never_leaves_two_copies(nodes: Nodes) -> None:
    """Every process of b stops (Ray's, the remote host, its launcher and child) until
    Ray has declared b dead, then all go on at once, as a VM that was paused. The
    thawed incarnation fences itself before the parent's lease wait (8 s) is over."""
    b, c = nodes.add(namespaced=True), nodes.add(namespaced=True)
    argv = ["sleep", "7003"]
    engine = RayEngine(lease_timeout=8.0)
    with Copies(argv) as copies:
        tree = start(engine, argv, b, c)
        try:
            wait_until(lambda: len(copies.alive()) == 1, 30, "the first copy")
            host = host_of(tree, b)
            old = [host, *remote_processes(b, host)]
            frozen = b.pids()  # every process of the node, its init too
            signal_all(frozen, signal.SIGSTOP)
            try:
                wait_until(lambda: b.node_id not in {n.id for n in engine.nodes()}, 60, "b dead")
            finally:
                signal_all(frozen, signal.SIGCONT)
            wait_until(lambda: restarted_on(tree, c), 60, "the restart on c")
            assert info(tree).last_exit.kind is ExitKind.NODE_DOWN
            assert wait_gone(old, timeout=30) == []
            wait_until(lambda: len(copies.lives) == 2, 10, "the new copy seen")
        finally:
            tree.stop(timeout=60)
        print(copies.report())
        assert copies.most() == 1, copies.report()


def test_a_node_frozen_past_the_lease_stays_stopped_beside_its_replacement(
    nodes: Nodes,
) -> None:
    """The worst case the lease leaves: b stays frozen (a paused VM) after Ray declared
    it dead and after its lease ran out, so the parent restarts the subtree on c while
    b's copy still exists, stopped. Nothing on c can reach it (b is another host);
    once thawed, b's incarnation finds its lease gone and stops its child by itself.
    Asserted: the old copy never ran beside the new one until the thaw (it was
    stopped), and it ended after the thaw with the new one untouched; how long it
    ran after the thaw is printed (docs/multihost.md section 5, the worst case)."""
    b, c = nodes.add(namespaced=True), nodes.add(namespaced=True)
    argv = ["sleep", "7008"]
    with Copies(argv) as copies:
        tree = start(RayEngine(lease_timeout=4.0), argv, b, c)
        try:
            wait_until(lambda: len(copies.alive()) == 1, 30, "the first copy")
            (first,) = copies.alive()
            host = host_of(tree, b)
            old = [host, *remote_processes(b, host)]
            frozen = b.pids()
            signal_all(frozen, signal.SIGSTOP)
            try:
                wait_until(lambda: restarted_on(tree, c), 60, "the restart on c")
                wait_until(lambda: len(copies.alive()) == 2, 10, "the new copy seen")
                assert psutil.Process(first).status() == psutil.STATUS_STOPPED
            finally:
                thawed = _now()
                signal_all(frozen, signal.SIGCONT)
            assert info(tree).last_exit.kind is ExitKind.NODE_DOWN
            assert wait_gone(old, timeout=30) == []
            (second,) = copies.alive()
            assert restarted_on(tree, c) and psutil.Process(second).is_running()
        finally:
            tree.stop(timeout=60)
        print(copies.report())
        ran = copies.lives[first][2] - thawed
        print(f"the old copy ran {ran * 1000:.0f} ms after the thaw (at most)")


@pytest.mark.parametrize("lease", [4.0, None], ids=["lease-4s", "lease-off"])
def test_a_hung_remote_supervisor_is_restarted_without_two_copies(
    nodes: Nodes, lease: float | None
) -> None:
    """SIGSTOP of the remote host only: Ray sees a live process on a live node; the
    opt-in liveness check finds it hung, it is killed and restarted on the same node.
    Its child, in the launcher's own session, is not stopped: the new incarnation
    starts its own only once the old one's are gone from the node."""
    b, c = nodes.add(namespaced=True), nodes.add(namespaced=True)
    argv = ["sleep", "7004" if lease else "7005"]
    with Copies(argv) as copies:
        tree = start(RayEngine(lease_timeout=lease, liveness_timeout=1.0), argv, b, c)
        try:
            wait_until(lambda: len(copies.alive()) == 1, 30, "the first copy")
            host = host_of(tree, b)
            old = [host, *remote_processes(b, host)]
            os.kill(host, signal.SIGSTOP)
            try:
                wait_until(lambda: restarted_on(tree, b), 60, "the restart on b")
            finally:
                signal_all([host], signal.SIGCONT)
            assert info(tree).last_exit.kind is ExitKind.REMOTE_UNRESPONSIVE
            assert wait_gone(old, timeout=30) == []
            wait_until(lambda: len(copies.lives) == 2, 10, "the new copy seen")
        finally:
            tree.stop(timeout=60)
        print(copies.report())
        assert copies.most() == 1, copies.report()


@pytest.mark.parametrize("lease", [4.0, None], ids=["lease-4s", "lease-off"])
def test_a_killed_remote_host_is_restarted_without_two_copies(
    nodes: Nodes, lease: float | None
) -> None:
    """SIGKILL of the remote host: `remote_crash`, restarted on the same node; its
    launcher sweeps the old child, and the new incarnation starts its own only once
    nothing of the old one is left on the node."""
    b, c = nodes.add(namespaced=True), nodes.add(namespaced=True)
    argv = ["sleep", "7006" if lease else "7007"]
    with Copies(argv) as copies:
        tree = start(RayEngine(lease_timeout=lease), argv, b, c)
        try:
            wait_until(lambda: len(copies.alive()) == 1, 30, "the first copy")
            host = host_of(tree, b)
            old = [host, *remote_processes(b, host)]
            os.kill(host, signal.SIGKILL)
            wait_until(lambda: restarted_on(tree, b), 60, "the restart on b")
            assert info(tree).last_exit.kind is ExitKind.REMOTE_CRASH
            assert wait_gone(old, timeout=30) == []
            wait_until(lambda: len(copies.lives) == 2, 10, "the new copy seen")
        finally:
            tree.stop(timeout=60)
        print(copies.report())
        assert copies.most() == 1, copies.report()
