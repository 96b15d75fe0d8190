"""The test harness and pytest plugin, used the way a user would."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from actors import aio, testing
from supervision import ChildSpec, EventKind, ExitKind, Strategy, SupervisorSpec
from tests.support import run_pytest


class Boom(Exception):
    pass


def _spec() -> SupervisorSpec:
    return SupervisorSpec(
        id="root",
        strategy=Strategy.ONE_FOR_ALL,
        intensity=5,
        children=[
            ChildSpec(id="a", target=testing.ready_after, args=(0,), ready="notify"),
            SupervisorSpec(
                id="sub",
                children=[ChildSpec(id="b", target=testing.ready_after, args=(0,), ready="notify")],
            ),
        ],
    )


def test_kill_and_wait_for_a_restart(nanny_tree):
    tree = nanny_tree(_spec())
    probe = tree.probe()
    pid = tree.kill("a")
    tree.wait_for(EventKind.CHILD_STARTED, "a", where=lambda e: e.pid != pid)
    assert probe.contexts("a")[:2] == [EventKind.CHILD_EXITED, EventKind.CHILD_STARTED]
    # one_for_all: sub was stopped and started again
    assert ("root", "child_terminated", "sub") in probe.sequence()


def test_crash_a_python_child_with_a_given_exception(nanny_tree):
    tree = nanny_tree(_spec())
    tree.crash("b", Boom("injected"))
    exited = tree.wait_for(EventKind.CHILD_EXITED, "b")
    assert exited.reason.kind is ExitKind.EXCEPTION
    assert exited.reason.exc_type == "tests.live.test_harness.Boom"
    assert exited.reason.message == "injected"
    assert exited.supervisor == "root/sub"


def test_signal_pause_resume_reach_nested_children(nanny_tree):
    tree = nanny_tree(_spec())
    tree.pause("b")
    assert tree.child("b").state == "paused"
    tree.resume("b")
    assert tree.child("b").state == "running"
    tree.signal("b", signal.SIGTERM)
    reason = tree.wait_for(EventKind.CHILD_EXITED, "b").reason
    assert reason.kind is ExitKind.KILLED and reason.signal == signal.SIGTERM


def test_scripted_children_behave_as_named(nanny_tree):
    tree = nanny_tree(
        SupervisorSpec(
            id="root",
            intensity=10,
            children=[
                ChildSpec(id="exit3", target=testing.exit_with, args=(3,), restart="temporary"),
                ChildSpec(
                    id="raises",
                    target=testing.raise_after,
                    args=(0, KeyError("k")),
                    restart="temporary",
                ),
                ChildSpec(
                    id="stubborn", target=testing.ignore_sigterm, ready="notify", shutdown=0.2
                ),
            ],
        )
    )
    assert tree.wait_for(EventKind.CHILD_EXITED, "exit3").reason.code == 3
    assert tree.wait_for(EventKind.CHILD_EXITED, "raises").reason.exc_type == "KeyError"
    tree.nanny.terminate_child("stubborn").get()
    assert "ignored SIGTERM" in tree.wait_for(EventKind.CHILD_TERMINATED, "stubborn").reason.message
    with pytest.raises(Exception, match="start_timeout"):
        tree.nanny.start_child(
            ChildSpec(id="hang", target=testing.hang_on_start, ready="notify", start_timeout=0.2)
        ).get()


def test_harness_reports_a_leaked_process():
    harness = testing.TreeHarness(
        SupervisorSpec(id="root", children=[ChildSpec(id="a", command=["sleep", "60"])])
    ).start()
    assert harness.stop() == []  # a clean stop leaves nothing


def test_async_calls_never_block_the_event_loop():
    async def main() -> tuple[int, list[str], object]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        task = asyncio.create_task(ticker())
        spec = SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="stubborn", target=testing.ignore_sigterm, ready="notify", shutdown=0.5
                )
            ],
        )
        async with aio.AsyncNanny(spec) as nanny:
            ids = [c.id for c in await nanny.which_children()]
            before = ticks
            await nanny.terminate_child("stubborn")  # takes 0.5 s: SIGTERM is ignored
            during = ticks - before
        reason = await nanny.finished()
        task.cancel()
        return during, ids, reason

    during, ids, reason = asyncio.run(main())
    assert ids == ["stubborn"]
    assert during >= 10, f"the loop ticked only {during} times while a call was awaited"
    assert reason is not None and reason.kind is ExitKind.SHUTDOWN


def test_async_finished_reports_a_give_up():
    async def main() -> object:
        spec = SupervisorSpec(
            id="root",
            intensity=0,
            children=[ChildSpec(id="c", target=testing.exit_with, args=(1,))],
        )
        nanny = await aio.AsyncNanny(spec).start()
        try:
            return await asyncio.wait_for(nanny.finished(), 10)
        finally:
            await nanny.stop()

    reason = asyncio.run(main())
    assert reason.kind is ExitKind.SHUTDOWN and "max_restart_intensity" in reason.message


# -- waits look forward, and the helpers ExUnit and Akka TestKit users expect (issue 15) ---


def test_wait_for_after_a_kill_returns_the_restart_not_the_first_start(nanny_tree):
    tree = nanny_tree(_spec())
    first = tree.wait_for(EventKind.CHILD_STARTED, "a")  # no fault yet: from the start
    pid = tree.kill("a")
    assert first.pid == pid
    again = tree.wait_for(EventKind.CHILD_STARTED, "a")  # the obvious test is the right one
    assert again.pid != pid and again.time > first.time
    assert tree.wait_for(EventKind.CHILD_STARTED, "a", since=0).pid == pid  # asked for


def test_wait_restarted_returns_the_new_incarnation(nanny_tree):
    tree = nanny_tree(_spec())
    before = tree.child("a")
    tree.kill("a")
    after = tree.wait_restarted("a")
    assert after.pid not in (None, before.pid)
    assert after.incarnation == before.incarnation + 1


def test_expect_no_event_passes_in_quiet_and_fails_on_a_match(nanny_tree):
    tree = nanny_tree(_spec())
    tree.expect_no_event(EventKind.CHILD_EXITED, within=0.3)
    mark = tree.mark()
    tree.kill("a")
    with pytest.raises(AssertionError, match=r"expected no such event within 5\.0s, got: .*a"):
        tree.expect_no_event(EventKind.CHILD_EXITED, "a", within=5.0, since=mark)


def test_a_misspelt_field_names_the_valid_ones(nanny_tree):
    tree = nanny_tree(_spec())
    with pytest.raises(TypeError, match=r"unknown event field 'incarnaton'; an Event has: .*pid"):
        tree.wait_for(EventKind.CHILD_STARTED, "a", incarnaton=1)


def test_crash_refuses_a_command_child(nanny_tree, tmp_path):
    spec = SupervisorSpec(id="cmd", children=[ChildSpec(id="c", command=["sleep", "600"])])
    tree = nanny_tree(spec)
    pid = tree.pid("c")
    with pytest.raises(TypeError, match=r"child 'c' runs a command.*use kill"):
        tree.crash("c", Boom("x"))
    assert tree.pid("c") == pid  # untouched
    assert not list(tmp_path.glob("crash-*")) and not list(Path.cwd().glob(f"crash-{pid}*"))


def test_a_tree_from_a_toml_file(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(
        '[supervisor]\nid = "file"\n[[supervisor.children]]\nid = "s"\ncommand = ["sleep", "600"]\n'
    )
    with testing.TreeHarness.from_toml(path) as tree:
        assert tree.child("s").state == "running"
        pid = tree.kill("s")
        assert tree.wait_restarted("s").pid != pid


MODULE_FIXTURE = """
from supervision import ChildSpec, SupervisorSpec

