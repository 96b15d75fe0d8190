"""Restarts decided ahead (issue 12): the core says what a child's next exit will
mean, the launcher restarts it the moment it dies, the core accounts for it after
by the ordinary path, and nothing beyond the intensity is ever started."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from actors import Tree
from actors.testing import FakeSpawner, wait_gone
from supervision import (
    ChildSpec,
    EventKind,
    ExitPlan,
    Strategy,
    Supervisor,
    SupervisorSpec,
)
from tests.targets import children

# -- the pure plan ------------------------------------------------------------------------


def _core(*specs: ChildSpec, **flags: object) -> Supervisor:
    core = Supervisor(SupervisorSpec(id="r", children=list(specs), **flags))  # type: ignore[arg-type]
    core.start(0.0)
    for spec in specs:
        core.started(spec.id, 100, 1, 0.0)
    return core


def test_the_plan_covers_what_one_for_one_restarts_alone() -> None:
    core = _core(
        ChildSpec(id="p", command=["x"]),
        ChildSpec(id="t", command=["x"], restart="transient", min_uptime=2.0),
        ChildSpec(id="tmp", command=["x"], restart="temporary"),
        intensity=3,
    )
    assert core.exit_plan("p") == ExitPlan("p", 1, "any", 0.0, frozenset({0}))
    assert core.exit_plan("t") == ExitPlan("t", 1, "abnormal", 2.0, frozenset({0}))
    assert core.exit_plan("tmp") is None
    assert core.restart_budget(1.0) == 3


@pytest.mark.parametrize("strategy", [Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE])
def test_no_plan_where_siblings_are_stopped_first(strategy: Strategy) -> None:
    core = _core(ChildSpec(id="a", command=["x"]), strategy=strategy, intensity=3)
    assert core.exit_plan("a") is None


def test_no_plan_with_backoff_and_the_budget_follows_the_window() -> None:
    from supervision import Backoff

    core = _core(ChildSpec(id="b", command=["x"], backoff=Backoff()), intensity=2, period=10.0)
    assert core.exit_plan("b") is None
    core = _core(ChildSpec(id="a", command=["x"]), intensity=2, period=10.0)
    core.child_exited("a", 1, __import__("supervision").ExitReason.normal(), 1.0)
    core.started("a", 101, 2, 1.0)
    assert core.restart_budget(2.0) == 1
    assert core.restart_budget(11.5) == 2  # the restart at t=1 left the window


# -- the live tree ---------------------------------------------------------------------------


def test_the_nanny_arms_its_workers_and_grants_its_budget() -> None:
    fake = FakeSpawner()
    tree = Tree.start(
        SupervisorSpec(id="root", intensity=4, children=[ChildSpec(id="w", command=["x"])]),
        spawner=lambda: fake,
    )
    try:
        child = fake.latest("w")
        tree.log.wait_for(lambda e: e.context is EventKind.CHILD_STARTED, 5)
        assert fake.grants and list(fake.grants.values())[-1] == 4
        while not fake.armed:
            pass  # told, not asked: the worker arms it on its own thread
        pid, plan = fake.armed[0]
        assert pid == child.pid and isinstance(plan, ExitPlan) and plan.restart_on == "any"
        tree.nanny.terminate_child("w").get()
        assert child.pid in fake.disarmed  # a stop's exit is the host's to decide
    finally:
        tree.stop()


def _armed(tree: Tree) -> tuple[int, Any]:
    """The pid of child "w"'s first process and its launcher handle, once armed."""
    launcher = tree.context.spawner
    assert launcher is not None
    first = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_STARTED, 5).pid
    assert first is not None
    handle = next(c for c in launcher.children() if c.pid == first)  # type: ignore[attr-defined]
    # The nanny told the worker ArmExit, then asks it this: once answered, the arm
    # is on the launcher's socket, which the launcher reads before it reaps.
    tree.nanny.read_output("w").get()
    return first, handle


def test_the_launcher_restarts_an_armed_child_before_the_host_decides() -> None:
    tree = Tree.start(
        SupervisorSpec(
            id="root", intensity=5, children=[ChildSpec(id="w", target=children.sleep_forever)]
        )
    )
    try:
        first, handle = _armed(tree)
        os.kill(first, signal.SIGKILL)
        started = tree.log.wait_for(
            lambda e: e.context is EventKind.CHILD_STARTED and e.incarnation == 2, 10
        )
        assert handle.successor is not None and started.pid == handle.successor.pid
        kinds = [e.context for e in tree.events() if e.offender == "w"]
        assert kinds == [EventKind.CHILD_STARTED, EventKind.CHILD_EXITED, EventKind.CHILD_STARTED]
    finally:
        tree.stop()


