"""Readiness, start timeout, min_uptime, memory limits, captured output,
environment and actor crashes, on real processes."""

from __future__ import annotations

import os
import stat

import pykka
import pytest

from actors import NannyActor
from actors._shell._worker import WorkerActor
from actors.testing import wait_gone
from supervision import (
    ChildSpec,
    EventKind,
    ExitKind,
    ReadyFile,
    SpecError,
    StartError,
    SupervisorSpec,
    SupervisorStartError,
)
from tests.support import children_by_id, event_log, wait_event
from tests.targets import children


def _started_order(ref) -> list[tuple[str, float]]:
    return [
        (e.offender, e.time)
        for e in ref.proxy().events().get()
        if e.context is EventKind.CHILD_STARTED
    ]


def test_notify_child_is_started_only_once_ready_and_next_sibling_waits(tree, tmp_path):
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(id="slow", target=children.ready_after, args=(0.3,), ready="notify"),
                ChildSpec(id="next", command=["sleep", "60"]),
            ],
        )
    )
    log = event_log(ref).snapshot()
    began = next(e for e in log if e.context is EventKind.SUPERVISOR_STARTED)
    ready = next(e for e in log if e.context is EventKind.CHILD_STARTED and e.offender == "slow")
    nxt = next(e for e in log if e.context is EventKind.CHILD_STARTED and e.offender == "next")
    assert ready.time - began.time >= 0.3  # started = ready, not merely spawned
    assert nxt.time >= ready.time  # and only then the next sibling


def test_not_ready_within_start_timeout_fails_the_start_and_kills_it():
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(
                id="late",
                target=children.ready_after,
                args=(30,),
                ready="notify",
                start_timeout=0.3,
            )
        ],
    )
    with pytest.raises(SupervisorStartError) as err:
        NannyActor.start(spec)
    assert err.value.child == "late"
    assert err.value.reason.kind is ExitKind.START_TIMEOUT


def test_start_timeout_reason_on_start_child(tree):
    ref = tree(SupervisorSpec(id="root"))
    with pytest.raises(StartError) as err:
        ref.proxy().start_child(
            ChildSpec(
                id="late",
                target=children.ready_after,
                args=(30,),
                ready="notify",
                start_timeout=0.3,
            )
        ).get()
    assert err.value.reason.kind is ExitKind.START_TIMEOUT
    assert "start_timeout=0.3" in err.value.reason.message


def test_command_ready_after_uptime_and_dying_before_fails(tree):
    ref = tree(SupervisorSpec(id="root"))
    nanny = ref.proxy()
    info = nanny.start_child(ChildSpec(id="up", command=["sleep", "60"], ready=0.2)).get()
    assert info.state == "running"
    with pytest.raises(StartError) as err:
        nanny.start_child(
            ChildSpec(id="dies", command=["sh", "-c", "exit 4"], ready=2.0, start_timeout=5)
        ).get()
    assert err.value.reason.kind is ExitKind.EXIT_CODE and err.value.reason.code == 4


def test_command_ready_when_its_file_exists(tree, tmp_path):
    flag = tmp_path / "ready"
    flag.write_text("stale")  # left by an earlier run: must not count
    ref = tree(SupervisorSpec(id="root"))
    nanny = ref.proxy()
    cmd = ["sh", "-c", f"sleep 0.2; touch {flag}; exec sleep 60"]
    info = nanny.start_child(ChildSpec(id="f", command=cmd, ready=ReadyFile(flag))).get()
    assert info.state == "running" and flag.exists()
    start = next(e for e in nanny.events().get() if e.offender == "f")
    assert start.context is EventKind.CHILD_STARTED
    with pytest.raises(StartError) as err:
        nanny.start_child(
            ChildSpec(
                id="never",
                command=["sleep", "60"],
                ready=ReadyFile(tmp_path / "nope"),
                start_timeout=0.3,
            )
        ).get()
    assert err.value.reason.kind is ExitKind.START_TIMEOUT


def test_exit_before_min_uptime_is_a_failed_start(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=5,
            children=[
                ChildSpec(
                    id="flaky",
                    command=["sh", "-c", "exit 0"],
                    min_uptime=5.0,
                    restart="transient",
                )
            ],
        )
    )
    # exit 0 is normal, but before min_uptime it is a failed start: a transient child restarts.
    exited = wait_event(ref, EventKind.CHILD_EXITED, "flaky")
    assert exited.reason.kind is ExitKind.START_FAILURE
    assert "min_uptime=5.0" in exited.reason.message
    wait_event(ref, EventKind.CHILD_STARTED, "flaky", where=lambda e: e.incarnation == 2)


