"""Nested trees, escalation, group strategies and dynamic children on real processes."""

from __future__ import annotations

import os
import signal
import time

import pytest

from actors import NannyActor
from actors.testing import wait_gone
from supervision import (
    ChildSpec,
    EventKind,
    ExitKind,
    Restart,
    SimpleOneForOneError,
    Strategy,
    SupervisorSpec,
    TooManyChildren,
)
from tests.support import children_by_id, event_log, wait_event, wait_until
from tests.targets import children


def _stopper(path, name: str, **kw) -> ChildSpec:
    return ChildSpec(
        id=name, target=children.record_stop, args=(str(path), name), ready="notify", **kw
    )


def test_three_level_tree_stops_depth_first_in_reverse_order(tmp_path):
    path = tmp_path / "stops"
    spec = SupervisorSpec(
        id="root",
        children=[
            _stopper(path, "a"),
            SupervisorSpec(
                id="mid",
                children=[
                    _stopper(path, "b"),
                    SupervisorSpec(id="leaf", children=[_stopper(path, "c"), _stopper(path, "d")]),
                    _stopper(path, "e"),
                ],
            ),
            _stopper(path, "f"),
        ],
    )
    ref = NannyActor.start(spec)
    log = event_log(ref)
    started = [e.offender for e in log.snapshot() if e.context is EventKind.CHILD_STARTED]
    assert started == ["a", "b", "c", "d", "leaf", "e", "mid", "f"]
    infos = children_by_id(ref)
    assert infos["mid"].type == "supervisor" and infos["mid"].pid is None
    ref.stop()
    assert path.read_text().split() == ["f", "e", "d", "c", "b", "a"]


def test_one_for_all_restarts_every_sibling(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            strategy=Strategy.ONE_FOR_ALL,
            intensity=3,
            children=[ChildSpec(id=i, command=["sleep", "60"]) for i in ("a", "b", "c")],
        )
    )
    before = children_by_id(ref)
    os.kill(before["b"].pid, signal.SIGKILL)
    wait_event(ref, EventKind.CHILD_STARTED, "c", where=lambda e: e.incarnation == 2)
    after = children_by_id(ref)
    assert all(after[i].pid != before[i].pid for i in "abc")
    terminated = [
        e.offender for e in ref.proxy().events().get() if e.context is EventKind.CHILD_TERMINATED
    ]
    assert terminated == ["c", "a"]  # the others, reverse start order
    assert wait_gone([before[i].pid for i in "abc"]) == []


def test_rest_for_one_restarts_later_siblings_only(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            strategy=Strategy.REST_FOR_ONE,
            intensity=3,
            children=[ChildSpec(id=i, command=["sleep", "60"]) for i in ("a", "b", "c")],
        )
    )
    before = children_by_id(ref)
    os.kill(before["b"].pid, signal.SIGKILL)
    wait_event(ref, EventKind.CHILD_STARTED, "c", where=lambda e: e.incarnation == 2)
    after = children_by_id(ref)
    assert after["a"].pid == before["a"].pid
    assert after["b"].pid != before["b"].pid and after["c"].pid != before["c"].pid


def _crashing_sub(restart: Restart) -> SupervisorSpec:
    return SupervisorSpec(
        id="sub",
        intensity=0,
        restart=restart,
        children=[ChildSpec(id="w", command=["sleep", "60"])],
    )


def test_permanent_nested_supervisor_that_gives_up_is_restarted_and_charged(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=1,
            period=60.0,
            children=[
                ChildSpec(id="sibling", command=["sleep", "60"]),
                _crashing_sub(Restart.PERMANENT),
            ],
        )
    )
    log = event_log(ref)
    w = next(
        e for e in log.snapshot() if e.context is EventKind.CHILD_STARTED and e.offender == "w"
    )
    os.kill(w.pid, signal.SIGKILL)
    gave_up = wait_event(ref, EventKind.MAX_INTENSITY_REACHED, "w")
    assert gave_up.supervisor == "root/sub"
    exited = wait_event(ref, EventKind.CHILD_EXITED, "sub")
    assert exited.supervisor == "root" and exited.reason.kind is ExitKind.SHUTDOWN
    wait_event(ref, EventKind.CHILD_STARTED, "sub", where=lambda e: e.incarnation == 2)
    infos = children_by_id(ref)
    assert infos["sub"].restarts == 1 and infos["sub"].state == "running"
    assert wait_gone([w.pid]) == []
    # The restart was charged to the parent: with intensity 1, a second escalation ends it.
    w2 = wait_event(ref, EventKind.CHILD_STARTED, "w", where=lambda e: e.pid != w.pid)
    os.kill(w2.pid, signal.SIGKILL)
    gave_up = log.wait_for(
        lambda e: e.context is EventKind.MAX_INTENSITY_REACHED and e.supervisor == "root", 10
    )
    assert gave_up.offender == "sub"
    assert ref.actor_stopped.wait(10)


def test_transient_nested_supervisor_that_gives_up_is_not_restarted(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(id="sibling", command=["sleep", "60"]),
                _crashing_sub(Restart.TRANSIENT),
            ],
        )
    )
    log = event_log(ref)
    w = next(
        e for e in log.snapshot() if e.context is EventKind.CHILD_STARTED and e.offender == "w"
    )
    os.kill(w.pid, signal.SIGKILL)
    wait_event(ref, EventKind.CHILD_EXITED, "sub")
    infos = children_by_id(ref)
    assert infos["sub"].state == "stopped" and infos["sub"].restarts == 0
    assert infos["sibling"].state == "running"


