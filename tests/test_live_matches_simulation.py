"""Live and simulated agree: the same spec and the same scripted faults give the
same event order in a live tree of real processes and in virtual time."""

from __future__ import annotations

import pytest

from supervision import ChildNotPaused, ChildSpec, ExitKind, ExitReason, Strategy, SupervisorSpec
from supervision.simulate import Scripted, call, event_sequence, simulate
from tests import children

KILLED = ExitReason(ExitKind.KILLED, signal=9)


def _spec(strategy: Strategy) -> SupervisorSpec:
    return SupervisorSpec(
        id="root",
        strategy=strategy,
        intensity=3,
        period=60.0,
        children=[
            ChildSpec(id="a", target=children.sleep_forever),
            SupervisorSpec(
                id="sub",
                intensity=0,
                children=[
                    ChildSpec(id="w1", target=children.sleep_forever),
                    ChildSpec(id="w2", target=children.sleep_forever),
                ],
            ),
            ChildSpec(id="z", target=children.sleep_forever),
        ],
    )


@pytest.mark.parametrize(
    "strategy", [Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE]
)
def test_crash_then_escalation_orders_events_alike(nanny_tree, strategy):
    # The script: a crashes at t=1; w2 crashes at t=2 (sub gives up, root restarts it).
    simulated = simulate(
        _spec(strategy),
        {"a": Scripted([(1.0, KILLED)]), "sub/w2": Scripted([(2.0, KILLED)])},
        duration=10.0,
    )
    expected = event_sequence(simulated.events)
    second = expected.index(("root/sub", "child_exited", "w2"))

    tree = nanny_tree(_spec(strategy))
    tree.kill("a")
    tree.log.wait_for(lambda e: True, 10, start=second - 1)  # a's crash fully handled
    tree.kill("w2")
    tree.log.wait_for(lambda e: True, 10, start=len(expected) - 1)
    live = event_sequence(tree.log.snapshot())
    assert live[:second] == expected[:second]
    assert live == expected


def test_min_uptime_orders_events_alike(nanny_tree):
    # A transient child that exits 0 at once, under min_uptime: each exit is a
    # failed start, restarted until the root gives up (the core decides it, live and simulated).
    spec = SupervisorSpec(
        id="root",
        intensity=2,
        period=60.0,
        children=[
            ChildSpec(id="a", target=children.sleep_forever),
            ChildSpec(
                id="t", target=children.exit_with, args=(0,), restart="transient", min_uptime=5.0
            ),
        ],
    )
    at_once = Scripted([(0.0, ExitReason.normal())], relative=True, repeat=True)
    expected = event_sequence(simulate(spec, {"t": at_once}, duration=10.0).events)
    assert ("root", "reached_max_restart_intensity", "t") in expected

    tree = nanny_tree(spec)
    tree.log.wait_for(lambda e: e.context.value == "supervisor_stopped", 20)
    assert event_sequence(tree.log.snapshot()) == expected


def test_pause_resume_orders_events_alike(nanny_tree):
    # Pause a; b crashes under one_for_all, so the paused a is terminated and
    # restarted; then b is paused and resumed.
    spec = SupervisorSpec(
        id="root",
        strategy=Strategy.ONE_FOR_ALL,
        intensity=3,
        children=[
            ChildSpec(id="a", target=children.sleep_forever),
            ChildSpec(id="b", target=children.sleep_forever),
        ],
    )
    simulated = simulate(
        spec,
        {"b": Scripted([(2.0, KILLED)])},
        duration=10.0,
        calls=[
            call(1.0, "pause_child", "a"),
            call(3.0, "pause_child", "b"),
            call(4.0, "resume_child", "b"),
            call(5.0, "resume_child", "b"),
        ],
    )
    expected = event_sequence(simulated.events)
    assert [type(r.error).__name__ for r in simulated.calls] == [
        "NoneType",
        "NoneType",
        "NoneType",
        "ChildNotPaused",
    ]

    tree = nanny_tree(spec)
    nanny = tree.nanny
    nanny.pause_child("a").get()
    assert tree.child("a").state == "paused"
    mark = len(tree.log.snapshot())
    tree.kill("b")
    tree.log.wait_for(
        lambda e: e.context.value == "child_started" and e.offender == "b", 10, start=mark
    )
    nanny.pause_child("b").get()
    nanny.resume_child("b").get()
    with pytest.raises(ChildNotPaused):
        nanny.resume_child("b").get()
    assert event_sequence(tree.log.snapshot()) == expected
