"""What must not depend on how a child is launched: fork from the launcher, a fresh
interpreter, a command, or a warm standby. Each behaviour runs in every mode."""

from __future__ import annotations

import os
import signal

import pytest

from actors import Tree, testing
from actors.testing import wait_gone
from supervision import ChildSpec, EventKind, ExitKind, SupervisorSpec
from tests.targets import children

MODES = ["fork", "fresh", "command", "warm"]

_COMMANDS = {
    "run": ["sleep", "600"],
    "exit3": ["sh", "-c", "exit 3"],
    "ignore_term": ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"],
}
_TARGETS = {
    "run": (children.sleep_forever, ()),
    "exit3": (children.exit_with, (3,)),
    "ignore_term": (testing.ignore_sigterm, ()),  # ready once SIGTERM is ignored
}


def _child(mode: str, behaviour: str, **fields: object) -> ChildSpec:
    if mode == "command":
        return ChildSpec(id="w", command=_COMMANDS[behaviour], **fields)  # type: ignore[arg-type]
    target, args = _TARGETS[behaviour]
    return ChildSpec(
        id="w",
        target=target,
        args=args,
        fresh_interpreter=mode == "fresh",
        warm_start=mode == "warm",
        **fields,  # type: ignore[arg-type]
    )


def _start(mode: str, behaviour: str, **fields: object) -> Tree:
    spec = SupervisorSpec(
        id="root", intensity=10, period=60.0, children=[_child(mode, behaviour, **fields)]
    )
    return Tree.start(spec)


def _started(tree: Tree, incarnation: int) -> int:
    event = tree.log.wait_for(
        lambda e: e.context is EventKind.CHILD_STARTED and e.incarnation == incarnation, 20
    )
    assert event.pid is not None
    return event.pid


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_child_is_restarted_with_a_new_pid(mode: str) -> None:
    tree = _start(mode, "run")
    try:
        first = _started(tree, 1)
        os.kill(first, signal.SIGKILL)
        second = _started(tree, 2)
        assert second != first
        exited = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 5)
        assert exited.reason is not None and exited.reason.kind is ExitKind.KILLED
        assert exited.reason.signal == signal.SIGKILL and exited.pid == first
    finally:
        tree.stop()


@pytest.mark.parametrize("mode", MODES)
def test_an_exit_code_is_an_abnormal_exit(mode: str) -> None:
    tree = _start(mode, "exit3", restart="transient")
    try:
        exited = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 20)
        assert exited.reason is not None
        assert (exited.reason.kind, exited.reason.code) == (ExitKind.EXIT_CODE, 3)
    finally:
        tree.stop()


@pytest.mark.parametrize("mode", MODES)
def test_a_stop_is_a_shutdown(mode: str) -> None:
    tree = _start(mode, "run")
    pid = _started(tree, 1)
    tree.nanny.terminate_child("w").get()
    info = tree.nanny.which_child("w").get()
    assert info.state == "stopped" and info.last_exit.kind is ExitKind.SHUTDOWN
    assert wait_gone([pid], 2.0) == []
    tree.stop()


@pytest.mark.parametrize("mode", MODES)
def test_a_child_that_ignores_sigterm_is_killed_after_its_shutdown(mode: str) -> None:
    # Started once SIGTERM is ignored: the target says so; the shell traps it first thing.
    ready = 0.3 if mode == "command" else "notify"
    tree = _start(mode, "ignore_term", shutdown=0.3, ready=ready)
    pid = _started(tree, 1)
    tree.nanny.terminate_child("w").get()
    reason = tree.nanny.which_child("w").get().last_exit
    assert reason.kind is ExitKind.SHUTDOWN
    assert reason.message == "ignored SIGTERM for 0.3s; killed with SIGKILL"
    assert wait_gone([pid], 2.0) == []
    tree.stop()
