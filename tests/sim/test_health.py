"""The simulator's health model (issue 25): readiness probes, one-shot steps, liveness
probes against hung and flapping services, in virtual time (docs/health-simulation.md)."""

from __future__ import annotations

import pytest

from supervision import (
    ChildSpec,
    EventKind,
    ExecProbe,
    ExitKind,
    ExitReason,
    HttpProbe,
    Liveness,
    Restart,
    SpecError,
    Strategy,
    SupervisorSpec,
    TcpProbe,
)
from supervision.simulate import (
    FaultModel,
    Flapping,
    Hang,
    Scripted,
    SimulationResult,
    call,
    simulate,
    sweep,
)

URL = "http://127.0.0.1:8000/health"


def timeline(result: SimulationResult, *kinds: EventKind) -> list[tuple[float, str, str | None]]:
    """(time, what, who) of each event, of the given kinds (all when none given)."""
    return [
        (round(e.time, 9), e.context.value, e.offender)
        for e in result.events
        if not kinds or e.context in kinds
    ]


HEALTH = (EventKind.CHILD_HEALTHY, EventKind.CHILD_UNHEALTHY)
LIFE = (EventKind.CHILD_STARTED, EventKind.CHILD_EXITED, EventKind.START_FAILED)


# -- liveness against a hung service ------------------------------------------------------


def _web(**fields: object) -> SupervisorSpec:
    intensity = fields.pop("intensity", 3)
    child = ChildSpec(id="web", command=["web"], **fields)  # type: ignore[arg-type]
    return SupervisorSpec(id="root", intensity=intensity, period=10, children=[child])  # type: ignore[arg-type]


def test_a_service_that_stops_answering_is_stopped_by_its_probe_and_restarted() -> None:
    # SIGSTOPped at t=1. Probes at 0, 0.2, ..., 0.8 pass; the one at 1.0 gets no
    # answer within its timeout (1 s, over the period: the next begins at once, at
    # 2.0); the second failure (3.0) stops it: SIGTERM is ignored, SIGKILL at
    # shutdown=0.5. The new process answers its first probe. The hang, each failed
    # attempt and the kill are events of their own, the kill before the exit.
    spec = _web(liveness=Liveness(TcpProbe(8000, period=0.2), failures=2), shutdown=0.5)
    result = simulate(spec, {"web": Hang(at=[1.0])}, duration=6.0)
    assert timeline(result) == [
        (0.0, "supervisor_started", None),
        (0.0, "child_started", "web"),
        (0.0, "child_healthy", "web"),
        (1.0, "child_hung", "web"),
        (2.0, "probe_failed", "web"),
        (2.0, "child_unhealthy", "web"),
        (3.0, "probe_failed", "web"),
        (3.0, "liveness_killed", "web"),
        (3.5, "child_exited", "web"),
        (3.5, "child_started", "web"),
        (3.5, "child_healthy", "web"),
    ]
    failed = [e for e in result.events if e.context is EventKind.PROBE_FAILED]
    assert [e.detail for e in failed] == [
        "failing 1/2: no answer within 1 s",
        "failing 2/2: no answer within 1 s",
    ]
    unhealthy = result.events[5]
    assert unhealthy.pid == 1000 and unhealthy.detail == "failing 1/2: no answer within 1 s"
    killed = result.events[7]
    assert killed.pid == 1000 and killed.detail.startswith("2/2 liveness probes failed")
    # Without the event list, the same run counts the same.
    quiet = simulate(spec, {"web": Hang(at=[1.0])}, duration=6.0, keep_events=False)
    assert quiet.children == result.children and quiet.states == result.states
    exited = result.events[8]
    assert exited.reason is not None and exited.reason.kind is ExitKind.UNHEALTHY
    assert exited.reason.message == (
        "2 failed liveness probes in a row (tcp 127.0.0.1:8000): no answer within 1 s"
    )
    web = result.children["web"]
    assert (web.restarts, web.failures, web.unhealthy) == (1, 1, 1)
    assert result.tree.unhealthy == 1
    # Down from the moment it stopped answering to its restart: 1.0 to 3.5.
    assert web.downtime == pytest.approx(2.5)
    assert "unhealthy" in str(result).splitlines()[0]


