"""The simulator's lease (docs/multihost.md sections 5 and 8): node loss is told when
a live tree with the same settings tells it, a partition outlasting the fence ends
the old incarnation, and a sweep over lease lengths shows what the lease costs."""

from __future__ import annotations

import inspect
import time

import pytest

from supervision import ChildSpec, EventKind, ExitKind, Placement, SupervisorSpec
from supervision.simulate import (
    Cluster,
    NodeDown,
    NodeFailures,
    Unreachable,
    event_sequence,
    simulate,
)
from tests.support import import_ray

SLEEP = ["sleep", "600"]


def tree(placement: Placement | None = None) -> SupervisorSpec:
    remote = SupervisorSpec(
        id="ingest",
        placement=placement or Placement(node="b", fallback=["c"]),
        children=[ChildSpec(id="reader", command=SLEEP)],
    )
    return SupervisorSpec(
        id="root",
        intensity=5,
        period=60.0,
        children=[ChildSpec(id="web", command=SLEEP), remote],
    )


def exits(result: object) -> list[tuple[float, ExitKind]]:
    return [
        (e.time, e.reason.kind)
        for e in result.events  # type: ignore[attr-defined]
        if e.context is EventKind.CHILD_EXITED and e.supervisor == "root"
    ]


def test_the_default_lease_is_ray_engines() -> None:
    import_ray()
    from actors.ray import RayEngine

    default = inspect.signature(RayEngine).parameters["lease_timeout"].default
    assert Cluster(["a"]).lease_timeout == default == 30.0


@pytest.mark.parametrize(
    ("lost", "told"),
    [(10.5, 40.0), (19.9, 40.0), (20.0, 50.0), (29.0, 50.0)],
)
def test_a_lost_node_is_told_once_the_lease_has_run_out_since_its_last_renewal(
    lost: float, told: float
) -> None:
    """Renewals every 10 s from the start; with no word from the far side (its host's
    processes died with it) the parent waits 30 s after the last renewal that came
    through, and at least the detection delay."""
    cluster = Cluster(["a", "b", "c"], faults=[NodeDown(lost, "b")], fence_ack=None)
    result = simulate(tree(), duration=120.0, cluster=cluster)
    assert exits(result) == [(told, ExitKind.NODE_DOWN)]
    assert result.placements == [(0.0, "ingest", "b"), (told, "ingest", "c")]
    # Down from the loss until the restart on c.
    reader = result.children["ingest/reader"]
    assert reader.availability == pytest.approx(1 - (told - lost) / 120.0)


def test_a_killed_node_is_told_at_its_fence_acknowledgement_before_the_lease() -> None:
    """Its far side outlives its raylet, stops its children and says so: the parent
    tells node_down then (1.45 s, measured), lease or not, long before Ray's verdict."""
    cluster = Cluster(["a", "b", "c"], faults=[NodeDown(10.5, "b")])
    assert cluster.fence_ack == 1.45 and cluster.detection == 15.0
    result = simulate(tree(), duration=60.0, cluster=cluster)
    assert exits(result) == [(pytest.approx(11.95), ExitKind.NODE_DOWN)]
    assert result.placements == [(0.0, "ingest", "b"), (pytest.approx(11.95), "ingest", "c")]
    # A word slower than Ray's verdict (tuned: 3 misses of 0.5 s) with a lease that
    # has run out by then (1.2 s, renewed at 10.4): the verdict is told.
    tuned = Cluster(
        ["a", "b", "c"],
        faults=[NodeDown(10.5, "b")],
        lease_timeout=1.2,
        health_check_period=0.5,
        health_check_timeout=1.0,
        health_check_failure_threshold=3,
        fence_ack=2.0,
    )
    assert (tuned.detection, tuned.health_check) == (1.5, 4.5)
    assert exits(simulate(tree(), duration=60.0, cluster=tuned)) == [
        (pytest.approx(12.0), ExitKind.NODE_DOWN)
    ]


def test_a_node_killed_while_cut_off_cannot_say_it_fenced() -> None:
    """Cut off at 10.5 (the last renewal through at 10), killed at 20: its far side's
    word cannot get out, so the parent waits for Ray's verdict (15 s) and the lease's
    end (40): told at 40, not 1.45 s after the kill."""
    cluster = Cluster(
        ["a", "b", "c"],
        faults=[Unreachable(10.5, "b", 100.0), NodeDown(20.0, "b")],
        health_check=60.0,
    )
    assert exits(simulate(tree(), duration=120.0, cluster=cluster)) == [(40.0, ExitKind.NODE_DOWN)]