def test_memory_limit_stops_the_child_with_its_usage(tree):
    limit = 80 * 1024 * 1024
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="hog",
                    target=children.leak_memory,
                    args=(8,),
                    memory_limit=limit,
                    restart="temporary",
                )
            ],
        )
    )
    pid = children_by_id(ref)["hog"].pid
    reason = wait_event(ref, EventKind.CHILD_EXITED, "hog", timeout=20).reason
    assert reason.kind is ExitKind.MEMORY_LIMIT and not reason.is_normal
    used = int(reason.message.split(" used ")[1].split()[0])
    assert used > limit
    assert wait_gone([pid]) == []


def test_captured_stderr_travels_with_an_abnormal_exit(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="loud",
                    target=children.complain_and_exit,
                    args=(30, 3),
                    stderr="capture",
                    stdout="capture",
                    restart="transient",
                    min_uptime=0,
                )
            ],
            intensity=0,
        )
    )
    reason = wait_event(ref, EventKind.CHILD_EXITED, "loud").reason
    assert reason.kind is ExitKind.EXIT_CODE and reason.code == 3
    tail = reason.stderr_tail.splitlines()
    assert tail[-1] == "complaint 29" and len(tail) == 20


def test_read_output_of_a_running_child(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="talker",
                    command=["sh", "-c", "echo hello; echo oops >&2; exec sleep 60"],
                    stdout="capture",
                    stderr="capture",
                    ready=0.2,
                )
            ],
        )
    )
    nanny = ref.proxy()
    assert nanny.read_output("talker", "stdout").get() == "hello\n"
    assert nanny.read_output("talker").get() == "oops\n"


def test_env_cwd_and_replaced_environment_reach_both_kinds(tree, tmp_path):
    out_cmd, out_py = tmp_path / "cmd", tmp_path / "py"
    os.environ["NANNYTREE_TEST_INHERITED"] = "yes"
    try:

        def report() -> None:
            out_py.write_text(
                f"{os.getcwd()} {os.environ.get('MODE')} "
                f"{os.environ.get('NANNYTREE_TEST_INHERITED')}"
            )

        ref = tree(
            SupervisorSpec(
                id="root",
                children=[
                    ChildSpec(
                        id="cmd",
                        command=[
                            "/bin/sh",
                            "-c",
                            f'echo "$PWD $MODE ${{NANNYTREE_TEST_INHERITED:-none}}" > {out_cmd}',
                        ],
                        env={"MODE": "alone"},
                        inherit_env=False,
                        cwd=tmp_path,
                        restart="temporary",
                    ),
                    ChildSpec(
                        id="py",
                        target=report,
                        env={"MODE": "added"},
                        cwd=tmp_path,
                        restart="temporary",
                    ),
                ],
            )
        )
        wait_event(ref, EventKind.CHILD_DELETED, "cmd")
        wait_event(ref, EventKind.CHILD_DELETED, "py")
    finally:
        del os.environ["NANNYTREE_TEST_INHERITED"]
    assert out_cmd.read_text().split() == [str(tmp_path), "alone", "none"]
    assert out_py.read_text().split() == [str(tmp_path), "added", "yes"]


def test_bad_input_is_refused_naming_child_field_and_fix(tree, tmp_path):
    ref = tree(SupervisorSpec(id="root", children=[ChildSpec(id="ok", command=["sleep", "60"])]))
    nanny = ref.proxy()
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(stat.S_IRUSR)  # not executable
    cases = {
        "missing-cwd": ChildSpec(id="missing-cwd", command=["true"], cwd=tmp_path / "nope"),
        "not-exec": ChildSpec(id="not-exec", command=[str(script)]),
        "no-such": ChildSpec(id="no-such", command=["no-such-program-xyz"]),
    }
    for child_id, spec in cases.items():
        with pytest.raises(StartError) as err:
            nanny.start_child(spec).get()
        assert err.value.child == child_id
        assert err.value.reason.kind is ExitKind.START_FAILURE
    for kwargs in ({"start_timeout": 0}, {"shutdown": -1}, {"memory_limit": 100}, {"ready": -1}):
        with pytest.raises(SpecError) as spec_err:
            ChildSpec(id="bad", command=["true"], **kwargs)
        assert spec_err.value.child == "bad" and spec_err.value.field == next(iter(kwargs))
    assert children_by_id(ref)["ok"].state == "running"  # the rest of the tree runs on


