"""The simulator's nodes (issue 13, item 5): remote subtrees placed by choose_node,
node loss, partitions and healing, in virtual time; and live (FakeEngine) = sim."""

from __future__ import annotations

import pytest

from supervision import (
    ChildInfo,
    ChildSpec,
    EventKind,
    ExitKind,
    NodeInfo,
    Placement,
    SpecError,
    Strategy,
    SupervisorSpec,
)
from supervision.simulate import (
    Cluster,
    NodeDown,
    NodeFailures,
    NodeUp,
    Unreachable,
    event_sequence,
    simulate,
)
from tests.support import import_ray

SLEEP = ["sleep", "600"]


def remote(placement: Placement, **kw: object) -> SupervisorSpec:
    return SupervisorSpec(
        id="ingest",
        placement=placement,
        children=[ChildSpec(id="reader", command=SLEEP), ChildSpec(id="parser", command=SLEEP)],
        **kw,  # type: ignore[arg-type]
    )


def tree(*children: object, **kw: object) -> SupervisorSpec:
    kw.setdefault("intensity", 5)
    kw.setdefault("period", 60.0)
    return SupervisorSpec(id="root", children=list(children), **kw)  # type: ignore[arg-type]


def root_events(result: object, kind: EventKind) -> list[object]:
    return [
        e
        for e in result.events  # type: ignore[attr-defined]
        if e.supervisor == "root" and e.context is kind and e.offender == "ingest"
    ]


def test_a_lost_node_is_node_down_after_the_detection_delay_and_prefer_moves_it() -> None:
    cluster = Cluster(
        ["a", "b", "c"], faults=[NodeDown(10.0, "b")], detection=2.0, lease_timeout=None
    )
    spec = tree(remote(Placement(node="b", fallback=["c"])))
    result = simulate(spec, duration=60.0, cluster=cluster)
    assert result.placements == [(0.0, "ingest", "b"), (12.0, "ingest", "c")]
    exits = root_events(result, EventKind.CHILD_EXITED)
    assert [(e.time, e.reason.kind) for e in exits] == [(12.0, ExitKind.NODE_DOWN)]
    assert result.children["ingest"].restarts == 1
    # Down from the loss (10 s), not from its detection: 2 s lost of 60.
    assert result.children["ingest/reader"].availability == pytest.approx(58 / 60)


def test_pinned_to_a_dead_node_retries_until_its_supervisor_gives_up() -> None:
    cluster = Cluster(["a", "b"], faults=[NodeDown(5.0, "b")], detection=1.0, lease_timeout=None)
    # wait=0: OTP's charged retry loop, not the wait for a node (tests/sim/test_pending.py)
    spec = tree(remote(Placement(node="b", policy="pinned", wait=0)), intensity=3)
    result = simulate(spec, duration=60.0, cluster=cluster)
    failures = [e for e in result.events if e.context is EventKind.START_FAILED]
    assert failures and all("no live node fits" in e.reason.message for e in failures)
    assert result.tree.give_ups == 1 and result.tree.time_to_give_up == pytest.approx(6.0)
    assert result.placements == [(0.0, "ingest", "b")]


def test_a_partition_shorter_than_the_health_check_charges_nothing() -> None:
    cluster = Cluster(
        ["a", "b"], faults=[Unreachable(10.0, "b", 3.0)], health_check=4.0, lease_timeout=None
    )
    result = simulate(tree(remote(Placement(node="b"))), duration=60.0, cluster=cluster)
    assert root_events(result, EventKind.CHILD_EXITED) == []
    assert result.children["ingest"].restarts == 0
    assert result.placements == [(0.0, "ingest", "b")]


