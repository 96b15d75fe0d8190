"""Tier 2, a Ray mini-cluster: a pinned node's loss is contained (docs/multihost.md
section 2). Issue 28's reproduction: a root with intensity 3 in 60 s, a local child
and a subtree pinned to a node that is removed; the local child used to be gone
within seconds. Now the subtree is pending and the local child keeps running.

One cluster for the module (a head and one worker node), with the GCS health check
tuned as in tests/remote/test_cluster.py. Bounded polls only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psutil
import pykka
import pytest

from tests.support import import_ray

ray = import_ray()

from actors import Tree  # noqa: E402
from actors.ray import RayEngine  # noqa: E402
from actors.testing import wait_gone  # noqa: E402
from supervision import ChildSpec, EventKind, ExitKind, Placement, SupervisorSpec  # noqa: E402
from tests.support import wait_until  # noqa: E402
from tests.support.ray_cluster import NODE, module_cluster  # noqa: E402

pytestmark = pytest.mark.ray
SLEEP = ["sleep", "300"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    yield from (nodes.cluster for nodes in module_cluster("ntp"))


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Overrides conftest's: the cluster's processes stay for the module; remote pids are
    checked in the test. Actors must not be left running."""
    yield
    actors = pykka.ActorRegistry.get_all()
    if actors:
        pykka.ActorRegistry.stop_all()
        pytest.fail(f"test left actors running: {actors}")


def info(tree: Tree, child: str) -> Any:
    return tree.nanny.which_child(child).get()


def test_a_removed_pinned_node_leaves_its_sibling_running_and_the_subtree_pending(
    cluster: Any,
) -> None:
    b = cluster.add_node(resources={"b": 1}, **NODE)
    cluster.wait_for_nodes()
    pinned = SupervisorSpec(
        id="ingest",
        placement=Placement(node=b.node_id, policy="pinned"),
        children=[ChildSpec(id="reader", command=SLEEP)],
    )
    spec = SupervisorSpec(
        id="root",
        intensity=3,
        period=60.0,
        children=[ChildSpec(id="web", command=SLEEP), pinned],
    )
    tree = Tree.start(spec, engine=RayEngine(lease_timeout=3.0))
    try:
        web = info(tree, "web").pid
        proxy = tree.nanny.child_nanny("ingest").get().proxy()
        old = [info(tree, "ingest").pid, *(c.pid for c in proxy.which_children().get())]
        lost = time.monotonic()
        cluster.remove_node(b, allow_graceful=False)
        wait_until(lambda: info(tree, "ingest").state == "pending", 60, "pending")
        child = info(tree, "ingest")
        assert Placement.is_unplaceable(child.last_exit) and child.pid is None
        assert lost <= child.since <= time.monotonic() and child.next_attempt > child.since
        view = [n.info for n in tree.nanny.which_tree().get() if n.info.id == "ingest"]
        assert [(v.state, v.since) for v in view] == [("pending", child.since)]
        # Several placement attempts later (1 s, then 2 s apart): nothing charged past
        # the node_down itself, and the local child is the same process.
        wait_until(
            lambda: (
                sum(
                    1
                    for e in tree.events()
                    if e.context is EventKind.RESTART_SCHEDULED and e.offender == "ingest"
                )
                >= 3
            ),
            30,
            "three placement attempts",
        )
        assert tree.finished() is None
        assert (info(tree, "web").state, info(tree, "web").pid) == ("running", web)
        exits = [
            e
            for e in tree.events()
            if e.supervisor == "root" and e.context is EventKind.CHILD_EXITED
        ]
        assert [(e.offender, e.reason.kind) for e in exits] == [("ingest", ExitKind.NODE_DOWN)]
        assert wait_gone([p for p in old if p is not None], timeout=30) == []
    finally:
        tree.stop(timeout=60)
    assert psutil.pid_exists(web) is False or psutil.Process(web).status() == "zombie"
