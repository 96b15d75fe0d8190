"""The parent's side of a remote subtree through FakeEngine (real local trees, fake
nodes; no Ray): a pinned node's loss contained (pending), an exit whose incarnation
may still run told only once it is gone, and "unreachable" shown with since when.
docs/multihost.md sections 2, 4 and 5."""

from __future__ import annotations

import threading
import time
from typing import Any

import psutil

from actors import Tree
from actors.testing import FakeEngine
from supervision import (
    ChildSpec,
    EventKind,
    ExitKind,
    ExitReason,
    NodeInfo,
    Placement,
    SupervisorSpec,
)
from tests.remote.fake_trees import info, start
from tests.support import wait_until

SLEEP = ["sleep", "60"]


class Engine(FakeEngine):
    """FakeEngine whose nodes come back under a new id and the same name (as Ray's do),
    and that records which processes of earlier incarnations ran at each spawn."""

    def __init__(self, nodes: list[str], *, slow_kill: float = 0.0, **kw: Any) -> None:
        super().__init__(nodes, **kw)
        self.slow_kill = slow_kill  # a kill takes effect this late (Ray's is asynchronous)
        self._ids: dict[str, str] = {}  # a new id -> the fake node behind it
        self.watched: list[int] = []  # pids of incarnations already started
        self.alive_at_spawn: list[list[int]] = []  # of those, alive at each later spawn

    def rejoin(self, name: str, new_id: str) -> None:
        self.add_node(name)
        self._ids[new_id] = name

    def nodes(self) -> list[NodeInfo]:
        back = {name: new for new, name in self._ids.items()}
        return [NodeInfo(back[n.id], n.name) if n.id in back else n for n in super().nodes()]

    def spawn(self, spec: SupervisorSpec, node: str, *args: Any) -> Any:
        self.alive_at_spawn.append([p for p in self.watched if _running(p)])
        handle = super().spawn(spec, self._ids.get(node, node), *args)
        self.watched += [c.pid for c in handle.host.api("which_children") if c.pid]
        return handle

    def kill(self, handle: Any) -> None:
        if not self.slow_kill:
            super().kill(handle)
            return
        later = threading.Timer(self.slow_kill, super().kill, [handle])
        later.daemon = True
        later.start()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def remote(placement: Placement) -> SupervisorSpec:
    return SupervisorSpec(
        id="ingest",
        placement=placement,
        children=[ChildSpec(id="reader", command=SLEEP), ChildSpec(id="parser", command=SLEEP)],
    )


def issue_tree(wait: float | None = None) -> SupervisorSpec:
    """Issue 28's reproduction: intensity 3 in 60 s, a local child, a pinned subtree."""
    return SupervisorSpec(
        id="root",
        intensity=3,
        period=60.0,
        children=[
            ChildSpec(id="web", command=SLEEP),
            remote(Placement(node="b", policy="pinned", wait=wait)),
        ],
    )


def attempts(tree: Tree) -> int:
    return sum(
        1
        for e in tree.events()
        if e.context is EventKind.RESTART_SCHEDULED and e.detail.startswith("pending")
    )


# -- item 4: a pinned node's loss is contained ---------------------------------------


def test_a_lost_pinned_node_leaves_the_sibling_running_and_the_subtree_pending(
    trees: list[Tree],
) -> None:
    engine = Engine(["a", "b"])
    tree = start(trees, issue_tree(), engine)
    web = info(tree, "web").pid
    lost = time.monotonic()
    engine.node_down("b")
    wait_until(lambda: info(tree).state == "pending", what="pending")
    child = info(tree)
    assert lost <= child.since <= time.monotonic() and child.next_attempt > child.since
    assert child.node is None and child.pid is None
    wait_until(lambda: attempts(tree) >= 2, what="two placement attempts")  # 1 s apart
    assert tree.finished() is None and info(tree, "web").pid == web
    assert info(tree, "web").state == "running" and info(tree).restarts == 0
    failed = [e for e in tree.events() if e.context is EventKind.START_FAILED]
    assert len(failed) == 1 and "no live node fits" in failed[0].reason.message
    # b comes back under a new id, with its name: the pinned subtree is placed there.
    engine.rejoin("b", "b-2")
    wait_until(lambda: info(tree).state == "running", 30, "placed again")
    assert (info(tree).node, info(tree).restarts, info(tree).since) == ("b-2", 1, None)
    assert info(tree, "web").pid == web
    assert [node for node, _ in engine.spawned] == ["b", "b"]


def test_a_pending_subtree_gives_up_by_its_wait(trees: list[Tree]) -> None:
    engine = Engine(["a", "b"])
    tree = start(trees, issue_tree(wait=1.5), engine)
    engine.node_down("b")
    reason = tree.wait(timeout=30)
    assert reason is not None and reason.kind is ExitKind.SHUTDOWN
    kinds = [e.context for e in tree.events() if e.supervisor == "root"]
    assert EventKind.MAX_INTENSITY_REACHED in kinds
    assert attempts(tree) >= 2  # it waited before the retry loop gave up