def test_probe_times_follow_the_period_from_readiness_and_initial_delay() -> None:
    # Ready at 0.3 (its readiness probe), probed from 0.3 + 1.0, every 2 s: 1.3, 3.3,
    # 5.3, 7.3... It hangs 6 s after its start (6.3): the probes at 7.3 and 9.3 fail,
    # each at its timeout (0.5 s), and the second one stops it (brutal_kill).
    spec = _web(
        ready=HttpProbe(URL),
        liveness=Liveness(HttpProbe(URL, period=2.0, timeout=0.5), failures=2, initial_delay=1.0),
        shutdown="brutal_kill",
    )
    result = simulate(spec, {"web": Hang(after=6.0, answers_after=0.25)}, duration=11.0)
    assert timeline(result, *LIFE, *HEALTH) == [
        (0.3, "child_started", "web"),
        (1.3, "child_healthy", "web"),
        (7.8, "child_unhealthy", "web"),
        (9.8, "child_exited", "web"),
        (10.1, "child_started", "web"),  # its next start answers at 0.3 again
    ]


def test_a_hang_is_stopped_by_its_watchdog_or_its_probe_whichever_decides_first() -> None:
    def run(watchdog: float) -> tuple[float, ExitKind]:
        spec = _web(
            watchdog=watchdog,
            liveness=Liveness(HttpProbe(URL, period=2.0, timeout=0.5), failures=1),
            shutdown=1.0,
        )
        result = simulate(spec, {"web": Hang(after=2.0)}, duration=5.0)
        exit = next(e for e in result.events if e.context is EventKind.CHILD_EXITED)
        assert exit.reason is not None
        return round(exit.time, 9), exit.reason.kind

    # The probe at 2.0 fails at 2.5; the watchdog fires 2.0 + watchdog; then 1 s of stop.
    assert run(watchdog=1.0) == (3.5, ExitKind.UNHEALTHY)
    assert run(watchdog=0.2) == (3.2, ExitKind.WATCHDOG)


def test_a_service_probed_before_it_answers_is_killed_unless_the_initial_delay_waits() -> None:
    # ready="started" says nothing of the service: probed at once, it refuses until 5 s.
    def run(initial_delay: float) -> SimulationResult:
        spec = _web(
            liveness=Liveness(ExecProbe(["check"], period=1.0), initial_delay=initial_delay),
            intensity=2,
        )
        return simulate(spec, {"web": FaultModel(answers_after=5.0)}, duration=20.0)

    eager = run(0.0)
    assert timeline(eager, *LIFE, *HEALTH)[:4] == [
        (0.0, "child_started", "web"),
        (0.0, "child_unhealthy", "web"),  # the first probe failing
        (2.0, "child_exited", "web"),  # the third in a row
        (2.0, "child_started", "web"),
    ]
    assert eager.tree.give_ups == 1 and eager.tree.unhealthy == 3
    patient = run(5.0)
    assert timeline(patient, *LIFE, *HEALTH) == [
        (0.0, "child_started", "web"),
        (5.0, "child_healthy", "web"),
    ]


def test_a_paused_child_is_not_probed_and_starts_a_fresh_count_when_resumed() -> None:
    spec = _web(liveness=Liveness(ExecProbe(["check"], period=1.0), failures=1))
    # Its probes pass three times, then fail: paused before the fourth, it is not probed
    # while paused; resumed, the next probe is its fourth, and fails.
    model = Flapping(pattern=[True, True, True, False])
    calls = [call(2.5, "pause_child", "web"), call(5.2, "resume_child", "web")]
    result = simulate(spec, {"web": model}, duration=5.5, calls=calls)
    assert timeline(result, *LIFE, *HEALTH, EventKind.CHILD_PAUSED, EventKind.CHILD_RESUMED) == [
        (0.0, "child_started", "web"),
        (0.0, "child_healthy", "web"),
        (2.5, "child_paused", "web"),
        (5.2, "child_resumed", "web"),
        (5.2, "child_exited", "web"),
        (5.2, "child_started", "web"),
        (5.2, "child_healthy", "web"),
    ]


