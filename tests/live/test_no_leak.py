"""Nothing leaks (issue 23, item 1): no API call racing a restart the launcher makes
ahead of the core's decision (an armed respawn) leaves a process the tree does not
know. Each test loops its race and, after every round, holds the launcher's
children against the pids the tree reports."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from actors import Tree
from supervision import (
    ChildNotPaused,
    ChildRunning,
    ChildSpec,
    EventKind,
    NannyError,
    Strategy,
    SupervisorSpec,
)
from tests.support import wait_until

ROUNDS = 30


def _launcher_pid(tree: Tree) -> int:
    launcher = tree.context.spawner
    assert launcher is not None
    return int(launcher.pid)  # type: ignore[attr-defined]


def _walk(nodes: Any) -> Any:
    for node in nodes:
        yield node.info
        yield from _walk(node.children)


def _reported(tree: Tree) -> set[int]:
    """Every pid the tree reports, nested supervisors included."""
    return {i.pid for i in _walk(tree.nanny.which_tree().get()) if i.pid is not None}


def _launched(tree: Tree) -> set[int]:
    """The launcher's living children (these trees keep no warm standby, which
    would be a child of the launcher that the tree does not report)."""
    alive = set()
    for p in psutil.Process(_launcher_pid(tree)).children():
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _exactly_what_the_tree_reports(tree: Tree, what: str) -> None:
    """Once the tree is quiet, the launcher runs exactly the processes it reports."""
    seen: dict[str, set[int]] = {}

    def agree() -> bool:
        seen["launcher"], seen["tree"] = _launched(tree), _reported(tree)
        return seen["launcher"] == seen["tree"]

    try:
        wait_until(agree, 5.0, what)
    except TimeoutError:
        unknown = _described(seen["launcher"] - seen["tree"])
        gone = sorted(seen["tree"] - seen["launcher"])
        pytest.fail(f"{what}: the launcher runs {unknown}, unknown to the tree; gone: {gone}")


def _described(pids: set[int]) -> list[str]:
    described = []
    for pid in sorted(pids):
        try:
            described.append(f"{pid} {' '.join(psutil.Process(pid).cmdline())}")
        except psutil.NoSuchProcess:
            described.append(f"{pid} (gone)")
    return described


def _kill(pid: int) -> None:
    """SIGKILL a child that the tree reported running; it may have died meanwhile (of a
    signal the last round sent it), which leaves the round its race all the same."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _steady(**flags: Any) -> SupervisorSpec:
    return SupervisorSpec(
        id="root",
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id="steady", command=["sleep", "1000"])],
        **flags,
    )


def _armed(tree: Tree, child: str) -> int:
    """The child's pid once its arm is on the launcher's socket (asked after it)."""
    pid: int | None = None

    def running() -> bool:
        nonlocal pid
        info = next(i for i in tree.nanny.which_children().get() if i.id == child)
        pid = info.pid if info.state == "running" else None
        return pid is not None

    wait_until(running, 10.0, f"{child} running")
    tree.nanny.read_output(child).get()  # answered after the ArmExit told before it
    assert pid is not None
    return pid


def test_a_terminate_right_after_a_fatal_signal_leaves_no_successor() -> None:
    """The reproduction: SIGTERM through the API, then terminate at once."""
    with Tree(_steady()) as tree:
        for round in range(ROUNDS):
            tree.nanny.restart_child("steady").get() if round else None
            _armed(tree, "steady")
            tree.nanny.signal_child("steady", signal.SIGTERM).get()
            tree.nanny.terminate_child("steady").get()
            _exactly_what_the_tree_reports(tree, f"round {round}")
            info = tree.nanny.which_children().get()[0]
            assert info.state == "stopped" and info.pid is None


