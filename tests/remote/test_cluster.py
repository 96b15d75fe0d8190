"""Tier 2: a mini-cluster (ray.cluster_utils.Cluster): a head and worker nodes on this
machine, with the GCS health check tuned so a lost node is declared dead in seconds.

One cluster for the module; a scenario that removes a node adds a fresh one.
Bounded polls only; remote pids are checked directly (the remote launchers are
detached from every process tree of the test).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pykka
import pytest

from tests.support import import_ray

ray = import_ray()

from actors import Tree  # noqa: E402
from actors._operate._snapshot import TreeInspector  # noqa: E402
from actors.ray import RayEngine  # noqa: E402
from actors.testing import wait_gone  # noqa: E402
from supervision import (  # noqa: E402
    ChildSpec,
    EventKind,
    ExitKind,
    Placement,
    Strategy,
    SupervisorSpec,
)
from tests.support import wait_until  # noqa: E402
from tests.support.ray_cluster import Nodes, module_cluster  # noqa: E402

pytestmark = pytest.mark.ray
SLEEP = ["sleep", "300"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Nodes]:
    yield from module_cluster("ntc")


@pytest.fixture
def nodes(cluster: Nodes) -> Iterator[Nodes]:
    yield cluster
    cluster.remove_all()


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Overrides conftest's: the cluster's processes stay for the module; remote pids are
    checked per test. Actors must not be left running."""
    yield
    actors = pykka.ActorRegistry.get_all()
    if actors:
        pykka.ActorRegistry.stop_all()
        pytest.fail(f"test left actors running: {actors}")


@pytest.fixture
def trees() -> Iterator[list[Tree]]:
    started: list[Tree] = []
    yield started
    for tree in started:
        tree.stop(timeout=60)


def remote(placement: Placement) -> SupervisorSpec:
    return SupervisorSpec(
        id="ingest",
        placement=placement,
        children=[ChildSpec(id="reader", command=SLEEP), ChildSpec(id="parser", command=SLEEP)],
    )


def info(tree: Tree, child: str = "ingest") -> Any:
    return tree.nanny.which_child(child).get()


def remote_processes(tree: Tree) -> list[int]:
    proxy = tree.nanny.child_nanny("ingest").get().proxy()
    children = [c.pid for c in proxy.which_children().get() if c.pid is not None]
    return [info(tree).pid, psutil.Process(children[0]).ppid(), *children]


def test_a_removed_node_is_node_down_and_prefer_moves_the_subtree(
    nodes: Nodes, trees: list[Tree]
) -> None:
    b, c = nodes.add(), nodes.add()
    engine = RayEngine(lease_timeout=None)
    spec = SupervisorSpec(
        id="root",
        intensity=3,
        children=[remote(Placement(node=b.node_id, fallback=[c.node_id]))],
    )
    tree = Tree.start(spec, engine=engine)
    trees.append(tree)
    assert info(tree).node == b.node_id
    old = remote_processes(tree)
    nodes.cluster.remove_node(b, allow_graceful=False)
    wait_until(lambda: info(tree).node == c.node_id and info(tree).state == "running", 60)
    child = info(tree)
    assert (child.restarts, child.last_exit.kind) == (1, ExitKind.NODE_DOWN)
    assert wait_gone(old, timeout=30) == []


def test_a_remote_crash_restarts_on_the_same_node(nodes: Nodes, trees: list[Tree]) -> None:
    b, c = nodes.add(), nodes.add()
    spec = SupervisorSpec(
        id="root", children=[remote(Placement(node=b.node_id, fallback=[c.node_id]))]
    )
    tree = Tree.start(spec, engine=RayEngine(lease_timeout=None))
    trees.append(tree)
    old = remote_processes(tree)
    os.kill(old[0], signal.SIGKILL)  # the remote host process, its node alive
    wait_until(lambda: info(tree).restarts == 1 and info(tree).state == "running", 60)
    child = info(tree)
    assert (child.node, child.last_exit.kind) == (b.node_id, ExitKind.REMOTE_CRASH)
    assert wait_gone(old, timeout=30) == []


def test_pinned_to_a_removed_node_retries_until_the_parent_gives_up(nodes: Nodes) -> None:
    b = nodes.add()
    spec = SupervisorSpec(
        id="root",
        intensity=2,
        children=[remote(Placement(node=b.node_id, policy="pinned", wait=0))],
    )
    tree = Tree.start(spec, engine=RayEngine(lease_timeout=None))
    old = remote_processes(tree)
    nodes.cluster.remove_node(b, allow_graceful=False)
    reason = tree.wait(timeout=60)
    assert reason is not None and reason.kind is ExitKind.SHUTDOWN
    assert any(e.context.value == "start_failed" for e in tree.events())
    assert wait_gone(old, timeout=30) == []


def test_a_silent_node_is_node_down_and_the_thawed_incarnation_fences_itself(
    nodes: Nodes, trees: list[Tree]
) -> None:
    b, c = nodes.add(), nodes.add()
    engine = RayEngine(lease_timeout=3.0)
    spec = SupervisorSpec(
        id="root", children=[remote(Placement(node=b.node_id, fallback=[c.node_id]))]
    )
    tree = Tree.start(spec, engine=engine)
    trees.append(tree)
    old = remote_processes(tree)
    frozen = [*nodes.pids(b), old[0]]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: info(tree).node == c.node_id and info(tree).state == "running", 60)
        assert info(tree).last_exit.kind is ExitKind.NODE_DOWN
        assert info(tree).restarts == 1
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    # Thawed: the old incarnation has lost its raylet and its lease; it stops its children.
    assert wait_gone(old, timeout=60) == []
    assert (info(tree).restarts, info(tree).node) == (1, c.node_id)  # late words ignored