def test_a_silent_node_with_the_defaults_is_told_at_ray_s_verdict() -> None:
    """Nothing answers: no word of a fence; Ray declares it dead after 5 x (3 + 10) s,
    the 30 s lease ran out long before; with a 6 s lease and the tuned check, the
    verdict (4.5 s) comes first and the lease's end (last renewal at 10) decides."""
    silent = [Unreachable(10.5, "b", 600.0)]
    cluster = Cluster(["a", "b", "c"], faults=silent)
    assert exits(simulate(tree(), duration=120.0, cluster=cluster)) == [(75.5, ExitKind.NODE_DOWN)]
    tuned = Cluster(
        ["a", "b", "c"],
        faults=silent,
        lease_timeout=6.0,
        health_check_period=0.5,
        health_check_timeout=1.0,
        health_check_failure_threshold=3,
    )
    assert exits(simulate(tree(), duration=120.0, cluster=tuned)) == [(16.0, ExitKind.NODE_DOWN)]


def test_without_a_lease_it_is_told_at_detection() -> None:
    """No lease: the far side has no time for an orderly fence, so no word; the
    engine's verdict (here 1.3 s) is told at once."""
    cluster = Cluster(
        ["a", "b", "c"], faults=[NodeDown(10.5, "b")], lease_timeout=None, detection=1.3
    )
    assert exits(simulate(tree(), duration=60.0, cluster=cluster)) == [
        (pytest.approx(11.8), ExitKind.NODE_DOWN)
    ]


def test_a_short_lease_is_still_bounded_below_by_detection() -> None:
    cluster = Cluster(
        ["a", "b", "c"], faults=[NodeDown(10.5, "b")], lease_timeout=0.6, detection=1.3
    )
    assert exits(simulate(tree(), duration=60.0, cluster=cluster)) == [
        (pytest.approx(11.8), ExitKind.NODE_DOWN)
    ]


def test_a_partition_past_the_fence_but_short_of_the_verdict_ends_in_remote_crash() -> None:
    """Lease 8 s (renewals every 8/3 s): cut at 12, the last renewal through at 32/3,
    the far side fences at 32/3 + 6; at the heal (52) the parent hears remote_crash."""
    cluster = Cluster(
        ["a", "b", "c"], faults=[Unreachable(12.0, "b", 40.0)], health_check=60.0, lease_timeout=8.0
    )
    result = simulate(tree(), duration=120.0, cluster=cluster)
    assert exits(result) == [(52.0, ExitKind.REMOTE_CRASH)]
    assert result.placements == [(0.0, "ingest", "b"), (52.0, "ingest", "b")]
    fenced_at = 32.0 / 3 + 6.0
    reader = result.children["ingest/reader"]
    assert reader.availability == pytest.approx(1 - (52.0 - fenced_at) / 120.0)


def test_a_partition_shorter_than_the_fence_changes_nothing() -> None:
    cluster = Cluster(
        ["a", "b", "c"], faults=[Unreachable(12.0, "b", 4.0)], health_check=60.0, lease_timeout=8.0
    )
    result = simulate(tree(), duration=60.0, cluster=cluster)
    assert exits(result) == [] and result.children["ingest/reader"].availability == 1.0


def test_a_declared_partition_is_told_after_the_lease() -> None:
    """Declared dead at 12 + 4.2; the lease (last renewal through at 10) runs out at 40."""
    cluster = Cluster(["a", "b", "c"], faults=[Unreachable(12.0, "b", 100.0)], health_check=4.2)
    result = simulate(tree(), duration=120.0, cluster=cluster)
    assert exits(result) == [(40.0, ExitKind.NODE_DOWN)]
    # Down from the declaration (its fence, at 10 + 22.5, would have come later).
    reader = result.children["ingest/reader"]
    assert reader.availability == pytest.approx(1 - (40.0 - 16.2) / 120.0)