def test_a_longer_partition_is_node_down_and_the_healed_incarnation_restarts_nothing() -> None:
    cluster = Cluster(
        ["a", "b"],
        faults=[Unreachable(10.0, "b", 30.0), NodeUp(50.0, "b")],
        health_check=4.0,
        lease_timeout=None,
    )
    result = simulate(tree(remote(Placement(node="b"))), duration=100.0, cluster=cluster)
    exits = root_events(result, EventKind.CHILD_EXITED)
    assert [(e.time, e.reason.kind) for e in exits] == [(14.0, ExitKind.NODE_DOWN)]
    assert result.placements == [(0.0, "ingest", "b"), (14.0, "ingest", "a")]
    assert result.children["ingest"].restarts == 1  # the heal at 40 s and b's return change nothing


def test_opt_in_unreachable_timeout_declares_it_sooner() -> None:
    cluster = Cluster(
        ["a", "b"],
        faults=[Unreachable(10.0, "b", 3.0)],
        health_check=4.0,
        unreachable_timeout=1.0,
        lease_timeout=None,
    )
    result = simulate(tree(remote(Placement(node="b"))), duration=60.0, cluster=cluster)
    exits = root_events(result, EventKind.CHILD_EXITED)
    assert [(e.time, e.reason.kind) for e in exits] == [(11.0, ExitKind.NODE_DOWN)]


def test_one_for_all_across_a_local_and_a_remote_child_is_charged_once() -> None:
    cluster = Cluster(["a", "b"], faults=[NodeDown(10.0, "b")], detection=1.0)
    spec = tree(
        ChildSpec(id="web", command=SLEEP),
        remote(Placement(node="b")),
        strategy=Strategy.ONE_FOR_ALL,
        intensity=1,
    )
    result = simulate(spec, duration=60.0, cluster=cluster)
    assert result.tree.give_ups == 0
    assert result.children["web"].restarts == 1 and result.children["ingest"].restarts == 1
    assert [p[2] for p in result.placements] == ["b", "a"]


def test_two_subtrees_on_one_lost_node_are_two_charged_exits_as_otp() -> None:
    cluster = Cluster(["a", "b"], faults=[NodeDown(10.0, "b")], detection=1.0)
    first = remote(Placement(node="b"))
    second = SupervisorSpec(
        id="store", placement=Placement(node="b"), children=[ChildSpec(id="db", command=SLEEP)]
    )
    result = simulate(tree(first, second, intensity=1), duration=60.0, cluster=cluster)
    assert result.tree.give_ups == 1  # intensity 1: the second charged exit ends the root


def test_random_node_failures_are_replayed_by_their_seed() -> None:
    cluster = Cluster(["a", "b", "c"], failures=NodeFailures(mtbf=200.0, repair=30.0))
    spec = tree(remote(Placement(policy="spread")), intensity=100, period=10.0)
    one = simulate(spec, duration=2000.0, seed=3, cluster=cluster)
    two = simulate(spec, duration=2000.0, seed=3, cluster=cluster)
    other = simulate(spec, duration=2000.0, seed=4, cluster=cluster)
    assert one.placements == two.placements and len(one.placements) > 3
    assert event_sequence(one.events) == event_sequence(two.events)
    assert other.placements != one.placements


def test_placement_uses_labels_of_the_cluster_nodes() -> None:
    nodes = [NodeInfo("a", "a"), NodeInfo("b", "b", labels={"zone": "eu"})]
    result = simulate(
        tree(remote(Placement(labels={"zone": "eu"}))), duration=10.0, cluster=Cluster(nodes)
    )
    assert result.placements == [(0.0, "ingest", "b")]


def test_without_a_cluster_a_placement_runs_locally() -> None:
    result = simulate(tree(remote(Placement(node="b"))), duration=10.0)
    assert result.placements == []
    assert result.children["ingest/reader"].availability == 1.0