def test_one_for_all_across_hosts_is_charged_once(nodes: Nodes, trees: list[Tree]) -> None:
    b, c = nodes.add(), nodes.add()
    spec = SupervisorSpec(
        id="root",
        strategy=Strategy.ONE_FOR_ALL,
        intensity=1,
        children=[
            ChildSpec(id="web", command=SLEEP),
            remote(Placement(node=b.node_id, fallback=[c.node_id])),
        ],
    )
    tree = Tree.start(spec, engine=RayEngine(lease_timeout=None))
    trees.append(tree)
    web = info(tree, "web").pid
    nodes.cluster.remove_node(b, allow_graceful=False)
    wait_until(lambda: info(tree).node == c.node_id and info(tree).state == "running", 60)
    assert info(tree, "web").pid != web  # the local sibling was restarted with it
    assert tree.finished() is None  # one charge within intensity 1


DRIVER = """
import sys, time
from actors import Tree
from actors.ray import RayEngine
from supervision import ChildSpec, Placement, SupervisorSpec
engine = RayEngine(address=sys.argv[1], lease_timeout=None)
subtrees = [SupervisorSpec(id=f"s{i}", placement=Placement(node=n),
            children=[ChildSpec(id="r", command=["sleep", "300"])])
            for i, n in enumerate(sys.argv[2:])]
tree = Tree.start(SupervisorSpec(id="root", children=subtrees), engine=engine)
pids = []
for s in subtrees:
    pids.append(tree.nanny.which_child(s.id).get().pid)
    kids = tree.nanny.child_nanny(s.id).get().proxy().which_children().get()
    pids += [k.pid for k in kids]
print(*pids, flush=True)
time.sleep(300)
"""


def test_a_killed_parent_driver_leaves_nothing_on_any_node(nodes: Nodes) -> None:
    b, c = nodes.add(), nodes.add()
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, nodes.cluster.address, b.node_id, c.node_id],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        pids = [int(p) for p in proc.stdout.readline().split()]
        launchers = [psutil.Process(pids[i]).ppid() for i in (1, 3)]
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert len(pids) == 4
    assert wait_gone([*pids, *launchers], timeout=30) == []


def test_a_frozen_node_is_remote_unresponsive_by_the_liveness_check_first(
    nodes: Nodes, trees: list[Tree], caplog: pytest.LogCaptureFixture
) -> None:
    """A whole node SIGSTOPped (its raylet, workers and the remote host) with the opt-in
    liveness check: a liveness question unanswered for T is the verdict, reachable or
    not, and the lease renewal that hangs meanwhile holds nothing back, so the verdict
    comes within 2T of the last answer, before Ray's tuned health check (about 3-4.5 s
    here) declares the node dead. The exit is told once the lease has run out (the
    kill cannot reach a frozen node), with the liveness reason."""
    b, c = nodes.add(), nodes.add()
    engine = RayEngine(lease_timeout=6.0, liveness_timeout=1.0)
    spec = SupervisorSpec(
        id="root", children=[remote(Placement(node=b.node_id, fallback=[c.node_id]))]
    )
    tree = Tree.start(spec, engine=engine)
    trees.append(tree)
    old = remote_processes(tree)
    frozen = [*nodes.pids(b), old[0]]
    caplog.set_level("INFO", logger="nannytree")
    frozen_at = time.time()
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: info(tree).node == c.node_id and info(tree).state == "running", 60)
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    verdicts = [r.created for r in caplog.records if "did not answer" in r.getMessage()]
    declared = f"declared {verdicts[0] - frozen_at:.2f}s after the freeze" if verdicts else "?"
    exits = [
        e.reason
        for e in tree.events()
        if e.context is EventKind.CHILD_EXITED and e.offender == "ingest"
    ]
    assert exits[0] is not None and exits[0].kind is ExitKind.REMOTE_UNRESPONSIVE, (
        f"{exits[0]} ({declared})"
    )
    assert wait_gone(old, timeout=60) == []


def test_status_shows_a_silent_node_unreachable_with_its_node_before_node_down(
    nodes: Nodes, trees: list[Tree]
) -> None:
    """`status` asked again and again while a node is frozen (lease off: nothing but the
    asking finds it): the subtree keeps its node, its children are never shown
    running from stale events, and it shows `unreachable` before Ray's health check
    declares the node dead (`node_down`, then running on the fallback)."""
    b, c = nodes.add(), nodes.add()
    engine = RayEngine(lease_timeout=None)
    spec = SupervisorSpec(
        id="root", children=[remote(Placement(node=b.node_id, fallback=[c.node_id]))]
    )
    tree = Tree.start(spec, engine=engine)
    trees.append(tree)
    inspector = TreeInspector(tree.ref, spec, tree.log)
    old = remote_processes(tree)
    frozen = [*nodes.pids(b), old[0]]
    seen: list[tuple[str, str | None, list[tuple[str, int | None]]]] = []

    def ingest_now() -> Any:
        root = inspector.snapshot(stats=False)
        row = next(n for _, n in root.walk() if n.path == "root/ingest")
        children = [(k.state, k.pid) for k in row.children]
        seen.append((row.state, row.node, children))
        return row

    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: ingest_now().node == c.node_id and info(tree).state == "running", 60)
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    on_b = [s for s in seen if s[1] != c.node_id]
    assert all(node == b.node_id for _, node, _ in on_b), on_b
    assert "unreachable" in [state for state, _, _ in on_b], on_b
    for state, _, children in on_b:  # no child's pid shown while its subtree is not running
        assert state == "running" or all(pid is None for _, pid in children), (state, children)
    assert info(tree).last_exit.kind is ExitKind.NODE_DOWN
    assert wait_gone(old, timeout=60) == []
