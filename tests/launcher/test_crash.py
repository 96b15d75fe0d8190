"""crash() raises the injected exception in the target, once, and says so only then.

Each round crashes a child the moment the tree reports it restarted, so the
exception is often sent while the child is still unpickling and importing its
target: it must wait for the target, then end the child with exactly that
exception (one exit per crash, never importlib's error, never swallowed).
A busy sibling keeps a core loaded meanwhile.
"""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Callable

import pytest

from actors import testing
from actors._launcher import _faults
from actors._launcher._faults import inject_crash
from supervision import ChildSpec, EventKind, ExitKind, Restart, SupervisorSpec
from tests.targets import children

BUSY = ChildSpec(id="busy", target=exec, args=("while True: pass", {}))
# A target that imports as it begins: a crash during these imports waits for them.
IMPORTS_FIRST = (
    "import email.mime.multipart, http.client, unittest, xml.etree.ElementTree\n"
    "import time\n"
    "while True: time.sleep(3600)\n"
)


WAIT = 30.0  # beside a busy sibling, on a machine that may be busy too

Trees = Callable[[SupervisorSpec], testing.TreeHarness]  # the nanny_tree fixture


class Injected(Exception):
    pass


def _tree(nanny_tree: Trees, victim: ChildSpec) -> testing.TreeHarness:
    harness: testing.TreeHarness = nanny_tree(
        SupervisorSpec(id="root", intensity=10_000, period=60.0, children=[BUSY, victim])
    )
    return harness


def _crash_after_each_restart(tree: testing.TreeHarness, child_id: str, rounds: int) -> None:
    since = tree.mark()
    for n in range(rounds):
        pid = tree.crash(child_id, RuntimeError(f"round {n}"), WAIT)
        exited = tree.wait_for(EventKind.CHILD_EXITED, child_id, timeout=WAIT)
        assert exited.pid == pid
        assert exited.reason is not None
        assert (exited.reason.kind, exited.reason.exc_type, exited.reason.message) == (
            ExitKind.EXCEPTION,
            "RuntimeError",
            f"round {n}",
        ), exited.reason
        tree.wait_restarted(child_id, WAIT)  # and crash the new one at once, as it starts
    exits = [
        e.reason.message if e.reason is not None else None
        for e in tree.log.snapshot()[since:]
        if e.context is EventKind.CHILD_EXITED and e.offender == child_id
    ]
    assert exits == [f"round {n}" for n in range(rounds)]  # one exit per crash


def test_a_crash_right_after_each_restart_raises_in_the_target(nanny_tree: Trees) -> None:
    tree = _tree(nanny_tree, ChildSpec(id="w", target=children.sleep_forever))
    _crash_after_each_restart(tree, "w", 60)


def test_a_crash_while_the_target_imports_waits_for_the_imports(nanny_tree: Trees) -> None:
    tree = _tree(nanny_tree, ChildSpec(id="w", target=exec, args=(IMPORTS_FIRST, {})))
    _crash_after_each_restart(tree, "w", 25)


def test_a_crash_while_the_child_unpickles_a_heavy_target(nanny_tree: Trees) -> None:
    # actors.testing is slow to import: the child spends its first moments in importlib.
    tree = _tree(nanny_tree, ChildSpec(id="w", target=testing.run_forever))
    _crash_after_each_restart(tree, "w", 12)


def test_a_warm_standby_takes_the_crash_once_it_runs(nanny_tree: Trees) -> None:
    tree = _tree(nanny_tree, ChildSpec(id="w", target=children.sleep_forever, warm_start=True))
    _crash_after_each_restart(tree, "w", 25)


def test_a_fresh_interpreter_takes_the_crash_once_it_runs(nanny_tree: Trees) -> None:
    # Its handler is set only after the interpreter has started: before, the signal
    # would kill it, so crash() waits until the child catches it.
    tree = _tree(
        nanny_tree, ChildSpec(id="w", target=children.sleep_forever, fresh_interpreter=True)
    )
    _crash_after_each_restart(tree, "w", 6)


def test_an_exception_of_the_test_module_reaches_the_target(nanny_tree: Trees) -> None:
    tree = _tree(
        nanny_tree, ChildSpec(id="w", target=children.sleep_forever, restart=Restart.TEMPORARY)
    )
    # The child imports this module to unpickle Injected, beside a busy sibling: on a
    # loaded machine that takes a while, and the crash waits for it.
    pid = tree.crash("w", Injected("by class"), timeout=40)
    reason = tree.wait_for(EventKind.CHILD_EXITED, "w", pid=pid).reason
    assert reason is not None
    assert (reason.exc_type, reason.message) == (f"{__name__}.Injected", "by class")


def test_an_exception_the_child_cannot_unpickle_is_refused_and_the_child_runs_on(
    nanny_tree: Trees, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Importable here only: the child cannot load its class.
    module = types.ModuleType("nannytree_host_only")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    host_only = type("HostOnly", (Exception,), {"__module__": module.__name__})
    module.HostOnly = host_only  # type: ignore[attr-defined]
    tree = _tree(nanny_tree, ChildSpec(id="w", target=children.sleep_forever, stderr="capture"))
    pid = tree.pid("w")
    with pytest.raises(ProcessLookupError, match=rf"pid {pid} cannot unpickle"):
        tree.crash("w", host_only("nowhere"))
    tree.expect_no_event(EventKind.CHILD_EXITED, "w", within=0.3)
    tree.crash("w", RuntimeError("still there"))
    reason = tree.wait_for(EventKind.CHILD_EXITED, "w", pid=pid).reason
    assert reason is not None and reason.message == "still there"
    assert "nannytree_host_only" in reason.stderr_tail


def test_a_crash_after_the_target_returned_is_refused_naming_the_pid(nanny_tree: Trees) -> None:
    # The target returns; the child lives on in an exit handler, and says ready there.
    after_return = (
        "import atexit, time\n"
        "from actors._launcher import _in_child\n"
        "atexit.register(lambda: (_in_child.ready(), time.sleep(3600)))\n"
    )
    tree = _tree(
        nanny_tree,
        ChildSpec(
            id="w", target=exec, args=(after_return, {}), ready="notify", restart=Restart.TEMPORARY
        ),
    )
    pid = tree.pid("w")
    with pytest.raises(ProcessLookupError, match=rf"pid {pid}\b.*returned"):
        tree.crash("w", RuntimeError("too late"))
    tree.expect_no_event(EventKind.CHILD_EXITED, "w", within=0.3)


def test_a_crash_of_a_gone_process_is_refused_naming_the_pid() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(ProcessLookupError, match=rf"pid {proc.pid}\b"):
        inject_crash(proc.pid, RuntimeError("nobody"))


def test_a_process_that_does_not_catch_the_crash_signal_is_not_signalled() -> None:
    # The signal's default action would kill it: crash() must time out, not kill.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(TimeoutError, match=rf"pid {proc.pid}\b"):
            inject_crash(proc.pid, RuntimeError("nobody"), timeout=0.3)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_crash_signal_sent_again_while_the_child_takes_it_raises_once(
    nanny_tree: Trees, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host sends the crash signal until the child answers; one that comes while the
    child is reading the injected exception must not swallow it (it raised inside the
    read, which then called the exception unloadable, and the child went on)."""
    monkeypatch.setattr(_faults, "_RESEND", 0.0)  # as often as the host can
    tree = _tree(nanny_tree, ChildSpec(id="w", target=children.sleep_forever))
    _crash_after_each_restart(tree, "w", 40)
