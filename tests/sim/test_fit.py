"""Fitting fault models to an event journal: the MLE and its exact interval by hand,
durations, hangs and flaps, the bounds on what is read, and the errors."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from supervision import ChildSpec, Liveness, SupervisorSpec, TcpProbe
from supervision._events import Event
from supervision.simulate import (
    Exponential,
    Flapping,
    Hang,
    Healthy,
    NotEnoughHistory,
    Rate,
    fit,
    read_journal,
    simulate,
)
from supervision.simulate._rates import chi2_quantile, fit_weibull


def line(t: float, who: str, what: str, reason: str | None = None, detail: str = "") -> str:
    """A journal line as `nannytree run --event-log` writes it."""
    record: dict[str, Any] = {"ts": "2026-11-29T10:00:00+00:00", "time": t, "who": who}
    record |= {"what": what, "pid": None, "reason": reason, "abnormal": reason is not None}
    return json.dumps(record | {"detail": detail, "stderr": ""})


RUNS = [0.2, 0.4, 0.6, 0.3, 0.5, 0.8, 0.1, 0.7, 0.9, 0.5]  # 10 crashes in 5.0 s


def crashing_journal() -> list[str]:
    """Root "t" starts at 1000; "w" takes 0.2 s to start, then each run of RUNS ends in a
    crash and the restart takes 0.1 s; the last run lasts 1.0 s until an operator's stop,
    which takes 0.003 s."""
    t = 1000.0
    lines = [line(t, "t", "supervisor_started", detail="one_for_one")]
    t += 0.2
    lines.append(line(t, "t/w", "child_started"))
    for run in RUNS:
        t += run
        lines.append(line(t, "t/w", "child_exited", "exit code 1"))
        t += 0.1
        lines.append(line(t, "t/w", "child_started"))
    lines.append(line(t + 0.997, "t", "operator_action", detail="shutdown by SIGINT"))
    lines.append(line(t + 1.0, "t/w", "child_terminated", "shutdown"))
    lines.append(line(t + 1.0, "t", "supervisor_stopped", "shutdown"))
    return lines


def test_chi_square_quantiles_match_the_tables() -> None:
    table = {
        (0.025, 2): 0.0506356,
        (0.975, 2): 7.377759,
        (0.025, 20): 9.590777,
        (0.975, 22): 36.780712,
        (0.95, 1): 3.841459,
        (0.5, 100): 99.334129,
    }
    for (q, df), value in table.items():
        assert chi2_quantile(q, df) == pytest.approx(value, rel=1e-6), (q, df)


def test_the_crash_rate_is_the_mle_with_its_exact_chi_square_interval() -> None:
    child = fit(crashing_journal())["w"]
    assert child.crashes.events == 10
    assert child.crashes.exposure == pytest.approx(6.0)
    assert child.crashes.rate == pytest.approx(10 / 6.0)
    # By hand: [chi2(.025, 2k), chi2(.975, 2k + 2)] / 2T with k = 10, T = 6.0 s.
    low, high = child.crashes.interval()
    assert low == pytest.approx(9.590777 / 12, rel=1e-6)
    assert high == pytest.approx(36.780712 / 12, rel=1e-6)
    assert child.starts == 11 and child.hangs.events == 0
    (model,) = child.models
    assert isinstance(model, Exponential) and model.mtbf == pytest.approx(0.6)


def test_start_and_stop_durations_are_the_gaps_to_the_supervisors_previous_event() -> None:
    child = fit(crashing_journal())["w"]
    assert child.start_duration is not None and child.start_duration.n == 11
    assert child.start_duration.mean == pytest.approx((0.2 + 10 * 0.1) / 11)
    assert child.stop_duration is not None and child.stop_duration.n == 1
    assert child.stop_duration.mean == pytest.approx(0.003)
    (model,) = child.models
    assert model.start_duration == pytest.approx((0.2 + 1.0) / 11)
    assert model.stop_duration == pytest.approx(0.003)


def test_no_event_gives_a_rate_of_zero_with_an_upper_bound() -> None:
    lines = [
        line(0.0, "t", "supervisor_started"),
        line(0.0, "t/w", "child_started"),
        line(100.0, "t/w", "child_terminated", "shutdown"),
    ]
    child = fit(lines)["w"]
    assert child.crashes.events == 0
    low, high = child.crashes.interval()
    assert low == 0.0 and high == pytest.approx(7.377759 / 200, rel=1e-6)  # -ln(.025)/T
    assert child.models == [Healthy(start_duration=0.0, stop_duration=0.0)]
    assert "none in 100.0 s" in str(child)


def _journal_of(events: list[Event]) -> list[str]:
    """A simulated run's events as journal lines (virtual seconds as wall time)."""
    return [
        line(
            e.time,
            f"{e.supervisor}/{e.offender}" if e.offender else e.supervisor,
            e.context.value,
            None if e.reason is None else str(e.reason),
            e.detail,
        )
        for e in events
    ]


