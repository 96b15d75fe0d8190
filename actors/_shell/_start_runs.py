"""A run of starts: spawns sent ahead of the core's questions (docs/scale.md).

The core asks for one start at a time, each once the last has answered
(OTP's order: a child starts only after the one before it has). When its plan
starts several children in a row (a tree's init, one_for_all's and
rest_for_one's restarts), the nanny sends their spawns to the launcher at once,
as one chain: the launcher starts them in that order, one after the other, and
none after one that failed. The core still asks for each start in turn and gets
each answer in its order; what it does not ask for after all (its plan changed)
is undone: the rest of the chain is cancelled, and what was started is killed
unreported.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pykka

from .._process._port import SPAWN_TIMEOUT, LaunchError, PendingSpawn, Spawner
from ._messages import ArmExit, ChildNote, PrepareStart, Start, StartDone, StartFailed, Unstart
from ._messages import StartTicket as StartTicket

log = logging.getLogger("nannytree")

# Spawns sent ahead at most; refilled once half of them were asked for.
RUN_OF_STARTS = 32
# How long a worker may take to say whether its start can be sent ahead.
PREPARE_TIMEOUT = 5.0


@dataclass
class Ahead:
    """A start sent ahead: its token, its worker, and what came back for it."""

    token: int
    worker: pykka.ActorRef[Any]
    answer: StartDone | StartFailed | None = None
    notes: list[ChildNote] = field(default_factory=list)  # held until its start counts


@dataclass(frozen=True)
class Member:
    child_id: str
    worker: pykka.ActorRef[Any]
    token: int
    arm: ArmExit | None


class StartRuns:
    """The nanny's starts sent ahead, in the core's order."""

    def __init__(self, call_later: Callable[[float, Callable[[], None]], None]) -> None:
        self._call_later = call_later
        self.ahead: dict[str, Ahead] = {}
        self._chain = 0
        self._launcher: Spawner | None = None
        # Births answered before the nanny read the exit that announced them.
        self._early: dict[tuple[str, int], StartDone | StartFailed] = {}

    @property
    def active(self) -> bool:
        """A chain is open: more starts may be sent behind what is ahead."""
        return self._chain != 0

    def take(self, child_id: str) -> Ahead | None:
        """The core asks for `child_id`: its start, if it was sent ahead. Anything else
        ahead first means the plan changed: all of it is undone."""
        if not self.ahead:
            return None
        first = next(iter(self.ahead))
        if first == child_id:
            return self.ahead.pop(first)
        self.undo()
        return None

    def keep(self, message: StartDone | StartFailed) -> bool:
        """An answer for a start ahead, kept until the core asks for it."""
        entry = self.ahead.get(message.child_id)
        if entry is None and message.token < 0:  # a birth's, before its exit's report
            self._early[message.child_id, message.token] = message
            return False
        if entry is None or entry.token != message.token:
            return False
        entry.answer = message
        return True

    def born(self, child_id: str, token: int, worker: pykka.ActorRef[Any]) -> None:
        """A restart the launcher made ahead of the decision, announced with the exit's
        report (docs/acting-ahead.md, "The exit path"): a start ahead like the others,
        answered once the successor's pid is known, that the core's next start of that
        child takes. Its answer may have come first (the exit waited behind a start)."""
        answer = self._early.pop((child_id, token), None)
        for key in [k for k in self._early if k[0] == child_id and k[1] > token]:
            del self._early[key]  # a birth of an older incarnation: nobody asks any more
        self.ahead[child_id] = Ahead(token, worker, answer)

    def hold_note(self, note: ChildNote) -> bool:
        """What a child ahead said is an event only once its start counts."""
        entry = self.ahead.get(note.child_id)
        if entry is None:
            return False
        entry.notes.append(note)
        return True

    def send(self, members: Sequence[Member], *, new_chain: bool) -> int:
        """Send the starts of `members` whose workers can take one (a leading run of
        them, asked at once); returns how many were sent. A new chain begins with
        `members[0]`, the start the core asks for now; else they follow the chain."""
        tickets = _prepare(members)
        if not tickets or (new_chain and len(tickets) < 2):
            if not new_chain:
                self._chain = 0  # the plan's next start is not a spawn: the chain ends
            return 0
        launcher = tickets[0].launcher
        if new_chain:
            self._chain, self._launcher = launcher.new_chain(), launcher
        elif launcher is not self._launcher:
            self._chain = 0  # the launcher was replaced: this chain ends here
            return 0
        spawns = [
            (ticket.template, ticket.name, ticket.notify, _starter(m.worker, m.token, m.arm))
            for m, ticket in zip(members, tickets, strict=False)
        ]
        try:
            slots = launcher.submit_run(spawns, chain=self._chain)
        except LaunchError:
            self._chain = 0  # each worker's own start says why
            return 0
        for m in members[1 if new_chain else 0 : len(tickets)]:
            self.ahead[m.child_id] = Ahead(m.token, m.worker)
        if len(tickets) < len(members):
            self._chain = 0  # the plan's next start is not a spawn: the chain ends before it
        self._call_later(SPAWN_TIMEOUT, lambda: launcher.expire(slots, SPAWN_TIMEOUT))
        return len(tickets)

    def undo(self) -> None:
        """Cancel the rest of the chain; the workers ahead kill what they started."""
        if self._chain and self._launcher is not None:
            self._launcher.cancel_chain(self._chain)
        self._chain, self._launcher = 0, None
        for entry in self.ahead.values():
            with contextlib.suppress(pykka.ActorDeadError):
                entry.worker.tell(Unstart(entry.token))
        self.ahead.clear()

    def end(self) -> None:
        """The core waits for no start: nothing may stay ahead of it."""
        if self.ahead:
            self.undo()
        self._chain, self._launcher = 0, None


def _prepare(members: Sequence[Member]) -> list[StartTicket]:
    """The tickets of the leading members whose next start is only a spawn."""
    futures = [m.worker.ask(PrepareStart(), block=False) for m in members]
    tickets: list[StartTicket] = []
    for future in futures:
        try:
            ticket = future.get(timeout=PREPARE_TIMEOUT)
        except Exception:
            break
        if ticket is None or (tickets and ticket.launcher is not tickets[0].launcher):
            break
        tickets.append(ticket)
    return tickets


def _starter(
    worker: pykka.ActorRef[Any], token: int, arm: ArmExit | None
) -> Callable[[PendingSpawn], None]:
    def on_done(slot: PendingSpawn) -> None:
        # On the launcher's reader thread: hand the answer on, nothing more.
        try:
            worker.tell(Start(token, arm, slot))
        except pykka.ActorDeadError:
            if slot.child is not None:  # its worker is gone: nobody would stop it
                slot.child.send_signal(signal.SIGKILL)

    return on_done