def test_a_successor_killed_by_a_stop_is_reported() -> None:
    with Tree(_steady()) as tree:
        killed: list[Any] = []
        for round in range(ROUNDS):
            tree.nanny.restart_child("steady").get() if round else None
            _armed(tree, "steady")
            tree.nanny.signal_child("steady", signal.SIGTERM).get()
            tree.nanny.terminate_child("steady").get()
            killed = [
                e
                for e in tree.events()
                if e.context is EventKind.CHILD_NOTE and "started ahead" in e.detail
            ]
            if killed:
                break
        assert killed, f"no successor met a stop in {ROUNDS} rounds"
        # Each kill names the successor's pid, which no other event names.
        for event in killed:
            assert event.pid is not None and event.offender == "steady"
            started = {e.pid for e in tree.events() if e.context is EventKind.CHILD_STARTED}
            assert event.pid not in started
            assert not psutil.pid_exists(event.pid) or (
                psutil.Process(event.pid).status() == psutil.STATUS_ZOMBIE
            )


Call = Callable[[Any], Any]

# Every call that stops, restarts, pauses, signals or reloads the child, racing the
# exit the launcher restarts ahead.
RACERS: dict[str, Call] = {
    "terminate": lambda n: n.terminate_child("steady").get(),
    "restart": lambda n: n.restart_child("steady").get(),
    "delete": lambda n: (n.terminate_child("steady").get(), n.delete_child("steady").get()),
    "pause": lambda n: n.pause_child("steady").get(),
    "signal": lambda n: n.signal_child("steady", signal.SIGTERM).get(),
    "reload": lambda n: n.reload_child("steady").get(),
    "stop with dependents": lambda n: n.terminate_child("steady", with_dependents=True).get(),
}


def _bring_back(tree: Tree, spec: ChildSpec) -> None:
    """The child running again, whatever the last round left."""
    info = next((i for i in tree.nanny.which_children().get() if i.id == spec.id), None)
    # A strategy's restart still under way may bring it back first: then it runs (a
    # paused child's exit, read after the pause, is restarted: running, not paused).
    with contextlib.suppress(ChildRunning, ChildNotPaused):
        if info is None:
            tree.nanny.start_child(spec).get()
        elif info.state == "paused":
            tree.nanny.resume_child(spec.id).get()
        elif info.state == "stopped":
            tree.nanny.restart_child(spec.id).get()


