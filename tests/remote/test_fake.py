"""Tier 0: remote subtrees through FakeEngine (real local trees, fake nodes), and the
fencing rules in virtual time. No Ray."""

from __future__ import annotations

from typing import Any

import psutil
import pytest

from actors import Tree
from actors._remote._port import Outcome
from actors.testing import FakeEngine, exit_with, wait_gone
from supervision import (
    ChildNotFound,
    ChildSpec,
    ExitKind,
    ExitReason,
    Placement,
    Restart,
    Strategy,
    SupervisorSpec,
)
from tests.remote.fake_trees import info, start
from tests.support import wait_until

SLEEP = ["sleep", "60"]


def remote(placement: Placement, **kw: Any) -> SupervisorSpec:
    return SupervisorSpec(
        id="ingest",
        placement=placement,
        children=[ChildSpec(id="reader", command=SLEEP), ChildSpec(id="parser", command=SLEEP)],
        **kw,
    )


def root(*children: Any, **kw: Any) -> SupervisorSpec:
    return SupervisorSpec(id="root", intensity=kw.pop("intensity", 5), children=children, **kw)


def remote_pids(tree: Tree) -> list[int]:
    return [
        c.pid for c in tree.ref.proxy().child_nanny("ingest").get().proxy().which_children().get()
    ]


