"""Two trees in one process: a failure in one never stops the other.

Where pykka would stop every actor of the process (a handler that raised a
BaseException), the broken actor's own tree ends, in order, with an exit reason
that names the failure; the other tree keeps running and restarting its
children. A late message to a stopped supervisor is dropped without a word, and
each tree a script forgets to stop is stopped at exit by its own hook.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pykka
import pytest

from actors import Tree
from actors._shell._messages import ChildStatus, ReadOutput, Signal, Start
from actors._shell._worker import WorkerActor
from actors.testing import wait_gone
from supervision import ChildNotRunning, ChildSpec, EventKind, ExitKind, SupervisorSpec
from tests.support import wait_until


class _Doom(BaseException):
    """What a handler raises where pykka would stop every actor (as SystemExit)."""


class _PoisonedSignal(Signal):
    """A Signal whose number cannot be read: the worker's handler raises _Doom."""

    def __getattribute__(self, name: str) -> Any:
        if name == "sig":
            raise _Doom("a worker broken on purpose")
        return super().__getattribute__(name)


class _PoisonedStatus(ChildStatus):
    """A ChildStatus whose child cannot be read: the nanny's handler raises _Doom."""

    def __getattribute__(self, name: str) -> Any:
        if name == "child_id":
            raise _Doom("a nanny broken on purpose")
        return super().__getattribute__(name)


def _spec(name: str) -> SupervisorSpec:
    sleep = ["sleep", "60"]
    return SupervisorSpec(
        id=name,
        children=[
            ChildSpec(f"{name}1", command=sleep),
            ChildSpec(f"{name}2", command=sleep),
            SupervisorSpec(id="sub", children=[ChildSpec(f"{name}3", command=sleep)]),
        ],
    )


def _pids(tree: Tree) -> list[int]:
    def walk(nodes: Any) -> Iterator[int]:
        for node in nodes:
            if node.info.pid is not None:
                yield node.info.pid
            yield from walk(node.children)

    return list(walk(tree.nanny.which_tree().get()))


def _worker(child_id: str) -> pykka.ActorRef[Any]:
    (ref,) = [
        r
        for r in pykka.ActorRegistry.get_by_class(WorkerActor)
        if r.proxy().spec.get().id == child_id
    ]
    return ref


@pytest.fixture
def trees() -> Iterator[tuple[Tree, Tree]]:
    a, b = Tree.start(_spec("a")), Tree.start(_spec("b"))
    try:
        yield a, b
    finally:
        for tree in (a, b):
            tree.stop(timeout=30)


def _break_worker(child_id: str) -> None:
    with pytest.raises(pykka.ActorDeadError):  # its asker is answered, not left waiting
        _worker(child_id).ask(_PoisonedSignal(0), timeout=30)


def _break_nanny(ref: pykka.ActorRef[Any]) -> None:
    ref.tell(_PoisonedStatus("any", ""))


BREAKS = {
    "a worker of the root": (lambda a: _break_worker("a2"), "the worker of a/a2"),
    "a worker of a nested nanny": (lambda a: _break_worker("a3"), "the worker of a/sub/a3"),
    "a nested nanny": (lambda a: _break_nanny(a.nanny.child_nanny("sub").get()), "nanny 'a/sub'"),
    "the root nanny": (lambda a: _break_nanny(a.ref), "nanny 'a'"),
}


@pytest.mark.parametrize("broken", list(BREAKS))
def test_a_base_exception_ends_its_own_tree_in_order_and_never_another(
    trees: tuple[Tree, Tree], broken: str
) -> None:
    a, b = trees
    a_pids, b_before = _pids(a), b.nanny.which_children().get()
    breaks, where = BREAKS[broken]

    breaks(a)

    reason = a.wait(timeout=30)
    assert reason is not None and reason.kind is ExitKind.ACTOR_CRASHED
    assert reason.exc_type == "_Doom"
    assert f"{where} failed with _Doom" in reason.message
    assert wait_gone(a_pids) == []  # every process of the broken tree is gone
    stopped = [
        e.offender
        for e in a.events()
        if e.context is EventKind.CHILD_TERMINATED and e.supervisor == "a"
    ]
    assert stopped == ["sub", "a2", "a1"]  # by its root, in reverse start order

    # The other tree: untouched, and still restarting its children.
    assert b.alive and b.nanny.which_children().get() == b_before
    b1 = b.nanny.which_child("b1").get()
    assert b1.pid is not None
    os.kill(b1.pid, signal.SIGKILL)
    wait_until(
        lambda: b.nanny.which_child("b1").get().pid not in (None, b1.pid), 30, "b1 restarted"
    )
    assert b.nanny.which_child("b1").get().state == "running"
    assert b.stop(timeout=30) is not None and b.finished() is not None
    assert b.finished().kind is ExitKind.SHUTDOWN  # type: ignore[union-attr]


class _Parent(pykka.ThreadingActor):
    """A supervisor stand-in that stops before its worker reports."""


def _has_process(worker: pykka.ActorRef[Any]) -> bool:
    try:
        worker.ask(Signal(0), timeout=30)
    except ChildNotRunning:
        return False
    return True


def test_a_late_report_to_a_stopped_supervisor_is_dropped_without_a_traceback(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Tree.start(SupervisorSpec("host", children=[]))
    parent = _Parent.start()
    sleep = ["sleep", "60"]
    worker = WorkerActor.start(ChildSpec("w", command=sleep), host.context, parent, "h")
    try:
        parent.stop()
        caplog.set_level(logging.DEBUG)
        worker.tell(Start(1))  # its StartDone finds no supervisor
        assert worker.ask(ReadOutput(2, False), timeout=30) == ""  # still serving
        (proc,) = [p for p in psutil.Process().children(recursive=True) if _runs(p, sleep)]
        proc.kill()  # its ChildExited finds no supervisor either
        assert wait_gone([proc.pid]) == []
        wait_until(lambda: not _has_process(worker), 30, "the exit reported to the worker")
        assert worker.ask(ReadOutput(2, False), timeout=30) == ""  # after the exit's report
    finally:
        worker.stop()
        host.stop(timeout=30)
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []
    assert "Traceback" not in capsys.readouterr().err


FORGOTTEN = """
import sys
from actors import Tree
from supervision import ChildSpec, SupervisorSpec
from tests.targets import children

for name in ("a", "b"):
    Tree.start(SupervisorSpec(id=name, children=[
        ChildSpec(id=name, target=children.record_stop, args=(sys.argv[1], name),
                  ready="notify"),
    ]))
# ... and the script ends without stopping either
"""


def test_each_tree_a_script_forgets_is_stopped_politely_at_exit(tmp_path: Path) -> None:
    stops = tmp_path / "stops"
    host = subprocess.run(
        [sys.executable, "-c", FORGOTTEN, str(stops)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert host.returncode == 0, host.stderr
    assert stops.read_text().split() == ["b", "a"]  # each by its own exit hook, newest first


def _runs(process: psutil.Process, argv: list[str]) -> bool:
    try:
        return bool(process.cmdline() == argv)
    except psutil.Error:  # gone, or a zombie another test left to be reaped
        return False
