"""The live tree under any interleaving (issue 23, item 3): a state machine whose rules
are the public API from one or two threads, kills, exits and crashes of children, and
SIGSTOP and SIGKILL of the launcher, over every strategy, with armed restarts, warm
starts and runs of starts and stops in play. After every step, once the tree is quiet,
it holds the tree to tests/support/live_invariants.py: every process under the launcher is one
the tree reports (or a warm standby), no zombie, every exit reported exactly once, no
child in a state the core does not have, no restart past the intensity, and no
launcher replaced past its own.

The suite runs two examples per strategy (the first is the simplest: child "a" killed
through the API at every step); the soak test runs them for NANNYTREE_SOAK_SECONDS
(30 by default; CI sets 600). A failure is printed unshrunk: replay its steps by hand.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pykka
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from actors import EventLog, Tree
from actors.testing import inject_crash
from supervision import (
    ChildSpec,
    Event,
    EventKind,
    ExitKind,
    ExitReason,
    NannyError,
    Strategy,
    SupervisorSpec,
)
from tests.support import SOAK_SECONDS, wait_until
from tests.support import live_invariants as inv
from tests.targets import children

CALL_TIMEOUT = 30.0  # an API call that takes longer is hung (a stopped launcher: 5 s)
STATIC = ["a", "b", "c", "d", "e", "sub"]  # root's children ("e" only by start_child)
WORKERS = ["a", "b", "c", "d", "e", "s1", "s2"]  # every worker of a static tree
COMMANDS = {"b", "s2"}  # no Python to raise in
DYNAMIC = [f"w-{n}" for n in range(1, 9)]  # simple_one_for_one's children, by id
# The first of each is what the simplest example does: kill child "a" through the API.
METHODS = [
    "signal_child",
    "start_child",
    "terminate_child",
    "terminate_with_dependents",
    "restart_child",
    "delete_child",
    "pause_child",
    "resume_child",
]
SIGNALS = ["KILL", "TERM", "USR1", "USR2", "HUP", "CONT"]
HURTS = ["kill -9", "exit 3", "exit 0", "crash"]
# One idle standby per warm child at most (test_a_restart_ahead_leaves_no_standby_behind).
STANDBYS_BOUNDED = True
# Tracebacks the shell may log (none: test_a_cascade_of_give_ups_logs_no_error).
KNOWN_TRACEBACKS: tuple[str, ...] = ()

Call = tuple[str, str, str]  # (method, child id, signal name)


class LiveTree(RuleBasedStateMachine):
    """One tree of real processes; `strategy` is its root's (set by `for_strategy`)."""

    strategy = Strategy.ONE_FOR_ONE

    def __init__(self) -> None:
        super().__init__()
        self.marks = tempfile.mkdtemp(prefix="nannytree-stateful-")
        self.tree: Tree | None = None
        self.specs = inv.Specs()
        self.launchers: list[int] = []  # every launcher pid the tree had, oldest first
        self.seen_at = 0.0  # when the newest launcher was last seen as the tree's
        self.relaunches: list[tuple[float, float]] = []  # (after, before): when each was
        self.born: dict[int, float] = {}  # pid: create time, of every process it started
        self.unsubscribe: Callable[[], None] = lambda: None
        self.tracebacks = inv.Tracebacks(KNOWN_TRACEBACKS)

    @property
    def simple(self) -> bool:
        return self.strategy is Strategy.SIMPLE_ONE_FOR_ONE

    # -- the tree ---------------------------------------------------------------------

    @initialize(
        intensity=st.sampled_from([1000, 10, 4]),
        period=st.sampled_from([10.0, 1.0]),
        nested=st.booleans(),  # a nested supervisor; simple_one_for_one: warm children
    )
    def start(self, intensity: int, period: float, nested: bool) -> None:
        pool = inv.pool(self.marks, intensity, period, warm=nested)
        first = ["w"] if self.simple else ["a", "b", "c", "d", *(["sub"] if nested else [])]
        kids = [pool[k] for k in first]
        spec = SupervisorSpec(
            id="root",
            strategy=self.strategy,
            intensity=intensity,
            period=period,
            max_children=6 if self.simple else None,
            children=kids,
        )
        self.specs.add(spec, "root")
        for extra in pool.values():  # what start_child may add
            self.specs.add_child(extra, "root")
        log = EventLog()
        self.unsubscribe = log.subscribe(self._note_birth)
        logging.getLogger("nannytree").addHandler(self.tracebacks)
        self.tree = Tree.start(spec, log=log)
        self._seen_launcher()
        if self.simple:
            for _ in range(4):
                self.tree.nanny.start_child(()).get(timeout=CALL_TIMEOUT)

    def _note_birth(self, event: Event) -> None:
        if event.pid is not None and event.context is EventKind.CHILD_STARTED:
            with contextlib.suppress(psutil.NoSuchProcess):
                self.born[event.pid] = psutil.Process(event.pid).create_time()

    def teardown(self) -> None:
        try:
            if self.tree is not None:
                self.tree.stop(timeout=60)
                if sys.exc_info()[0] is None:  # else that failure is the one to report
                    inv.hold(self._left, "the stopped tree left")
        finally:
            self.unsubscribe()
            logging.getLogger("nannytree").removeHandler(self.tracebacks)
            shutil.rmtree(self.marks, ignore_errors=True)

    def _left(self) -> str:
        """The processes of the tree (children, launchers) that still run."""
        alive = inv.still_running(self.born, [*self.born, *self.launchers])
        return str(alive) if alive else ""

    @property
    def alive(self) -> bool:
        return self.tree is not None and self.tree.finished() is None

    def _seen_launcher(self) -> None:
        """Note a new launcher (the tree replaced the last one since we looked)."""
        assert self.tree is not None
        launcher = self.tree.context.spawner
        now = time.monotonic()
        if launcher is not None and (not self.launchers or launcher.pid != self.launchers[-1]):  # type: ignore[attr-defined]
            if self.launchers:
                self.relaunches.append((self.seen_at, now))
            self.launchers.append(int(launcher.pid))  # type: ignore[attr-defined]
            with contextlib.suppress(psutil.NoSuchProcess):
                self.born[self.launchers[-1]] = psutil.Process(self.launchers[-1]).create_time()
        self.seen_at = now

    def _which_tree(self) -> list[tuple[str, Any]]:
        """Every child the tree reports now (none once it ended)."""
        assert self.tree is not None
        try:
            return list(inv.walk(self.tree.nanny.which_tree().get(timeout=CALL_TIMEOUT)))
        except pykka.ActorDeadError:
            assert self.tree.context.wait(10), "the root stopped, and the tree did not end"
            return []

    def _child(self, child_id: str) -> Any:
        return next((i for _, i in self._which_tree() if i.id == child_id), None)

    def _invoke(self, call: Call) -> None:
        """One API call; a refusal (NannyError) or a tree that ended is an answer."""
        assert self.tree is not None
        method, key, sig = call
        nanny = self.tree.nanny
        with contextlib.suppress(NannyError, pykka.ActorDeadError):
            if method == "start_child":
                future = nanny.start_child(() if self.simple else self.specs.of(key))
            elif method == "terminate_with_dependents":
                future = nanny.terminate_child(key, with_dependents=True)
            elif method == "signal_child":
                future = nanny.signal_child(key, sig)
            else:
                future = getattr(nanny, method)(key)
            future.get(timeout=CALL_TIMEOUT)

    def _hurt(self, child_id: str, how: str) -> None:
        """SIGKILL, exit 3 / exit 0 (live_invariants.marked), or an exception raised in it."""
        info = self._child(child_id)
        if info is None or info.pid is None:
            return
        sig = {"kill -9": signal.SIGKILL, "exit 3": signal.SIGUSR1, "exit 0": signal.SIGUSR2}
        if how == "crash" and (child_id in COMMANDS or info.state == "paused"):
            how = "kill -9"  # no Python to raise in, or none running to take it
        with contextlib.suppress(ProcessLookupError):  # it died meanwhile
            if how in sig:
                os.kill(info.pid, sig[how])
            else:
                # A deadline for a hang, not for speed: a loaded machine's restarted
                # child can take seconds to reach its target.
                inject_crash(info.pid, RuntimeError("injected"), timeout=CALL_TIMEOUT)

    # -- rules --------------------------------------------------------------------------

    def workers(self) -> st.SearchStrategy[str]:
        return st.sampled_from(DYNAMIC if self.simple else WORKERS)

    def calls(self) -> st.SearchStrategy[Call]:
        keys = st.sampled_from(DYNAMIC if self.simple else STATIC)
        return st.tuples(st.sampled_from(METHODS), keys, st.sampled_from(SIGNALS))

    @precondition(lambda self: self.alive)
    @rule(data=st.data())
    def call(self, data: st.DataObject) -> None:
        self._invoke(data.draw(self.calls(), label="call"))

    @precondition(lambda self: self.alive)
    @rule(data=st.data())
    def two_calls_at_once(self, data: st.DataObject) -> None:
        calls = [data.draw(self.calls(), label=f"call {n}") for n in (1, 2)]
        _at_once(*(lambda c=c: self._invoke(c) for c in calls))

    @precondition(lambda self: self.alive)
    @rule(data=st.data(), how=st.sampled_from(HURTS))
    def fault(self, data: st.DataObject, how: str) -> None:
        """A child dies by itself: SIGKILL, an exit code, or an exception raised in it."""
        self._hurt(data.draw(self.workers(), label="child"), how)

    @precondition(lambda self: self.alive)
    @rule(data=st.data(), how=st.sampled_from(HURTS), on_it=st.booleans())
    def fault_racing_a_call(self, data: st.DataObject, how: str, on_it: bool) -> None:
        """A child dies as a call is made, on it or another: a restart ahead meets a stop."""
        child, (method, key, sig) = data.draw(self.workers()), data.draw(self.calls())
        call = (method, child if on_it else key, sig)
        _at_once(lambda: self._hurt(child, how), lambda: self._invoke(call))

    @precondition(lambda self: self.alive)
    @rule(
        data=st.data(),
        held=st.sampled_from([0.0, 0.3, 1.0]),
        meanwhile=st.sampled_from(["nothing", "kill -9", "call"]),
    )
    def stop_launcher(self, data: st.DataObject, held: float, meanwhile: str) -> None:
        """SIGSTOP the launcher, hurt a child or call the API while it is stopped, then
        SIGCONT it: the call waits, nothing is lost."""
        child, call = data.draw(self.workers(), label="child"), data.draw(self.calls())
        victim = self._child(child)
        caller = threading.Thread(target=self._invoke, args=(call,))
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.launchers[-1], signal.SIGSTOP)
        try:
            if meanwhile == "kill -9" and victim is not None and victim.pid is not None:
                os.kill(victim.pid, signal.SIGKILL)
            elif meanwhile == "call":
                caller.start()
            threading.Event().wait(held)  # how long the fault lasts, not a synchronisation
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.launchers[-1], signal.SIGCONT)
        if caller.ident is not None:  # started
            caller.join(CALL_TIMEOUT * 2)
            assert not caller.is_alive(), f"{call} hung after the launcher was continued"

    @precondition(lambda self: self.alive)
    @rule(really=st.booleans())
    def kill_launcher(self, really: bool) -> None:
        """SIGKILL the launcher (one time in two: the tree replaces only three)."""
        if really:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.launchers[-1], signal.SIGKILL)

    @precondition(lambda self: not self.alive)
    @rule()
    def ended(self) -> None:
        """Nothing more happens to a tree that ended (the invariants still hold)."""

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def quiet_then_consistent(self) -> None:
        """Each check on one look at the quiet tree; a look taken as a late exit came in
        (a loaded machine) is taken again, so a failure is one that lasts."""

        def look() -> str:
            try:
                self._consistent()
            except AssertionError as e:
                return str(e)
            return ""

        inv.hold(look, "once the tree is quiet")

    def _consistent(self) -> None:
        tree = self.tree
        assert tree is not None
        inv.wait_quiet(tree)
        if self.alive:
            self._seen_launcher()
        infos = self._which_tree() if self.alive else []
        reported = {i.pid for _, i in infos if i.pid is not None}
        events = tree.events()
        assert tree.log.dropped == 0, "the log dropped events: the checks would be blind"
        end = tree.finished()
        inv.states_known(infos)
        inv.no_shell_failure(events, self.tracebacks)
        inv.exits_reported_once(events, reported, ended=end is not None)
        inv.intensity_kept(events, self.specs)
        inv.relaunches_kept(self.relaunches, self.seen_at, end)
        if end is not None:
            inv.ended_as_allowed(end)
            assert not self._left(), f"the tree ended ({end}), and left {self._left()}"
            return
        found = inv.launched(self.launchers[-1], reported, self.marks)
        warm = sum(1 for _, i in infos if getattr(self.specs.of(i.id), "warm_start", False))
        too_many = STANDBYS_BOUNDED and len(found.standbys) > warm
        problems = [
            ("zombies", found.zombies),
            ("unknown to the tree", found.unknown),
            ("reported, not running", found.missing),
            (f"standbys for {warm} warm children", found.standbys if too_many else []),
            ("replaced launchers alive", inv.still_running(self.born, self.launchers[:-1])),
        ]
        wrong = "; ".join(f"{what}: {value}" for what, value in problems if value)
        assert not wrong, f"the launcher's processes against the tree's: {wrong}"