# -- item 3: an exit whose incarnation may still run waits until it is gone ----------


def test_a_hung_remote_is_restarted_only_once_its_kill_is_confirmed(trees: list[Tree]) -> None:
    """No lease: the liveness check kills the hung incarnation, and the parent restarts
    it only once the engine confirms it dead; none of its processes runs at the spawn."""
    engine = Engine(["a", "b"], liveness_timeout=0.3)
    tree = start(trees, issue_tree(), engine)
    old = engine.handles()[0]
    nanny = old.host.tree.ref._actor_weakref()  # the remote nanny, to hang it
    hung, release = threading.Event(), threading.Event()

    def stuck() -> Any:  # its own thread blocks: a deadlock
        hung.set()
        release.wait(30)
        return {}

    nanny.count_children = stuck
    try:
        wait_until(hung.is_set, what="the liveness check to find it hung")
        wait_until(lambda: old.host.killed, what="the kill")
        wait_until(lambda: info(tree).state == "unreachable", what="shown unreachable")
        # Its kill waits for the hung nanny (its children still run): no restart yet.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert info(tree).incarnation == 1 and len(engine.spawned) == 1
            time.sleep(0.05)
    finally:
        release.set()
    wait_until(lambda: info(tree).incarnation == 2 and info(tree).state == "running")
    assert engine.alive_at_spawn == [[], []]  # nothing of incarnation 1 ran at the restart
    reason = info(tree).last_exit
    assert reason.kind is ExitKind.REMOTE_UNRESPONSIVE and "liveness" in reason.message


def test_liveness_fires_on_a_remote_that_does_not_answer_at_all(trees: list[Tree]) -> None:
    """With a lease, a silent remote is unreachable (renewals fail), and the liveness
    check still counts its silence: remote_unresponsive, killed, told once confirmed."""
    engine = Engine(["a", "b"], lease_timeout=3.0, liveness_timeout=0.5)
    tree = start(trees, issue_tree(), engine)
    old = engine.handles()[0]
    engine.silence("b")
    wait_until(lambda: info(tree).state == "unreachable", what="unreachable")
    wait_until(lambda: old.host.killed, what="the liveness verdict's kill")
    assert info(tree).incarnation == 1  # not confirmed while nothing comes through
    engine.heal("b")
    wait_until(lambda: info(tree).incarnation == 2 and info(tree).state == "running")
    reason = info(tree).last_exit
    assert reason.kind is ExitKind.REMOTE_UNRESPONSIVE and "did not answer" in reason.message
    assert engine.alive_at_spawn[-1] == [] and info(tree).restarts == 1


def test_a_stop_the_parent_asks_for_answers_once_the_old_incarnation_is_gone(
    trees: list[Tree],
) -> None:
    engine = Engine(["a", "b"], slow_kill=0.5)
    tree = start(trees, issue_tree(), engine)
    old = engine.handles()[0]
    pids = list(engine.watched)
    engine.unreachable("b")  # its orderly stop fails; the kill reaches it, 0.5 s later
    tree.nanny.terminate_child("ingest").get(timeout=30)
    assert old.host.ended and [p for p in pids if _running(p)] == []
    assert info(tree).state == "stopped"


# -- item 2: unreachable, with since when -----------------------------------------------


def test_a_silent_node_shows_unreachable_with_since_when_and_which_tree_answers(
    trees: list[Tree],
) -> None:
    engine = Engine(["a", "b"], lease_timeout=30.0)
    tree = start(trees, issue_tree(), engine)
    cut = time.monotonic()
    engine.silence("b")
    tree_now = tree.nanny.which_tree().get(timeout=15)  # a failed call marks it, not raises
    ingest = next(n for n in tree_now if n.info.id == "ingest")
    assert ingest.children == ()
    wait_until(lambda: info(tree).state == "unreachable", what="unreachable")
    status = tree.nanny.child_nanny("ingest").get().proxy().status.get()
    assert cut <= status.unreachable_since <= time.monotonic()
    assert info(tree).restarts == 0
    engine.heal("b")
    wait_until(lambda: info(tree).state == "running", what="answers again")
    assert status.unreachable_since is None


def test_which_child_shows_since_when_it_is_unreachable(trees: list[Tree]) -> None:
    """ChildInfo.since: the field `status` prints ("unreachable for 12 s")."""
    engine = Engine(["a", "b"])
    tree = start(trees, issue_tree(), engine)
    cut = time.monotonic()
    engine.unreachable("b")
    wait_until(lambda: info(tree).state == "unreachable", what="unreachable")
    since = info(tree).since
    assert since is not None and cut <= since <= time.monotonic()
    assert [n.info.since for n in tree.nanny.which_tree().get() if n.info.id == "ingest"] == [since]
    engine.heal("b")
    wait_until(lambda: info(tree).state == "running", what="answers again")
    assert info(tree).since is None