def test_bad_cluster_input_is_refused_clearly() -> None:
    with pytest.raises(SpecError, match=r"Cluster\.nodes"):
        Cluster([])
    with pytest.raises(SpecError, match="unique"):
        Cluster(["a", "a"])
    with pytest.raises(SpecError, match=r"NodeDown\.at"):
        NodeDown(-1.0, "a")
    with pytest.raises(SpecError, match="cluster"):
        simulate(tree(), duration=1.0, cluster=["a"])  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"Cluster\.health_check_failure_threshold.*integer"):
        Cluster(["a"], health_check_failure_threshold=0)
    with pytest.raises(SpecError, match=r"Cluster\.health_check_period.*> 0"):
        Cluster(["a"], health_check_period=0.0)
    with pytest.raises(SpecError, match=r"Cluster\.fence_ack"):
        Cluster(["a"], fence_ack=-1.0)


def test_ray_s_verdicts_come_from_its_health_check_settings() -> None:
    """A silent node: threshold x (period + timeout) (the checks time out); a killed
    one: threshold x period (its raylet refuses them at once). Given values win."""
    ray_default = Cluster(["a"])
    assert (ray_default.health_check, ray_default.detection) == (65.0, 15.0)
    tuned = Cluster(
        ["a"],
        health_check_period=0.5,
        health_check_timeout=1.0,
        health_check_failure_threshold=3,
    )
    assert (tuned.health_check, tuned.detection) == (4.5, 1.5)
    assert Cluster(["a"], health_check=4.2, detection=1.3).declared_after == 4.2


def test_the_settings_are_named_as_ray_engine_s() -> None:
    import_ray()
    import inspect

    from actors.ray import RayEngine

    engine = inspect.signature(RayEngine).parameters
    for name in (
        "lease_timeout",
        "unreachable_timeout",
        "health_check_period",
        "health_check_timeout",
        "health_check_failure_threshold",
    ):
        assert name in engine and name in Cluster.__dataclass_fields__, name


def test_live_fake_engine_and_simulation_agree_on_a_node_loss() -> None:
    """The same spec and node loss: the root's events in the same order, live (through
    FakeEngine, real processes) and simulated."""
    from actors import Tree
    from actors.testing import FakeEngine
    from tests.support import wait_until

    spec = tree(
        ChildSpec(id="web", command=SLEEP),
        remote(Placement(node="b", fallback=["c"])),
        strategy=Strategy.ONE_FOR_ALL,
    )
    simulated = simulate(
        spec, duration=30.0, cluster=Cluster(["a", "b", "c"], faults=[NodeDown(5.0, "b")])
    )
    expected = [(s, k, o) for s, k, o in event_sequence(simulated.events) if s == "root"]

    engine = FakeEngine(["a", "b", "c"])
    live_tree = Tree.start(spec, engine=engine)
    try:
        engine.node_down("b")
        wait_until(
            lambda: (
                live_tree.nanny.which_child("ingest").get().node == "c"
                and live_tree.nanny.which_child("web").get().restarts == 1
            ),
            30,
            "the subtree to move to c",
        )
        live = [(s, k, o) for s, k, o in event_sequence(live_tree.events()) if s == "root"]
    finally:
        live_tree.stop(timeout=30)
    assert live == expected
    assert [p[2] for p in simulated.placements] == ["b", "c"]


