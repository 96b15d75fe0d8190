"""Readiness probes, liveness probes and one-shot steps, on real processes and
real sockets (docs/health.md)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from actors import NannyActor
from actors.testing import free_port
from supervision import (
    ChildSpec,
    EventKind,
    ExecProbe,
    ExitKind,
    HttpProbe,
    Liveness,
    LogLine,
    Restart,
    StartError,
    SupervisorSpec,
    SupervisorStartError,
    TcpProbe,
)
from tests.support import children_by_id, event_log, wait_event, wait_until

SERVICE = str(Path(__file__).parents[1] / "support" / "health_service.py")


def service(port: int, warmup: float = 0.0, **kw: object) -> ChildSpec:
    return ChildSpec(
        id=str(kw.pop("id", "web")),
        command=[sys.executable, SERVICE, str(port), str(warmup)],
        **kw,  # type: ignore[arg-type]
    )


def get(port: int, path: str = "/health") -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


# -- readiness ------------------------------------------------------------------------


def test_http_readiness_waits_for_the_service_and_orders_the_next_sibling(tree):
    port = free_port()
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                service(port, 0.5, ready=HttpProbe(f"http://127.0.0.1:{port}/health")),
                ChildSpec(id="client", command=["sleep", "60"]),
            ],
        )
    )
    # The tree's start returned: the service answers now, without a poll of ours.
    assert get(port) == 200
    log = event_log(ref).snapshot()
    started = [e.offender for e in log if e.context is EventKind.CHILD_STARTED]
    assert started == ["web", "client"]


def test_tcp_readiness_on_a_port_another_process_holds_is_not_ready_and_says_whose():
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        spec = SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="web",
                    command=["sleep", "60"],
                    ready=TcpProbe(port, period=0.05),
                    start_timeout=1.0,
                )
            ],
        )
        with pytest.raises(SupervisorStartError) as err:
            NannyActor.start(spec)
    reason = err.value.reason
    assert reason.kind is ExitKind.START_TIMEOUT
    assert f"port {port} is held by pid {os.getpid()}" in reason.message
    assert "not this child" in reason.message


def test_a_service_that_loses_the_port_race_fails_fast_with_the_port_and_its_stderr():
    """The xdist false pass: a second copy of a service on a fixed port must not
    count as ready because the first copy answers."""
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        spec = SupervisorSpec(
            id="root",
            children=[
                service(port, ready=HttpProbe(f"http://127.0.0.1:{port}/health"), start_timeout=30)
            ],
        )
        began = time.monotonic()
        with pytest.raises(SupervisorStartError) as err:
            NannyActor.start(spec)
        took = time.monotonic() - began
    reason = err.value.reason
    assert reason.kind is ExitKind.EXIT_CODE and reason.code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in reason.stderr_tail
    assert took < spec.children[0].start_timeout  # the exit ended the wait, not the timeout


def test_exec_readiness_runs_with_the_childs_environment(tree, tmp_path):
    flag = tmp_path / "up"
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="svc",
                    command=["sh", "-c", f"sleep 0.3; touch {flag}; exec sleep 60"],
                    env={"WANT": "yes"},
                    ready=ExecProbe(["sh", "-c", f'test "$WANT" = yes && test -f {flag}']),
                )
            ],
        )
    )
    assert flag.exists()
    assert children_by_id(ref)["svc"].state == "running"


def test_exec_readiness_that_never_passes_reports_its_last_error():
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(
                id="svc",
                command=["sleep", "60"],
                ready=ExecProbe(["sh", "-c", "echo not yet; exit 3"], period=0.05),
                start_timeout=0.5,
            )
        ],
    )
    with pytest.raises(SupervisorStartError) as err:
        NannyActor.start(spec)
    assert err.value.reason.kind is ExitKind.START_TIMEOUT
    assert "exit code 3: not yet" in err.value.reason.message


def test_log_line_readiness_without_capture(tree):
    port = free_port()
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                service(port, 0.3, ready=LogLine(r"listening on .*:\d+", stream="stderr")),
            ],
        )
    )
    assert get(port) == 200
    assert children_by_id(ref)["web"].state == "running"


def test_a_child_crashing_while_awaited_fails_at_once_with_its_stderr(tree):
    ref = tree(SupervisorSpec(id="root", intensity=0))
    began = time.monotonic()
    with pytest.raises(StartError) as err:
        ref.proxy().start_child(
            ChildSpec(
                id="bad",
                command=["sh", "-c", "echo 'config error: no such table' >&2; exit 3"],
                ready=TcpProbe(free_port()),
                start_timeout=30,
            )
        ).get()
    assert time.monotonic() - began < 30
    reason = err.value.reason
    assert reason.kind is ExitKind.EXIT_CODE and reason.code == 3
    assert "config error: no such table" in reason.stderr_tail


# -- one-shot steps -------------------------------------------------------------------


def test_a_one_shot_step_finishes_before_its_next_sibling_starts(tree, tmp_path):
    done = tmp_path / "migrated"
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="migrate",
                    command=["sh", "-c", f"sleep 0.3; touch {done}"],
                    restart=Restart.TRANSIENT,
                    ready="exited",
                ),
                # Exits 7 (a failed start) if it starts before the step finished.
                ChildSpec(
                    id="app", command=["sh", "-c", f"test -f {done} || exit 7; exec sleep 60"]
                ),
            ],
        )
    )
    app = children_by_id(ref)["app"]
    assert app.state == "running" and app.restarts == 0
    assert children_by_id(ref)["migrate"].pid is None  # done, not restarted
    assert not [e for e in event_log(ref).snapshot() if e.context is EventKind.START_FAILED]


def test_a_one_shot_step_that_fails_is_a_failed_start():
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(
                id="migrate",
                command=["sh", "-c", "echo 'migration 42 failed' >&2; exit 4"],
                restart=Restart.TRANSIENT,
                ready="exited",
            ),
            ChildSpec(id="app", command=["sleep", "60"]),
        ],
    )
    with pytest.raises(SupervisorStartError) as err:
        NannyActor.start(spec)
    assert err.value.child == "migrate"
    assert err.value.reason.code == 4
    assert "migration 42 failed" in err.value.reason.stderr_tail


# -- liveness -------------------------------------------------------------------------


def test_a_hung_service_is_restarted_by_its_liveness_probe(tree):
    port = free_port()
    url = f"http://127.0.0.1:{port}/health"
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=3,
            period=30,
            children=[
                service(
                    port,
                    ready=HttpProbe(url),
                    liveness=Liveness(HttpProbe(url, timeout=0.2, period=0.2), failures=2),
                    shutdown=0.5,
                )
            ],
        )
    )
    wait_event(ref, EventKind.CHILD_HEALTHY, "web")
    info = children_by_id(ref)["web"]
    assert info.health is not None and info.health.status == "healthy"
    os.kill(info.pid, signal.SIGSTOP)  # alive, and silent
    unhealthy = wait_event(ref, EventKind.CHILD_UNHEALTHY, "web")
    assert unhealthy.pid == info.pid
    exited = wait_event(ref, EventKind.CHILD_EXITED, "web")
    assert exited.reason is not None and exited.reason.kind is ExitKind.UNHEALTHY
    assert "2 failed liveness probes in a row" in exited.reason.message
    wait_event(ref, EventKind.CHILD_STARTED, "web", where=lambda e: e.time > exited.time)
    again = children_by_id(ref)["web"]
    assert again.pid != info.pid and again.restarts == 1
    assert get(port) == 200


def test_a_liveness_kill_shows_each_failed_probe_and_the_kill_before_the_exit(tree):
    port = free_port()
    url = f"http://127.0.0.1:{port}/health"
    liveness = Liveness(HttpProbe(url, timeout=0.2, period=0.2), failures=3)
    spec = service(port, ready=HttpProbe(url), liveness=liveness, shutdown=0.5)
    ref = tree(SupervisorSpec(id="root", intensity=3, period=30, children=[spec]))
    wait_event(ref, EventKind.CHILD_HEALTHY, "web")
    pid = children_by_id(ref)["web"].pid
    os.kill(pid, signal.SIGSTOP)  # alive, and silent: each probe times out
    exited = wait_event(ref, EventKind.CHILD_EXITED, "web")
    web = [
        e
        for e in event_log(ref).snapshot()
        if e.offender == "web" and e.pid == pid and e.time <= exited.time
    ]
    kinds = [e.context.value for e in web if e.context is not EventKind.CHILD_STARTED]
    assert kinds == [
        "child_healthy",
        "probe_failed",
        "child_unhealthy",
        "probe_failed",
        "probe_failed",
        "liveness_killed",
        "child_exited",
    ]
    failed = [e.detail for e in web if e.context is EventKind.PROBE_FAILED]
    assert [d.split(":")[0] for d in failed] == ["failing 1/3", "failing 2/3", "failing 3/3"]
    killed = next(e for e in web if e.context is EventKind.LIVENESS_KILLED)
    assert killed.detail.startswith("3/3 liveness probes failed in a row")
    assert exited.reason is not None and exited.reason.kind is ExitKind.UNHEALTHY
    assert killed.time <= exited.time


def test_a_flapping_probe_ends_in_the_restart_intensity(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(id="steady", command=["sleep", "60"]),
                ChildSpec(
                    id="sub",
                    command=["sleep", "60"],
                    liveness=Liveness(ExecProbe(["false"], period=0.05), failures=1),
                    shutdown="brutal_kill",
                ),
            ],
            intensity=2,
            period=30,
        )
    )
    wait_event(ref, EventKind.MAX_INTENSITY_REACHED, timeout=20)
    exits = [
        e
        for e in event_log(ref).snapshot()
        if e.context is EventKind.CHILD_EXITED and e.offender == "sub"
    ]
    assert len(exits) == 3  # two restarts, then the one too many
    assert all(e.reason.kind is ExitKind.UNHEALTHY for e in exits)


def test_a_paused_child_is_not_probed(tree):
    port = free_port()
    url = f"http://127.0.0.1:{port}/health"
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                service(
                    port,
                    ready=HttpProbe(url),
                    liveness=Liveness(HttpProbe(url, timeout=0.1, period=0.1), failures=1),
                )
            ],
        )
    )
    wait_event(ref, EventKind.CHILD_HEALTHY, "web")
    ref.proxy().pause_child("web").get()
    paused_at = len(event_log(ref))
    # Ten probe periods, paused: nothing may count against it. The event it would
    # cause is awaited, and must not come.
    with pytest.raises(TimeoutError):
        wait_event(ref, EventKind.CHILD_UNHEALTHY, "web", start=paused_at, timeout=1.0)
    ref.proxy().resume_child("web").get()
    wait_event(ref, EventKind.CHILD_HEALTHY, "web", start=paused_at)
    assert children_by_id(ref)["web"].restarts == 0


def test_exec_probes_leave_no_process_behind(tree, tmp_path):
    """A probe that hangs is killed at its timeout, with what it started."""
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="svc",
                    command=["sleep", "60"],
                    liveness=Liveness(
                        ExecProbe(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.1, period=0.1),
                        failures=1000,
                    ),
                )
            ],
        )
    )
    wait_event(ref, EventKind.CHILD_UNHEALTHY, "svc")
    wait_until(
        lambda: (h := children_by_id(ref)["svc"].health) is not None and h.failures >= 3,
        what="three timed-out probes",
    )
    assert "no answer within 0.1 s" in str(children_by_id(ref)["svc"].health)
