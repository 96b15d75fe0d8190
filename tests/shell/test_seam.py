"""The live shell without a process: WorkerActors and NannyActors driven through the
executor seam by a fake launcher (starts, exits, stale exits, stops, failed starts)."""

from __future__ import annotations

import signal
import threading

import pykka
import pytest

from actors import NannyActor, Tree
from actors._launcher._protocol import Failure
from actors.testing import FakeSpawner
from supervision import (
    ChildSpec,
    EventKind,
    ExitKind,
    StartError,
    Strategy,
    SupervisorSpec,
    SupervisorStartError,
)


def _tree(fake: FakeSpawner, *children: ChildSpec | SupervisorSpec, **flags: object) -> Tree:
    spec = SupervisorSpec(id="root", children=list(children), **flags)  # type: ignore[arg-type]
    return Tree.start(spec, spawner=lambda: fake)


def _contexts(tree: Tree, child: str) -> list[EventKind]:
    return [e.context for e in tree.events() if e.offender == child]


def _wait(tree: Tree, kind: EventKind, child: str, incarnation: int | None = None) -> None:
    tree.log.wait_for(
        lambda e: (
            e.context is kind
            and e.offender == child
            and (incarnation is None or e.incarnation == incarnation)
        ),
        10,
    )


def test_an_exit_is_classified_once_and_restarts_the_child() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]), intensity=5)
    first = fake.latest("w")
    first.finish(3, uptime=2.5)
    _wait(tree, EventKind.CHILD_STARTED, "w", 2)
    exited = [e for e in tree.events() if e.context is EventKind.CHILD_EXITED]
    assert len(exited) == 1 and exited[0].pid == first.pid
    assert exited[0].reason is not None and exited[0].reason.code == 3
    assert fake.latest("w", 2).pid == tree.nanny.which_child("w").get().pid
    tree.stop()


def test_an_exception_reported_by_the_launcher_becomes_the_reason() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", target=print), intensity=5)
    fake.latest("w").finish(1, Failure("ValueError", "bad", "Traceback ..."))
    _wait(tree, EventKind.CHILD_STARTED, "w", 2)
    reason = tree.nanny.which_child("w").get().last_exit
    assert reason.kind is ExitKind.EXCEPTION and reason.exc_type == "ValueError"
    tree.stop()


def test_a_stale_exit_note_restarts_nothing() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]), intensity=5)
    first = fake.latest("w")
    first.finish(1)
    _wait(tree, EventKind.CHILD_STARTED, "w", 2)
    first.renotify()  # the old process's exit, told again after the restart
    second = fake.latest("w", 2)
    assert tree.nanny.which_child("w").get().pid == second.pid  # answered after the note
    assert _contexts(tree, "w").count(EventKind.CHILD_EXITED) == 1
    assert len([c for c in fake.children if c.name == "w"]) == 2
    tree.stop()


def test_a_stop_is_the_stops_answer_not_a_crash() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]))
    child = fake.latest("w")
    tree.nanny.terminate_child("w").get()
    assert child.signals == [signal.SIGTERM]
    assert _contexts(tree, "w")[-1] is EventKind.CHILD_TERMINATED
    child.renotify()
    tree.nanny.restart_child("w").get()
    assert EventKind.CHILD_EXITED not in _contexts(tree, "w")
    tree.stop()


def test_a_child_that_ignores_sigterm_is_killed_after_its_shutdown() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"], shutdown=0.2))
    child = fake.latest("w")
    child.ignores_sigterm = True
    tree.nanny.terminate_child("w").get()
    # SIGCONT after the stop signal: a stopped process could not act on it (as systemd)
    assert child.signals == [signal.SIGTERM, signal.SIGCONT, signal.SIGKILL]
    reason = tree.nanny.which_child("w").get().last_exit
    assert reason.kind is ExitKind.SHUTDOWN and "ignored SIGTERM" in reason.message
    tree.stop()


def test_a_failed_start_at_init_fails_the_tree_and_stops_the_started() -> None:
    fake = FakeSpawner()
    fake.failures.append("no such program")
    with pytest.raises(SupervisorStartError) as info:
        _tree(fake, ChildSpec(id="a", command=["x"]), ChildSpec(id="b", command=["y"]))
    assert "no such program" in str(info.value)
    assert fake.children == []  # a failed first; b never started


def test_a_failed_restart_enters_the_retry_loop() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]), intensity=10)
    fake.failures.append("transient trouble")
    fake.latest("w").finish(1)
    _wait(tree, EventKind.RESTART_SCHEDULED, "w")
    _wait(tree, EventKind.CHILD_STARTED, "w", 2)
    tree.stop()


def test_a_failed_api_start_raises_start_error() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]))
    tree.nanny.terminate_child("w").get()
    fake.failures.append("gone fishing")
    with pytest.raises(StartError, match="gone fishing"):
        tree.nanny.restart_child("w").get()
    tree.stop()


def test_read_only_calls_answer_while_a_start_waits() -> None:
    fake = FakeSpawner()
    started = threading.Thread(
        target=lambda: results.append(
            _tree(fake, ChildSpec(id="slow", target=print, ready="notify", start_timeout=30.0))
        )
    )
    results: list[Tree] = []
    started.start()
    child = fake.latest("slow")
    # The tree is still starting; its root answers from the core's state.
    nanny = None
    while nanny is None:
        roots = pykka.ActorRegistry.get_by_class(NannyActor)
        nanny = roots[0].proxy() if roots else None
    info = nanny.which_children().get(timeout=2)
    assert [(i.id, i.state) for i in info] == [("slow", "starting")]
    child.become_ready()
    started.join(10)
    tree = results[0]
    assert tree.nanny.which_child("slow").get().state == "running"
    tree.stop()


def test_nested_supervisors_start_and_escalate_through_the_seam() -> None:
    fake = FakeSpawner()
    tree = _tree(
        fake,
        SupervisorSpec(id="sub", intensity=0, children=[ChildSpec(id="w", command=["x"])]),
        strategy=Strategy.ONE_FOR_ONE,
        intensity=3,
    )
    fake.latest("w").finish(1)
    _wait(tree, EventKind.CHILD_STARTED, "sub", 2)
    kinds = [(e.supervisor, e.context) for e in tree.events()]
    assert ("root/sub", EventKind.MAX_INTENSITY_REACHED) in kinds
    assert fake.latest("w", 2).exit is None
    tree.stop()


def test_the_tree_handle_after_a_give_up() -> None:
    fake = FakeSpawner()
    tree = _tree(fake, ChildSpec(id="w", command=["x"]), intensity=0)
    fake.latest("w").finish(1)
    reason = tree.wait(10)
    assert reason is not None and reason.message == "reached_max_restart_intensity"
    assert tree.finished() == reason and not tree.alive
    assert tree.events()[-1].context is EventKind.SUPERVISOR_STOPPED  # no ActorDeadError
    assert tree.log.snapshot() == tree.events()