@pytest.mark.parametrize("lease", [None, 1.2], ids=["no-lease", "lease"])
def test_live_and_simulation_agree_on_a_partition_past_unreachable_timeout(
    lease: float | None,
) -> None:
    """The fencing rule (supervision.Fencing) live and simulated: node b cut off for
    longer than unreachable_timeout is declared down by both, the root's events come
    in the same order, and the subtree moves to c. Live, with a lease, the parent also
    waits for the old incarnation's fence; that only delays the same decisions."""
    import time

    from actors import Tree
    from actors.testing import FakeEngine, wait_gone
    from tests.support import wait_until

    bound = 0.5
    spec = tree(
        ChildSpec(id="web", command=SLEEP),
        remote(Placement(node="b", fallback=["c"])),
        strategy=Strategy.ONE_FOR_ALL,
    )
    cluster = Cluster(
        ["a", "b", "c"],
        faults=[Unreachable(5.0, "b", 60.0)],
        unreachable_timeout=bound,
        lease_timeout=lease,
    )
    simulated = simulate(spec, duration=30.0, cluster=cluster)
    expected = [(s, k, o) for s, k, o in event_sequence(simulated.events) if s == "root"]

    engine = FakeEngine(["a", "b", "c"], unreachable_timeout=bound, lease_timeout=lease)
    live_tree = Tree.start(spec, engine=engine)
    try:
        old = engine.handles()[0]
        old_pids = [c.pid for c in old.host.api("which_children")]
        cut = time.monotonic()
        engine.unreachable("b")  # never declared dead by the engine: only the bound can
        wait_until(
            lambda: (
                live_tree.nanny.which_child("ingest").get().node == "c"
                and live_tree.nanny.which_child("web").get().restarts == 1
            ),
            30,
            "the subtree to move to c",
        )
        live_events = live_tree.events()
        live = [(s, k, o) for s, k, o in event_sequence(live_events) if s == "root"]
    finally:
        live_tree.stop(timeout=30)
    assert live == expected
    assert [p[2] for p in simulated.placements] == ["b", "c"]
    sim_exit = root_events(simulated, EventKind.CHILD_EXITED)
    told = 5.0 + bound if lease is None else 6.0  # with a lease: once it ran out
    assert [e.time for e in sim_exit] == [told]  # type: ignore[attr-defined]
    assert engine.spawned == [("b", 1), ("c", 2)]
    exits = [
        e
        for e in live_events
        if e.supervisor == "root" and e.context is EventKind.CHILD_EXITED and e.offender == "ingest"
    ]
    assert [e.reason.kind for e in exits] == [ExitKind.NODE_DOWN]
    assert "unreachable_timeout" in exits[0].reason.message
    assert exits[0].time - cut >= bound  # never before the rule's bound
    assert old.host.ended and wait_gone(old_pids) == []


def test_live_and_simulation_agree_that_a_short_partition_decides_nothing() -> None:
    """Cut off, then healed before any verdict: nothing charged, live and simulated."""
    from actors import Tree
    from actors.testing import FakeEngine
    from tests.support import wait_until

    spec = tree(ChildSpec(id="web", command=SLEEP), remote(Placement(node="b", fallback=["c"])))
    cluster = Cluster(["a", "b", "c"], faults=[Unreachable(5.0, "b", 2.0)], unreachable_timeout=30)
    simulated = simulate(spec, duration=30.0, cluster=cluster)
    expected = [(s, k, o) for s, k, o in event_sequence(simulated.events) if s == "root"]

    engine = FakeEngine(["a", "b", "c"], unreachable_timeout=30.0)
    live_tree = Tree.start(spec, engine=engine)
    try:

        def ingest() -> ChildInfo:
            return live_tree.nanny.which_child("ingest").get()

        engine.unreachable("b")
        wait_until(lambda: ingest().state == "unreachable", what="unreachable")
        engine.heal("b")
        wait_until(lambda: ingest().state == "running", what="running again")
        live = [(s, k, o) for s, k, o in event_sequence(live_tree.events()) if s == "root"]
    finally:
        live_tree.stop(timeout=30)
    assert live == expected
    assert [p[2] for p in simulated.placements] == ["b"] and engine.spawned == [("b", 1)]


def _policy_tree(policy: str) -> SupervisorSpec:
    return tree(remote(Placement(node="b", policy=policy)), intensity=2, period=60.0)


def test_a_sweep_compares_placement_policies_under_node_failures() -> None:
    from supervision.simulate import sweep

    cluster = Cluster(["a", "b", "c"], failures=NodeFailures(mtbf=3000.0, repair=1800.0))
    table = sweep(
        _policy_tree, duration=20000.0, seeds=range(6), cluster=cluster, policy=["prefer", "pinned"]
    )
    by_policy = {row.params["policy"]: row for row in table.rows}
    assert by_policy["prefer"].availability.mean > by_policy["pinned"].availability.mean
