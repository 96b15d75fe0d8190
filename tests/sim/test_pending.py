"""A pinned node's loss is contained, simulated (docs/multihost.md section 2): the
subtree that cannot be placed is pending, its healthy siblings keep running, and
it comes back when its node returns, or gives up by its placement's `wait`."""

from __future__ import annotations

import pytest

from supervision import ChildSpec, EventKind, ExitKind, Placement, SupervisorSpec
from supervision.simulate import Cluster, NodeDown, NodeUp, simulate

SLEEP = ["sleep", "600"]


def spec(wait: float | None = None) -> SupervisorSpec:
    """The reproduction of issue 28: intensity 3 in 60 s, a local child, a pinned subtree."""
    pinned = SupervisorSpec(
        id="ingest",
        placement=Placement(node="b", policy="pinned", wait=wait),
        children=[ChildSpec(id="reader", command=SLEEP)],
    )
    return SupervisorSpec(
        id="root",
        intensity=3,
        period=60.0,
        children=[ChildSpec(id="web", command=SLEEP), pinned],
    )


def cluster(*faults: object) -> Cluster:
    return Cluster(["a", "b"], faults=list(faults), detection=1.0, lease_timeout=None)  # type: ignore[arg-type]


def attempts(result: object) -> list[float]:
    return [
        e.time
        for e in result.events  # type: ignore[attr-defined]
        if e.context is EventKind.RESTART_SCHEDULED and e.offender == "ingest"
    ]


def test_the_healthy_sibling_keeps_running_while_the_pinned_subtree_waits() -> None:
    result = simulate(spec(), duration=600.0, cluster=cluster(NodeDown(10.0, "b")))
    assert result.tree.give_ups == 0 and result.ended_at == 600.0
    assert result.children["web"].availability == 1.0 and result.children["web"].restarts == 0
    assert result.children["ingest"].restarts == 0  # never placed again
    assert result.placements == [(0.0, "ingest", "b")]
    # Told at 11; attempts at 11, 12, 14, 18, 26, then every 10 s: none charged.
    assert attempts(result)[:6] == [11.0, 12.0, 14.0, 18.0, 26.0, 36.0]
    charged = [
        e for e in result.events if e.context is EventKind.CHILD_EXITED and e.supervisor == "root"
    ]
    assert [(e.time, e.reason.kind) for e in charged] == [(11.0, ExitKind.NODE_DOWN)]


def test_the_pinned_subtree_comes_back_when_its_node_returns() -> None:
    result = simulate(
        spec(), duration=120.0, cluster=cluster(NodeDown(10.0, "b"), NodeUp(50.0, "b"))
    )
    # Pending attempts at 11, 12, 14, 18, 26, 36, 46; b is back at 50: placed at 56.
    assert result.placements == [(0.0, "ingest", "b"), (56.0, "ingest", "b")]
    assert result.children["ingest"].restarts == 1
    assert result.children["ingest/reader"].availability == pytest.approx(1 - 46 / 120)
    assert result.children["web"].availability == 1.0


def test_it_gives_up_by_the_rule_once_its_wait_is_over() -> None:
    result = simulate(spec(wait=20.0), duration=600.0, cluster=cluster(NodeDown(10.0, "b")))
    # Pending from 11 until 31 (the last delay cut to the wait's end), then OTP's retry
    # loop: charges at 31, 31, 31 exceed intensity 3 with the node_down's at 11.
    assert attempts(result)[:6] == [11.0, 12.0, 14.0, 18.0, 26.0, 31.0]
    assert result.tree.give_ups == 1 and result.tree.time_to_give_up == pytest.approx(31.0)
    assert result.children["web"].availability == pytest.approx(31.0 / 600.0)


def test_wait_zero_is_the_old_retry_loop_that_takes_the_siblings_down() -> None:
    result = simulate(spec(wait=0.0), duration=600.0, cluster=cluster(NodeDown(10.0, "b")))
    assert result.tree.give_ups == 1 and result.tree.time_to_give_up == pytest.approx(11.0)
