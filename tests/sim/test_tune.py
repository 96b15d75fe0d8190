"""Tuning settings on the simulator: objectives and constraints, the knobs, the search and
its held-out replay, and the errors that name what is wrong."""

from __future__ import annotations

import pytest

from supervision import Backoff, ChildSpec, Liveness, RestartLimit, SupervisorSpec, TcpProbe
from supervision.simulate import Exponential, Hang, Knob, TuneError, simulate, tune
from supervision.simulate._tune import Constraint, Objective, apply, default_knobs


def tree(intensity: int = 1, period: float = 5.0) -> SupervisorSpec:
    probe = Liveness(TcpProbe(port=1, period=2.0), failures=3)
    pool = SupervisorSpec(
        "pool",
        intensity=intensity,
        period=period,
        children=[ChildSpec("web", command=["web"]), ChildSpec("jobs", command=["jobs"])],
    )
    return SupervisorSpec(
        "svc",
        intensity=100,
        period=10.0,
        children=[pool, ChildSpec("db", command=["db"], liveness=probe)],
    )


FAULTS = {
    "pool/web": Exponential(mtbf=1e9, start_duration=0.5),
    "pool/jobs": Exponential(mtbf=2.0, start_duration=0.2),
}


def test_objectives_and_constraints_are_parsed_from_text() -> None:
    assert Objective.parse("max availability(pool/web)") == Objective(
        "availability(pool/web)", True
    )
    assert Objective.parse("minimise restarts") == Objective("restarts", False)
    assert Constraint.parse("availability(pool/web) >= 99.9%") == Constraint(
        "availability(pool/web)", ">=", pytest.approx(0.999)
    )
    assert Constraint.parse("restarts<=40") == Constraint("restarts", "<=", 40.0)
    with pytest.raises(TuneError, match="write 'max METRIC' or 'min METRIC'"):
        Objective.parse("availability")
    with pytest.raises(TuneError, match="write 'METRIC >= NUMBER'"):
        Constraint.parse("availability(web) > 0.9")


def test_an_unknown_metric_or_child_is_named_with_what_is_known() -> None:
    with pytest.raises(TuneError, match=r"'uptime' is no metric. The metrics: availability"):
        tune(tree(), FAULTS, objective="max uptime(pool/web)", duration=10.0)
    with pytest.raises(TuneError) as caught:
        tune(tree(), FAULTS, objective="max availability(web)", duration=10.0)
    assert str(caught.value) == (
        "metric 'availability(web)' names no child of the tree: 'web'; "
        "its children: pool, pool/web, pool/jobs, db"
    )
    with pytest.raises(TuneError, match="names no child of the tree: 'web'; its children: pool,"):
        tune(tree(), FAULTS, objective="max k_of_n(1, pool/jobs, web)", duration=10.0)
    with pytest.raises(TuneError, match="'pool/web' is no supervisor of this tree"):
        tune(tree(), FAULTS, objective="min give_ups(pool/web)", duration=10.0)
    with pytest.raises(TuneError, match="the history names child 'cache', which the tree has not"):
        tune(
            tree(), {**FAULTS, "cache": Exponential(mtbf=1.0)}, objective="min restarts", duration=1
        )


def test_the_default_grid_is_around_the_current_values() -> None:
    knobs = {(k.path, k.field): k.values for k in default_knobs(tree(intensity=4), FAULTS)}
    assert knobs[("svc/pool", "intensity")] == (4, 2, 8, 20, 40)
    assert knobs[("svc/pool", "period")] == (5.0, 2.5, 10.0)
    assert knobs[("svc/pool/jobs", "backoff")] == (
        None,
        Backoff(0.1, max=1.0),
        Backoff(1.0, max=10.0),
    )
    assert knobs[("svc/pool/jobs", "restart_limit")] == (None, RestartLimit(10, 60.0))
    assert len(knobs[("svc/db", "liveness")]) == 12  # 3 periods x 4 thresholds
    assert ("svc/db", "backoff") not in knobs  # no fault model: nothing to gain


def test_settings_are_applied_to_a_copy_of_the_spec() -> None:
    spec = tree()
    changed = apply(
        spec,
        {
            ("svc/pool", "intensity"): 9,
            ("svc/pool/jobs", "backoff"): Backoff(0.5),
            ("svc/db", "liveness"): (1.0, 5),
        },
    )
    pool, db = changed.children
    assert isinstance(pool, SupervisorSpec) and pool.intensity == 9
    assert pool.children[1].backoff == Backoff(0.5)  # type: ignore[union-attr]
    assert isinstance(db, ChildSpec) and db.liveness is not None
    assert (db.liveness.period, db.liveness.failures) == (1.0, 5)
    assert spec.children[0].intensity == 1  # type: ignore[union-attr]