def _at_once(*calls: Callable[[], None]) -> None:
    """Run the calls on threads of their own, released together; raise what one raised."""
    barrier = threading.Barrier(len(calls))
    failed: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        barrier.wait()
        try:
            call()
        except BaseException as e:
            failed.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(CALL_TIMEOUT * 2)
        assert not t.is_alive(), "a call hung"
    if failed:
        raise failed[0]


def for_strategy(strategy: Strategy) -> type[LiveTree]:
    return type(f"LiveTree_{strategy.value}", (LiveTree,), {"strategy": strategy})


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        # A shrink on real processes takes many minutes: the failing run is printed as is.
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.value)
def test_the_live_tree_keeps_its_invariants(strategy: Strategy) -> None:
    run_state_machine_as_test(for_strategy(strategy), settings=_settings(2, 15))


@pytest.mark.soak
@pytest.mark.timeout(SOAK_SECONDS + 600)
def test_soak_the_live_tree_keeps_its_invariants() -> None:
    deadline = time.monotonic() + SOAK_SECONDS
    while time.monotonic() < deadline:
        for strategy in Strategy:
            if time.monotonic() < deadline:
                run_state_machine_as_test(for_strategy(strategy), settings=_settings(4, 40))


# -- what it found ----------------------------------------------------------------------


