"""The shell's acting ahead, driven through the public fake behind the process port
(`actors.testing.FakeSpawner`), with no process: armed restarts and their grant,
a stop meeting a successor, runs of starts and runs of stops."""

from __future__ import annotations

from actors import Tree
from actors.testing import FakeSpawner
from supervision import ChildSpec, EventKind, Strategy, SupervisorSpec


def _tree(fake: FakeSpawner, *children: ChildSpec, **flags: object) -> Tree:
    spec = SupervisorSpec(id="root", children=list(children), **flags)  # type: ignore[arg-type]
    return Tree.start(spec, spawner=lambda: fake)


def _started(tree: Tree, child: str, incarnation: int) -> int:
    event = tree.log.wait_for(
        lambda e: (
            e.context is EventKind.CHILD_STARTED
            and e.offender == child
            and e.incarnation == incarnation
        ),
        10,
    )
    assert event.pid is not None
    return event.pid


def _armed(tree: Tree, fake: FakeSpawner, child: str) -> None:
    """Once the worker armed its child (told, then asked behind it)."""
    tree.nanny.read_output(child).get()
    assert any(pid == fake.latest(child).pid for pid, _ in fake.armed)


def test_an_armed_exit_is_restarted_ahead_and_the_successor_adopted() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]), intensity=4)
    try:
        first = fake.latest("w")
        _armed(tree, fake, "w")
        first.finish(-9)
        assert first.successor is not None  # started before the exit was reported
        assert _started(tree, "w", 2) == first.successor.pid  # and adopted by the restart
        assert sum(fake.used.values()) == 1 and len(fake.children) == 2
    finally:
        tree.stop()
    assert all(c.exit is not None for c in fake.children)


def test_nothing_is_restarted_ahead_beyond_the_grant() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]), intensity=1, period=60.0)
    try:
        _armed(tree, fake, "w")
        fake.latest("w").finish(-9)
        _started(tree, "w", 2)
        _armed(tree, fake, "w")
        second = fake.latest("w")
        second.finish(-9)
        assert second.successor is None  # the intensity's one restart was spent
        assert tree.wait(10) is not None
    finally:
        tree.stop()


def test_a_stop_that_meets_a_successor_kills_it_and_says_so() -> None:
    """The launcher reaped and restarted the child before the stop's Disarm reached
    it: the stop takes the successor with the exit it concludes."""
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]), intensity=4)
    try:
        first = fake.latest("w")
        _armed(tree, fake, "w")
        first.finish(-15, note=False)  # the report is still on its way
        successor = first.successor
        assert successor is not None and successor.exit is None
        tree.nanny.terminate_child("w").get()
        assert successor.exit is not None  # killed by the stop
        notes = [
            e for e in tree.events() if e.context is EventKind.CHILD_NOTE and e.pid == successor.pid
        ]
        assert notes and "a stop came first" in notes[0].detail
        first.renotify()  # the late report restarts nothing
        tree.nanny.which_children().get()
        assert tree.nanny.which_children().get()[0].state == "stopped"
        assert len(fake.children) == 2
    finally:
        tree.stop()


def test_a_successor_of_a_process_let_go_is_never_born() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]), intensity=4)
    try:
        first = fake.latest("w")
        _armed(tree, fake, "w")
        assert first.take_successor() is None  # its owner let go first
        first.finish(-9)
        assert first.successor is None
    finally:
        tree.stop()


def test_one_for_all_restarts_its_children_as_one_run_of_starts_in_order() -> None:
    fake = FakeSpawner()
    kids = [ChildSpec(id=f"c{i}", command=["x"]) for i in range(5)]
    tree = _tree(fake, *kids, strategy=Strategy.ONE_FOR_ALL, intensity=3)
    try:
        runs_before = len(fake.runs)
        fake.latest("c2").finish(1)
        for kid in kids:
            _started(tree, kid.id, 2)
        runs = fake.runs[runs_before:]
        assert runs and runs[0] == [k.id for k in kids]  # sent ahead as one run, in order
        restarted = [c.name for c in fake.children[len(kids) :]]
        assert restarted == [k.id for k in kids]
        # Its siblings were stopped in reverse start order before, as one run of stops.
        stopped = [c.name for c in fake.ended if c.name != "c2"]
        assert stopped == ["c4", "c3", "c1", "c0"]
    finally:
        tree.stop()


def test_a_run_of_starts_starts_nothing_after_a_start_that_failed() -> None:
    fake = FakeSpawner()
    kids = [ChildSpec(id=f"c{i}", command=["x"]) for i in range(4)]
    tree = _tree(fake, *kids, strategy=Strategy.ONE_FOR_ALL, intensity=3)
    try:
        runs_before = len(fake.runs)
        fake.failures.append("no such file")
        fake.latest("c1").finish(1)
        tree.log.wait_for(lambda e: e.context is EventKind.START_FAILED and e.offender == "c0", 10)
        assert fake.runs[runs_before] == [k.id for k in kids]
        # c0 failed: nothing after it in the run was started behind its back.
        assert fake.cancelled[:3] == ["c1", "c2", "c3"]
        for kid in kids:  # the core restarts them all again, the ordinary way
            _started(tree, kid.id, 2)
    finally:
        tree.stop()


def test_a_tree_stop_stops_its_children_as_runs_in_reverse_order() -> None:
    fake = FakeSpawner()
    kids = [ChildSpec(id=f"c{i}", command=["x"]) for i in range(6)]
    tree = _tree(fake, *kids)
    tree.stop()
    assert [c.name for c in fake.ended] == [k.id for k in reversed(kids)]
    assert not fake.used  # the grant went to nothing before the stops
