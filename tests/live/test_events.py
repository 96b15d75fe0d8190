"""Events as data (JSON Lines), listeners that never block the tree, plugins."""

from __future__ import annotations

import threading

from actors import EventLog, NannyActor, NannyPlugin, load_events
from supervision import (
    ChildSpec,
    Event,
    EventKind,
    ExitKind,
    ExitReason,
    SupervisorSpec,
    event_from_dict,
    event_to_dict,
)


def test_event_dict_round_trip_keeps_every_field():
    event = Event(
        time=1.5,
        supervisor="root/sub",
        context=EventKind.CHILD_EXITED,
        offender="w",
        reason=ExitReason(ExitKind.NORMAL, code=0),
        pid=42,
        incarnation=3,
        detail="x",
    )
    assert event_from_dict(event_to_dict(event)) == event
    bare = Event(time=0.0, supervisor="root", context=EventKind.SUPERVISOR_STARTED)
    assert event_from_dict(event_to_dict(bare)) == bare


def test_a_live_trees_events_export_to_jsonl_and_load_back(nanny_tree, tmp_path):
    tree = nanny_tree(
        SupervisorSpec(id="root", children=[ChildSpec(id="a", command=["sleep", "60"])])
    )
    tree.kill("a")
    tree.wait_for(EventKind.CHILD_STARTED, "a", incarnation=2)
    path = tmp_path / "events.jsonl"
    n = tree.log.dump_jsonl(path)
    loaded = load_events(path)
    assert len(loaded) == n and loaded == tree.log.snapshot()[:n]


def test_a_slow_or_failing_listener_never_holds_up_the_tree(nanny_tree):
    release, got_two = threading.Event(), threading.Event()
    seen: list[Event] = []

    def slow(event: Event) -> None:
        release.wait(30)
        seen.append(event)
        if len(seen) >= 2:
            got_two.set()

    def failing(event: Event) -> None:
        raise RuntimeError("listener bug")

    log = EventLog()
    log.subscribe(slow)
    log.subscribe(failing)
    tree = nanny_tree(
        SupervisorSpec(id="root", children=[ChildSpec(id="a", command=["sleep", "60"])]),
        log=log,
    )
    # The tree started and restarts while the slow listener is stuck on its first event.
    tree.kill("a")
    tree.wait_for(EventKind.CHILD_STARTED, "a", incarnation=2, timeout=10)
    assert seen == []
    release.set()
    assert got_two.wait(10)
    assert [e.context for e in seen[:2]] == [
        EventKind.SUPERVISOR_STARTED,
        EventKind.CHILD_STARTED,
    ]


def test_plugins_set_up_after_start_and_tear_down_after_stop():
    calls: list[tuple[str, object]] = []

    class Recorder(NannyPlugin):
        def setup(self, ref, log):
            calls.append(("setup", [e.context for e in log.snapshot()][-1]))

        def teardown(self, log, reason):
            calls.append(("teardown", reason.kind))

    ref = NannyActor.start(
        SupervisorSpec(id="root", children=[ChildSpec(id="a", command=["sleep", "60"])]),
        plugins=[Recorder()],
    )
    assert calls == [("setup", EventKind.CHILD_STARTED)]
    ref.stop()
    assert calls[-1] == ("teardown", ExitKind.SHUTDOWN)


def test_wait_for_from_an_index_not_reached_yet_waits_for_it():
    log = EventLog()
    for i in range(3):
        log.append(Event(time=float(i), supervisor="root", context=EventKind.CHILD_STARTED))

    def later() -> None:
        for i in range(3, 6):
            log.append(Event(time=float(i), supervisor="root", context=EventKind.CHILD_STARTED))

    threading.Timer(0.05, later).start()
    assert log.wait_for(lambda e: True, 5, start=5).time == 5.0