def test_an_absolute_hang_of_a_template_hangs_each_of_its_running_children() -> None:
    template = ChildSpec(
        id="w",
        command=["w"],
        liveness=Liveness(TcpProbe(8000, period=1.0, timeout=0.5), failures=1),
        shutdown=0.25,
    )
    pool = SupervisorSpec(
        "pool", strategy=Strategy.SIMPLE_ONE_FOR_ONE, intensity=5, children=[template]
    )
    spec = SupervisorSpec("root", children=[pool])
    calls = [
        call(0.0, "start_child", (), supervisor="pool"),
        call(0.5, "start_child", (), supervisor="pool"),
    ]
    result = simulate(spec, {"pool/w": Hang(at=[2.2])}, duration=4.0, calls=calls)
    # Each is probed on its own schedule: w-1 at 3.0, w-2 at 2.5; each fails at +0.5.
    assert timeline(result, EventKind.CHILD_EXITED, EventKind.CHILD_UNHEALTHY) == [
        (3.25, "child_exited", "w-2"),
        (3.75, "child_exited", "w-1"),
    ]
    assert {e.reason.kind for e in result.events if e.reason and e.offender} == {ExitKind.UNHEALTHY}


# -- flapping probes ------------------------------------------------------------------------


def test_a_flapping_pattern_reports_each_change_once_and_stops_at_the_threshold() -> None:
    spec = _web(liveness=Liveness(ExecProbe(["check"], period=1.0), failures=3))
    model = Flapping(pattern=[True, False, False, True, False, False, False])
    result = simulate(spec, {"web": model}, duration=7.5)
    assert timeline(result, *LIFE, *HEALTH) == [
        (0.0, "child_started", "web"),
        (0.0, "child_healthy", "web"),
        (1.0, "child_unhealthy", "web"),  # 2.0: one more failure, no event
        (3.0, "child_healthy", "web"),
        (4.0, "child_unhealthy", "web"),
        (6.0, "child_exited", "web"),  # the third in a row
        (6.0, "child_started", "web"),
        (6.0, "child_healthy", "web"),  # a new process: its pattern starts again
        (7.0, "child_unhealthy", "web"),
    ]
    exited = next(e for e in result.events if e.context is EventKind.CHILD_EXITED)
    assert exited.reason is not None and exited.reason.kind is ExitKind.UNHEALTHY
    # A flapping service serves until it is stopped: only the restart costs.
    assert result.children["web"].availability == 1.0


def test_a_flapping_probe_ends_in_the_restart_intensity() -> None:
    spec = SupervisorSpec(
        id="root",
        intensity=3,
        period=60,
        children=[
            ChildSpec(id="steady", command=["steady"]),
            ChildSpec(
                id="web",
                command=["web"],
                liveness=Liveness(ExecProbe(["check"], period=1.0), failures=2),
                shutdown=1.0,
            ),
        ],
    )
    faults = {"web": Flapping(probability=0.5, stop_duration=0.2)}
    result = simulate(spec, faults, duration=600.0, seed=3)
    exits = [e for e in result.events if e.context is EventKind.CHILD_EXITED]
    assert [e.offender for e in exits] == ["web"] * 4  # three restarts, then the one too many
    assert all(e.reason is not None and e.reason.kind is ExitKind.UNHEALTHY for e in exits)
    kinds = [e.context for e in result.events]
    assert kinds[-3:] == [
        EventKind.MAX_INTENSITY_REACHED,
        EventKind.CHILD_TERMINATED,  # its sibling, as the supervisor stops
        EventKind.SUPERVISOR_STOPPED,
    ]
    assert result.tree.give_ups == 1 and result.tree.unhealthy == 4
    again = simulate(spec, faults, duration=600.0, seed=3)
    assert timeline(again) == timeline(result)
    # Each stop began at a probe (whole seconds after its start) and took its
    # stop_duration (0.2 s < shutdown): a flapping process answers SIGTERM.
    starts = [e.time for e in result.events if e.context is EventKind.CHILD_STARTED][1:]
    assert [round((e.time - s) % 1.0, 9) for s, e in zip(starts, exits, strict=True)] == [0.2] * 4


# -- readiness -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answers_after", "period", "ready_at"),
    [(0.0, None, 0.0), (0.25, None, 0.3), (0.3, None, 0.3), (1.1, 0.5, 1.5), (2.0, 1.0, 2.0)],
)
def test_a_probe_readiness_ends_at_the_first_attempt_at_or_after_the_answer(
    answers_after: float, period: float | None, ready_at: float
) -> None:
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(id="web", command=["web"], ready=TcpProbe(8000, period=period)),
            ChildSpec(id="next", command=["next"]),
        ],
    )
    result = simulate(spec, {"web": FaultModel(answers_after=answers_after)}, duration=10.0)
    assert timeline(result, *LIFE) == [
        (ready_at, "child_started", "web"),
        (ready_at, "child_started", "next"),  # its next sibling waited for it
    ]