def test_a_crashed_worker_actor_is_an_abnormal_exit_and_restarts(tree):
    ref = tree(
        SupervisorSpec(
            id="root", intensity=3, children=[ChildSpec(id="c", command=["sleep", "60"])]
        )
    )
    pid = children_by_id(ref)["c"].pid
    worker = next(
        w
        for w in pykka.ActorRegistry.get_by_class(WorkerActor)
        if w._actor_weakref().spec.id == "c"
    )
    worker.tell("an unknown message")  # a bug in the worker's message handling
    exited = wait_event(ref, EventKind.CHILD_EXITED, "c")
    assert exited.reason.kind is ExitKind.ACTOR_CRASHED and exited.reason.exc_type == "TypeError"
    wait_event(
        ref, EventKind.CHILD_STARTED, "c", where=lambda e: e.incarnation >= 1 and e.pid != pid
    )
    assert wait_gone([pid]) == []
    assert children_by_id(ref)["c"].state == "running"


def test_a_crashed_nested_nanny_reaches_its_parent(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=3,
            children=[
                SupervisorSpec(id="sub", children=[ChildSpec(id="w", command=["sleep", "60"])])
            ],
        )
    )
    w_pid = next(e.pid for e in ref.proxy().events().get() if e.offender == "w")
    sub = next(
        n
        for n in pykka.ActorRegistry.get_by_class(NannyActor)
        if n._actor_weakref()._core.name == "root/sub"
    )
    sub.tell("an unknown message")
    exited = wait_event(ref, EventKind.CHILD_EXITED, "sub")
    assert exited.reason.kind is ExitKind.ACTOR_CRASHED
    wait_event(ref, EventKind.CHILD_STARTED, "sub", where=lambda e: e.incarnation == 2)
    assert wait_gone([w_pid]) == []


def test_backoff_delays_live_restarts_and_shows_in_which_children(tree):
    from supervision import Backoff

    backoff = Backoff(initial=0.3, factor=2.0, max=1.0, jitter=0.0, reset_after=30.0)
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=50,
            period=60.0,
            children=[ChildSpec(id="crashy", command=["sleep", "60"], backoff=backoff)],
        )
    )
    pid = children_by_id(ref)["crashy"].pid
    os.kill(pid, 9)
    scheduled = wait_event(ref, EventKind.RESTART_SCHEDULED, "crashy")
    assert "delay=0.300" in scheduled.detail
    info = children_by_id(ref)["crashy"]
    if info.state == "backoff":  # unless the 0.3 s already passed on a slow machine
        assert info.next_attempt is not None and info.pid is None
    restarted = wait_event(
        ref, EventKind.CHILD_STARTED, "crashy", where=lambda e: e.incarnation == 2
    )
    assert restarted.time - scheduled.time >= 0.3
    os.kill(restarted.pid, 9)
    second = wait_event(
        ref, EventKind.RESTART_SCHEDULED, "crashy", where=lambda e: e.time > restarted.time
    )
    assert "delay=0.600" in second.detail


def test_interpreter_start_variables_need_a_fresh_interpreter(tree, tmp_path):
    # PYTHONOPTIMIZE is read when an interpreter starts: a fork of the launcher
    # cannot honour it, a fresh interpreter does (docs/explanation/trust.md says which to use).
    def report(path: str) -> None:
        import sys

        with open(path, "w") as f:
            f.write(str(sys.flags.optimize))

    fresh, forked = tmp_path / "fresh", tmp_path / "forked"
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="fresh",
                    target=report,
                    args=(str(fresh),),
                    env={"PYTHONOPTIMIZE": "1"},
                    fresh_interpreter=True,
                    restart="temporary",
                ),
                ChildSpec(
                    id="forked",
                    target=report,
                    args=(str(forked),),
                    env={"PYTHONOPTIMIZE": "1"},
                    restart="temporary",
                ),
            ],
        )
    )
    wait_event(ref, EventKind.CHILD_DELETED, "fresh")
    wait_event(ref, EventKind.CHILD_DELETED, "forked")
    assert fresh.read_text() == "1"
    assert forked.read_text() == "0"


def test_auto_shutdown_when_a_significant_child_ends(nanny_tree):
    from supervision import AutoShutdown

    tree = nanny_tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(id="steady", command=["sleep", "60"]),
                SupervisorSpec(
                    id="job",
                    auto_shutdown=AutoShutdown.ANY_SIGNIFICANT,
                    restart="transient",
                    children=[
                        ChildSpec(id="keeper", command=["sleep", "60"]),
                        ChildSpec(
                            id="task",
                            command=["sh", "-c", "exit 0"],
                            restart="transient",
                            significant=True,
                        ),
                    ],
                ),
            ],
        )
    )
    tree.wait_for(EventKind.AUTO_SHUTDOWN, "task")
    exited = tree.wait_for(EventKind.CHILD_EXITED, "job")
    assert exited.reason.kind is ExitKind.SHUTDOWN and exited.reason.message == "auto_shutdown"
    assert tree.child("job").state == "stopped"  # transient: a normal end, not restarted
    assert tree.child("steady").state == "running"