def _launched(tree: Tree) -> list[int]:
    launcher = tree.context.spawner
    assert launcher is not None
    found = inv.launched(int(launcher.pid), set(), "/nonexistent")  # type: ignore[attr-defined]
    return sorted(found.standbys + [int(u.split()[0]) for u in found.unknown])


def test_a_restart_ahead_leaves_no_standby_behind() -> None:
    """Two warm children alike share a template: y's restart ahead runs x's standby."""
    twins = [ChildSpec(id=c, target=children.sleep_forever, warm_start=True) for c in "xy"]
    with Tree(SupervisorSpec(id="root", intensity=10, period=10.0, children=twins)) as tree:
        wait_until(lambda: len(_launched(tree)) == 4, what="two children, two standbys")
        y = tree.nanny.which_child("y").get().pid
        tree.nanny.read_output("y").get()  # answered after its arm went out
        os.kill(y, signal.SIGKILL)
        tree.log.wait_for(
            lambda e: e.context is EventKind.CHILD_STARTED and e.offender == "y" and e.pid != y,
            10,
        )
        wait_until(lambda: len(_launched(tree)) == 4, what="y's standby forked again")
        tree.nanny.terminate_child("x").get()
        tree.nanny.terminate_child("y").get()
        wait_until(lambda: _launched(tree) == [], 2.0, "no child, so no standby")


