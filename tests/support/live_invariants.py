"""What a live tree must satisfy once it is quiet, whatever happened to it (issue 23,
item 3): the checks of tests/live/test_stateful.py, and the children it runs.

Python children import this module to run `marked`: it imports only psutil and the
pure core.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, get_args

import psutil

from supervision import (
    ChildInfo,
    ChildSpec,
    ChildState,
    Event,
    EventKind,
    ExitKind,
    ExitReason,
    Restart,
    RestartWindow,
    SupervisorSpec,
)
from supervision._intensity import RELAUNCH_PERIOD, RELAUNCHES  # the launcher's own intensity

AnySpec = ChildSpec | SupervisorSpec
EXIT_CODE = 3  # a marked child exits with it on SIGUSR1 (abnormal), and with 0 on SIGUSR2
STEADY = frozenset({"running", "paused", "stopped"})  # no start, stop or restart under way
QUIET = 0.25  # s without a new event, every child steady: the tree is quiet
QUIET_DEADLINE = 30.0  # a tree not quiet after this long is a failure
HOLD_DEADLINE = 15.0  # the launcher reaps and reports within this once the tree is quiet

# -- the child ----------------------------------------------------------------------


def start_ticks(pid: int) -> str | None:
    """When the process started (clock ticks after boot): with the pid, who it is."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def marked(marks: str) -> None:
    """Leave who we are in `marks` (so a process that ran its target is told from a
    warm standby that never did), exit 3 on SIGUSR1 and 0 on SIGUSR2, else run."""
    with open(os.path.join(marks, str(os.getpid())), "w") as f:
        f.write(start_ticks(os.getpid()) or "")
    signal.signal(signal.SIGUSR1, lambda *_: sys.exit(EXIT_CODE))
    signal.signal(signal.SIGUSR2, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


def _standby_title(launcher: list[str]) -> str:
    """A warm standby's title beside its launcher's (actors/_launcher/_title.py)."""
    title = launcher[0] if launcher else ""
    return title.replace("nannytree: launcher", "nannytree: standby", 1)


def ran_target(marks: str, pid: int) -> bool:
    try:
        with open(os.path.join(marks, str(pid))) as f:
            return f.read() == start_ticks(pid)
    except OSError:
        return False


def pool(marks: str, intensity: int, period: float, warm: bool) -> dict[str, AnySpec]:
    """Every child a tree may have, by id: warm, cold, command and nested; each restart
    type; "w" is simple_one_for_one's template. The Python ones are alike: they share
    one template in the launcher."""

    def py(cid: str, **fields: Any) -> ChildSpec:
        return ChildSpec(
            id=cid, target=marked, args=(marks,), shutdown=2.0, stderr="capture", **fields
        )

    sleep = ["sleep", "1000"]
    return {
        "a": py("a", warm_start=True),
        "b": ChildSpec(id="b", command=sleep, shutdown=2.0),
        "c": py("c", restart="transient", warm_start=True),
        "d": py("d"),
        "e": py("e", restart="temporary"),
        "sub": SupervisorSpec(
            id="sub",
            intensity=intensity,
            period=period,
            children=[py("s1", warm_start=True), ChildSpec(id="s2", command=sleep, shutdown=2.0)],
        ),
        "w": py("w", warm_start=warm),
    }


# -- the tree as it reports itself ----------------------------------------------------


def walk(nodes: Any, path: str = "root") -> Iterator[tuple[str, ChildInfo]]:
    """(supervisor path, info) of every child of which_tree(), nested ones included."""
    for node in nodes:
        yield path, node.info
        yield from walk(node.children, node.path)


def wait_quiet(tree: Any) -> None:
    """Until the tree has ended, or no child is starting, stopping or restarting and no
    event came for QUIET s (a wait on the log, with a deadline)."""
    deadline = time.monotonic() + QUIET_DEADLINE
    last = ""
    while time.monotonic() < deadline:
        if tree.finished() is not None:
            return
        mark = len(tree.log)
        try:
            infos = list(walk(tree.nanny.which_tree().get(timeout=10)))
        except Exception:  # the root stopped meanwhile: the tree is ending
            if tree.context.wait(10):
                return
            raise
        moving = [f"{p}/{i.id}={i.state}" for p, i in infos if i.state not in STEADY]
        fresh, _ = tree.log.since(mark, QUIET)
        if not moving and not fresh:
            return
        last = f"moving: {moving}, last event: {fresh[-1] if fresh else None}"
    raise AssertionError(f"the tree is not quiet after {QUIET_DEADLINE}s: {last}")


# -- the invariants ---------------------------------------------------------------------


@dataclass
class Specs:
    """The specs the machine ever gave the tree, to tell what an exit costs."""

    supervisors: dict[str, SupervisorSpec] = field(default_factory=dict)  # by path
    children: dict[str, AnySpec] = field(default_factory=dict)  # by id

    def add(self, spec: SupervisorSpec, path: str) -> None:
        self.supervisors[path] = spec
        for child in spec.children:
            self.add_child(child, path)

    def add_child(self, spec: AnySpec, parent: str) -> None:
        self.children[spec.id] = spec
        if isinstance(spec, SupervisorSpec):
            self.add(spec, f"{parent}/{spec.id}")

    def of(self, child_id: str) -> AnySpec:
        """A child's spec; a dynamic child ("w-3") has its template's."""
        found = self.children.get(child_id)
        return found if found is not None else self.children[child_id.rsplit("-", 1)[0]]


def _ahead(e: Event) -> bool:
    """A process started ahead of a decision that did not come, killed: it ran, once."""
    return e.context is EventKind.CHILD_NOTE and "started ahead" in e.detail


def exits_reported_once(events: list[Event], reported: set[int], ended: bool) -> None:
    """Every process the tree started ends in exactly one event, after its start; those
    with none yet are exactly the ones it reports (none once it ended). In log order,
    so that a pid the OS gave again is a new process."""
    running: dict[int, Event] = {}
    ended_by: dict[int, Event] = {}
    for e in events:
        if e.pid is None:
            continue
        if e.context is EventKind.CHILD_STARTED:
            assert e.pid not in running, f"started again while running: {running[e.pid]} / {e}"
            running[e.pid] = e
            ended_by.pop(e.pid, None)
        elif e.context in (EventKind.CHILD_EXITED, EventKind.CHILD_TERMINATED):
            assert e.pid not in ended_by, f"an exit reported twice: {ended_by[e.pid]} / {e}"
            assert e.pid in running, f"an exit of a process never started: {e}"
            ended_by[e.pid] = running.pop(e.pid)
        elif _ahead(e):
            assert e.pid not in running, f"a running child killed as started ahead: {e}"
    expected = set() if ended else reported
    assert set(running) == expected, (
        f"started and never reported ended: {sorted(running)}; the tree reports {sorted(expected)}"
    )


def _charged(spec: AnySpec, e: Event) -> bool:
    """Whether this exit is charged to the intensity (OTP: permanent, or transient
    and abnormal; temporary never)."""
    if spec.restart is Restart.PERMANENT:
        return True
    return spec.restart is Restart.TRANSIENT and e.reason is not None and not e.reason.is_normal


def intensity_kept(events: list[Event], specs: Specs) -> None:
    """Replay every supervisor's restart window from its log: no restart past its
    intensity, and a give-up exactly when the window overflows.

    A failed restart's retry is charged with no event of its own; where one came
    (restart_scheduled), the charges seen are a lower bound and only the first
    half holds: an overflow of them must have been met by a give-up by then.
    """
    window: dict[str, RestartWindow] = {}
    over: dict[str, float | None] = {}
    gave_up: dict[str, float | None] = {}
    retried: set[str] = set()

    def settle(path: str) -> None:
        if path not in window:
            return
        overflow, give_up = over[path], gave_up[path]
        if path in retried:
            assert overflow is None or (give_up is not None and give_up <= overflow), (
                f"{path} restarted past its intensity: over at {overflow}, gave up at {give_up}"
            )
        else:
            assert overflow == give_up, (
                f"{path}: the window overflowed at {overflow}, the supervisor gave up at {give_up}"
            )

    for e in events:
        path = e.supervisor
        if e.context is EventKind.SUPERVISOR_STARTED:  # a (re)started supervisor: a new window
            settle(path)
            sup = specs.supervisors[path]
            window[path] = RestartWindow(sup.intensity, sup.period)
            over[path] = gave_up[path] = None
            retried.discard(path)
        elif path not in window:
            continue
        elif e.context is EventKind.RESTART_SCHEDULED:
            retried.add(path)
        elif e.context is EventKind.MAX_INTENSITY_REACHED:
            assert gave_up[path] is None, f"{path} gave up twice: {e}"
            gave_up[path] = e.time
        elif e.context is EventKind.CHILD_STARTED and gave_up[path] is not None:
            raise AssertionError(f"{path} started a child after it gave up: {e}")
        elif (
            e.context is EventKind.CHILD_EXITED
            and e.offender is not None
            and _charged(specs.of(e.offender), e)
            and window[path].add(e.time)
            and over[path] is None
        ):
            over[path] = e.time
    for path in window:
        settle(path)


def relaunches_kept(relaunches: list[tuple[float, float]], seen_at: float, end: Any) -> None:
    """At most RELAUNCHES new launchers in any RELAUNCH_PERIOD, and a tree ends with
    `launcher_died` only when the next would have been one too many.

    Each relaunch is known to lie in an interval (after, before); `seen_at` is when the
    last launcher was last seen as the tree's, before the death that ended it.
    """
    for first, last in zip(relaunches, relaunches[RELAUNCHES:], strict=False):
        assert last[1] - first[0] > RELAUNCH_PERIOD, f"too many launchers: {relaunches}"
    if end is None or end.kind is not ExitKind.LAUNCHER_DIED:
        return
    assert len(relaunches) >= RELAUNCHES, f"ended with {end} after {relaunches}"
    assert seen_at - relaunches[-RELAUNCHES][1] <= RELAUNCH_PERIOD, (
        f"ended with {end}: relaunched at {relaunches}, last seen at {seen_at}"
    )


def ended_as_allowed(reason: ExitReason) -> None:
    """A tree the machine never stops ends by giving up or by losing its launcher."""
    gave_up = reason.kind is ExitKind.SHUTDOWN and "max_restart_intensity" in reason.message
    assert gave_up or reason.kind is ExitKind.LAUNCHER_DIED, f"the tree ended: {reason}"


class Tracebacks(logging.Handler):
    """What the shell logs with a traceback: an exception nobody expected."""

    def __init__(self, known: tuple[str, ...]) -> None:
        super().__init__(logging.ERROR)
        self.known = known  # messages of bugs already reproduced elsewhere
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.exc_info and not any(k in message for k in self.known):
            self.seen.append(f"{message}: {record.exc_info[1]!r}")


def no_shell_failure(events: list[Event], tracebacks: Tracebacks) -> None:
    """No actor of the tree failed: none logged a traceback, no child exited because
    the actor that owned it crashed."""
    crashed = [str(e) for e in events if e.reason and e.reason.kind is ExitKind.ACTOR_CRASHED]
    assert not crashed, f"actors crashed: {crashed}"
    assert not tracebacks.seen, f"the shell logged exceptions: {tracebacks.seen}"


def states_known(infos: list[tuple[str, ChildInfo]]) -> None:
    known = set(get_args(ChildState))
    odd = [f"{p}/{i.id}={i.state}" for p, i in infos if i.state not in known]
    assert not odd, f"children in states the core does not have: {odd}"
    moving = [f"{p}/{i.id}={i.state}" for p, i in infos if i.state not in STEADY]
    assert not moving, f"children still moving once quiet: {moving}"


# -- the processes ----------------------------------------------------------------------


@dataclass
class Launched:
    """What runs under a launcher, as psutil sees it."""

    zombies: list[int]
    unknown: list[str]  # processes neither reported by the tree nor a standby
    missing: list[int]  # pids the tree reports that do not run under it
    standbys: list[int]  # idle forks of the launcher: warm standbys


def launched(launcher: int, reported: set[int], marks: str) -> Launched:
    """Hold the launcher's processes against the pids the tree reports.

    A process it forked that is not reported is a warm standby only if it never ran a
    target (no mark) and runs the launcher's own program.
    """
    try:
        proc = psutil.Process(launcher)
        me = proc.cmdline()
        direct = proc.children()
        every = proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return Launched([], [], sorted(reported), [])
    zombies, unknown, alive, standbys = [], [], set(), []
    for p in direct:
        with contextlib.suppress(psutil.NoSuchProcess):
            if p.status() == psutil.STATUS_ZOMBIE:
                zombies.append(p.pid)
                continue
            alive.add(p.pid)
            if p.pid in reported:
                continue
            standby = p.cmdline() == me or p.cmdline()[:1] == [_standby_title(me)]
            if not ran_target(marks, p.pid) and standby:
                standbys.append(p.pid)
            else:
                unknown.append(f"{p.pid} {' '.join(p.cmdline())}")
    for p in every:
        if p.pid in alive or p.pid in zombies:
            continue
        with contextlib.suppress(psutil.NoSuchProcess):
            if not any(a.pid in reported for a in p.parents()):
                unknown.append(f"{p.pid} {' '.join(p.cmdline())} (a descendant)")
    return Launched(zombies, unknown, sorted(reported - alive), standbys)


def still_running(born: dict[int, float], pids: Iterable[int]) -> list[int]:
    """Those of `pids` that still run as the process `born` saw start (pid: create
    time): a pid the OS gave again to another process is not ours."""
    alive = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess, KeyError):
            p = psutil.Process(pid)
            if p.create_time() == born[pid] and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
    return alive


def hold(check: Callable[[], str], what: str, timeout: float = HOLD_DEADLINE) -> None:
    """Until `check()` finds nothing wrong (""), with a deadline: what the OS shows
    lags the events by the launcher's reaping."""
    deadline = time.monotonic() + timeout
    while (problem := check()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not problem, f"{what}: {problem}"
