"""What was started ahead of the core's decision, for one worker
(docs/acting-ahead.md): the successor the launcher started in place of an armed
exit (adopted by the next Start from the same template, or at its birth when the
reader answered its start ahead, killed otherwise), the warm standby a restart may
run, and a start of a run of starts the core may withdraw (`Unstart`), with the
ticket for one (`PrepareStart`).

A process started ahead that no decision took is killed, and said so: an event
names its pid, and its supervisor counts the restart its grant spent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Protocol

import pykka

from supervision import ChildSpec

from .._process._port import SPAWN_TIMEOUT, ChildHandle, LaunchError, Note, ProcessExit, Spawner
from .._runtime._pooled import blocking
from ._exit_gate import Claim
from ._messages import ArmExit, ChildNote, StartTicket
from ._request import StartProblem
from ._start_output import RunHistory


class Owner(Protocol):
    """What of its worker (`_worker.WorkerActor`) an `Ahead` uses."""

    spec: ChildSpec
    proc: ChildHandle | None
    incarnation: int
    history: RunHistory

    def kill_now(self, proc: ChildHandle) -> ProcessExit: ...
    def tell_parent(self, message: Any) -> None: ...
    def spawner(self) -> Spawner: ...
    def respawner(self) -> Spawner | None: ...
    def own_exit(self, proc: ChildHandle) -> ChildHandle | None: ...
    def forget(self, proc: ChildHandle, why: str, *, adopt: bool = False) -> ChildHandle | None: ...
    def start_now(self, token: int, arm: ArmExit | None) -> None: ...
    def begin(self, proc: ChildHandle) -> None: ...
    def started(self, proc: ChildHandle) -> None: ...
    def arm_start(self, token: int, proc: ChildHandle | None, arm: ArmExit | None) -> None: ...
    def open_gate(self, proc: ChildHandle) -> None: ...
    def define(self) -> tuple[Spawner, int]: ...
    def notifier(self) -> Callable[[ChildHandle, Note], None]: ...


class Ahead:
    """One worker's processes started ahead of a decision."""

    def __init__(self, worker: Owner) -> None:
        self._worker = worker
        # Started by the spawner in place of the last process (an armed exit).
        self.successor: ChildHandle | None = None
        self._standby: tuple[Spawner, int, int] | None = None  # (launcher, template, id)
        # Runs of starts: the last Start's token and what it started; and the tokens
        # the nanny withdrew (Unstart) before their Start came.
        self._last_start: tuple[int, ChildHandle | None] | None = None
        self._withdrawn: set[int] = set()
        # The plan the current process was armed with (a successor adopted at its
        # exit report is armed with it again: docs/acting-ahead.md).
        self.arm: ArmExit | None = None
        # The token of the start the reader answers at the successor's birth (0: none).
        self.birth = 0

    @property
    def holds(self) -> bool:
        """Whether a successor or a standby waits to be used."""
        return self.successor is not None or self._standby is not None

    # -- the successor ------------------------------------------------------------

    def let_go(self, why: str) -> None:
        """Nothing started ahead will be used (a stop): the standby and the successor go."""
        self.discard_standby()  # part of the child: stopped with it
        self.drop(why)

    def drop(self, why: str) -> None:
        """The successor an exit report handed us, for a decision that did not come."""
        successor, self.successor = self.successor, None
        self.kill(successor, why)

    def take(self, template: int, current: int) -> ChildHandle | None:
        """The successor, for a start from `template`: adopted if it was started from
        it (`current`), even if it has ended since (it did run: its exit is reported
        once it counts as started); else killed."""
        successor = self._wait_born(self.successor)
        self.successor = None
        if successor is not None and template == current:
            # It may have run our standby: a new one is forked behind it.
            self.discard_standby()
            return successor
        if successor is not None:
            self.kill(successor, "it was started from a request that no longer holds")
        return None

    def kill(self, successor: ChildHandle | None, why: str) -> None:
        """A process started ahead of a decision that did not come: killed, and said so."""
        successor = self._wait_born(successor)
        if successor is None:
            return
        worker = self._worker
        if successor.exit is None:
            worker.kill_now(successor)
        note = ChildNote(
            worker.spec.id,
            worker.incarnation,
            successor.pid,
            f"killed pid {successor.pid}, started ahead of its supervisor's decision: {why}",
            respawned_by=worker.respawner(),
        )
        with contextlib.suppress(pykka.ActorDeadError):  # a supervisor gone first
            worker.tell_parent(note)

    @staticmethod
    def _wait_born(successor: ChildHandle | None) -> ChildHandle | None:
        """The successor the launcher started, once its pid is known (it is announced
        with its predecessor's exit, before the spawn); None if it was not started."""
        if successor is None:
            return None
        with blocking():
            return successor if successor.wait_born(SPAWN_TIMEOUT) else None

    # -- a successor whose exit the reader reported (_exit_gate.py) ----------------

    def catch_up(self, claim: Claim | None) -> None:
        """The exit the reader reported to the nanny, kept as its note would have."""
        worker = self._worker
        if claim is None or claim.proc is not worker.proc:
            return
        successor = worker.forget(claim.proc, "", adopt=True)
        worker.history.last_exit = claim.reason
        self.successor = successor
        if successor is not None:  # its output begins about now
            worker.history.mark()
        self.birth = claim.ahead if successor is not None else 0

    def born_as(self, born: tuple[ChildHandle, int] | None) -> None:
        """The successor whose start the reader answered (ChildExited.ahead) was born
        (its pid 0: never): adopted, as a Start from the same template would; or
        killed, its start withdrawn first; or, never born, started the ordinary way."""
        token, self.birth = self.birth, 0
        if born is None or not token or born[1] != token:
            return
        worker = self._worker
        withdrawn = self.withdrawn(token)  # its Unstart came first
        successor, pid = self.successor, born[0].pid
        if successor is not born[0] or worker.proc is not None:
            return  # a stop or a start came between: that one decided
        if withdrawn:
            self.drop("its start was withdrawn")
        elif not pid:
            worker.start_now(token, self.arm)  # answers the token itself
        else:
            self.successor = None
            self.discard_standby()  # it may have run ours: a new one is forked behind it
            worker.begin(successor)
            worker.started(successor)
            # Armed with the plan its predecessor had: the core's, one incarnation on.
            worker.arm_start(token, successor, self.arm)
            worker.open_gate(successor)

    # -- the standby --------------------------------------------------------------

    def refill_standby(self, launcher: Spawner, template: int) -> None:
        """Refill behind a start: one standby at most, so that a crash storm cannot
        become a spawn storm."""
        self.discard_standby()
        with contextlib.suppress(LaunchError, OSError):
            self._standby = (launcher, template, launcher.prepare(template).id)

    def take_standby(self, launcher: Spawner, template: int) -> int | None:
        """The standby for this start, if it was forked from the same template."""
        standby, self._standby = self._standby, None
        if standby is None:
            return None
        owner, prepared, sid = standby
        if owner is not launcher or prepared != template:
            owner.discard(sid)  # forked before env, cwd or sys.path changed
            return None
        return sid

    def standby_id(self) -> int:
        """Our warm standby's id, for a restart ahead to run (0: none)."""
        return self._standby[2] if self._standby is not None else 0

    def discard_standby(self) -> None:
        if self._standby is not None:
            launcher, _, sid = self._standby
            launcher.discard(sid)
            self._standby = None

    # -- runs of starts -----------------------------------------------------------

    def ticket(self) -> StartTicket | None:
        """Whether the worker's next start is only a spawn from its template
        (ready="started", nothing to adopt or wait for), and if so what its supervisor
        sends for it (PrepareStart)."""
        worker = self._worker
        spec, proc = worker.spec, worker.proc
        if (
            spec.ready != "started"
            or spec.start_check is not None  # checked by its worker before each start
            or spec.pid_file is not None
            or spec.notify_socket
            or spec.warm_start
            or self.holds
            or (proc is not None and proc.exit is None)
        ):
            return None
        try:
            launcher, template = worker.define()
        except StartProblem:
            return None  # the Start itself reports why
        worker.history.mark()
        return StartTicket(launcher, template, spec.id, worker.notifier())

    def withdrawn(self, token: int) -> bool:
        """Whether the start `token` was withdrawn before it came (then nothing of it
        may run)."""
        if token in self._withdrawn:
            self._withdrawn.discard(token)
            return True
        return False

    def started(self, token: int, proc: ChildHandle | None) -> None:
        self._last_start = (token, proc)

    def unstart(self, token: int) -> None:
        """The core did not ask for that start of a run: undo it, unreported."""
        last, worker = self._last_start, self._worker
        if last is None or last[0] != token:
            self._withdrawn.add(token)
            return
        self._last_start = None
        proc = last[1]
        if proc is None or proc is not worker.proc:
            self.drop("its start was withdrawn")  # restarted ahead: not wanted
            return
        if worker.own_exit(proc) is None:
            self.drop("its start was withdrawn")  # it ended by itself first, reported
            return
        worker.spawner().disarm(proc)
        self.drop("its start was withdrawn")
        if proc.exit is None:
            worker.kill_now(proc)
        worker.forget(proc, "its start was withdrawn")