@pytest.mark.parametrize("answers_after", [2.2, 3.0, 9.0])
def test_a_service_that_answers_after_start_timeout_fails_to_start_then(
    answers_after: float,
) -> None:
    # Attempts at 0, 1, 2, 3...: an answer after 2 s is seen at 3.0, later than 2.5.
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(
                id="web", command=["web"], ready=HttpProbe(URL, period=1.0), start_timeout=2.5
            )
        ],
    )
    result = simulate(spec, {"web": FaultModel(answers_after=answers_after)}, duration=10.0)
    failed = [e for e in result.events if e.context is EventKind.START_FAILED]
    assert [(e.time, e.offender) for e in failed] == [(2.5, "web")]
    assert failed[0].reason is not None and failed[0].reason.kind is ExitKind.START_TIMEOUT
    assert result.tree.time_to_give_up == 2.5  # at init: the tree does not start
    in_time = simulate(spec, {"web": FaultModel(answers_after=2.0)}, duration=10.0)
    assert timeline(in_time, *LIFE) == [(2.0, "child_started", "web")]


def test_a_failing_start_under_a_probe_fails_when_its_process_exits() -> None:
    spec = SupervisorSpec(
        id="root",
        intensity=5,
        children=[ChildSpec(id="web", command=["web"], ready=TcpProbe(8000))],
    )
    model = FaultModel(start_duration=0.05, failed_starts={2}, answers_after=1.0)
    calls = [call(3.0, "terminate_child", "web"), call(4.0, "restart_child", "web")]
    result = simulate(spec, {"web": model}, duration=10.0, calls=calls)
    assert timeline(result, *LIFE) == [
        (1.0, "child_started", "web"),
        (4.05, "start_failed", "web"),  # at once: not at start_timeout
    ]


# -- one-shot steps -------------------------------------------------------------------------


def _steps(strategy: Strategy = Strategy.ONE_FOR_ONE) -> SupervisorSpec:
    return SupervisorSpec(
        id="root",
        strategy=strategy,
        children=[
            ChildSpec(id="migrate", command=["migrate"], ready="exited", restart=Restart.TRANSIENT),
            ChildSpec(id="app", command=["app"]),
        ],
    )


def test_a_one_shot_step_finishes_before_its_next_sibling_starts() -> None:
    result = simulate(_steps(), {"migrate": FaultModel(start_duration=2.0)}, duration=10.0)
    assert timeline(result, *LIFE) == [
        (2.0, "child_started", "migrate"),
        (2.0, "child_started", "app"),
        (2.0, "child_exited", "migrate"),  # its exit, reported after its start, as live
    ]
    exited = result.events[-1]
    assert exited.reason is not None and exited.reason.kind is ExitKind.NORMAL
    migrate = result.children["migrate"]
    assert (migrate.restarts, migrate.failures) == (0, 0)
    assert result.tree.availability == pytest.approx(0.8)  # done, not down, from 2.0


def test_a_one_shot_step_runs_a_scripted_duration_and_a_failure_is_a_failed_start() -> None:
    normal = Scripted([(3.0, ExitReason.normal())], relative=True)
    result = simulate(_steps(), {"migrate": normal}, duration=10.0)
    assert timeline(result, *LIFE)[:2] == [
        (3.0, "child_started", "migrate"),
        (3.0, "child_started", "app"),
    ]
    crash = Scripted([1.5], relative=True)  # exit code 1 after 1.5 s
    failed = simulate(_steps(), {"migrate": crash}, duration=10.0)
    assert timeline(failed, *LIFE) == [(1.5, "start_failed", "migrate")]  # app never starts
    reason = failed.events[1].reason
    assert reason is not None and reason.kind is ExitKind.EXIT_CODE and reason.code == 1
    slow = simulate(_steps(), {"migrate": Hang(after=1.0, start_duration=2.0)}, duration=60.0)
    (event,) = [e for e in slow.events if e.context is EventKind.START_FAILED]
    assert event.time == 30.0 and event.reason is not None
    assert event.reason.kind is ExitKind.START_TIMEOUT


