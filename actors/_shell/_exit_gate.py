"""Where a worker's exits are read: the short exit path (docs/acting-ahead.md, "The
exit path").

The launcher's reader thread calls a worker's notifier once per exit. While the
gate is open on the worker's process (it started, and nothing of the worker has
taken it back), the reader claims the exit there and then: it classifies it once
(`RunHistory.classify`, the core's rules) and tells the nanny `ChildExited`
itself, without waiting for a pool thread to serve the worker. When the launcher
is restarting the child ahead of the decision (an armed exit) and the worker's
next start would only adopt that successor (ready="started", no pid file, the same
template in the same host state), the report also names a start sent ahead for it
(`ChildExited.ahead`, a token): the reader answers it (`StartDone`) as soon as the
successor's pid is known, and the nanny gives that answer to the core when the core
asks for the start, with no Start/StartDone round trip through the worker. A start
the core does not ask for is withdrawn (`Unstart`), as any start sent ahead; a
successor that is never born is started the ordinary way by the worker, which then
answers the token itself.

What stays the worker's: an exit during a start (the start sees it), an exit a stop
or a guard caused (the stop's answer, never an exit to restart), and the pid of a
process its supervisor stops in a run (`quiet`: its note is dropped). The worker
closes the gate (`close`) before it takes a process back; if the reader claimed the
exit first, the worker catches up (`take_claim`): it forgets the process, keeps the
successor, and goes on as if the exit's note had come first; a birth the reader
answered is adopted the same way (`take_born`). The worker catches up before it
handles any message, so that the nanny's next message to the worker finds both
done: the reader tells the nanny first, then wakes the worker with a note.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from supervision import ChildSpec, ExitReason

from .._process._port import ChildHandle, Note
from ._messages import ChildExited, ProcessNote, StartDone
from ._start_output import RunHistory
from ._template import Template

# Whether an armed restart's start is answered at the successor's birth (the
# start sent ahead with the exit). Off: the worker's Start adopts the successor.
ANSWER_BIRTHS = True


@dataclass(frozen=True)
class Claim:
    """An exit the reader reported: for the worker to catch up on."""

    proc: ChildHandle
    reason: ExitReason
    ahead: int  # the token of the successor's start sent ahead (0: none)


class ExitGate:
    """One worker's gate, and its reports to its nanny."""

    def __init__(
        self,
        spec: ChildSpec,
        history: RunHistory,
        template: Template,
        parent: pykka.ActorRef[Any],
    ) -> None:
        self._spec, self._history, self._template = spec, history, template
        self._parent = parent
        self._lock = threading.Lock()
        self._open: tuple[ChildHandle, int] | None = None  # (process, incarnation)
        self.claimed: Claim | None = None
        self._birth: tuple[ChildHandle, int, int] | None = None  # (successor, token, incarnation)
        self.born: tuple[ChildHandle, int] | None = None  # a birth for the worker to adopt
        self.quiet = 0  # the pid its supervisor stops in a run: its exit note is not wanted

    def tell(self, message: Any) -> None:
        """To the nanny. A report to a supervisor that has stopped is normal (OTP drops
        a message to a dead process): dropped, not raised into the handler as a crash."""
        with contextlib.suppress(pykka.ActorDeadError):
            self._parent.tell(message)

    # -- the worker's side ---------------------------------------------------------

    def open(self, proc: ChildHandle, incarnation: int) -> None:
        """`proc` started as `incarnation`: its exit is the reader's to report."""
        with self._lock:
            self._open = (proc, incarnation)

    def close(self, proc: ChildHandle) -> bool:
        """The worker takes `proc`'s exit back; False if the reader reported it first
        (then `take_claim` says what it reported)."""
        with self._lock:
            if self._open is not None and self._open[0] is proc:
                self._open = None
            return self.claimed is None or self.claimed.proc is not proc

    def take_claim(self) -> Claim | None:
        with self._lock:
            claim, self.claimed = self.claimed, None
            return claim

    def take_born(self) -> tuple[ChildHandle, int] | None:
        with self._lock:
            born, self.born = self.born, None
            return born

    def notifier(self, worker: pykka.ActorRef[Any]) -> Callable[[ChildHandle, Note], None]:
        """What the reader calls for a process of this worker."""

        def notify(process: ChildHandle, note: Note) -> None:
            # On the reader thread: nothing of the worker's is touched but the gate.
            if note == "exited" and self._report(process, worker):
                return
            if note == "born":
                self._born(process, worker)
                return  # a successor nobody announced: its owner let go of it
            if note == "exited" and process.pid == self.quiet:
                return  # its supervisor stops it and reads its exit itself
            with contextlib.suppress(pykka.ActorDeadError):
                worker.tell(ProcessNote(process.pid, note))

        return notify

    # -- the reader's side -----------------------------------------------------------

    def _report(self, process: ChildHandle, worker: pykka.ActorRef[Any]) -> bool:
        """Claim `process`'s exit if the gate is open on it, and report it."""
        with self._lock:
            # Closed and claimed in one hold: a worker's `close` between the two would
            # find neither, take the exit back too (a guard's kill, a stop) and kill the
            # successor whose birth still answers the core's start.
            opened = self._open
            if opened is None or opened[0] is not process:
                return False
            self._open = None
            exit = process.exit
            assert exit is not None
            incarnation = opened[1]
            reason = self._history.classify(exit, stop_requested=False)
            successor = process.successor
            token = 0
            # The host's state as it is at the exit (env, cwd, sys.path: a change since
            # the start means a new template, which the successor was not started from).
            if successor is not None and self._adopts_as_is():
                token = -(incarnation + 1)  # the nanny's own tokens are positive
            self.claimed = Claim(process, reason, token)
            if successor is not None and token:
                self._birth = (successor, token, incarnation + 1)
        # The nanny first (the decision waits for nothing of the worker's); the worker
        # catches up on the claim before any message it handles from now on.
        respawned_by = self._template.respawner() if successor is not None else None
        self.tell(
            ChildExited(
                self._spec.id, incarnation, process.pid, reason, exit.uptime, respawned_by, token
            )
        )
        with contextlib.suppress(pykka.ActorDeadError):
            worker.tell(ProcessNote(process.pid, "exited"))
        if successor is not None and successor.pid and token:
            self._born(successor, worker)  # born before its predecessor's exit was read
        return True

    def _born(self, successor: ChildHandle, worker: pykka.ActorRef[Any]) -> bool:
        """The birth of the successor a report announced: the worker adopts it (or, never
        born, starts the child the ordinary way), and the nanny has its start's answer."""
        with self._lock:
            birth = self._birth
            if birth is None or birth[0] is not successor:
                return False
            self._birth = None
            self.born = (successor, birth[1])  # adopted before any message the worker handles
        _, token, incarnation = birth
        if successor.pid:
            self.tell(StartDone(self._spec.id, token, successor.pid, incarnation))
        with contextlib.suppress(pykka.ActorDeadError):
            worker.tell(ProcessNote(successor.pid, "born"))  # a wake-up: the gate holds it
        return True

    def _adopts_as_is(self) -> bool:
        """Whether the worker's next start would only adopt the successor: nothing to
        wait for (ready="started", no pid file, no settle) and the same template."""
        spec = self._spec
        return (
            ANSWER_BIRTHS
            and spec.ready == "started"
            and spec.pid_file is None
            and self._template.holds()
        )
