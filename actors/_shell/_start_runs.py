"""A supervisor starting its children: `Starts` carries out the core's starts (the
one it waits for, with its token; a worker's, a nested tree's, a remote
subtree's), and sends the starts of a run ahead of the core's questions
(`StartRuns`, docs/scale.md).

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pykka

from supervision import Action, AnySpec, ChildSpec, StartError, Supervisor, SupervisorSpec

from .._process._port import SPAWN_TIMEOUT, LaunchError, PendingSpawn, Spawner
from ._ahead import AheadLedger
from ._children import ChildActors, crash_reason
from ._context import TreeContext
from ._messages import (
    ArmExit,
    ChildNote,
    InitTree,
    PrepareStart,
    Start,
    StartDone,
    StartFailed,
    Unstart,
)
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
        if entry is not None and entry.token == message.token:
            entry.answer = message
            return True
        if message.token < 0:  # a birth's, before its exit's report (the child's start
            # of a run may still be ahead: the run's answer, not this one, is its)
            self._early[message.child_id, message.token] = message
        return False

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


@dataclass(frozen=True)
class ParentLink:
    """How a nested nanny reaches its parent: the parent's ref, its own path, incarnation."""

    ref: pykka.ActorRef[Any]
    name: str
    incarnation: int


@dataclass
class Pending:
    """The start the core waits for."""

    token: int
    child_id: str
    nested: pykka.ActorRef[Any] | None = None

    def answered_by(self, message: StartDone | StartFailed) -> bool:
        return (message.token, message.child_id) == (self.token, self.child_id)


# How a nanny starts a nested one (NannyActor.start_nested): its spec, its tree, its link.
StartNested = Callable[[SupervisorSpec, TreeContext, ParentLink], pykka.ActorRef[Any]]


