"""What a supervisor observes of its children, beside the core's decisions: what
their liveness probes say, their sd_notify STATUS= texts, their notes, the
events it records (to the tree's EventLog, and to the log once its actions are
carried out), and how a remote subtree shows (its node, its pid, unreachable).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any, cast

import pykka

from supervision import ChildInfo, Event, EventKind, Health, NannyError, Supervisor
from supervision._events import liveness_events

from ._api import TreeNode
from ._children import ChildActors
from ._event_log import EventLog
from ._messages import ChildExited, ChildHealth, ChildNote, ChildStatus

# The events as log lines: a logger of their own, which a test report (whose own
# section shows the events) can leave out.
events_log = logging.getLogger("nannytree.events")
# Seconds a supervisor's which_tree waits for its remote subtrees' listings, all asked
# at once: less than a status's patience with a busy supervisor (TreeInspector.QUICK),
# so a silent node shows as such (its subtree with its node, no children), never as
# the events' guess. A healthy one answers in a few ms.
REMOTE_TREE_WAIT = 0.15


def window_reader(core: Supervisor) -> Callable[[], tuple[float, ...]]:
    """Reads `core`'s charged restarts from another thread: the copy is one C-level
    pass over a deque of floats, which holds the GIL throughout."""

    def read() -> tuple[float, ...]:
        try:
            return core.restart_times
        except RuntimeError:  # mutated meanwhile (a runtime without a GIL): none known
            return ()

    return read


def remote_view(info: ChildInfo, remote: Any) -> ChildInfo:
    """A remote subtree as its RemoteChild knows it (`remote`, its RemoteStatus, or
    None): node, remote pid, unreachable."""
    if remote is None or info.type != "supervisor" or info.state not in ("running", "stopping"):
        return info
    state = "unreachable" if remote.unreachable else info.state
    view: ChildInfo = dataclasses.replace(
        info,
        state=state,
        node=remote.node,
        pid=remote.pid,
        since=remote.unreachable_since if remote.unreachable else None,
    )
    return view


class Observations:
    """One supervisor's record of what its children say, and of its events."""

    def __init__(self, core: Supervisor, children: ChildActors, log: EventLog) -> None:
        self._core = core
        self._children = children
        self.log = log
        self._to_log: list[Event] = []
        self._statuses: dict[str, str] = {}  # child id -> its last sd_notify STATUS=
        # child id -> (incarnation, what its liveness probe says): shown while current.
        self._health: dict[str, tuple[int, Health]] = {}

    def record(self, event: Event) -> None:
        self.log.append(event)
        self._to_log.append(event)

    def note_event(self, kind: EventKind, info: ChildInfo, detail: str) -> None:
        """An event the nanny makes itself (a signal sent, a reload), recorded now."""
        self.record(
            Event(
                time=time.monotonic(),
                supervisor=self._core.name,
                context=kind,
                offender=info.id,
                pid=info.pid,
                incarnation=info.incarnation,
                detail=detail,
            )
        )
        self.log_events()

    def status(self, message: ChildStatus) -> None:
        self._statuses[message.child_id] = message.status

    def exited(self, message: ChildExited) -> None:
        """What a process said of itself goes with it: its STATUS= text is gone once its
        exit is read (the reader tells the exit before its worker catches up), unless the
        exit is of an older incarnation than the core's."""
        if message.child_id not in self._statuses:
            return  # the common case, read on every exit: no ChildInfo built for it
        with contextlib.suppress(NannyError):
            if self._core.which_child(message.child_id).incarnation == message.incarnation:
                self._statuses.pop(message.child_id, None)

    def status_of(self, child_id: str) -> str:
        """A child's last sd_notify STATUS= text, "" if it sent none."""
        return self._statuses.get(child_id, "")

    def health(self, message: ChildHealth, now: float) -> None:
        """What the liveness probe said: events as the simulator reports them
        (supervision's liveness_events: every failed attempt, the kill at the threshold)."""
        self._health[message.child_id] = (message.incarnation, message.health)
        events = liveness_events(
            message.verdict,
            message.health,
            time=now,
            supervisor=self._core.name,
            child_id=message.child_id,
            pid=message.pid,
            incarnation=message.incarnation,
        )
        for event in events:
            self.record(event)
        if events:
            self.log_events()

    def note(self, message: ChildNote, now: float) -> None:
        """What a child said (sd_notify, a successor's main pid): an event."""
        if message.main_pid:
            self._core.main_pid_changed(message.child_id, message.incarnation, message.main_pid)
        self.record(
            Event(
                time=now,
                supervisor=self._core.name,
                context=EventKind.CHILD_NOTE,
                offender=message.child_id,
                pid=message.pid,
                incarnation=message.incarnation,
                detail=message.detail,
            )
        )
        self.log_events()

    def with_health(self, info: ChildInfo) -> ChildInfo:
        """`info` with what its current process's liveness probe says, if it has one."""
        held = self._health.get(info.id)
        if held is None or info.state != "running":
            return info
        incarnation, health = held
        if incarnation != info.incarnation:
            health = Health("unknown", threshold=health.threshold)
        return dataclasses.replace(info, health=health)

    def view(self, info: ChildInfo) -> ChildInfo:
        """A child's info as the API shows it: a remote one's node and reachability."""
        return remote_view(info, self._children.remote.get(info.id))

    def which_children(self) -> list[ChildInfo]:
        infos = self._core.which_children()
        if self._children.remote:
            infos = [self.view(i) for i in infos]
        return [self.with_health(i) for i in infos] if self._health else infos

    def which_tree(self) -> list[TreeNode]:
        infos = self._core.children()
        asked: dict[str, pykka.Future[Any]] = {}
        for info in infos:  # every nested supervisor at once, remote ones included
            nested = self._children.nested.get(info.id)
            if nested is not None and info.state == "running":
                with contextlib.suppress(pykka.ActorDeadError):
                    asked[info.id] = nested.proxy().which_tree()
        deadline = time.monotonic() + REMOTE_TREE_WAIT
        nodes = []
        for info in infos:
            path = f"{self._core.name}/{info.id}"
            below: list[TreeNode] = []
            future = asked.get(info.id)
            if future is not None:
                # A remote subtree's far side may be frozen: it is shown without its
                # children rather than holding this nanny (and every caller) up.
                remote = info.id in self._children.remote
                timeout = max(0.0, deadline - time.monotonic()) if remote else None
                with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout, NannyError):
                    below = cast(list[TreeNode], future.get(timeout=timeout))
            view = self.with_health(self.view(info))
            nodes.append(TreeNode(view, path, tuple(below), self._statuses.get(info.id, "")))
        return nodes

    def log_events(self) -> None:
        # Logged once the actions are carried out: formatting stays off the restart path.
        events, self._to_log = self._to_log, []
        for event in events:
            # A supervisor giving up or a child failing to start is worth a warning; a
            # crash is routine (it is restarted), so INFO: a crash storm must not be
            # a stderr storm. Every event is in the EventLog regardless.
            if event.context in (
                EventKind.START_FAILED,
                EventKind.MAX_INTENSITY_REACHED,
                EventKind.CHILD_NOTE,
                EventKind.CHILD_FAILED,
            ):
                events_log.warning("%s", event)
            elif event.context is EventKind.CHILD_EXITED and events_log.isEnabledFor(logging.INFO):
                events_log.info("%s", event)
            elif events_log.isEnabledFor(logging.DEBUG):
                events_log.debug("%s", event)