def test_a_cascade_of_give_ups_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    sub = SupervisorSpec(id="sub", intensity=0, children=[ChildSpec("s", command=["true"])])
    tree = Tree.start(SupervisorSpec(id="root", intensity=0, children=[sub]))
    reason = tree.wait(10)
    assert reason is not None and reason.message == "reached_max_restart_intensity"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


# -- the checks can fail ------------------------------------------------------------------


def _event(t: float, context: EventKind, offender: str | None = None, **fields: Any) -> Event:
    return Event(time=t, supervisor="root", context=context, offender=offender, **fields)


def test_the_checks_catch_an_exit_reported_twice_or_never() -> None:
    started = _event(1.0, EventKind.CHILD_STARTED, "a", pid=10, incarnation=1)
    exited = _event(2.0, EventKind.CHILD_EXITED, "a", pid=10, reason=ExitReason.normal())
    stopped = _event(3.0, EventKind.CHILD_TERMINATED, "a", pid=10)
    inv.exits_reported_once([started, exited], set(), ended=False)
    inv.exits_reported_once([started, exited, started], {10}, ended=False)  # a pid reused
    with pytest.raises(AssertionError, match="reported twice"):
        inv.exits_reported_once([started, exited, stopped], set(), ended=False)
    with pytest.raises(AssertionError, match="never reported ended"):
        inv.exits_reported_once([started], set(), ended=False)
    with pytest.raises(AssertionError, match="never reported ended"):
        inv.exits_reported_once([started], {10}, ended=True)