def test_a_group_restart_runs_a_finished_step_again_before_its_sibling() -> None:
    faults = {"migrate": FaultModel(start_duration=2.0), "app": Scripted([5.0])}
    result = simulate(_steps(Strategy.ONE_FOR_ALL), faults, duration=10.0)
    assert timeline(result, *LIFE) == [
        (2.0, "child_started", "migrate"),
        (2.0, "child_started", "app"),
        (2.0, "child_exited", "migrate"),
        (5.0, "child_exited", "app"),
        (7.0, "child_started", "migrate"),  # OTP 5.2: a stopped child is started again
        (7.0, "child_started", "app"),
        (7.0, "child_exited", "migrate"),
    ]


# -- sweeps ----------------------------------------------------------------------------------


def _probed(period: float, failures: int, intensity: int = 1000) -> SupervisorSpec:
    probe = HttpProbe(URL, period=period, timeout=0.5)
    return SupervisorSpec(
        id="root",
        intensity=intensity,
        period=60,
        children=[
            ChildSpec(
                id="web", command=["web"], liveness=Liveness(probe, failures=failures), shutdown=1.0
            )
        ],
    )


def test_a_sweep_over_probe_periods_and_thresholds_orders_the_downtime() -> None:
    # `build` names the axes: here the probe's period and the failures in a row.
    table = sweep(
        _probed,
        {"web": Hang(mean=300.0)},
        duration=20_000.0,
        seeds=range(4),
        period=[1, 5, 10],
        failures=[1, 3],
    )
    avail = {(r.params["period"], r.params["failures"]): r.availability.mean for r in table.rows}
    # Slower detection, more downtime: the hang waits for the next probe, then the
    # other failures in a row, each a period apart.
    assert avail[(1, 3)] > avail[(5, 3)] > avail[(10, 3)]
    assert avail[(1, 1)] > avail[(5, 1)] > avail[(10, 1)]
    for period in (1, 5, 10):
        assert avail[(period, 1)] >= avail[(period, 3)]
    assert avail[(10, 1)] > avail[(10, 3)]
    # Every hang ends in one liveness stop, whatever the schedule.
    for r in table.rows:
        assert r.unhealthy is not None and r.unhealthy.mean == pytest.approx(r.restarts.mean)
        assert r.metric("unhealthy") == r.unhealthy.mean
    assert "unhealthy" in str(table)


def test_a_sweep_over_thresholds_and_intensities_of_a_flapping_probe() -> None:
    table = sweep(
        _probed,
        {"web": Flapping(probability=0.2, start_duration=2.0)},
        duration=3600.0,
        seeds=range(4),
        period=[10],
        failures=[1, 3],
        intensity=[1, 5],
    )
    one, three = table.row(failures=1, intensity=5), table.row(failures=3, intensity=5)
    # One failure in a row is common (20%): stops and give-ups; three (0.8%) rarely.
    assert one.unhealthy is not None and three.unhealthy is not None
    assert one.unhealthy.mean > three.unhealthy.mean
    # Each stop costs a restart (2 s); one a minute too many gives up at intensity 1.
    assert three.availability.mean > one.availability.mean
    assert table.row(failures=1, intensity=1).give_ups.mean == 1.0
    assert one.give_ups.mean < 1.0


# -- the models' fields ------------------------------------------------------------------


def test_the_models_refuse_bad_fields() -> None:
    with pytest.raises(SpecError, match="exactly one"):
        Flapping()
    with pytest.raises(SpecError, match="exactly one"):
        Flapping(probability=0.5, pattern=[True])
    with pytest.raises(SpecError, match="from 0 to 1"):
        Flapping(probability=1.5)
    with pytest.raises(SpecError, match="list of bools"):
        Flapping(pattern=[1, 0])  # type: ignore[list-item]
    with pytest.raises(SpecError, match="only a pattern repeats"):
        Flapping(probability=0.1, repeat=True)
    with pytest.raises(SpecError, match="exactly one"):
        Hang(after=1.0, at=[2.0])
    with pytest.raises(SpecError, match=r"Hang\.at"):
        Hang(at=[-1.0])
    with pytest.raises(SpecError, match="answers_after"):
        FaultModel(answers_after=-1.0)


def test_a_repeated_pattern_cycles() -> None:
    model = Flapping(pattern=[True, False], repeat=True)
    assert [model.probe_passes(None, i) for i in range(5)] == [True, False, True, False, True]  # type: ignore[arg-type]
    once = Flapping(pattern=[False])
    assert [once.probe_passes(None, i) for i in range(3)] == [False, True, True]  # type: ignore[arg-type]