def test_a_heal_the_parent_noticed_renews_at_once() -> None:
    """Lease 3 s (renewals every 1 s): a cut from 5.5 to 7.2 fails the renewals at 6
    and 7, and the heal renews at 7.2; lost at 8.1: the last renewal through is 8."""
    cluster = Cluster(
        ["a", "b", "c"],
        faults=[Unreachable(5.5, "b", 1.7), NodeDown(8.1, "b")],
        lease_timeout=3.0,
        detection=0.0,
        fence_ack=None,
    )
    assert exits(simulate(tree(), duration=60.0, cluster=cluster)) == [(11.0, ExitKind.NODE_DOWN)]
    one_cut = Cluster(
        ["a", "b", "c"],
        faults=[Unreachable(5.5, "b", 1.7), NodeDown(7.9, "b")],
        lease_timeout=3.0,
        detection=0.0,
        fence_ack=None,
    )
    assert exits(simulate(tree(), duration=60.0, cluster=one_cut)) == [
        (pytest.approx(10.2), ExitKind.NODE_DOWN)
    ]


def test_a_sweep_over_lease_lengths_shows_its_cost_in_availability() -> None:
    """Random node losses: the longer the lease, the longer each loss keeps the subtree
    down before its restart elsewhere; no lease at all is the fastest (and the one
    that cannot fence a node that was only cut off)."""
    spec = tree(Placement(policy="spread"))
    failures = NodeFailures(mtbf=600.0, repair=120.0)
    down = {}
    for lease in (None, 8.0, 30.0, 90.0):
        cluster = Cluster(
            ["a", "b", "c"], failures=failures, lease_timeout=lease, detection=1.3, fence_ack=None
        )
        runs = [simulate(spec, duration=20000.0, seed=s, cluster=cluster) for s in range(3)]
        down[lease] = sum(1 - r.children["ingest/reader"].availability for r in runs)
    assert down[None] < down[8.0] < down[30.0] < down[90.0]


def test_live_and_simulated_node_loss_agree_with_a_lease() -> None:
    """The same lease live (FakeEngine) and simulated: the node_down is told at the same
    time after the subtree's start, and the root's events come in the same order."""
    from actors import Tree
    from actors.testing import FakeEngine
    from tests.support import wait_until

    # A renewal every lease/3 s. Live and simulated may differ by the live tree's own
    # delays, which a loaded machine stretches; they must not differ by a renewal, so
    # they are compared to within half of one (0.5 s).
    lease, every = 3.0, 1.0
    engine = FakeEngine(["a", "b", "c"], lease_timeout=lease)
    live_tree = Tree.start(tree(), engine=engine)
    try:

        def root_event(kind: EventKind) -> float | None:
            found = [
                e.time
                for e in live_tree.events()
                if e.supervisor == "root" and e.context is kind and e.offender == "ingest"
            ]
            return found[0] if found else None

        started = root_event(EventKind.CHILD_STARTED)
        assert started is not None
        # Cut between two renewals (mid-interval): live and simulated agree on which
        # renewal came through last.
        cut_at = started + 2.5 * every
        wait_until(lambda: time.monotonic() >= cut_at, what="the moment of the cut")
        cut = time.monotonic() - started
        engine.node_down("b")
        wait_until(lambda: root_event(EventKind.CHILD_EXITED) is not None, what="node_down")
        wait_until(
            lambda: live_tree.nanny.which_child("ingest").get().state == "running",
            what="the restart on c",
        )
        told = root_event(EventKind.CHILD_EXITED)
        assert told is not None
        live = [(s, k, o) for s, k, o in event_sequence(live_tree.events()) if s == "root"]
    finally:
        live_tree.stop(timeout=30)
    # FakeEngine's far side says nothing of its fence (no fence_confirmed).
    cluster = Cluster(
        ["a", "b", "c"],
        faults=[NodeDown(cut, "b")],
        detection=0.0,
        lease_timeout=lease,
        fence_ack=None,
    )
    simulated = simulate(tree(), duration=30.0, cluster=cluster)
    sim_told = [t for t, k in exits(simulated)]
    assert sim_told == [pytest.approx(2 * every + lease)]
    assert told - started == pytest.approx(sim_told[0], abs=every / 2)
    expected = [(s, k, o) for s, k, o in event_sequence(simulated.events) if s == "root"]
    assert live == expected