SPEC = SupervisorSpec(id="shared", children=[ChildSpec(id="s", command=["sleep", "600"])])
PIDS = []

def test_one(nanny_tree_module):
    PIDS.append(nanny_tree_module(SPEC).pid("s"))

def test_two(nanny_tree_module):
    PIDS.append(nanny_tree_module(SPEC).pid("s"))
    import os
    os.kill(PIDS[0], 0)  # the first test's tree is still running
    open(os.environ["PIDS_OUT"], "w").write(" ".join(map(str, PIDS)))
"""


def test_a_module_scoped_fixture_keeps_its_trees_for_the_module(tmp_path):
    (tmp_path / "test_inner.py").write_text(MODULE_FIXTURE)
    out = tmp_path / "pids"
    env = {**os.environ, "PIDS_OUT": str(out)}
    run = run_pytest("-q", str(tmp_path), cwd=tmp_path, env=env, timeout=50)
    assert run.returncode == 0, run.stdout + run.stderr
    pids = [int(p) for p in out.read_text().split()]
    assert len(pids) == 2
    assert testing.wait_gone(pids) == []  # stopped at the module's end


def test_the_harness_waits_for_a_give_up_and_reads_the_log_after(nanny_tree):
    spec = SupervisorSpec(
        id="gives", intensity=0, children=[ChildSpec(id="c", target=testing.exit_with, args=(1,))]
    )
    tree = nanny_tree(spec)
    reason = tree.wait(timeout=20)
    assert reason is not None and "max_restart_intensity" in reason.message
    # It names the child behind the give-up, and its last exit.
    assert "because of gives/c (its last exit: exit code 1)" in reason.message, reason
    assert tree.wait_for(EventKind.SUPERVISOR_STOPPED, since=0).supervisor == "gives"