class Starts:
    """One supervisor's starts of its children, as its core asks for them: one at a
    time, each answered by a message (StartDone, StartFailed) or at once."""

    def __init__(
        self,
        core: Supervisor,
        context: TreeContext,
        children: ChildActors,
        ahead: AheadLedger,
        owner: pykka.ActorRef[Any],
        start_nested: StartNested,
    ) -> None:
        self._core = core
        self._context = context
        self._children = children
        self._ahead = ahead
        self._start_nested = start_nested
        self._owner = owner  # the nanny: its children's parent, their answers' address
        self.pending: Pending | None = None  # the start the core waits for
        self._tokens = 0
        # Starts of a run sent ahead of the core's questions, in its order.
        self._runs = StartRuns(context.scheduler.call_later)

    def next_token(self) -> int:
        self._tokens += 1
        return self._tokens

    def start(self, child_id: str, spec: AnySpec, settle: float = 0.0) -> list[Action]:
        """Tell the child to start; the core gets its answer as a message (StartDone),
        or now (the actions that follow) when it was started ahead in a run."""
        owner = self._owner
        ahead = self._runs.take(child_id)
        if ahead is not None:
            self.pending = Pending(ahead.token, child_id)
            self._send_ahead()
            if ahead.answer is None:
                return []
            self.pending = None
            for note in ahead.notes:  # what it said before its start counted
                owner.tell(note)
            return self._answered(ahead.answer, time.monotonic())
        token = self.next_token()
        self.pending = Pending(token, child_id)
        if isinstance(spec, ChildSpec):
            worker = self._children.worker_for(child_id, spec, owner)
            arm = self._ahead.exit_plan(child_id)
            if settle > 0:  # an operator's start, alone: no run of starts waits on it
                worker.tell(Start(token, arm, settle=settle))
            elif not self._send_ahead(Member(child_id, worker, token, arm)):
                worker.tell(Start(token, arm))
            return []
        incarnation = self._children.next_incarnation(child_id)
        link = ParentLink(owner, f"{self._core.name}/{child_id}", incarnation)
        if spec.placement is not None and self._context.engine is not None:
            return self._start_remote(child_id, spec, link, incarnation)
        try:
            nested = self._start_nested(spec, self._context, link)
        except Exception as e:
            self.pending = None
            return self._core.start_failed(child_id, crash_reason(e), time.monotonic())
        self.pending.nested = nested
        nested.tell(InitTree(token, settle))
        return []

    def _send_ahead(self, head: Member | None = None) -> bool:
        """Send the starts the core's plan asks for next (after `head`, the start it
        asks for now, which begins a new run) ahead of its questions. False if
        `head` is not sent (it starts on its own)."""
        runs = self._runs
        if head is None and (not runs.active or len(runs.ahead) > RUN_OF_STARTS // 2):
            return False
        known = len(runs.ahead)
        upcoming = self._core.next_starts(RUN_OF_STARTS)
        if head is None and upcoming[:known] != tuple(runs.ahead):
            return False  # not the plan the run was sent for: the next take() undoes it
        owner = self._owner
        members = [head] if head is not None else []
        for child_id in upcoming[known:]:
            spec = self._core.get_childspec(child_id)
            if not isinstance(spec, ChildSpec):
                break
            arm = self._ahead.exit_plan(child_id, ahead=True)
            worker = self._children.worker_for(child_id, spec, owner)
            members.append(Member(child_id, worker, self.next_token(), arm))
        if len(members) < (2 if head is not None else 1):
            return False
        return runs.send(members, new_chain=head is not None) > 0

    def _start_remote(
        self, child_id: str, spec: SupervisorSpec, link: ParentLink, incarnation: int
    ) -> list[Action]:
        """Multi-host: a RemoteChild plays the nested nanny for a subtree on another node."""
        from ._remote_child import start_remote

        try:
            remote, self._children.remote[child_id] = start_remote(spec, self._context, link)
        except StartError as e:
            reason = e.reason
        except Exception as e:
            reason = crash_reason(e)
        else:
            self.pending = None
            self._children.nested[child_id] = remote
            return self._core.started(child_id, None, incarnation, time.monotonic())
        self.pending = None
        return self._core.start_failed(child_id, reason, time.monotonic())

    def answer(self, message: StartDone | StartFailed, now: float) -> list[Action] | None:
        """A child's answer to its start: the core's actions that follow, or None when
        the core does not wait for it (a start sent ahead keeps it until asked)."""
        pending = self.pending
        if pending is None or not pending.answered_by(message):
            self._runs.keep(message)  # a start sent ahead, or an answer nobody waits for
            return None
        self.pending = None
        if isinstance(message, StartDone) and pending.nested is not None:
            self._children.nested[message.child_id] = pending.nested
        return self._answered(message, now)

    def _answered(self, message: StartDone | StartFailed, now: float) -> list[Action]:
        if isinstance(message, StartDone):
            ended = message.ended  # a one-shot step's exit: recorded before the next start
            return self._core.started(
                message.child_id,
                message.pid,
                message.incarnation,
                now,
                ended=None if ended is None else ended.reason,
                uptime=None if ended is None else ended.uptime,
            )
        return self._core.start_failed(message.child_id, message.reason, now)

    def hold_note(self, note: ChildNote) -> bool:
        """What a child started ahead said is an event only once its start counts."""
        return self._runs.hold_note(note)

    def born(self, child_id: str, token: int, worker: pykka.ActorRef[Any]) -> None:
        """A restart the launcher made ahead, announced with its exit: a start ahead."""
        self._runs.born(child_id, token, worker)

    def end_runs_if_idle(self) -> None:
        """The core waits for no start: nothing may stay ahead of it."""
        if self.pending is None:
            self._runs.end()

    def end_runs(self) -> None:
        """The nanny ends: what was sent ahead is undone."""
        self._runs.end()

    def abandon(self) -> None:
        """The nanny ends: a nested tree it waits for stops."""
        pending, self.pending = self.pending, None
        if pending is not None and pending.nested is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                pending.nested.stop()
