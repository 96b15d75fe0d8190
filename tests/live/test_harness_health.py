"""The test author's side of health (docs/health.md): wait_ready, waits that fail at
once with the cause, strict mode, output waits, and the report of a failed test, on
real processes and a real HTTP server."""

from __future__ import annotations

import http.client
import signal
import sys

import pytest

from actors import testing
from actors.testing import UnexpectedExit, WaitFailed
from supervision import (
    Backoff,
    ChildSpec,
    EventKind,
    ExitKind,
    HttpProbe,
    Liveness,
    Strategy,
    SupervisorSpec,
)

pytest_plugins = ["pytester"]


def http_server(port: int, **kw: object) -> ChildSpec:
    """`python3 -m http.server PORT`, ready once it answers a GET."""
    return ChildSpec(
        id=str(kw.pop("id", "web")),
        command=[sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        ready=HttpProbe(f"http://127.0.0.1:{port}/"),
        **kw,  # type: ignore[arg-type]
    )


def get(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/")
        return conn.getresponse().status
    finally:
        conn.close()


# -- wait_ready ------------------------------------------------------------------------


def test_wait_ready_after_a_kill_returns_once_the_new_server_answers(nanny_tree):
    port = testing.free_port()
    tree = nanny_tree(SupervisorSpec(id="root", children=[http_server(port)]), strict=True)
    assert get(port) == 200  # the tree's start returned once it answered
    pid = tree.kill("web")
    info = tree.wait_ready("web")
    assert info.pid != pid and info.incarnation == 2 and info.state == "running"
    assert get(port) == 200  # no poll of ours: ready means it answers
    assert tree.unexpected() == []  # strict: the kill was the test's


def test_wait_ready_with_liveness_waits_past_a_failing_probe(nanny_tree):
    port = testing.free_port()
    url = f"http://127.0.0.1:{port}/"
    spec = SupervisorSpec(
        id="root",
        intensity=3,
        period=30,
        children=[
            http_server(
                port,
                liveness=Liveness(HttpProbe(url, timeout=0.2, period=0.2), failures=2),
                shutdown="brutal_kill",
            )
        ],
    )
    tree = nanny_tree(spec, strict=True)
    tree.wait_for(EventKind.CHILD_HEALTHY, "web")
    pid = tree.kill("web", signal.SIGSTOP)  # alive, but silent
    tree.wait_for(EventKind.CHILD_UNHEALTHY, "web")
    info = tree.wait_ready("web")  # not while it fails: once liveness has replaced it
    assert info.pid != pid and info.incarnation == 2
    exited = tree.wait_for(EventKind.CHILD_EXITED, "web")
    assert exited.reason is not None and exited.reason.kind is ExitKind.UNHEALTHY
    assert get(port) == 200
    assert tree.unexpected() == []  # the stop came of the test's SIGSTOP


CRASH_AT_START = (
    'if [ -e "$FLAG" ]; then echo "fatal: cannot read /etc/app.conf" >&2; exit 3; fi; '
    'exec "$PYTHON" -m http.server "$PORT" --bind 127.0.0.1'
)


def test_a_restart_that_crashes_at_start_fails_wait_ready_at_once_with_its_stderr(
    nanny_tree, tmp_path
):
    port = testing.free_port()
    flag = tmp_path / "broken"
    web = ChildSpec(
        id="web",
        command=["sh", "-c", CRASH_AT_START],
        env={"FLAG": str(flag), "PYTHON": sys.executable, "PORT": str(port)},
        ready=HttpProbe(f"http://127.0.0.1:{port}/"),
        start_timeout=30,
    )
    tree = nanny_tree(SupervisorSpec(id="root", intensity=1, children=[web]))
    flag.touch()  # its next start fails, saying why on stderr
    tree.kill("web")
    with pytest.raises(WaitFailed) as caught:
        # A WaitFailed, not a TimeoutError: it ended before this timeout, itself
        # shorter than start_timeout; the exit ended the wait, not a clock.
        tree.wait_ready("web", timeout=20)
    message = str(caught.value)
    assert "its start failed" in message
    assert "fatal: cannot read /etc/app.conf" in message
    reason = caught.value.reason
    assert reason is not None and reason.kind is ExitKind.EXIT_CODE and reason.code == 3
    assert "fatal: cannot read /etc/app.conf" in reason.stderr_tail


def test_a_start_that_fails_in_the_fixture_carries_the_stderr(nanny_tree):
    port = testing.free_port()
    web = ChildSpec(
        id="web",
        command=["sh", "-c", "echo 'fatal: no such table: users' >&2; exit 2"],
        ready=HttpProbe(f"http://127.0.0.1:{port}/"),
        start_timeout=30,
    )
    with pytest.raises(Exception, match="failed to start") as caught:
        nanny_tree(SupervisorSpec(id="root", children=[web]))
    # In the error's message (the cause first, then the tail); no note repeats it.
    assert "fatal: no such table: users" in str(caught.value)
    notes = getattr(caught.value, "__notes__", [])
    assert not any("fatal: no such table" in note for note in notes), notes


# -- every wait fails fast when its tree, or the supervisor above its child, ended -----


def test_wait_for_fails_at_once_when_the_tree_gives_up_naming_the_exit_and_stderr(nanny_tree):
    crashing = ChildSpec(
        id="c",
        command=["sh", "-c", "echo 'boom: the config is broken' >&2; sleep 0.2; exit 1"],
    )
    tree = nanny_tree(SupervisorSpec(id="root", intensity=2, period=30, children=[crashing]))
    with pytest.raises(WaitFailed) as caught:
        tree.wait_for(EventKind.CHILD_STARTED, "c", incarnation=100, timeout=30)
    message = str(caught.value)
    assert "tree 'root' has ended (shutdown: reached_max_restart_intensity)" in message
    assert "last exit of 'c'" in message and "exit code 1" in message
    assert "boom: the config is broken" in message
    assert caught.value.reason is not None and caught.value.reason.code == 1
    # The tree ended: a later wait fails at once too, and what happened is still found.
    with pytest.raises(WaitFailed):
        tree.wait_for(EventKind.CHILD_STARTED, "c", since=tree.mark(), timeout=30)
    assert tree.wait_for(EventKind.MAX_INTENSITY_REACHED, since=0).offender == "c"


def _nested(restart: str) -> SupervisorSpec:
    return SupervisorSpec(
        id="root",
        intensity=3,
        period=30,
        children=[
            ChildSpec(id="steady", command=["sleep", "60"]),
            SupervisorSpec(
                id="pool",
                intensity=0,  # gives up at the first exit of its child
                restart=restart,
                children=[ChildSpec(id="job", command=["sleep", "60"])],
            ),
        ],
    )


def test_a_wait_fails_at_once_when_the_childs_supervisor_ended_and_is_not_restarted(
    nanny_tree,
):
    tree = nanny_tree(_nested("temporary"))
    tree.kill("job")
    with pytest.raises(WaitFailed) as caught:
        tree.wait_for(EventKind.CHILD_STARTED, "job", timeout=30)
    assert "supervisor root/pool" in str(caught.value)
    assert "last exit of 'job'" in str(caught.value)
    assert tree.child("steady").state == "running"  # the tree itself goes on


def test_a_wait_goes_on_when_the_childs_supervisor_is_restarted(nanny_tree):
    tree = nanny_tree(_nested("permanent"))
    pid = tree.kill("job")
    info = tree.wait_restarted("job")  # pool gave up, root restarted pool, and job
    assert info.pid != pid and info.state == "running"


# -- strict mode -------------------------------------------------------------------------


def test_strict_mode_raises_on_an_exit_the_test_did_not_cause_at_the_next_call():
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(id="steady", command=["sleep", "60"]),
            ChildSpec(
                id="flaky",
                command=["sh", "-c", "sleep 0.3; echo 'lost the database' >&2; exit 4"],
                restart="temporary",
            ),
        ],
    )
    with testing.TreeHarness(spec, strict=True) as tree:
        # Waited for outside the harness: nothing the harness does sees it first.
        tree.log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 10)
        with pytest.raises(UnexpectedExit) as caught:
            tree.child("steady")
        message = str(caught.value)
        assert "strict mode: tree 'root' had 1" in message
        assert "root/flaky child_exited" in message and "exit code 4" in message
        assert "lost the database" in message
        assert [e.offender for e in caught.value.events] == ["flaky"]
        tree.child("steady")  # said once: the next call goes on


