"""supervision.simulate: the decision core in virtual time, with fault models per child."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervision import (
    Backoff,
    ChildSpec,
    EventKind,
    ExitKind,
    ExitReason,
    Restart,
    SpecError,
    Strategy,
    SupervisorSpec,
)
from supervision.simulate import (
    CRASH,
    ComparisonRow,
    Exponential,
    FaultModel,
    Healthy,
    Scripted,
    Table,
    compare,
    event_sequence,
    simulate,
)
from tests.support.fake_executor import FakeClock, running, worker

K = EventKind


def flat(strategy: Strategy = Strategy.ONE_FOR_ONE, *ids: str, **flags) -> SupervisorSpec:
    return SupervisorSpec(
        "root", strategy=strategy, children=[worker(i) for i in ids or "abc"], **flags
    )


def timeline(result) -> list[tuple[float, str, str, str | None]]:
    return [(e.time, e.supervisor, e.context.value, e.offender) for e in result.events]


# -- scripted scenarios: exact event orders ------------------------------------------------


def test_one_for_one_restarts_only_the_child_that_exited():
    result = simulate(flat(), {"b": Scripted([10.0])}, duration=20)
    assert timeline(result) == [
        (0.0, "root", K.SUPERVISOR_STARTED, None),
        (0.0, "root", K.CHILD_STARTED, "a"),
        (0.0, "root", K.CHILD_STARTED, "b"),
        (0.0, "root", K.CHILD_STARTED, "c"),
        (10.0, "root", K.CHILD_EXITED, "b"),
        (10.0, "root", K.CHILD_STARTED, "b"),
    ]
    assert result.events[4].reason == CRASH
    assert result.children["b"].restarts == 1
    assert result.children["a"].restarts == 0
    assert result.tree.give_ups == 0
    assert result.tree.time_to_give_up is None
    assert result.ended_at == 20


def test_one_for_all_stops_the_others_in_reverse_and_starts_all_in_order():
    slow = {"start_duration": 1.0, "stop_duration": 0.5}
    faults = {"a": Healthy(**slow), "b": Scripted([10.0], **slow), "c": Healthy(**slow)}
    result = simulate(flat(Strategy.ONE_FOR_ALL), faults, duration=20)
    assert timeline(result) == [
        (0.0, "root", K.SUPERVISOR_STARTED, None),
        (1.0, "root", K.CHILD_STARTED, "a"),
        (2.0, "root", K.CHILD_STARTED, "b"),
        (3.0, "root", K.CHILD_STARTED, "c"),
        (10.0, "root", K.CHILD_EXITED, "b"),
        (10.5, "root", K.CHILD_TERMINATED, "c"),
        (11.0, "root", K.CHILD_TERMINATED, "a"),
        (12.0, "root", K.CHILD_STARTED, "a"),
        (13.0, "root", K.CHILD_STARTED, "b"),
        (14.0, "root", K.CHILD_STARTED, "c"),
    ]


def test_availability_is_uptime_over_duration_by_hand():
    # Same run as above. a: up 1..10.5 (its stop begins at 10.5) and 12..20 = 17.5 s.
    # b: 2..10 and 13..20 = 15 s. c: 3..10 (stop begins at 10) and 14..20 = 13 s.
    # The tree: all up 3..10 and 14..20 = 13 s.
    slow = {"start_duration": 1.0, "stop_duration": 0.5}
    faults = {"a": Healthy(**slow), "b": Scripted([10.0], **slow), "c": Healthy(**slow)}
    result = simulate(flat(Strategy.ONE_FOR_ALL), faults, duration=20)
    a, b, c = (result.children[i] for i in "abc")
    assert (a.uptime, b.uptime, c.uptime) == (17.5, 15.0, 13.0)
    assert (a.availability, b.availability, c.availability) == (0.875, 0.75, 0.65)
    assert a.downtime == pytest.approx(2.5)
    assert (a.terminations, b.terminations, c.terminations) == (1, 0, 1)
    assert (b.exits, b.failures, b.starts, b.restarts) == (1, 1, 2, 1)
    assert result.tree.uptime == 13.0
    assert result.tree.availability == 0.65
    assert result.tree.downtime == 7.0


def test_rest_for_one_restarts_the_child_and_the_ones_after_it():
    result = simulate(flat(Strategy.REST_FOR_ONE), {"b": Scripted([10.0])}, duration=20)
    assert timeline(result)[4:] == [
        (10.0, "root", K.CHILD_EXITED, "b"),
        (10.0, "root", K.CHILD_TERMINATED, "c"),
        (10.0, "root", K.CHILD_STARTED, "b"),
        (10.0, "root", K.CHILD_STARTED, "c"),
    ]


def test_give_up_stops_the_rest_in_reverse_and_ends_the_run():
    result = simulate(flat(), {"b": Scripted([10.0, 12.0])}, duration=20)
    assert timeline(result)[4:] == [
        (10.0, "root", K.CHILD_EXITED, "b"),
        (10.0, "root", K.CHILD_STARTED, "b"),
        (12.0, "root", K.CHILD_EXITED, "b"),
        (12.0, "root", K.MAX_INTENSITY_REACHED, "b"),
        (12.0, "root", K.CHILD_TERMINATED, "c"),
        (12.0, "root", K.CHILD_TERMINATED, "a"),
        (12.0, "root", K.SUPERVISOR_STOPPED, None),
    ]
    tree = result.tree
    assert (tree.give_ups, tree.time_to_give_up, tree.intensity_reached) == (1, 12.0, 1)
    assert result.ended_at == 12.0
    assert tree.availability == 12.0 / 20  # down from the give-up to the end
    assert tree.root_exits[0][1].message == "reached_max_restart_intensity"


def test_root_restart_delay_starts_the_tree_again():
    result = simulate(flat(), {"b": Scripted([10.0, 12.0])}, duration=20, root_restart_delay=3)
    assert timeline(result)[-4:] == [
        (15.0, "root", K.SUPERVISOR_STARTED, None),
        (15.0, "root", K.CHILD_STARTED, "a"),
        (15.0, "root", K.CHILD_STARTED, "b"),
        (15.0, "root", K.CHILD_STARTED, "c"),
    ]
    assert result.ended_at == 20
    assert result.tree.availability == pytest.approx(17.0 / 20)
    assert result.children["a"].starts == 2
    assert result.children["a"].restarts == 0  # a fresh root starts, it does not restart


def test_nested_supervisor_escalates_its_give_up_to_its_parent():
    spec = SupervisorSpec(
        "root",
        children=[
            worker("a"),
            SupervisorSpec("pool", children=[worker("w1"), worker("w2")]),
            worker("c"),
        ],
    )
    result = simulate(spec, {"pool/w1": Scripted([10.0, 11.0])}, duration=20)
    assert timeline(result) == [
        (0.0, "root", K.SUPERVISOR_STARTED, None),
        (0.0, "root", K.CHILD_STARTED, "a"),
        (0.0, "root/pool", K.SUPERVISOR_STARTED, None),
        (0.0, "root/pool", K.CHILD_STARTED, "w1"),
        (0.0, "root/pool", K.CHILD_STARTED, "w2"),
        (0.0, "root", K.CHILD_STARTED, "pool"),
        (0.0, "root", K.CHILD_STARTED, "c"),
        (10.0, "root/pool", K.CHILD_EXITED, "w1"),
        (10.0, "root/pool", K.CHILD_STARTED, "w1"),
        (11.0, "root/pool", K.CHILD_EXITED, "w1"),
        (11.0, "root/pool", K.MAX_INTENSITY_REACHED, "w1"),
        (11.0, "root/pool", K.CHILD_TERMINATED, "w2"),
        (11.0, "root/pool", K.SUPERVISOR_STOPPED, None),
        (11.0, "root", K.CHILD_EXITED, "pool"),
        (11.0, "root/pool", K.SUPERVISOR_STARTED, None),
        (11.0, "root/pool", K.CHILD_STARTED, "w1"),
        (11.0, "root/pool", K.CHILD_STARTED, "w2"),
        (11.0, "root", K.CHILD_STARTED, "pool"),
    ]
    exited = result.events[13]
    assert exited.reason == ExitReason.shutdown("reached_max_restart_intensity")
    assert result.children["pool"].restarts == 1
    assert result.children["pool/w1"].starts == 3
    assert result.tree.intensity_reached == 1
    assert result.tree.give_ups == 0


def test_nested_give_up_escalates_to_a_root_give_up():
    spec = SupervisorSpec(
        "root", children=[worker("a"), SupervisorSpec("pool", children=[worker("w1")])]
    )
    # pool gives up at 11 and 13 (w1 crashes twice in 5 s, each time): the root
    # restarts it at 11 and gives up at 13.
    result = simulate(spec, {"pool/w1": Scripted([10.0, 11.0, 12.0, 13.0])}, duration=20)
    assert event_sequence(result.events)[-7:] == [
        ("root/pool", "child_exited", "w1"),
        ("root/pool", "reached_max_restart_intensity", "w1"),
        ("root/pool", "supervisor_stopped", None),
        ("root", "child_exited", "pool"),
        ("root", "reached_max_restart_intensity", "pool"),
        ("root", "child_terminated", "a"),
        ("root", "supervisor_stopped", None),
    ]
    assert result.tree.time_to_give_up == 13.0
    assert result.tree.intensity_reached == 3


def test_failed_restart_is_retried_through_the_mailbox():
    spec = flat(intensity=5)
    result = simulate(spec, {"b": Scripted([10.0], failed_starts={2})}, duration=20)
    assert timeline(result)[4:] == [
        (10.0, "root", K.CHILD_EXITED, "b"),
        (10.0, "root", K.START_FAILED, "b"),
        (10.0, "root", K.RESTART_SCHEDULED, "b"),
        (10.0, "root", K.CHILD_STARTED, "b"),
    ]
    b = result.children["b"]
    assert (b.start_failures, b.starts, b.restarts) == (1, 2, 1)


def test_a_failed_start_at_init_is_a_give_up_at_once():
    result = simulate(flat(), {"b": Healthy(failed_starts={1})}, duration=20)
    assert event_sequence(result.events) == [
        ("root", "supervisor_started", None),
        ("root", "child_started", "a"),
        ("root", "start_failed", "b"),
        ("root", "child_terminated", "a"),
        ("root", "supervisor_stopped", None),
    ]
    assert result.tree.time_to_give_up == 0.0
    assert result.tree.availability == 0.0


def test_backoff_delays_the_restart_by_its_retry_delay():
    spec = SupervisorSpec(
        "root", children=[worker("a"), worker("b", backoff=Backoff(initial=2.5, jitter=0.0))]
    )
    result = simulate(spec, {"b": Scripted([10.0])}, duration=20)
    assert timeline(result)[3:] == [
        (10.0, "root", K.CHILD_EXITED, "b"),
        (10.0, "root", K.RESTART_SCHEDULED, "b"),
        (12.5, "root", K.CHILD_STARTED, "b"),
    ]
    b = result.children["b"]
    assert (b.downtime, b.restarts) == (2.5, 1)
    assert result.tree.availability == 17.5 / 20


def test_relative_script_repeats_per_incarnation():
    # Every process of b lives 2 s: exits at 2 (restarted) and 4 (2 in 5 s: give up).
    result = simulate(flat(), {"b": Scripted([2.0], relative=True, repeat=True)}, duration=20)
    exits = [e.time for e in result.events if e.context is K.CHILD_EXITED]
    assert exits == [2.0, 4.0]
    assert result.tree.time_to_give_up == 4.0


def test_absolute_exit_while_the_child_is_starting_does_nothing():
    faults = {"b": Scripted([0.5, 5.0], start_duration=1.0)}
    result = simulate(flat(), faults, duration=20)
    assert [e.time for e in result.events if e.context is K.CHILD_EXITED] == [5.0]


def test_stop_longer_than_the_shutdown_timeout_is_cut_by_a_kill():
    spec = SupervisorSpec(
        "root", strategy=Strategy.ONE_FOR_ALL, children=[worker("a", shutdown=1.0), worker("b")]
    )
    faults = {"a": Healthy(stop_duration=30.0), "b": Scripted([10.0])}
    result = simulate(spec, faults, duration=20)
    [terminated] = [e for e in result.events if e.context is K.CHILD_TERMINATED]
    assert terminated.time == 11.0
    assert terminated.reason is not None
    assert terminated.reason.kind is ExitKind.SHUTDOWN
    assert terminated.reason.signal == 9


def test_brutal_kill_stops_at_once():
    spec = SupervisorSpec(
        "root",
        strategy=Strategy.ONE_FOR_ALL,
        children=[worker("a", shutdown="brutal_kill"), worker("b")],
    )
    faults = {"a": Healthy(stop_duration=30.0), "b": Scripted([10.0])}
    result = simulate(spec, faults, duration=20)
    [terminated] = [e for e in result.events if e.context is K.CHILD_TERMINATED]
    assert terminated.time == 10.0


def test_a_finished_transient_child_does_not_make_the_tree_unavailable():
    spec = SupervisorSpec("root", children=[worker("job", restart=Restart.TRANSIENT), worker("b")])
    result = simulate(spec, {"job": Scripted([(5.0, ExitReason.normal())])}, duration=20)
    assert result.children["job"].availability == 0.25
    assert result.tree.availability == 1.0


def test_same_events_as_the_core_driven_by_the_fake_executor():
    spec = flat(Strategy.ONE_FOR_ALL, intensity=5)
    result = simulate(spec, {"b": Scripted([10.0]), "c": Scripted([20.0])}, duration=30)
    ex = running(spec, FakeClock())
    ex.clock.advance(10)
    ex.exit("b")
    ex.clock.advance(10)
    ex.exit("c")
    ex.drain()
    assert [(e.time, e.supervisor, e.context, e.offender) for e in ex.events] == timeline(result)


# -- randomness: deterministic per seed ----------------------------------------------------


FLAKY = {"a": Exponential(30.0), "b": Exponential(10.0, start_failure_probability=0.1)}


def test_the_same_seed_gives_the_same_run():
    spec = flat(intensity=10, period=60.0)
    one = simulate(spec, FLAKY, duration=3600, seed=7, root_restart_delay=5.0)
    two = simulate(spec, FLAKY, duration=3600, seed=7, root_restart_delay=5.0)
    assert len(one.events) > 100
    assert one.events == two.events
    assert one.children == two.children
    assert one.tree == two.tree


def test_different_seeds_give_different_runs():
    spec = flat(intensity=10, period=60.0)
    one = simulate(spec, FLAKY, duration=3600, seed=1)
    two = simulate(spec, FLAKY, duration=3600, seed=2)
    assert one.events != two.events


def test_each_child_has_its_own_random_stream():
    # Adding faults to c does not move a's failures.
    spec = flat(intensity=1000)
    alone = simulate(spec, {"a": Exponential(30.0)}, duration=600, seed=3)
    more = simulate(spec, {"a": Exponential(30.0), "c": Exponential(5.0)}, duration=600, seed=3)

    def a_exits(result):
        return [e.time for e in result.events if e.offender == "a" and e.context is K.CHILD_EXITED]

    assert a_exits(alone) == a_exits(more)


def test_keep_events_false_gives_the_same_reports():
    spec = flat(intensity=10, period=60.0)
    full = simulate(spec, FLAKY, duration=600, seed=4)
    lean = simulate(spec, FLAKY, duration=600, seed=4, keep_events=False)
    assert lean.events == []
    assert (lean.children, lean.tree) == (full.children, full.tree)


@settings(max_examples=60, deadline=None)
@given(
    strategy=st.sampled_from([Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE]),
    intensity=st.integers(0, 4),
    period=st.sampled_from([1.0, 5.0, 30.0]),
    mtbfs=st.lists(st.floats(0.5, 60.0), min_size=1, max_size=4),
    start_duration=st.sampled_from([0.0, 0.2, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_availability_is_a_fraction_and_restarts_stay_within_the_intensity(
    strategy, intensity, period, mtbfs, start_duration, seed
):
    ids = [f"w{i}" for i in range(len(mtbfs))]
    spec = SupervisorSpec(
        "root",
        strategy=strategy,
        intensity=intensity,
        period=period,
        children=[worker(i) for i in ids],
    )
    faults = {
        i: Exponential(m, start_duration=start_duration) for i, m in zip(ids, mtbfs, strict=True)
    }
    result = simulate(spec, faults, duration=600, seed=seed)
    assert 0.0 <= result.tree.availability <= 1.0
    for child in result.children.values():
        assert 0.0 <= child.availability <= 1.0
        assert child.uptime + child.downtime == pytest.approx(600)
        assert result.tree.uptime <= child.uptime + 1e-9
    # Every exit of a permanent child is charged: at most `intensity` in any
    # `period`, except the one that makes the supervisor give up (and nothing after).
    charges = [e.time for e in result.events if e.context is K.CHILD_EXITED]
    give_ups = [e for e in result.events if e.context is K.MAX_INTENSITY_REACHED]
    assert len(give_ups) <= 1
    for i, t in enumerate(charges):
        in_window = sum(1 for u in charges[: i + 1] if u >= t - period)
        if give_ups and i == len(charges) - 1:
            assert in_window > intensity
            assert give_ups[0].time == t
        else:
            assert in_window <= intensity
    assert result.tree.give_ups == len(give_ups)


# -- compare(): one table ---------------------------------------------------------------------


def test_compare_gives_one_row_per_spec_in_order():
    specs = {
        f"{s.value} {n}": flat(s, intensity=n, period=30.0)
        for s in (Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL)
        for n in (1, 5)
    }
    table = compare(
        specs, {"b": Exponential(20.0, start_duration=0.5)}, duration=3600, seeds=range(3)
    )
    assert isinstance(table, Table)
    assert [r.name for r in table.rows] == list(specs)
    assert all(isinstance(r, ComparisonRow) and r.runs == 3 for r in table.rows)
    for row in table.rows:
        assert 0.0 <= row.availability_min <= row.availability <= 1.0
        assert 0 <= row.gave_up_runs <= 3
    text = str(table)
    lines = text.splitlines()
    assert len(lines) >= 3 + len(specs)  # title, header, rule, rows, then the legend
    assert "can exceed failures" in text and "averaged over the runs that gave up" in text
    assert "availability" in lines[1]
    assert lines[3].startswith("one_for_one 1")
    assert table.seeds == (0, 1, 2)


def test_compare_is_deterministic():
    specs = {"x": flat(intensity=3, period=10.0)}
    faults = {"a": Exponential(15.0)}
    one = compare(specs, faults, duration=600, seeds=[1, 2], root_restart_delay=10.0)
    two = compare(specs, faults, duration=600, seeds=[1, 2], root_restart_delay=10.0)
    assert one.rows == two.rows
    assert str(one) == str(two)


# -- the helper for comparing with a live run ----------------------------------------------


def test_event_sequence_drops_times_and_can_ignore_kinds():
    result = simulate(flat(), {"b": Scripted([10.0])}, duration=20)
    seq = event_sequence(result.events, ignore={K.SUPERVISOR_STARTED})
    assert seq == [
        ("root", "child_started", "a"),
        ("root", "child_started", "b"),
        ("root", "child_started", "c"),
        ("root", "child_exited", "b"),
        ("root", "child_started", "b"),
    ]


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("faults", "match"),
    [
        ({"nope": Healthy()}, "no worker at this path"),
        ({"pool": Healthy()}, "fails through its children"),
        ({"a": "crash"}, "expected a fault model"),
    ],
)
def test_bad_fault_keys_are_refused(faults, match):
    spec = SupervisorSpec("root", children=[worker("a"), SupervisorSpec("pool", children=[])])
    with pytest.raises(SpecError, match=match):
        simulate(spec, faults, duration=10)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Exponential(0.0), "mtbf"),
        (lambda: Exponential(10.0, start_failure_probability=1.5), "from 0 to 1"),
        (lambda: Healthy(start_duration=-1.0), "start_duration"),
        (lambda: Healthy(failed_starts={0}), "attempt numbers >= 1"),
        (lambda: Scripted([(1.0, "crash")]), "ExitReason"),
        (lambda: Scripted([1.0], repeat=True), "relative=True"),
        (lambda: FaultModel(stop_duration=float("inf")), "finite"),
    ],
)
def test_bad_fault_models_are_refused(make, match):
    with pytest.raises(SpecError, match=match):
        make()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"duration": 0}, "duration"),
        ({"duration": 10, "root_restart_delay": 0}, "root_restart_delay"),
    ],
)
def test_bad_run_arguments_are_refused(kwargs, match):
    with pytest.raises(SpecError, match=match):
        simulate(flat(), {}, **kwargs)


def test_command_children_are_simulated_too():
    # Nothing is run: a command child is a child like any other.
    spec = SupervisorSpec("root", children=[ChildSpec("x", command=["false"])])
    assert simulate(spec, {"x": Scripted([1.0])}, duration=2).children["x"].exits == 1


@pytest.mark.parametrize("delay", [None, 30.0])
def test_compare_is_the_mean_of_simulate_with_the_same_arguments(delay):
    # The experiments tutorial's example: a 1-in-5 s spec; compare() once left out the root restart.
    spec = flat(intensity=1, period=5.0)
    faults = {"b": Exponential(30.0, start_duration=0.5)}
    kw = {} if delay is None else {"root_restart_delay": delay}
    table = compare({"x": spec}, faults, duration=3600, seeds=range(3), **kw)
    runs = [simulate(spec, faults, duration=3600, seed=s, **kw) for s in range(3)]
    mean = sum(r.tree.availability for r in runs) / 3
    assert table.rows[0].availability == pytest.approx(mean)
    if delay is not None:
        assert mean > 0.5, "the root is restarted: most of the hour is up"


def test_compare_and_sweep_default_to_the_same_seeds():
    from supervision.simulate import DEFAULT_SEEDS, sweep

    spec = flat(intensity=3, period=10.0)
    table = compare({"x": spec}, {"a": Exponential(50.0)}, duration=300)
    swept = sweep(lambda n: spec, {"a": Exponential(50.0)}, duration=300, n=[1])
    assert table.seeds == swept.seeds == tuple(DEFAULT_SEEDS)
    assert table.rows[0].availability == pytest.approx(swept.rows[0].availability.mean)
