"""Live and simulated agree: the same spec and the same scripted faults give the
same event order in a live tree of real processes and in virtual time; dynamic
children too (a simple_one_for_one child's crash scripted by its id, a
terminate_child by pid), and a liveness restart (issue 25 item 9: the live
service is SIGSTOPped once healthy, the simulated one hangs, `Hang(at=...)`)."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from actors import Tree
from actors.testing import free_port
from supervision import (
    ChildNotPaused,
    ChildSpec,
    EventKind,
    ExitKind,
    ExitReason,
    HttpProbe,
    Liveness,
    NannyError,
    StartError,
    Strategy,
    SupervisorSpec,
)
from supervision.simulate import (
    Hang,
    Healthy,
    MemoryGrowth,
    Scripted,
    call,
    event_sequence,
    pid_of,
    simulate,
)
from tests.live.test_health import SERVICE
from tests.support import wait_until
from tests.targets import children

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


def _outcome(results) -> list[str | None]:
    return [None if r.error is None else type(r.error).__name__ for r in results]


def _live_call(fn, *args) -> tuple[object, str | None]:
    try:
        return fn(*args).get(), None
    except NannyError as e:
        return None, type(e).__name__


def test_simple_one_for_one_calls_and_snapshots_alike(nanny_tree, tmp_path):
    # start_child with arguments up to max_children, terminate one, start another,
    # snapshots of which_children/count_children, then stop the tree.
    spec = SupervisorSpec(
        id="pool",
        strategy=Strategy.SIMPLE_ONE_FOR_ONE,
        max_children=2,
        children=[ChildSpec(id="w", target=children.write_pid_then_sleep)],
    )
    files = [str(tmp_path / f"w{i}") for i in range(4)]
    script = [
        ("start_child", (files[0],)),
        ("start_child", (files[1],)),
        ("start_child", (files[2],)),
        ("terminate_child", "w-2"),
        ("start_child", (files[3],)),
        ("which_children",),
        ("count_children",),
    ]
    simulated = simulate(
        spec,
        duration=20.0,
        calls=[call(1.0 + i, *step) for i, step in enumerate(script)] + [call(15.0, "stop")],
    )

    tree = nanny_tree(spec)
    nanny = tree.nanny
    live = [_live_call(getattr(nanny, step[0]), *step[1:]) for step in script]
    assert [error for _, error in live] == _outcome(simulated.calls[: len(script)])
    assert _outcome(simulated.calls)[2] == "TooManyChildren"
    live_ids = [c.id for c in live[5][0]]
    assert live_ids == [c.id for c in simulated.calls[5].value] == ["w-3", "w-1"]
    assert live[6][0] == simulated.calls[6].value
    tree.ref.stop()
    tree.log.wait_for(lambda e: e.context.value == "supervisor_stopped", 10)
    assert event_sequence(tree.log.snapshot()) == event_sequence(simulated.events)


def test_start_timeout_and_a_numeric_ready_alike(nanny_tree):
    # "a" is ready after 0.3 s of uptime; a child added later never notifies and
    # fails to start at its start_timeout (and is not kept).
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(id="a", target=children.sleep_forever, ready=0.3),
            ChildSpec(id="b", target=children.sleep_forever),
        ],
    )
    slow = ChildSpec(id="slow", target=children.sleep_forever, ready="notify", start_timeout=0.5)
    simulated = simulate(
        spec,
        {"slow": Healthy(start_duration=10.0)},
        duration=5.0,
        calls=[call(1.0, "start_child", slow), call(2.0, "stop")],
    )
    assert _outcome(simulated.calls) == ["StartError", None]

    tree = nanny_tree(spec)
    with pytest.raises(StartError) as failed:
        tree.nanny.start_child(slow).get()
    assert failed.value.reason.kind is ExitKind.START_TIMEOUT
    assert simulated.calls[0].error.reason.kind is ExitKind.START_TIMEOUT
    tree.ref.stop()
    tree.log.wait_for(lambda e: e.context.value == "supervisor_stopped", 10)
    assert event_sequence(tree.log.snapshot()) == event_sequence(simulated.events)


def test_memory_limit_alike(nanny_tree):
    # A leaking child is stopped at its memory_limit and restarted.
    limit = 64 * 1024 * 1024
    spec = SupervisorSpec(
        id="root",
        intensity=5,
        children=[
            ChildSpec(id="ok", target=children.sleep_forever),
            ChildSpec(id="hog", target=children.leak_memory, args=(8,), memory_limit=limit),
        ],
    )
    simulated = simulate(spec, {"hog": MemoryGrowth(rate=limit / 2)}, duration=3.0)
    expected = event_sequence(simulated.events)
    assert expected[-2:] == [("root", "child_exited", "hog"), ("root", "child_started", "hog")]
    assert simulated.events[-2].reason.kind is ExitKind.MEMORY_LIMIT

    tree = nanny_tree(spec)
    tree.log.wait_for(
        lambda e: (
            e.context.value == "child_started"
            and e.offender == "hog"
            and e.incarnation
            and e.incarnation > 2
        ),
        30,
    )
    live = tree.log.snapshot()
    exited = next(e for e in live if e.context.value == "child_exited")
    assert exited.reason.kind is ExitKind.MEMORY_LIMIT
    assert event_sequence(live)[: len(expected)] == expected


def test_a_hung_child_and_its_watchdog_alike(nanny_tree):
    # A child that beats 0.25 s, then hangs: its watchdog stops it, and it is
    # restarted until the root gives up; a healthy sibling is left alone.
    spec = SupervisorSpec(
        id="root",
        intensity=2,
        period=60.0,
        children=[
            ChildSpec(id="ok", target=children.sleep_forever),
            ChildSpec(
                id="stuck", target=children.beat_then_hang, args=(5,), watchdog=0.3, shutdown=0.2
            ),
        ],
    )
    simulated = simulate(spec, {"stuck": Hang(after=0.25)}, duration=30.0)
    expected = event_sequence(simulated.events)
    exits = [e for e in simulated.events if e.context.value == "child_exited"]
    assert [e.reason.kind for e in exits] == [ExitKind.WATCHDOG] * 3

    tree = nanny_tree(spec)
    tree.log.wait_for(lambda e: e.context.value == "supervisor_stopped", 30)
    live = tree.log.snapshot()
    assert [e.reason.kind for e in live if e.context.value == "child_exited"] == [
        ExitKind.WATCHDOG
    ] * 3
    assert event_sequence(live)[: len(expected)] == expected


def test_failed_restarts_retry_through_the_mailbox_until_the_intensity_alike(nanny_tree, tmp_path):
    # f is killed; every restart then fails (it exits before it is ready), each retry
    # is charged, and the supervisor gives up: OTP's retry loop, live and simulated.
    spec = SupervisorSpec(
        id="root",
        intensity=3,
        period=60.0,
        children=[
            ChildSpec(id="a", target=children.sleep_forever),
            ChildSpec(
                id="f",
                target=children.ready_only_the_first_time,
                args=(str(tmp_path / "flag"),),
                ready="notify",
                start_timeout=20.0,
            ),
        ],
    )
    faults = {"f": Scripted([(1.0, KILLED)], failed_starts=range(2, 10))}
    expected = event_sequence(simulate(spec, faults, duration=30.0).events)
    assert expected.count(("root", "restart_scheduled", "f")) == 3
    assert ("root", "reached_max_restart_intensity", "f") in expected

    tree = nanny_tree(spec)
    tree.kill("f")
    tree.log.wait_for(lambda e: e.context.value == "supervisor_stopped", 30)
    assert event_sequence(tree.log.snapshot()) == expected


def test_static_api_calls_alike(nanny_tree):
    # terminate, restart, delete, start_child and the errors they give, in order.
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(id="a", target=children.sleep_forever),
            ChildSpec(id="b", target=children.sleep_forever),
        ],
    )
    c = ChildSpec(id="c", target=children.sleep_forever)
    script = [
        ("restart_child", "a"),
        ("delete_child", "b"),
        ("terminate_child", "b"),
        ("restart_child", "b"),
        ("terminate_child", "b"),
        ("delete_child", "b"),
        ("start_child", c),
        ("start_child", c),
        ("which_child", "ghost"),
        ("count_children",),
    ]
    simulated = simulate(
        spec, duration=20.0, calls=[call(1.0 + i, *step) for i, step in enumerate(script)]
    )
    tree = nanny_tree(spec)
    nanny = tree.nanny
    live = [_live_call(getattr(nanny, step[0]), *step[1:]) for step in script]
    assert [error for _, error in live] == _outcome(simulated.calls)
    assert _outcome(simulated.calls)[:2] == ["ChildRunning", "ChildRunning"]
    assert live[-1][0] == simulated.calls[-1].value
    assert event_sequence(tree.log.snapshot()) == event_sequence(simulated.events)


# -- dynamic children: a crash scripted by id, a terminate by pid ---------------------


def test_a_dynamic_childs_crash_and_a_terminate_by_pid_alike(nanny_tree):
    # Three children of "pool"; the second is killed and restarted; the third is
    # stopped by its pid; then the tree stops.
    pool = SupervisorSpec(
        id="pool",
        strategy="simple_one_for_one",
        intensity=3,
        period=60.0,
        children=[ChildSpec(id="w", target=children.sleep_forever)],
    )
    spec = SupervisorSpec(
        id="root",
        children=[ChildSpec(id="a", target=children.sleep_forever), pool],
    )
    starts = [call(1.0, "start_child", (), supervisor="pool") for _ in range(3)]
    simulated = simulate(
        spec,
        {"pool/w-2": Scripted([(5.0, KILLED)])},
        duration=20.0,
        calls=[
            *starts,
            call(7.0, "terminate_child", pid_of("w-3"), supervisor="pool"),
            call(8.0, "which_children", supervisor="pool"),
            call(9.0, "stop"),
        ],
    )
    expected = event_sequence(simulated.events)
    assert ("root/pool", "child_exited", "w-2") in expected
    assert [r.error for r in simulated.calls] == [None] * 6
    assert all(isinstance(r.value.pid, int) for r in simulated.calls[:3])

    tree = nanny_tree(spec)
    live_pool = tree.nanny.child_nanny("pool").get().proxy()
    infos = [live_pool.start_child(()).get() for _ in range(3)]
    assert [i.id for i in infos] == [r.value.id for r in simulated.calls[:3]]
    tree.kill("w-2")
    tree.wait_for(EventKind.CHILD_STARTED, "w-2")
    assert live_pool.terminate_child(tree.pid("w-3")).get() is None
    listing = live_pool.which_children().get()
    assert [c.id for c in listing] == [c.id for c in simulated.calls[4].value] == ["w-2", "w-1"]
    tree.ref.stop()
    tree.log.wait_for(
        lambda e: e.context is EventKind.SUPERVISOR_STOPPED and e.supervisor == "root", 10
    )
    assert event_sequence(tree.log.snapshot()) == expected


# -- a liveness restart: the live service SIGSTOPped, the simulated one hung ------------


def _liveness_spec(port: int) -> SupervisorSpec:
    url = f"http://127.0.0.1:{port}/health"
    return SupervisorSpec(
        id="root",
        intensity=3,
        period=10,
        children=[
            ChildSpec(
                id="web",
                command=[sys.executable, SERVICE, str(port)],
                ready=HttpProbe(url),
                liveness=Liveness(HttpProbe(url, period=0.2, timeout=0.3), failures=2),
                shutdown=0.5,
            )
        ],
    )


def test_a_liveness_restart_live_matches_the_simulation() -> None:
    spec = _liveness_spec(free_port())
    simulated = simulate(spec, {"web": Hang(at=[1.0])}, duration=6.0)
    expected = event_sequence(simulated.events)
    assert ("root", "child_unhealthy", "web") in expected  # the scenario is the one meant
    assert simulated.children["web"].unhealthy == 1
    with Tree(spec) as tree:

        def healthy(n: int) -> bool:
            kinds = [e.context for e in tree.log.snapshot()]
            return kinds.count(EventKind.CHILD_HEALTHY) >= n

        wait_until(lambda: healthy(1), what="the first child_healthy")
        pid = tree.nanny.which_children().get()[0].pid
        os.kill(pid, signal.SIGSTOP)  # alive, and silent
        wait_until(lambda: healthy(2), what="healthy again after the restart")
        live = tree.log.snapshot()
    assert event_sequence(live) == expected
    exits = [e for e in live if e.context is EventKind.CHILD_EXITED]
    assert [e.reason.kind for e in exits if e.reason] == [ExitKind.UNHEALTHY]
