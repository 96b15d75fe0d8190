"""Metrics over a run: the built-ins against hand-computed values, the text parser,
and a supervisor's own give-ups in its reports."""

from __future__ import annotations

import pickle

import pytest

from supervision import ChildSpec, SpecError, SupervisorSpec
from supervision.simulate import (
    BUILTIN_METRICS,
    Availability,
    GiveUps,
    KOfN,
    Scripted,
    SimulationResult,
    TimeToDetect,
    custom,
    metric,
    simulate,
)
from supervision.simulate._metrics import kind_of, needs_events


def _worker(child_id: str, **fields: object) -> ChildSpec:
    return ChildSpec(id=child_id, command=[child_id], **fields)  # type: ignore[arg-type]


ABC = SupervisorSpec(
    "root", intensity=10, period=1, children=[_worker("a"), _worker("b"), _worker("c")]
)
# a: starts 0-2, crashes at 10, restarted 10-12. b: starts 2-4, crashes at 11; its exit
# waits for a's restart (to 12), then its own takes 2 s (up at 14). c: starts at once
# (4), crashes at 30 and 31 and is restarted at once.
SCRIPT = {
    "a": Scripted([10.0], start_duration=2.0),
    "b": Scripted([11.0], start_duration=2.0),
    "c": Scripted([30.0, 31.0]),
}


def test_the_scripted_runs_states_are_the_ones_the_hand_computation_uses() -> None:
    result = simulate(ABC, SCRIPT, duration=60.0)
    assert result.states["a"] == [(2.0, "up"), (10.0, "down"), (12.0, "up")]
    assert result.states["b"] == [(4.0, "up"), (11.0, "down"), (14.0, "up")]
    assert [s for _, s in result.states["c"]] == ["up", "down", "up", "down", "up"]


def test_k_of_n_is_the_share_of_the_run_with_at_least_k_up() -> None:
    metrics = {
        "two": "k_of_n(2, a, b, c)",
        "all": "all_of(a, b, c)",
        "any": "any_of(a, b, c)",
        "only_a": "k_of_n(1, a)",
        "a": "availability(a)",
    }
    result = simulate(ABC, SCRIPT, duration=60.0, metrics=metrics)
    # Two of three: from 4 (b up) to 60, but for 11-12 (a and b down at once).
    assert result.metrics["two"] == pytest.approx((56 - 1) / 60)
    # All three: 4-10 and 14-60 (c's crashes take no time).
    assert result.metrics["all"] == pytest.approx((6 + 46) / 60)
    # Any: from 2 (a up) to the end.
    assert result.metrics["any"] == pytest.approx(58 / 60)
    # One of one is the child's availability: up 2-10 and 12-60.
    assert result.metrics["only_a"] == result.metrics["a"] == pytest.approx(56 / 60)


def test_k_of_n_nests_db_up_and_at_least_one_worker_up() -> None:
    both = KOfN(2, ("a", KOfN(1, ("b", "c"))))
    assert str(both) == "k_of_n(2, a, k_of_n(1, b, c))" and metric(str(both)) == both
    result = simulate(ABC, SCRIPT, duration=60.0, metrics={"x": both})
    # a up (2-10, 12-60) and b or c up (from 4): 4-10 and 12-60.
    assert result.metrics["x"] == pytest.approx((6 + 48) / 60)


def _hanging(**fields: object) -> SupervisorSpec:
    web = _worker("web", watchdog=5.0, shutdown=2.0, **fields)
    return SupervisorSpec("root", intensity=100, period=1.0, children=[web])


def test_time_to_detect_runs_from_the_hang_to_the_stop() -> None:
    from supervision.simulate import Hang

    # Hangs 10 s after each start; the watchdog fires 5 s later and the SIGTERM is
    # ignored for shutdown=2 s: hung at 10, 27, 44; down (and restarted) at 17, 34, 51.
    result = simulate(
        _hanging(),
        {"web": Hang(after=10.0)},
        duration=60.0,
        metrics={"detect": "time_to_detect(web)", "incident": "downtime_per_incident(web)"},
    )
    assert [t for t, s in result.states["web"] if s == "hung"] == [10.0, 27.0, 44.0]
    assert result.metrics["detect"] == pytest.approx(7.0)
    assert result.metrics["incident"] == pytest.approx(7.0)


def test_without_a_hang_time_to_detect_is_not_defined() -> None:
    result = simulate(ABC, SCRIPT, duration=60.0, metrics={"d": TimeToDetect("a")})
    assert result.metrics == {"d": None}


def test_downtime_per_incident_leaves_out_the_first_start_and_counts_an_open_one() -> None:
    # a: first up at 2 (no incident); down 10-12; crashes at 59 with a 2 s start: still
    # down at the end (60), an open incident of 1 s.
    faults = {"a": Scripted([10.0, 59.0], start_duration=2.0)}
    result = simulate(ABC, faults, duration=60.0, metrics={"a": "downtime_per_incident(a)"})
    assert result.states["a"] == [(2.0, "up"), (10.0, "down"), (12.0, "up"), (59.0, "down")]
    assert result.metrics["a"] == pytest.approx((2.0 + 1.0) / 2)