def test_a_simulated_history_is_fitted_back_to_its_own_model() -> None:
    spec = SupervisorSpec(
        "t", intensity=10_000, period=1.0, children=[ChildSpec("w", command=["w"])]
    )
    injected = Exponential(mtbf=2.0, start_duration=0.3)
    run = simulate(spec, {"w": injected}, duration=2000.0, seed=3)
    child = fit(_journal_of(run.events))["w"]
    low, high = child.crashes.interval()
    assert low < 1 / 2.0 < high
    assert child.crashes.events > 500
    assert child.start_duration is not None
    assert child.start_duration.mean == pytest.approx(0.3)
    assert child.weibull is not None and not child.weibull.better


def test_liveness_kills_are_hangs_and_recovered_streaks_are_flaps() -> None:
    probe = Liveness(TcpProbe(port=1, period=1.0), failures=3)
    spec = SupervisorSpec("t", children=[ChildSpec("db", command=["db"], liveness=probe)])
    lines = [
        line(0.0, "t", "supervisor_started"),
        line(0.0, "t/db", "child_started"),
        line(10.0, "t/db", "child_unhealthy", detail="probe failed"),
        line(11.0, "t/db", "child_healthy"),  # a flap
        line(30.0, "t/db", "child_unhealthy", detail="probe failed"),  # the hang seen
        line(32.5, "t/db", "child_exited", "unhealthy: 3 probes failed in a row"),
        line(32.5, "t/db", "child_started"),
        line(50.0, "t/db", "child_exited", "watchdog: no heartbeat for 5 s"),
        line(50.0, "t/db", "child_started"),
        line(70.0, "t/db", "child_terminated", "shutdown"),
    ]
    child = fit(lines, spec)["db"]
    # Exposure ends at the first failing probe before a liveness kill: 30 + 17.5 + 20.
    assert child.hangs.events == 2 and child.hangs.exposure == pytest.approx(67.5)
    assert child.crashes.events == 0
    assert child.flaps.hits == 1 and child.flaps.trials == 67  # a probe a second
    kinds = [type(m) for m in child.models]
    assert kinds == [Hang, Flapping]
    assert child.models[0].mean == pytest.approx(67.5 / 2)  # type: ignore[attr-defined]
    # A combined list: the child's start fields on its first model only.
    hang, flapping = child.models
    assert flapping == Flapping(probability=flapping.probability)  # type: ignore[attr-defined]
    assert hang.start_duration == child.start_duration.mean  # type: ignore[union-attr]
    assert fit(lines, spec).faults() == {"db": child.models}
    assert simulate(spec, fit(lines, spec).faults(), duration=600).children["db"].unhealthy


def test_each_failed_attempt_of_a_recovered_streak_counts_where_the_journal_has_them() -> None:
    lines = [
        line(0.0, "t", "supervisor_started"),
        line(0.0, "t/db", "child_started"),
        line(10.0, "t/db", "probe_failed", detail="failing 1/3"),
        line(10.0, "t/db", "child_unhealthy"),
        line(11.0, "t/db", "probe_failed", detail="failing 2/3"),
        line(12.0, "t/db", "child_healthy"),
        line(100.0, "t/db", "child_terminated", "shutdown"),
    ]
    probe = Liveness(TcpProbe(port=1, period=1.0), failures=3)
    spec = SupervisorSpec("t", children=[ChildSpec("db", command=["db"], liveness=probe)])
    child = fit(lines, spec)["db"]
    assert (child.flaps.hits, child.flaps.trials) == (2, 100)
    assert child.models == [Flapping(probability=0.02)]