def test_a_remote_subtree_shows_its_node_and_forwards_the_api(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b"])
    tree = start(
        trees, root(ChildSpec(id="web", command=SLEEP), remote(Placement(node="b"))), engine
    )
    child = info(tree)
    assert (child.type, child.state, child.node) == ("supervisor", "running", "b")
    assert engine.spawned == [("b", 1)]
    proxy = tree.nanny.child_nanny("ingest").get().proxy()
    assert [c.id for c in proxy.which_children().get()] == ["parser", "reader"]
    proxy.terminate_child("parser").get()
    assert proxy.which_child("parser").get().state == "stopped"
    with pytest.raises(ChildNotFound) as error:  # rebuilt on this side, fields and all
        proxy.terminate_child("nope").get()
    assert (error.value.supervisor, error.value.child) == ("ingest", "nope")
    paths = {n.path: n for n in tree.nanny.which_tree().get()[1].children}
    assert set(paths) == {"root/ingest/reader", "root/ingest/parser"}
    assert paths["root/ingest/reader"].info.node == "b"


def test_unreachable_then_heal_charges_nothing(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b"])
    tree = start(trees, root(remote(Placement(node="b"))), engine)
    engine.unreachable("b")
    wait_until(lambda: info(tree).state == "unreachable", what="unreachable")
    assert info(tree).restarts == 0
    engine.heal("b")
    wait_until(lambda: info(tree).state == "running", what="running again")
    assert (info(tree).restarts, engine.spawned) == (0, [("b", 1)])
    # and the subtree is watched again: a crash now is seen
    engine.crash(engine.handles()[0])
    wait_until(lambda: info(tree).restarts == 1, what="the crash after the heal")


def test_unreachable_then_node_down_is_charged_once_and_moves(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b", "c"])
    spec = root(remote(Placement(node="b", fallback=["c"])))
    tree = start(trees, spec, engine)
    old = remote_pids(tree)
    engine.unreachable("b")
    wait_until(lambda: info(tree).state == "unreachable", what="unreachable")
    engine.node_down("b")
    wait_until(lambda: info(tree).node == "c" and info(tree).state == "running", what="moved")
    child = info(tree)
    assert child.restarts == 1
    assert child.last_exit.kind is ExitKind.NODE_DOWN
    assert engine.spawned == [("b", 1), ("c", 2)]
    assert wait_gone(old) == []


def test_remote_crash_restarts_on_the_same_node(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b"])
    tree = start(trees, root(remote(Placement(node="b"))), engine)
    engine.crash(engine.handles()[0])
    wait_until(lambda: info(tree).restarts == 1 and info(tree).state == "running")
    assert info(tree).last_exit.kind is ExitKind.REMOTE_CRASH
    assert engine.spawned == [("b", 1), ("b", 2)]


def test_late_results_of_an_old_incarnation_restart_nothing(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b"])
    tree = start(trees, root(remote(Placement(node="b"))), engine)
    first = engine.handles()[0]
    engine.crash(first)
    wait_until(lambda: info(tree).restarts == 1 and info(tree).state == "running")
    before = info(tree)
    engine.replay(first, Outcome("dead", ExitReason(ExitKind.NODE_DOWN)))
    engine.replay(first, Outcome("exited", ExitReason.shutdown()))
    engine.replay(first, Outcome("unreachable"))
    # A probe: a fresh crash of the current incarnation is handled after the replays.
    engine.crash(engine.handles()[1])
    wait_until(lambda: info(tree).restarts == 2 and info(tree).state == "running")
    assert info(tree).incarnation == before.incarnation + 1
    assert len(engine.spawned) == 3


@pytest.mark.parametrize(("restart", "restarted"), [("permanent", True), ("transient", False)])
def test_a_remote_give_up_crosses_as_shutdown(
    trees: list[Tree], restart: str, restarted: bool
) -> None:
    engine = FakeEngine(["b"])
    flaky = SupervisorSpec(
        id="ingest",
        placement=Placement(node="b"),
        intensity=0,
        restart=Restart(restart),
        children=[ChildSpec(id="crash", target=exit_with, args=(3, 0.2))],
    )
    tree = start(trees, root(ChildSpec(id="web", command=SLEEP), flaky), engine)
    wait_until(lambda: info(tree).last_exit is not None, what="the remote give-up")
    assert info(tree).last_exit.kind is ExitKind.SHUTDOWN
    if restarted:
        wait_until(lambda: len(engine.spawned) >= 2, what="a restart")
    else:
        wait_until(lambda: info(tree).state == "stopped", what="left stopped")
        assert engine.spawned == [("b", 1)]


def test_pinned_to_a_dead_node_retries_then_gives_up(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b"])
    # wait=0: OTP's charged retry loop (the default waits for the node: test_remote_parent_fake)
    tree = start(
        trees, root(remote(Placement(node="b", policy="pinned", wait=0)), intensity=2), engine
    )
    engine.node_down("b")
    reason = tree.wait(timeout=30)
    assert reason is not None and reason.kind is ExitKind.SHUTDOWN
    failed = [e for e in tree.events() if e.context.value == "start_failed"]
    assert len(failed) >= 1
    assert engine.spawned == [("b", 1)]


def test_a_start_failure_at_init_fails_the_tree() -> None:
    engine = FakeEngine(["a"])
    with pytest.raises(Exception, match="no live node fits"):
        Tree.start(root(remote(Placement(node="b", policy="pinned"))), engine=engine)


def test_one_for_all_across_a_local_and_a_remote_child_is_charged_once(
    trees: list[Tree],
) -> None:
    engine = FakeEngine(["a", "b"])
    spec = root(
        ChildSpec(id="web", command=SLEEP),
        remote(Placement(node="b")),
        strategy=Strategy.ONE_FOR_ALL,
        intensity=1,
    )
    tree = start(trees, spec, engine)
    web = info(tree, "web").pid
    engine.crash(engine.handles()[0])
    wait_until(lambda: info(tree, "web").pid not in (None, web), what="web restarted too")
    wait_until(lambda: info(tree).state == "running", what="remote restarted")
    assert tree.finished() is None  # one charge within intensity 1: still alive


def test_the_parent_waits_for_the_old_incarnations_fence(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b", "c"], lease_timeout=1.0)
    tree = start(trees, root(remote(Placement(node="b", fallback=["c"]))), engine)
    old = engine.handles()[0]
    pids = remote_pids(tree)
    engine.node_down("b", kill=False)  # frozen, not dead: a zombie that may thaw
    wait_until(lambda: len(engine.spawned) == 2, what="the restart on c")
    # By the time the parent restarted elsewhere, the zombie had fenced itself.
    assert old.host.fenced and old.host.ended
    assert all(not psutil.pid_exists(p) or psutil.Process(p).status() == "zombie" for p in pids)
    assert engine.spawned[1] == ("c", 2)


def test_stop_takes_the_remote_subtree_down(trees: list[Tree]) -> None:
    engine = FakeEngine(["b"])
    tree = Tree.start(root(remote(Placement(node="b"))), engine=engine)
    pids = remote_pids(tree)
    tree.stop(timeout=30)
    assert engine.handles()[0].host.ended
    assert wait_gone(pids) == []


def test_a_partition_longer_than_the_lease_fences_the_remote_side(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b"], lease_timeout=0.6)
    tree = start(trees, root(remote(Placement(node="b"))), engine)
    first = engine.handles()[0]
    pids = remote_pids(tree)
    engine.silence("b")  # parked calls hang, renewals fail: a partition, the node alive
    wait_until(lambda: info(tree).state == "unreachable", what="unreachable")
    wait_until(lambda: first.host.ended, what="the remote side fenced itself")
    assert first.host.fenced and info(tree).restarts == 0  # nothing charged while unreachable
    assert wait_gone(pids) == []
    engine.heal("b")
    # Reachable again, the old incarnation is over: one charged exit, a new incarnation.
    wait_until(lambda: info(tree).restarts == 1 and info(tree).state == "running")
    assert info(tree).last_exit.kind is ExitKind.REMOTE_CRASH
    assert engine.spawned == [("b", 1), ("b", 2)]


def test_unreachable_timeout_declares_node_down_without_the_engine(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b", "c"], unreachable_timeout=0.5)
    tree = start(trees, root(remote(Placement(node="b", fallback=["c"]))), engine)
    engine.unreachable("b")  # never declared dead by the engine
    wait_until(lambda: info(tree).node == "c" and info(tree).state == "running", what="moved")
    assert info(tree).last_exit.kind is ExitKind.NODE_DOWN
    assert "unreachable_timeout" in info(tree).last_exit.message
    assert engine.spawned == [("b", 1), ("c", 2)]
    engine.heal("b")  # the old incarnation was killed when declared: nothing comes back
    engine.replay(engine.handles()[0], Outcome("exited", ExitReason.shutdown()))
    assert info(tree).restarts == 1


def test_a_hung_remote_supervisor_is_found_by_the_liveness_check(trees: list[Tree]) -> None:
    """The engine sees nothing wrong (process and node fine); only the opt-in liveness
    check finds that the remote nanny no longer answers: remote_unresponsive."""
    import threading

    engine = FakeEngine(["a", "b"], liveness_timeout=0.3)
    tree = start(trees, root(remote(Placement(node="b"))), engine)
    wait_until(lambda: info(tree).state == "running", what="started")
    host = engine.handles()[0].host
    nanny = host._tree.ref._actor_weakref()
    hung, release = threading.Event(), threading.Event()

    def stuck() -> Any:  # the remote nanny's own thread blocks: a deadlock
        hung.set()
        release.wait(30)
        return {}

    nanny.count_children = stuck
    try:
        wait_until(hung.is_set, what="the liveness check to find it hung")
        # Without a lease, no new incarnation while the old one may still run: it is
        # killed, and shown unreachable until its death is confirmed (issue 28).
        wait_until(lambda: info(tree).state == "unreachable", what="unreachable")
        assert info(tree).incarnation == 1
    finally:
        release.set()
    wait_until(lambda: info(tree).incarnation == 2, what="the restart")
    reason = info(tree).last_exit
    assert reason.kind is ExitKind.REMOTE_UNRESPONSIVE and not reason.is_normal
    assert "liveness" in reason.message
    wait_until(lambda: info(tree).state == "running", what="running again")
    assert info(tree).restarts == 1
    wait_until(lambda: host.ended, what="the hung incarnation to be stopped")


def test_a_healthy_remote_supervisor_passes_its_liveness_checks(trees: list[Tree]) -> None:
    engine = FakeEngine(["a", "b"], liveness_timeout=0.05)
    tree = start(trees, root(remote(Placement(node="b"))), engine)
    host = engine.handles()[0].host
    asked = []
    real = host.liveness
    host.liveness = lambda timeout: asked.append(timeout) or real(timeout)  # type: ignore[method-assign]
    wait_until(lambda: len(asked) >= 5, what="five liveness checks")
    assert info(tree).restarts == 0 and info(tree).incarnation == 1


def test_the_remote_tree_events_join_the_parent_log_under_its_path(trees: list[Tree]) -> None:
    import os
    import signal
    import time

    from supervision import EventKind

    engine = FakeEngine(["a", "b"])
    tree = start(trees, root(remote(Placement(node="b"))), engine)

    def remote_event(kind: EventKind, child: str) -> Any:
        found = [
            e
            for e in tree.events()
            if e.supervisor == "root/ingest" and e.context is kind and e.offender == child
        ]
        return found[-1] if found else None

    wait_until(lambda: remote_event(EventKind.CHILD_STARTED, "parser") is not None)
    started = remote_event(EventKind.CHILD_STARTED, "reader")
    assert started is not None and started.pid == remote_pids(tree)[1]
    victim = remote_pids(tree)[0]  # parser (newest first)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: remote_event(EventKind.CHILD_EXITED, "parser") is not None)
    exited = remote_event(EventKind.CHILD_EXITED, "parser")
    assert exited.pid == victim and exited.reason.kind is ExitKind.KILLED
    assert abs(exited.time - time.monotonic()) < 30  # on the parent's clock


def test_status_shows_a_remote_subtree_with_its_node_and_no_local_figures(
    trees: list[Tree],
) -> None:
    """The CLI's status: a remote child's pid is another host's; it is not sampled here."""
    from actors._operate._snapshot import TreeInspector
    from actors.cli._plain import Painter, status_lines

    engine = FakeEngine(["a", "b"])
    spec = root(ChildSpec(id="web", command=SLEEP), remote(Placement(node="b")))
    tree = start(trees, spec, engine)
    inspector = TreeInspector(tree.ref, spec, tree.log)
    try:
        snapshot = inspector.snapshot()
    finally:
        inspector.close()
    nodes = {n.path: n for _, n in snapshot.walk()}
    local, ingest = nodes["root/web"], nodes["root/ingest"]
    remote_worker = nodes["root/ingest/reader"]
    assert local.node is None and local.rss is not None and local.rss > 0
    assert ingest.node == "b" and remote_worker.node == "b"
    assert remote_worker.pid is not None and remote_worker.cpu is None and remote_worker.rss is None

    class Out:
        def isatty(self) -> bool:
            return False

    text = "\n".join(status_lines(Painter(Out()), {"pid": 1}, snapshot))  # type: ignore[arg-type]
    assert "ingest (one_for_one) @b" in text