def test_escalation_through_three_levels_ends_the_root(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=0,
            children=[
                SupervisorSpec(
                    id="mid",
                    intensity=0,
                    children=[
                        SupervisorSpec(
                            id="leaf",
                            intensity=0,
                            children=[ChildSpec(id="w", command=["sleep", "60"])],
                        )
                    ],
                )
            ],
        )
    )
    log = event_log(ref)
    w = next(e for e in log.snapshot() if e.offender == "w")
    os.kill(w.pid, signal.SIGKILL)
    stopped = log.wait_for(
        lambda e: e.context is EventKind.SUPERVISOR_STOPPED and e.supervisor == "root", 10
    )
    assert stopped.reason.kind is ExitKind.SHUTDOWN
    gave_up = [e.supervisor for e in log.snapshot() if e.context is EventKind.MAX_INTENSITY_REACHED]
    assert gave_up == ["root/mid/leaf", "root/mid", "root"]
    assert ref.actor_stopped.wait(10)


def test_dynamic_children_from_a_template(tree):
    ref = tree(
        SupervisorSpec(
            id="pool",
            strategy=Strategy.SIMPLE_ONE_FOR_ONE,
            intensity=3,
            max_children=3,
            children=[ChildSpec(id="job", command=["sleep"])],
        )
    )
    nanny = ref.proxy()
    a = nanny.start_child(("60",)).get()
    b = nanny.start_child(("61",)).get()
    assert (a.id, b.id) == ("job-1", "job-2")
    assert nanny.get_childspec("job-2").get().command == ("sleep", "61")
    assert nanny.which_child(b.pid).get().id == "job-2"  # addressable by pid
    nanny.terminate_child(a.pid).get()
    assert set(children_by_id(ref)) == {"job-2"}  # a terminated dynamic child is gone
    nanny.start_child(("62",)).get()
    nanny.start_child(("63",)).get()
    with pytest.raises(TooManyChildren):
        nanny.start_child(("64",)).get()
    with pytest.raises(SimpleOneForOneError):
        nanny.restart_child("job-2").get()
    os.kill(b.pid, signal.SIGKILL)
    wait_event(ref, EventKind.CHILD_STARTED, "job-2", where=lambda e: e.incarnation == 2)


def test_dynamic_children_shut_down_in_parallel_with_one_timer(tree, tmp_path):
    marker = tmp_path / "m"
    ref = tree(
        SupervisorSpec(
            id="pool",
            strategy=Strategy.SIMPLE_ONE_FOR_ONE,
            children=[ChildSpec(id="stubborn", target=children.ignore_sigterm, shutdown=1.0)],
        )
    )
    for i in range(4):
        ref.proxy().start_child((f"{marker}{i}",)).get()
    from tests.support import wait_until

    wait_until(lambda: all((tmp_path / f"m{i}").exists() for i in range(4)), what="SIG_IGN set")
    pids = [c.pid for c in ref.proxy().which_children().get()]
    t0 = time.monotonic()
    ref.stop()
    elapsed = time.monotonic() - t0
    # Four children that ignore SIGTERM, 1 s each: in sequence this takes 4 s or more.
    assert elapsed < 3.0, f"dynamic children were not stopped in parallel ({elapsed:.1f}s)"
    assert wait_gone(pids) == []


@pytest.mark.parametrize("shutdown", [0.5, "brutal_kill"])
def test_a_nested_supervisors_shutdown_bounds_its_whole_subtree(nanny_tree, shutdown):
    from actors import testing

    tree = nanny_tree(
        SupervisorSpec(
            id="root",
            children=[
                SupervisorSpec(
                    id="sub",
                    shutdown=shutdown,
                    children=[
                        SupervisorSpec(
                            id="leaf",
                            children=[
                                ChildSpec(
                                    id="stubborn",
                                    target=testing.ignore_sigterm,
                                    ready="notify",
                                    shutdown=30.0,  # would take 30 s on its own
                                )
                            ],
                        )
                    ],
                )
            ],
        )
    )
    pid = tree.pid("stubborn")
    t0 = time.monotonic()
    tree.nanny.terminate_child("sub").get()
    assert time.monotonic() - t0 < 5.0
    stopped = tree.wait_for(EventKind.CHILD_TERMINATED, "stubborn")
    assert stopped.reason.signal == signal.SIGKILL
    assert "shutdown deadline" in stopped.reason.message or shutdown == "brutal_kill"
    assert wait_gone([pid]) == []


def test_a_shared_shutdown_deadline_is_one_warning_not_one_per_child(
    caplog: pytest.LogCaptureFixture, tmp_path
) -> None:
    """simple_one_for_one children that ignore SIGTERM all reach the shared timer:
    the supervisor says so once, naming them, instead of one warning per child."""
    from actors import Tree

    marks = tmp_path / "trapped"
    marks.mkdir()
    # Each says when its trap is set: a SIGTERM before that would still end it.
    script = f"trap '' TERM; touch {marks}/$$; exec sleep 100"
    stubborn = ChildSpec(id="w", command=["sh", "-c", script], shutdown=0.5)
    tree = Tree.start(
        SupervisorSpec(id="pool", strategy=Strategy.SIMPLE_ONE_FOR_ONE, children=[stubborn])
    )
    pids = [tree.nanny.start_child([]).get().pid for _ in range(7)]
    wait_until(lambda: len(list(marks.iterdir())) == 7, 20, "seven traps set")
    caplog.set_level("WARNING", logger="nannytree")
    tree.stop(timeout=30)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    late = [w for w in warnings if "shutdown deadline" in w]
    assert len(late) == 1, warnings
    assert "7 of 7 children" in late[0] and "and 2 more" in late[0]
    assert not any("ignored SIGTERM" in w for w in warnings)
    assert wait_gone(pids, timeout=10) == []
