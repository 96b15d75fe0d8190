"""`status` while the tree's supervisor is busy (a remote restart under way): the tree
as its events tell. A subtree that is restarting shows no pid of the children its
exit ended, and a subtree waiting for a node shows `pending`, with its node."""

from __future__ import annotations

from actors._operate._snapshot import TreeInspector
from actors._shell._event_log import EventLog
from supervision import (
    ChildSpec,
    Event,
    EventKind,
    ExitKind,
    ExitReason,
    Placement,
    SupervisorSpec,
)

SPEC = SupervisorSpec(
    id="root",
    children=[
        SupervisorSpec(
            id="ingest",
            placement=Placement(node="b"),
            children=[ChildSpec(id="reader", command=["sleep", "60"])],
        )
    ],
)
DOWN = ExitReason(ExitKind.NODE_DOWN, message="node 'b' is dead")


def _rows(log: EventLog) -> dict[str, tuple[str, int | None]]:
    root = TreeInspector(None, SPEC, log).snapshot(stats=False)  # no ref: "busy"
    return {node.path: (node.state, node.pid) for _, node in root.walk()}


def _log(*events: tuple[float, str, EventKind, str, str]) -> EventLog:
    log = EventLog()
    for time, supervisor, kind, offender, detail in events:
        pid = 4242 if kind is EventKind.CHILD_STARTED and offender == "reader" else None
        reason = DOWN if kind is not EventKind.CHILD_STARTED else None
        log.append(Event(time, supervisor, kind, offender, reason, pid, None, detail))
    return log


def test_a_restarting_subtree_shows_no_pid_of_its_old_children() -> None:
    log = _log(
        (1.0, "root/ingest", EventKind.CHILD_STARTED, "reader", ""),
        (1.1, "root", EventKind.CHILD_STARTED, "ingest", ""),
        (5.0, "root", EventKind.CHILD_EXITED, "ingest", ""),
    )
    rows = _rows(log)
    assert rows["root/ingest"][0] == "restarting"
    assert rows["root/ingest/reader"] == ("restarting", None)


def test_a_restarted_subtree_ignores_its_childrens_events_from_before_its_exit() -> None:
    log = _log(
        (1.0, "root/ingest", EventKind.CHILD_STARTED, "reader", ""),
        (1.1, "root", EventKind.CHILD_STARTED, "ingest", ""),
        (5.0, "root", EventKind.CHILD_EXITED, "ingest", ""),
        (6.0, "root", EventKind.CHILD_STARTED, "ingest", ""),  # its reader's not yet seen
    )
    assert _rows(log)["root/ingest/reader"] == ("starting", None)


def test_a_subtree_waiting_for_a_node_shows_pending() -> None:
    log = _log(
        (1.1, "root", EventKind.CHILD_STARTED, "ingest", ""),
        (5.0, "root", EventKind.CHILD_EXITED, "ingest", ""),
        (5.1, "root", EventKind.RESTART_SCHEDULED, "ingest", "pending delay=1.000 attempt=1"),
    )
    rows = _rows(log)
    assert rows["root/ingest"][0] == "pending"
    assert rows["root/ingest/reader"] == ("pending", None)