def test_a_knob_of_no_such_node_or_field_is_refused() -> None:
    with pytest.raises(TuneError, match="the tree has no 'svc/cache'; its paths: svc, svc/pool"):
        tune(
            tree(),
            FAULTS,
            objective="min restarts",
            duration=1,
            knobs=[Knob("svc/cache", "backoff", (None,))],
        )
    with pytest.raises(
        TuneError, match="'svc/pool' has no searchable 'backoff'; its knobs: intensity"
    ):
        tune(
            tree(),
            FAULTS,
            objective="min restarts",
            duration=1,
            knobs=[Knob("svc/pool", "backoff", (None,))],
        )
    with pytest.raises(TuneError, match="'svc/pool/web' has no liveness probe"):
        tune(
            tree(),
            FAULTS,
            objective="min restarts",
            duration=1,
            knobs=[Knob("svc/pool/web", "liveness", ((1.0, 1),))],
        )


def test_held_out_seeds_must_be_fresh_and_the_grid_bounded() -> None:
    with pytest.raises(TuneError, match="held-out seeds must differ"):
        tune(tree(), FAULTS, objective="min restarts", duration=1, seeds=[1, 2], holdout=[2, 3])
    with pytest.raises(TuneError, match=r"could take \d+ points .* the bound is 5"):
        tune(tree(), FAULTS, objective="min restarts", duration=1, max_points=5)


def test_the_search_finds_an_intensity_that_keeps_web_up_and_the_held_out_replay_agrees() -> None:
    """`pool` allows 1 restart in 5 s while `jobs` crashes every 2 s: it gives up and
    takes `web` (0.5 s to start) down each time. More intensity keeps web up."""
    knobs = [Knob("svc/pool", "intensity", (1, 2, 10, 50)), Knob("svc/pool", "period", (5.0, 1.0))]
    result = tune(
        tree(),
        FAULTS,
        objective="min restarts",
        require=["availability(pool/web) >= 99.5%", "availability(pool/jobs) >= 80%"],
        knobs=knobs,
        duration=600.0,
        seeds=range(6),
        holdout=range(50, 56),
    )
    assert not result.feasible(result.current) and result.feasible(result.recommended)
    assert result.beats
    assert set(result.changes) <= {("svc/pool", "intensity"), ("svc/pool", "period")}
    # The held-out replay is what simulate() gives on those seeds: paired, seed by seed.
    pool_spec = apply(tree(), dict(result.recommended.settings))
    again = simulate(pool_spec, FAULTS, duration=600.0, seed=50, keep_events=False)
    assert result.holdout_recommended.objective[0] == again.tree.restarts
    assert len(result.holdout_current.objective) == 6
    text = str(result)
    assert "recommended settings:\n  svc/pool " in text
    assert "constraints: current not met, recommended met; the recommendation beats" in text


def test_settings_already_best_are_kept() -> None:
    result = tune(
        tree(intensity=50),
        FAULTS,
        objective="max availability(pool/web)",
        knobs=[Knob("svc/pool", "intensity", (1, 50))],
        duration=300.0,
        seeds=range(4),
        holdout=range(10, 14),
    )
    assert result.changes == {} and "recommended: keep the current settings" in str(result)
    assert not result.beats  # nothing to beat: the same settings, a difference of 0


def test_any_built_in_metric_serves_as_objective_or_constraint() -> None:
    """A nested supervisor's give-ups as the objective, k of n as a constraint."""
    result = tune(
        tree(),
        FAULTS,
        objective="min give_ups(pool)",
        require=["k_of_n(2, pool/web, pool/jobs, db) >= 80%"],
        knobs=[Knob("svc/pool", "intensity", (1, 50))],
        duration=300.0,
        seeds=range(4),
        holdout=range(10, 14),
    )
    assert result.changes == {("svc/pool", "intensity"): (1, 50)}
    assert result.holdout_recommended.objective == (0.0, 0.0, 0.0, 0.0)
    assert result.beats


def test_a_fitted_hang_tunes_the_liveness_probe() -> None:
    """A db that hangs every 5 minutes on average, seen by a probe every 10 s that
    needs 5 failures: a faster probe or a lower threshold finds the hang sooner."""

    probe = Liveness(TcpProbe(port=1, period=10.0, timeout=1.0), failures=5)
    spec = SupervisorSpec(
        "svc",
        intensity=100,
        period=10.0,
        children=[ChildSpec("db", command=["db"], liveness=probe, shutdown=1.0)],
    )
    result = tune(
        spec,
        {"db": Hang(mean=300.0, start_duration=1.0)},
        objective="max availability(db)",
        knobs=[Knob("svc/db", "liveness", ((10.0, 5), (10.0, 2), (2.0, 2)))],
        duration=3600.0,
        seeds=range(6),
        holdout=range(10, 16),
    )
    assert result.changes == {("svc/db", "liveness"): ((10.0, 5), (2.0, 2))}
    assert result.beats
    assert "svc/db liveness: every 10 s, 5 failures -> every 2 s, 2 failures" in str(result)