def test_nothing_beyond_the_intensity_is_started_ahead() -> None:
    tree = Tree.start(
        SupervisorSpec(
            id="root",
            intensity=1,
            period=60.0,
            children=[ChildSpec(id="w", target=children.sleep_forever)],
        )
    )
    pids, handles = [], []
    launcher = tree.context.spawner
    assert launcher is not None
    for incarnation in (1, 2):
        event = tree.log.wait_for(
            lambda e, i=incarnation: e.context is EventKind.CHILD_STARTED and e.incarnation == i,
            10,
        )
        pids.append(event.pid)
        handles.append(next(c for c in launcher.children() if c.pid == event.pid))  # type: ignore[attr-defined]
        tree.nanny.read_output("w").get()  # the arm has gone out before the kill
        os.kill(event.pid, signal.SIGKILL)
    reason = tree.wait(10)
    assert handles[0].successor is not None  # the first restart went ahead: within budget
    assert handles[1].exit is not None and handles[1].successor is None  # the budget was spent
    assert reason is not None and reason.message == "reached_max_restart_intensity"
    assert wait_gone(pids, 2.0) == []
    assert len([e for e in tree.events() if e.context is EventKind.CHILD_STARTED]) == 2


def test_a_shutdown_restarts_nothing_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hundreds of armed children stopped at once: the launcher restarts none of
    them on the way out (the grant drops to nothing before the stops)."""
    from actors._process import _reader

    respawned = []
    dispatch = _reader.Reader.dispatch

    def spy(self: _reader.Reader, record: object) -> None:
        if isinstance(record, _reader.Exited) and record.respawned:
            respawned.append(record.pid)
        dispatch(self, record)  # type: ignore[arg-type]

    monkeypatch.setattr(_reader.Reader, "dispatch", spy)
    spec = SupervisorSpec(
        id="dyn",
        strategy=Strategy.SIMPLE_ONE_FOR_ONE,
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id="c", command=["sleep", "1000"])],
    )
    for _ in range(3):
        tree = Tree.start(spec)
        for _ in range(300):
            tree.nanny.start_child(()).get()
        tree.stop()
    assert respawned == []


def _records(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What the launcher reported to the host, in its order."""
    from actors._process._reader import Reader

    seen: list[object] = []
    real = Reader.dispatch

    def dispatch(self: Reader, record: object) -> None:
        seen.append(record)
        real(self, record)  # type: ignore[arg-type]

    monkeypatch.setattr(Reader, "dispatch", dispatch)
    return seen


def test_the_exit_is_reported_before_its_successor_is_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from actors._launcher._protocol import RESPAWNING, Exited, Respawned

    seen = _records(monkeypatch)
    tree = Tree.start(
        SupervisorSpec(
            id="root", intensity=5, children=[ChildSpec(id="w", command=["sleep", "60"])]
        )
    )
    try:
        first, handle = _armed(tree)
        os.kill(first, signal.SIGKILL)
        started = tree.log.wait_for(
            lambda e: e.context is EventKind.CHILD_STARTED and e.incarnation == 2, 10
        )
        about = [r for r in seen if isinstance(r, Exited | Respawned) and r.pid == first]
        assert about == [
            Exited(first, -signal.SIGKILL, about[0].uptime, None, RESPAWNING, []),  # type: ignore[union-attr]
            Respawned(first, started.pid),  # type: ignore[arg-type]
        ]
        assert handle.successor is not None and handle.successor.wait_born(0)
        assert handle.successor.pid == started.pid
    finally:
        tree.stop()


def test_a_successor_that_cannot_be_started_is_restarted_the_ordinary_way(
    tmp_path: Path,
) -> None:
    script = tmp_path / "serve"
    script.write_text("#!/bin/sh\nexec sleep 60\n")
    script.chmod(0o755)
    tree = Tree.start(
        SupervisorSpec(id="root", intensity=5, children=[ChildSpec(id="w", command=[str(script)])])
    )
    try:
        first, handle = _armed(tree)
        script.unlink()
        os.kill(first, signal.SIGKILL)
        failed = tree.log.wait_for(
            lambda e: e.context is EventKind.START_FAILED and e.offender == "w", 10
        )
        assert failed.reason is not None and str(script) in (failed.reason.message or "")
        # The launcher announced a successor with the exit, and could not start it.
        assert handle.successor is not None and not handle.successor.wait_born(5)
        assert handle.successor.pid == 0
        exited = [e for e in tree.events() if e.context is EventKind.CHILD_EXITED]
        assert [e.pid for e in exited] == [first]
    finally:
        tree.stop()