def _nested() -> SupervisorSpec:
    web = SupervisorSpec("web", intensity=2, period=10, children=[_worker("a"), _worker("b")])
    return SupervisorSpec("root", intensity=100, period=1, children=[_worker("db"), web])


def test_a_nested_supervisor_counts_its_own_give_ups() -> None:
    # web/a crashes 3 times within 10 s twice: web (intensity 2 in 10 s) gives up twice.
    faults = {"web/a": Scripted([5.0, 6.0, 7.0, 20.0, 21.0, 22.0])}
    result = simulate(
        _nested(),
        faults,
        duration=60.0,
        metrics={"web": "give_ups(web)", "root": GiveUps()},
    )
    assert result.children["web"].give_ups == 2
    assert result.children["db"].give_ups == 0
    assert result.tree.supervisor_give_ups == {"": 0, "web": 2}
    assert result.metrics == {"web": 2.0, "root": 0.0}
    text = str(result)
    assert "give-ups" in text.splitlines()[0]
    assert text.splitlines()[2].split()[-1] == "2"  # web's row


def test_a_metric_on_a_path_the_tree_lacks_names_the_paths_it_has() -> None:
    with pytest.raises(SpecError, match=r"'nope' is no child of this tree; its paths: a, b, c"):
        simulate(ABC, SCRIPT, duration=10.0, metrics={"x": Availability("nope")})
    with pytest.raises(SpecError, match="no supervisor of this tree"):
        simulate(_nested(), duration=10.0, metrics={"x": "give_ups(db)"})


@pytest.mark.parametrize(
    "text",
    [
        "availability",
        "availability(web)",
        "k_of_n(1, web/a, web/b, web/c)",
        "k_of_n(2, db, k_of_n(1, web/a, web/b))",
        "restarts(web/a)",
        "give_ups(pool)",
        "give_ups",
        "time_to_give_up",
        "unhealthy(db)",
        "downtime_per_incident(db)",
        "time_to_detect(db)",
    ],
)
def test_a_metrics_text_reads_back_to_itself(text: str) -> None:
    m = metric(text)
    assert str(m) == text and metric(str(m)) == m
    assert pickle.loads(pickle.dumps(m)) == m  # crosses a process pool


def test_all_of_and_any_of_are_k_of_n() -> None:
    assert metric("all_of(a, b)") == KOfN(2, ("a", "b"))
    assert metric(" any_of( a ,b ) ") == KOfN(1, ("a", "b"))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("avail(web)", "'avail' is no metric"),
        ("k_of_n(x, a)", "first argument is K"),
        ("k_of_n(4, a, b)", r"k \(4\) exceeds its 2 members"),
        ("time_to_detect", r"needs a child's path, e\.g\. time_to_detect\(db\)"),
        ("availability(a, b)", "at most one path"),
        ("availability(web", "availability"),
        ("", "it is empty"),
        ("availability) x", "unexpected"),
        ("time_to_give_up(web)", "takes no path"),
    ],
)
def test_a_bad_text_is_refused_naming_it(text: str, why: str) -> None:
    with pytest.raises(SpecError, match=why) as caught:
        metric(text)
    assert repr(text) in str(caught.value)
    if "exceeds" not in why:
        assert all(name in str(caught.value) for name in BUILTIN_METRICS)


def _uptime_of_a(result: SimulationResult) -> float:
    return result.children["a"].uptime


def test_a_plain_function_is_a_metric_and_custom_gives_it_a_kind() -> None:
    result = simulate(ABC, SCRIPT, duration=60.0, metrics={"up": _uptime_of_a})
    assert result.metrics["up"] == pytest.approx(56.0)
    assert kind_of(_uptime_of_a) == "value" and not needs_events(_uptime_of_a)
    timed = custom(_uptime_of_a, kind="time", events=True)
    assert kind_of(timed) == "time" and needs_events(timed)
    assert kind_of(metric("availability(a)")) == "fraction"


def test_a_metric_must_return_a_number_or_none() -> None:
    with pytest.raises(SpecError, match="returned 'x'; a metric returns a float or None"):
        simulate(ABC, duration=1.0, metrics={"bad": lambda r: "x"})  # type: ignore[arg-type,return-value]


def test_metrics_refuse_a_default_figures_name_and_a_non_metric() -> None:
    with pytest.raises(SpecError, match="give yours another name"):
        simulate(ABC, duration=1.0, metrics={"availability": "availability(a)"})
    with pytest.raises(SpecError, match="expected a metric"):
        simulate(ABC, duration=1.0, metrics={"x": 3})  # type: ignore[dict-item]
