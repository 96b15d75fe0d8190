"""Live and simulated agree: the same spec and the same scripted faults give the
same event order in a live tree of real processes and in virtual time."""

from __future__ import annotations

import pytest

from supervision import ChildSpec, ExitKind, ExitReason, Strategy, SupervisorSpec
from supervision.simulate import Scripted, event_sequence, simulate
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
