"""A run of stops: the children a supervisor stops one after the other (a shutdown,
one_for_all's and rest_for_one's restarts) are stopped in the core's order, each
stop signal sent once the process before has exited, or been killed at its
shutdown time (docs/scale.md, "A run of stops")."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from actors import Tree
from actors.testing import wait_gone
from supervision import (
    ChildSpec,
    EventKind,
    ExitReason,
    Strategy,
    Supervisor,
    SupervisorSpec,
    TerminateChild,
)
from tests.support.fake_executor import ABNORMAL, worker


def started(spec: SupervisorSpec) -> Supervisor:
    sup = Supervisor(spec)
    sup.start(0.0)
    for pid, child in enumerate(spec.children, start=100):
        sup.started(child.id, pid, 1, 0.0)
    return sup


def test_the_core_names_the_stops_that_follow_the_pending_one_in_its_order() -> None:
    sup = started(SupervisorSpec("sup", children=[worker(i) for i in "abcd"]))
    actions = sup.shutdown(1.0)
    assert [a.child_id for a in actions if isinstance(a, TerminateChild)] == ["d"]
    assert sup.next_terminations() == ("c", "b", "a")
    sup.terminated("d", ExitReason.shutdown(), 1.0)
    assert sup.next_terminations() == ("b", "a")


def test_the_run_ends_where_the_plan_starts_children_again() -> None:
    sup = started(
        SupervisorSpec(
            "sup", strategy=Strategy.ONE_FOR_ALL, intensity=5, children=[worker(i) for i in "abcd"]
        )
    )
    actions = sup.child_exited("b", 1, ABNORMAL, 1.0)
    assert [a.child_id for a in actions if isinstance(a, TerminateChild)] == ["d"]
    assert sup.next_terminations() == ("c", "a")  # then a, b, c, d start again


def test_children_that_are_not_running_are_not_in_the_run() -> None:
    sup = started(
        SupervisorSpec(
            "sup",
            strategy=Strategy.ONE_FOR_ALL,
            intensity=5,
            children=[worker(i, restart="temporary") for i in "abc"],
        )
    )
    sup.child_exited("b", 1, ABNORMAL, 1.0)  # temporary: removed, the others stay
    sup.shutdown(2.0)
    assert sup.next_terminations() == ("a",)


# -- live: real processes ---------------------------------------------------------


def pid_of(tree: Tree, child: str) -> int:
    pid = tree.nanny.which_child(child).get().pid
    assert pid is not None
    return int(pid)


def _trapping(marks: Path, child: str, *, exits: bool = True, shutdown: float = 5.0) -> ChildSpec:
    """A shell that writes when its trap is set, when SIGTERM comes and (if it exits
    on it) just before it exits, 0.2 s later."""
    on_term = (
        f"echo term {child} >> {marks}/log; sleep 0.2; echo exit {child} >> {marks}/log; exit 0"
        if exits
        else f"echo term {child} >> {marks}/log"
    )
    script = f"trap '{on_term}' TERM; touch {marks}/{child}; while :; do sleep 0.05; done"
    return ChildSpec(id=child, command=["sh", "-c", script], shutdown=shutdown)


def _wait_for_traps(marks: Path, ids: list[str]) -> None:
    deadline = time.monotonic() + 20
    while not all((marks / i).exists() for i in ids):
        assert time.monotonic() < deadline, "the children did not set their traps"
        time.sleep(0.01)


def test_each_stop_signal_waits_for_the_exit_before_it(tmp_path: Path) -> None:
    ids = ["a", "b", "c", "d"]
    tree = Tree.start(SupervisorSpec("root", children=[_trapping(tmp_path, i) for i in ids]))
    pids = [pid_of(tree, i) for i in ids]
    _wait_for_traps(tmp_path, ids)
    tree.stop(timeout=30)
    lines = (tmp_path / "log").read_text().split("\n")[:-1]
    # One after the other: never a second SIGTERM while a child is still going.
    assert lines == [f"{what} {i}" for i in reversed(ids) for what in ("term", "exit")]
    stops = [e for e in tree.events() if e.context is EventKind.CHILD_TERMINATED]
    reasons = {e.offender: e.reason for e in stops}
    assert set(reasons) == set(ids)
    assert all(r.is_normal and r.signal is None for r in reasons.values()), reasons
    assert wait_gone(pids) == []


def test_a_child_that_ignores_its_signal_is_killed_at_its_time_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    specs = [
        _trapping(tmp_path, "a"),
        _trapping(tmp_path, "b", exits=False, shutdown=0.5),
        _trapping(tmp_path, "c"),
    ]
    tree = Tree.start(SupervisorSpec("root", children=specs))
    _wait_for_traps(tmp_path, ["a", "b", "c"])
    stubborn = pid_of(tree, "b")
    tree.stop(timeout=30)
    lines = (tmp_path / "log").read_text().split("\n")[:-1]
    assert lines == ["term c", "exit c", "term b", "term a", "exit a"]
    stops = {e.offender: e for e in tree.events() if e.context is EventKind.CHILD_TERMINATED}
    assert stops["b"].reason.signal == signal.SIGKILL
    assert stops["b"].reason.message == "ignored SIGTERM for 0.5s; killed with SIGKILL"
    assert stops["a"].time - stops["c"].time >= 0.5  # a's stop waited for b's kill
    assert wait_gone([stubborn]) == []


def test_a_paused_child_in_a_run_is_continued_to_act_on_its_signal(tmp_path: Path) -> None:
    tree = Tree.start(
        SupervisorSpec("root", children=[_trapping(tmp_path, i, shutdown=30.0) for i in "ab"])
    )
    _wait_for_traps(tmp_path, ["a", "b"])
    tree.nanny.pause_child("b").get()
    t0 = time.monotonic()
    tree.stop(timeout=60)
    assert time.monotonic() - t0 < 10  # not its 30 s shutdown: SIGCONT followed SIGTERM
    lines = (tmp_path / "log").read_text().split("\n")[:-1]
    assert lines == ["term b", "exit b", "term a", "exit a"]


def test_a_child_gone_before_the_run_reaches_it_is_stopped_with_its_own_exit(
    tmp_path: Path,
) -> None:
    """The workers let go of their processes as the run begins; one that ends
    before its turn (here c's trap kills b) is stopped with the exit it had."""
    killer = (
        f"trap 'kill -KILL $(cat {tmp_path}/b.pid); echo term c >> {tmp_path}/log; exit 0' TERM; "
        f"touch {tmp_path}/c; while :; do sleep 0.05; done"
    )
    specs = [
        _trapping(tmp_path, "a"),
        ChildSpec(id="b", command=["sleep", "60"]),
        ChildSpec(id="c", command=["sh", "-c", killer]),
    ]
    tree = Tree.start(SupervisorSpec("root", children=specs))
    b_pid = pid_of(tree, "b")
    (tmp_path / "b.pid").write_text(str(b_pid))
    _wait_for_traps(tmp_path, ["a", "c"])
    tree.stop(timeout=30)
    stops = {e.offender: e.reason for e in tree.events() if e.context is EventKind.CHILD_TERMINATED}
    assert stops["b"].signal == signal.SIGKILL  # its own end, not a stop signal of ours
    assert stops["a"].is_normal and stops["c"].is_normal
    starts = [e.offender for e in tree.events() if e.context is EventKind.CHILD_STARTED]
    assert starts.count("b") == 1  # the shutdown restarted nothing
    assert (tmp_path / "log").read_text().split("\n")[:-1] == ["term c", "term a", "exit a"]
    assert wait_gone([b_pid]) == []


@pytest.fixture(autouse=True)
def _no_leftovers() -> None:
    before = set(os.listdir("/proc/self/fd"))
    yield
    # The supervisor's own watch on each process (a pidfd) is closed with its stop.
    assert set(os.listdir("/proc/self/fd")) - before == set()


def test_runs_longer_than_one_batch_stop_every_child_once_in_reverse_order() -> None:
    from actors._shell import _stop_runs

    n = _stop_runs.RUN_OF_STOPS * 2 + 3  # three runs: the core's order holds across them
    ids = [f"c{i}" for i in range(n)]
    tree = Tree.start(
        SupervisorSpec("root", children=[ChildSpec(id=i, command=["sleep", "60"]) for i in ids])
    )
    pids = [pid_of(tree, i) for i in ids]
    tree.stop(timeout=60)
    stops = [e for e in tree.events() if e.context is EventKind.CHILD_TERMINATED]
    assert [e.offender for e in stops] == list(reversed(ids))
    assert [e.pid for e in stops] == list(reversed(pids))
    assert all(e.reason.signal == signal.SIGTERM for e in stops)
    times = [e.time for e in stops]
    assert times == sorted(times)  # each event has its own stop's time, in order
    assert wait_gone(pids) == []