def test_while_its_exit_waits_for_the_fence_it_is_never_shown_running(
    trees: list[Tree],
) -> None:
    engine = Engine(["a", "b", "c"], lease_timeout=1.5)
    spec = SupervisorSpec(id="root", children=[remote(Placement(node="b", fallback=["c"]))])
    tree = start(trees, spec, engine)
    engine.node_down("b", kill=False)  # frozen, not dead: it fences itself
    wait_until(lambda: info(tree).state == "unreachable", what="its exit decided")
    deadline = time.monotonic() + 10
    while (child := info(tree)).incarnation == 1 and time.monotonic() < deadline:
        assert child.state == "unreachable" and child.since is not None
        time.sleep(0.01)
    wait_until(lambda: info(tree).state == "running", what="restarted on c")
    assert info(tree).node == "c" and engine.alive_at_spawn[-1] == []


class Confirming(Engine):
    """An engine whose far side says when its fence is complete (RayEngine's
    fence_confirmed, in Ray's KV store)."""

    def __init__(self, nodes: list[str], **kw: Any) -> None:
        super().__init__(nodes, **kw)
        self.confirmed_at: float | None = None

    def fence_confirmed(self, handle: Any) -> bool:
        if handle.host.fenced and handle.host.ended:
            if self.confirmed_at is None:
                self.confirmed_at = time.monotonic()
            return True
        return False


def test_a_fence_the_far_side_confirms_ends_the_wait_for_the_lease(trees: list[Tree]) -> None:
    """Lease 4 s: the far side fences 3 s after its last renewal and says so; the
    parent restarts elsewhere then, not at the lease's end (4 s)."""
    engine = Confirming(["a", "b", "c"], lease_timeout=4.0)
    spec = SupervisorSpec(id="root", children=[remote(Placement(node="b", fallback=["c"]))])
    tree = start(trees, spec, engine)
    old = engine.handles()[0]
    engine.node_down("b", kill=False)  # frozen, not dead: it fences itself
    renewed = old.host._last_renewal  # the far side's last renewal: no later one comes
    wait_until(lambda: info(tree).node == "c" and info(tree).state == "running", 15, "moved")
    told = next(
        e.time
        for e in tree.events()
        if e.context is EventKind.CHILD_EXITED and e.offender == "ingest"
    )
    assert engine.confirmed_at is not None and engine.confirmed_at <= told
    assert told - renewed < 4.0 - 0.1  # before the lease's end
    assert info(tree).last_exit.kind is ExitKind.NODE_DOWN
    assert engine.alive_at_spawn[-1] == []


class OneReport(FakeEngine):
    """The engine reports node "a" dead for the first subtree started there only: the
    others hear nothing of it (Ray's reports of one node's actors come one by one)."""

    def __init__(self, nodes: list[str]) -> None:
        super().__init__(nodes)
        self.first: Any = None
        self.lost = False

    def spawn(self, spec: SupervisorSpec, node: str, *args: Any) -> Any:
        handle = super().spawn(spec, node, *args)
        if self.first is None:
            self.first = handle
        return handle

    def _dead_reason(self, handle: Any, node: Any) -> Any:
        if self.lost and handle is self.first:
            return ExitReason(ExitKind.NODE_DOWN, message="node 'a' is dead")
        return super()._dead_reason(handle, node)

    def lose_a(self) -> None:
        self.lost = True
        self._wake()


def test_two_subtrees_on_a_lost_node_are_declared_down_together(trees: list[Tree]) -> None:
    """One subtree's node_down is the node's for the whole tree: the other subtree on it
    is declared down at once, before its own engine says anything, and both restart
    on the fallback node."""
    engine = OneReport(["a", "b"])
    subtrees = [
        SupervisorSpec(
            id=name,
            placement=Placement(node="a", fallback=["b"]),
            children=[ChildSpec(id="reader", command=SLEEP)],
        )
        for name in ("s1", "s2")
    ]
    tree = start(trees, SupervisorSpec(id="root", intensity=5, children=subtrees), engine)
    assert {info(tree, s).node for s in ("s1", "s2")} == {"a"}
    engine.lose_a()
    wait_until(
        lambda: all(
            info(tree, s).node == "b" and info(tree, s).state == "running" for s in ("s1", "s2")
        ),
        what="both subtrees running on b",
    )
    exits = {
        e.offender: e.reason
        for e in tree.events()
        if e.context is EventKind.CHILD_EXITED and e.reason is not None
    }
    assert exits["s1"].kind is ExitKind.NODE_DOWN and "is dead" in exits["s1"].message
    assert exits["s2"].kind is ExitKind.NODE_DOWN
    assert "a sibling subtree there" in exits["s2"].message, exits["s2"]