@pytest.mark.parametrize("racer", sorted(RACERS))
def test_no_call_racing_an_armed_exit_leaks(racer: str) -> None:
    child = ChildSpec(id="steady", command=["sleep", "1000"], reload="HUP")
    spec = SupervisorSpec(id="root", intensity=10**6, period=1.0, children=[child])
    with Tree(spec) as tree:
        for round in range(ROUNDS // 2):
            _bring_back(tree, child)
            _kill(_armed(tree, "steady"))
            with contextlib.suppress(NannyError):  # it lost the race: the exit came first
                RACERS[racer](tree.nanny)
            _exactly_what_the_tree_reports(tree, f"{racer}, round {round}")


def _hammer(nanny: Any, calls: list[Call], offset: int, barrier: threading.Barrier) -> None:
    barrier.wait()
    for i in range(12):
        with contextlib.suppress(NannyError):  # not running, or running again: a lost race
            calls[(i + offset) % len(calls)](nanny)


def test_calls_from_two_threads_leak_nothing() -> None:
    """Signal, terminate and restart on one child from two threads at once."""
    calls = [RACERS["signal"], RACERS["terminate"], RACERS["restart"]]
    with Tree(_steady()) as tree:
        for round in range(ROUNDS // 3):
            barrier = threading.Barrier(2)
            threads = [
                threading.Thread(target=_hammer, args=(tree.nanny, calls, k, barrier))
                for k in (0, 1)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
                assert not t.is_alive()
            _exactly_what_the_tree_reports(tree, f"two threads, round {round}")


@pytest.mark.parametrize("strategy", [Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE])
def test_a_subtree_stop_racing_an_exit_inside_it_leaks_nothing(strategy: Strategy) -> None:
    sub = SupervisorSpec(
        id="sub",
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id="steady", command=["sleep", "1000"])],
    )
    spec = SupervisorSpec(
        id="root",
        intensity=10**6,
        period=1.0,
        strategy=strategy,
        children=[sub, ChildSpec(id="other", command=["sleep", "1000"])],
    )
    with Tree(spec) as tree:
        for round in range(ROUNDS // 3):
            nested = tree.nanny.child_nanny("sub").get().proxy()
            pid = next(i.pid for i in _walk(tree.nanny.which_tree().get()) if i.id == "steady")
            nested.read_output("steady").get()  # its arm is out
            _kill(pid)
            tree.nanny.terminate_child("sub").get()
            _exactly_what_the_tree_reports(tree, f"{strategy.value}, round {round}")
            tree.nanny.restart_child("sub").get()


def test_a_tree_stop_racing_an_exit_leaks_nothing() -> None:
    for round in range(ROUNDS // 3):
        tree = Tree.start(_steady())
        launcher = _launcher_pid(tree)
        pid = _armed(tree, "steady")
        _kill(pid)
        tree.stop()
        assert not [
            p.pid
            for p in psutil.Process().children(recursive=True)
            if p.pid != launcher and p.status() != psutil.STATUS_ZOMBIE
        ], f"round {round}"


@pytest.mark.parametrize("strategy", [Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE])
def test_calls_racing_runs_of_starts_and_stops_leak_nothing(strategy: Strategy) -> None:
    """A kill sets off a run of stops and a run of starts (its siblings are stopped and
    started again in a row); calls on other children race both."""
    kids = [ChildSpec(id=f"c{i}", command=["sleep", "1000"]) for i in range(6)]
    spec = SupervisorSpec(id="root", intensity=10**6, period=1.0, strategy=strategy, children=kids)
    rng = random.Random(23)
    with Tree(spec) as tree:
        for round in range(ROUNDS // 2):
            for kid in kids:
                _bring_back(tree, kid)
            victim, other = rng.sample(kids, 2)
            pid = _armed(tree, victim.id)
            call = rng.choice(["terminate", "restart", "pause", "signal", "delete"])
            _kill(pid)
            with contextlib.suppress(NannyError):
                RACERS[call](_Renamed(tree.nanny, other.id))
            _exactly_what_the_tree_reports(tree, f"{call} {other.id}, round {round}")


class _Renamed:
    """The nanny's proxy, with RACERS' calls on "steady" sent to another child."""

    def __init__(self, nanny: Any, child: str) -> None:
        self._nanny, self._child = nanny, child

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._nanny, name)

        def call(key: str, *args: Any, **kwargs: Any) -> Any:
            return method(self._child if key == "steady" else key, *args, **kwargs)

        return call


def test_liveness_stops_racing_exits_and_calls_leak_nothing() -> None:
    """A probe that always fails stops the child again and again (issue 25): each of
    those stops races the armed exit of a kill and the API's calls."""
    from supervision import ExecProbe, Liveness

    child = ChildSpec(
        id="steady",
        command=["sleep", "1000"],
        liveness=Liveness(ExecProbe(["false"], period=0.02), failures=1),
        shutdown="brutal_kill",
    )
    spec = SupervisorSpec(id="root", intensity=10**6, period=1.0, children=[child])
    rng = random.Random(25)
    with Tree(spec) as tree:
        for round in range(ROUNDS):
            _bring_back(tree, child)
            with contextlib.suppress(TimeoutError):
                _kill(_armed(tree, "steady"))
            with contextlib.suppress(NannyError):
                RACERS[rng.choice(["terminate", "restart", "pause", "signal"])](tree.nanny)
            _exactly_what_the_tree_reports(tree, f"round {round}")
        unhealthy = [
            e
            for e in tree.events()
            if e.context is EventKind.CHILD_EXITED
            and e.reason is not None
            and e.reason.kind.value == "unhealthy"
        ]
        assert unhealthy, "no liveness stop happened: the race was not run"