def test_strict_mode_takes_the_faults_the_test_caused_and_the_exits_it_declared(nanny_tree):
    spec = SupervisorSpec(
        id="root",
        strategy=Strategy.ONE_FOR_ALL,
        intensity=10,
        children=[
            ChildSpec(id="a", target=testing.ready_after, args=(0,), ready="notify"),
            ChildSpec(id="b", target=testing.run_forever),
            ChildSpec(id="once", target=testing.exit_with, args=(5, 0.2), restart="temporary"),
        ],
    )
    tree = nanny_tree(spec, strict=True)
    tree.expect_exit("once")  # it exits by itself, as the test means it to
    tree.log.wait_for(lambda e: e.offender == "once" and e.context is EventKind.CHILD_EXITED, 10)
    tree.kill("a")  # one_for_all: b is stopped and restarted too
    tree.wait_restarted("b")
    tree.crash("b", ValueError("injected"))
    assert tree.wait_for(EventKind.CHILD_EXITED, "b").reason.kind is ExitKind.EXCEPTION
    tree.wait_restarted("a")
    tree.signal("a", signal.SIGTERM)
    tree.wait_restarted("a")
    tree.terminate("b")
    assert tree.restart("b").state == "running"
    assert tree.unexpected() == []


# -- output --------------------------------------------------------------------------------