def test_the_checks_catch_a_restart_past_the_intensity() -> None:
    specs = inv.Specs()
    only = [ChildSpec("a", command=["x"])]
    specs.add(SupervisorSpec(id="root", intensity=1, period=10.0, children=only), "root")
    crash = ExitReason(ExitKind.EXIT_CODE, code=1)
    events = [
        _event(0.0, EventKind.SUPERVISOR_STARTED),
        _event(1.0, EventKind.CHILD_EXITED, "a", reason=crash),
        _event(1.0, EventKind.CHILD_STARTED, "a"),
        _event(2.0, EventKind.CHILD_EXITED, "a", reason=crash),
    ]
    inv.intensity_kept([*events, _event(2.0, EventKind.MAX_INTENSITY_REACHED, "a")], specs)
    with pytest.raises(AssertionError, match="overflowed"):
        inv.intensity_kept([*events, _event(2.0, EventKind.CHILD_STARTED, "a")], specs)
    with pytest.raises(AssertionError, match="overflowed"):
        inv.intensity_kept([*events[:2], _event(1.0, EventKind.MAX_INTENSITY_REACHED)], specs)


def test_the_checks_catch_a_launcher_replaced_too_often_or_too_soon_given_up() -> None:
    died = ExitReason(ExitKind.LAUNCHER_DIED)
    inv.relaunches_kept([(0, 1), (2, 3), (4, 5)], 6.0, died)
    with pytest.raises(AssertionError, match="too many launchers"):
        inv.relaunches_kept([(0, 1), (2, 3), (4, 5), (6, 7)], 8.0, None)
    with pytest.raises(AssertionError, match="ended with"):
        inv.relaunches_kept([(0, 1), (2, 3)], 4.0, died)
    with pytest.raises(AssertionError, match="ended with"):
        inv.relaunches_kept([(0, 1), (2, 3), (4, 5)], 20.0, died)


def test_the_checks_catch_a_stray_process_and_a_zombie(tmp_path: Path) -> None:
    stray = subprocess.Popen(["sleep", "60"])
    dead = subprocess.Popen(["true"])
    try:
        inv.hold(lambda: "" if psutil.Process(dead.pid).status() == "zombie" else "no", "zombie")
        found = inv.launched(os.getpid(), set(), str(tmp_path))
        assert dead.pid in found.zombies
        assert any(line.startswith(f"{stray.pid} sleep") for line in found.unknown)
        assert inv.launched(os.getpid(), {stray.pid}, str(tmp_path)).missing == []
        assert inv.launched(os.getpid(), {12345678}, str(tmp_path)).missing == [12345678]
        born = {stray.pid: psutil.Process(stray.pid).create_time()}
        assert inv.still_running(born, [stray.pid, dead.pid]) == [stray.pid]
    finally:
        stray.kill()
        stray.wait()
        dead.wait()