def test_a_weibull_is_said_to_fit_better_only_when_the_test_rejects_the_exponential() -> None:
    rng = random.Random(7)
    wearing = [rng.weibullvariate(1.0, 3.0) for _ in range(200)]
    found = fit_weibull(wearing, [True] * 200)
    assert found is not None and found.better and found.shape == pytest.approx(3.0, rel=0.15)
    memoryless = [rng.expovariate(1.0) for _ in range(200)]
    found = fit_weibull(memoryless, [True] * 200)
    assert found is not None and not found.better and found.shape == pytest.approx(1.0, rel=0.15)


def test_a_rate_formats_its_mean_time_and_interval() -> None:
    text = Rate(10, 6.0).format()
    assert text.startswith("10 in 6.0 s: one every 0.6 s (95%: 0.326 s to 1.25 s)"), text


# -- what is read, and the errors --------------------------------------------------------


def test_lines_that_are_not_events_are_counted_and_skipped() -> None:
    lines = [
        "not json",
        "[1, 2]",
        json.dumps({"time": "soon", "who": "t", "what": "x"}),
        json.dumps({"time": 1.0, "who": "", "what": "x"}),
        "x" * 100_000,
        "[" * 60_000,  # nested too deep for the parser
        json.dumps({"time": 10**400, "who": "t/w", "what": "child_started"}),
        json.dumps({"time": float("nan"), "who": "t/w", "what": "child_started"}),
        "",
        *crashing_journal(),
    ]
    journal = read_journal(lines)
    assert journal.skipped == 8 and not journal.truncated
    assert fit(journal)["w"].crashes.events == 10
    assert "8 lines that are not events skipped" in str(fit(journal))


def test_reading_stops_at_max_lines_and_says_so() -> None:
    journal = read_journal(iter(crashing_journal() * 100), max_lines=10)
    assert len(journal.events) == 10 and journal.truncated


def test_a_childs_name_is_escaped_in_the_report() -> None:
    lines = [
        line(0.0, "t", "supervisor_started"),
        line(0.0, "t/w\x1b[2J", "child_started"),
        line(5.0, "t/w\x1b[2J", "child_exited", "exit code 1"),
    ]
    text = str(fit(lines))
    assert "\x1b" not in text and "w\\x1b[2J" in text


def test_a_journal_without_a_supervisor_is_refused() -> None:
    with pytest.raises(NotEnoughHistory, match="no supervisor_started event"):
        fit(['{"time": 1, "who": "t/w", "what": "child_started"}'])


def test_too_few_starts_name_the_child_what_it_has_and_what_it_needs() -> None:
    lines = crashing_journal()
    with pytest.raises(NotEnoughHistory) as caught:
        fit(lines, min_starts=20, children=["w"])
    assert str(caught.value) == (
        "worker 'w' has 11 starts in the journal; the fit needs at least 20: "
        "let the tree run longer, or lower min_starts"
    )
    with pytest.raises(NotEnoughHistory, match="has 11 starts"):
        fit(lines, min_starts=20)  # no worker left to fit


def test_an_unknown_child_is_named_with_the_known_ones() -> None:
    with pytest.raises(NotEnoughHistory, match=r"no worker 'web' \(its workers: w\)"):
        fit(crashing_journal(), children=["web"])
    with pytest.raises(NotEnoughHistory, match="no worker 'web'; its workers: w"):
        fit(crashing_journal())["web"]


def test_an_exponential_interval_covers_the_truth_as_often_as_it_says() -> None:
    """Coverage of the exact interval over 400 synthetic histories (k ~ 20 events)."""
    rng = random.Random(11)
    covered = 0
    for _ in range(400):
        exposure, k = 0.0, 0
        while True:
            gap = rng.expovariate(2.0)
            if exposure + gap > 10.0:
                break
            exposure += gap
            k += 1
        low, high = Rate(k, 10.0).interval()
        covered += low <= 2.0 <= high
    assert 0.92 <= covered / 400 <= 0.99
    assert math.isinf(Rate(0, 0.0).interval()[1])