def test_wait_output_returns_the_match_of_what_the_child_wrote(nanny_tree):
    talker = ChildSpec(
        id="talker",
        command=["sh", "-c", 'echo starting; sleep 0.3; echo "listening as $$"; exec sleep 60'],
        stdout="capture",
        backoff=Backoff(initial=0.5, jitter=0),  # the dead one's output stays a while
    )
    quiet = ChildSpec(id="quiet", command=["sleep", "60"])
    tree = nanny_tree(SupervisorSpec(id="root", children=[talker, quiet]))
    match = tree.wait_output("talker", r"listening as (\d+)", stream="stdout")
    pid = int(match.group(1))
    assert pid == tree.pid("talker")
    assert tree.output("talker", stream="stdout").startswith("starting\n")
    # Not kept apart: "does not keep its stdout", or one pipe for both when this
    # process's stdout and stderr are one file; either way the fix is named.
    with pytest.raises(ValueError, match=r'stdout="capture" in its spec'):
        tree.wait_output("quiet", "anything", stream="stdout")
    tree.kill("talker")
    # What the killed process said does not count: the match is its successor's.
    again = tree.wait_output("talker", r"listening as (\d+)", stream="stdout")
    assert int(again.group(1)) != pid


def test_wait_output_fails_at_once_when_the_tree_gives_up(nanny_tree):
    crashing = ChildSpec(
        id="c",
        command=["sh", "-c", "echo 'about to fail' >&2; sleep 0.2; exit 1"],
        stderr="capture",
    )
    tree = nanny_tree(SupervisorSpec(id="root", intensity=1, period=30, children=[crashing]))
    with pytest.raises(WaitFailed, match="about to fail"):
        tree.wait_output("c", "a line it never writes", timeout=30)


# -- the report of a failed test -------------------------------------------------------


REPORTED = """
from supervision import ChildSpec, EventKind, SupervisorSpec


def spec(id):
    crash = ["sh", "-c", "sleep 0.2; echo 'fatal: the disk is on fire' >&2; exit 3"]
    return SupervisorSpec(
        id=id,
        children=[
            ChildSpec(id="steady", command=["sleep", "60"]),
            ChildSpec(id="crasher", command=crash, restart="temporary"),
        ],
    )


def test_failing(nanny_tree):
    tree = nanny_tree(spec("failing"))
    tree.wait_for(EventKind.CHILD_EXITED, "crasher")
    assert False, "the test's own failure"


def test_passing(nanny_tree):
    tree = nanny_tree(spec("passing"))
    tree.wait_for(EventKind.CHILD_EXITED, "crasher")


def test_strict(nanny_tree):
    tree = nanny_tree(spec("strict"), strict=True)
    tree.log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 10)
"""


def test_a_failed_test_reports_the_trees_events_and_the_crashed_childrens_stderr(pytester):
    pytester.makepyfile(test_reported=REPORTED)
    result = pytester.runpytest_subprocess("-rA", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    out = result.stdout.str()
    # The failing test: its tree's events and the crashed child's stderr, as sections.
    assert "nannytree events: tree 'failing' (last " in out
    assert "nannytree stderr of crashed children: tree 'failing'" in out
    assert "failing/crasher child_exited" in out
    assert "fatal: the disk is on fire" in out
    # A test that passed has none (-rA shows a passed test's sections: there are none).
    assert "tree 'passing'" not in out
    # Strict mode fails the test at teardown, with the exit it did not cause.
    assert "strict mode: tree 'strict' had 1" in out
    assert "nannytree events: tree 'strict'" in out


STRICT_BY_INI = """
from supervision import ChildSpec, EventKind, SupervisorSpec

SPEC = SupervisorSpec(
    id="ini",
    children=[ChildSpec(id="c", command=["sh", "-c", "sleep 0.2; exit 7"], restart="temporary")],
)


def test_strict_by_the_ini(nanny_tree):
    nanny_tree(SPEC).log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 10)


def test_not_strict_when_asked(nanny_tree):
    nanny_tree(SPEC, strict=False).log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 10)
"""


def test_the_ini_option_makes_strict_the_default(pytester):
    pytester.makeini("[pytest]\nnannytree_strict = true\n")
    pytester.makepyfile(test_ini=STRICT_BY_INI)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_strict_by_the_ini*"])
    assert "strict mode: tree 'ini' had 1" in result.stdout.str()
