"""Containment (issue 10): a child can never take over its supervisor, a dead
launcher never spins, and nothing survives the tree. Real processes throughout."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from actors import EventLog, Tree
from actors._launcher._control import CHILD_FRAME, MAX_MESSAGE, MAX_TRACEBACK
from actors.testing import wait_gone
from supervision import ChildSpec, EventKind, ExitKind, SpecError, StartError, SupervisorSpec
from tests import children
from tests.support import wait_until

ROOT = Path(__file__).resolve().parent.parent


def _tree(*specs: ChildSpec, log: EventLog | None = None, **flags: object) -> Tree:
    return Tree.start(SupervisorSpec(id="root", children=list(specs), **flags), log=log)  # type: ignore[arg-type]


def _note(tree: Tree, child: str) -> str:
    event = tree.log.wait_for(
        lambda e: e.context is EventKind.CHILD_NOTE and e.offender == child, 10
    )
    return event.detail


def _started(tree: Tree, child: str, incarnation: int) -> int:
    event = tree.log.wait_for(
        lambda e: (
            e.context is EventKind.CHILD_STARTED
            and e.offender == child
            and e.incarnation == incarnation
        ),
        15,
    )
    assert event.pid is not None
    return event.pid


# -- 1. what a child writes is never unpickled -----------------------------------------


@pytest.mark.parametrize("drop", [False, True], ids=["same-uid", "setuid-nobody"])
def test_a_pickle_on_the_control_pipe_runs_nothing(tmp_path: Path, drop: bool) -> None:
    if drop and os.getuid() != 0:
        pytest.skip("dropping privileges needs root")  # CI runs as root: covered there
    marker = tmp_path / "pwned"
    os.chmod(tmp_path, 0o777)  # so that the exploit, were it run, could write the marker
    tree = _tree(
        ChildSpec(
            id="evil",
            target=children.send_pickle_to_launcher,
            args=(str(marker), 65534 if drop else None),
        ),
        ChildSpec(id="good", command=["sleep", "60"]),
    )
    try:
        launcher = tree.context.spawner
        assert launcher is not None
        detail = _note(tree, "evil")
        assert "control channel closed" in detail
        assert not marker.exists()
        # The launcher is the same, and still serves: a restart of another child works.
        good = tree.nanny.which_child("good").get().pid
        os.kill(good, signal.SIGKILL)
        _started(tree, "good", 2)
        assert tree.context.spawner is launcher and launcher.alive
        assert not marker.exists()
    finally:
        tree.stop()


def test_a_huge_frame_is_refused_before_it_is_buffered() -> None:
    tree = _tree(ChildSpec(id="liar", target=children.announce_huge_frame, args=(64,)))
    try:
        launcher = tree.context.spawner
        assert launcher is not None
        detail = _note(tree, "liar")
        assert f"over the limit of {CHILD_FRAME}" in detail
        rss = psutil.Process(launcher.pid).memory_info().rss
        assert rss < 200 * 1024 * 1024  # nowhere near 2 GiB, nor the 64 MiB of junk
    finally:
        tree.stop()


# -- 2. every buffer a child fills is bounded in bytes ------------------------------------


def test_a_storm_of_big_exceptions_stays_within_the_log_bounds() -> None:
    log = EventLog(max_bytes=512 * 1024)
    tree = _tree(
        ChildSpec(id="big", target=children.raise_big, args=(60_000,), stderr="capture"),
        log=log,
        intensity=10**6,
        period=3600.0,
    )
    try:
        log.wait_for(
            lambda e: e.context is EventKind.CHILD_STARTED and (e.incarnation or 0) >= 60, 60
        )
        exits = [e for e in log.snapshot() if e.context is EventKind.CHILD_EXITED]
        assert exits
        for event in exits:
            reason = event.reason
            assert reason is not None and reason.kind is ExitKind.EXCEPTION
            assert len(reason.message) <= MAX_MESSAGE
            assert "characters cut" in reason.message
            assert len(reason.traceback) <= MAX_TRACEBACK
            assert len(reason.stderr_tail) <= 4096
        assert log.bytes <= 512 * 1024
        assert log.dropped > 0
    finally:
        tree.stop()


# -- 3. a dead launcher is replaced, or the tree ends: never a crash loop ---------------


def test_launcher_death_at_the_default_intensity_ends_the_tree() -> None:
    tree = _tree(
        ChildSpec(id="a", command=["sleep", "60"]),
        ChildSpec(id="b", target=children.sleep_forever),
    )
    launcher = tree.context.spawner
    assert launcher is not None
    pids = [c.pid for c in tree.nanny.which_children().get()]
    os.kill(launcher.pid, signal.SIGKILL)
    reason = tree.wait(20)
    assert reason is not None and "reached_max_restart_intensity" in reason.message
    exits = [e for e in tree.events() if e.context is EventKind.CHILD_EXITED]
    assert exits[0].reason is not None and exits[0].reason.kind is ExitKind.LAUNCHER_DIED
    assert wait_gone([p for p in pids if p], 2.0) == []


def test_launcher_death_at_a_high_intensity_restarts_the_children_once() -> None:
    tree = _tree(
        ChildSpec(id="a", command=["sleep", "60"]),
        ChildSpec(id="b", target=children.sleep_forever),
        intensity=1000,
        period=60.0,
    )
    try:
        first = tree.context.spawner
        assert first is not None
        old = {c.id: c.pid for c in tree.nanny.which_children().get()}
        os.kill(first.pid, signal.SIGKILL)
        new = {"a": _started(tree, "a", 2), "b": _started(tree, "b", 2)}
        assert set(new.values()).isdisjoint(old.values())
        second = tree.context.spawner
        assert second is not None and second is not first and second.alive
        assert psutil.Process(new["b"]).ppid() == second.pid
        # No retry loop: nothing more happens once both are back.
        with pytest.raises(TimeoutError):
            tree.log.wait_for(
                lambda e: e.context is EventKind.CHILD_STARTED and (e.incarnation or 0) > 2, 1.0
            )
        assert wait_gone([p for p in old.values() if p], 2.0) == []
    finally:
        tree.stop()


def test_a_launcher_that_keeps_dying_ends_the_tree_with_launcher_died() -> None:
    tree = _tree(ChildSpec(id="a", command=["sleep", "60"]), intensity=1000, period=60.0)
    for incarnation in range(2, 6):
        launcher = tree.context.spawner
        assert launcher is not None
        os.kill(launcher.pid, signal.SIGKILL)
        if incarnation == 5:
            break
        _started(tree, "a", incarnation)
    reason = tree.wait(20)
    assert reason is not None and reason.kind is ExitKind.LAUNCHER_DIED
    assert "died 4 times" in reason.message and "Launcher" not in reason.message
    assert not tree.alive


# -- 4. nothing survives the host and the launcher dying together --------------------------

HOST = textwrap.dedent(
    """
    import json, os, sys, threading
    from actors import Tree
    from supervision import ChildSpec, SupervisorSpec
    from tests import children

    tmp = sys.argv[1]
    sh = f"setsid sleep 61 & echo $! > {tmp}/sh.tmp; mv {tmp}/sh.tmp {tmp}/sh; wait"
    tree = Tree.start(SupervisorSpec(id="host", children=[
        ChildSpec(id="cmd", command=["sleep", "60"]),
        ChildSpec(id="sh", command=["sh", "-c", sh]),
        ChildSpec(id="py", target=children.fork_escapee, args=(tmp + "/py",)),
        ChildSpec(id="fresh", target=children.fork_escapee, args=(tmp + "/fresh",),
                  fresh_interpreter=True),
    ]))
    launcher = tree.context.spawner
    pids = [c.pid for c in tree.nanny.which_children().get()]
    print(json.dumps({"launcher": launcher.pid, "guardian": launcher.guardian_pid,
                      "children": pids}), flush=True)
    threading.Event().wait()
    """
)


def _read_pid(path: Path) -> int:
    wait_until(path.exists, 20, f"{path} to be written")
    return int(path.read_text())


@pytest.mark.parametrize("victims", ["host", "launcher", "both"])
def test_nothing_survives_host_or_launcher_death(tmp_path: Path, victims: str) -> None:
    script = tmp_path / "host.py"
    script.write_text(HOST)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    host = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, env=env
    )
    try:
        assert host.stdout is not None
        ready, _, _ = select.select([host.stdout], [], [], 30)
        assert ready, "the host script did not report its children"
        info = json.loads(host.stdout.readline())
        escapees = [_read_pid(tmp_path / name) for name in ("sh", "py", "fresh")]
        everything = [info["launcher"], info["guardian"], *info["children"], *escapees]
        if victims in ("launcher", "both"):
            os.kill(info["launcher"], signal.SIGKILL)
        if victims in ("host", "both"):
            host.kill()
        survivors = wait_gone(
            [p for p in everything if p != info["guardian"] or victims != "launcher"], 1.0
        )
        if victims == "launcher":
            # The host lives on: it replaced the launcher; the old tree's processes are gone.
            old = [p for p in everything if p not in (info["guardian"],)]
            assert wait_gone(old, 1.0) == []
        assert survivors == [], f"alive after 1 s: {survivors}"
    finally:
        if host.poll() is None:
            host.kill()
        host.wait(10)
        if host.stdout is not None:
            host.stdout.close()
    wait_until(lambda: wait_gone(everything, 0.1) == [], 10, "the host's replacement tree to go")


# -- 5. the API never hangs on a stopped launcher ---------------------------------------------


def test_a_stopped_launcher_hangs_no_call() -> None:
    tree = _tree(
        ChildSpec(id="steady", target=children.sleep_forever, shutdown=1.0),
        ChildSpec(id="storm", command=["sh", "-c", "exit 1"]),
        intensity=10**6,
        period=3600.0,
    )
    launcher = tree.context.spawner
    assert launcher is not None
    try:
        _started(tree, "storm", 3)
        os.kill(launcher.pid, signal.SIGSTOP)
        for _ in range(3):
            infos = tree.nanny.which_children().get(timeout=2)
            assert {i.id for i in infos} == {"steady", "storm"}
        started = time.monotonic()
        reason = tree.stop(timeout=40)
        assert reason is not None and reason.kind is ExitKind.SHUTDOWN
        assert time.monotonic() - started < 40
    finally:
        if launcher.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(launcher.pid, signal.SIGCONT)
        tree.stop()


# -- 8. bad input is a clear error naming the child and the field -------------------------------


def test_signal_child_takes_names_and_refuses_bad_signals() -> None:
    tree = _tree(ChildSpec(id="w", command=["sleep", "60"]))
    try:
        tree.nanny.signal_child("w", "USR1").get()
        tree.log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 10)  # USR1 kills sleep
        _started(tree, "w", 2)
        tree.nanny.signal_child("w", "SIGCONT").get()
        for bad in (999, -1, 0, "NOPE", True):
            with pytest.raises(SpecError) as info:
                tree.nanny.signal_child("w", bad).get()
            assert info.value.child == "w" and info.value.field == "signal"
    finally:
        tree.stop()


def test_unpicklable_args_name_the_field() -> None:
    import threading

    spec = SupervisorSpec(
        id="root", children=[ChildSpec(id="w", target=print, args=(threading.Lock(),))]
    )
    with pytest.raises(StartError) as info:
        Tree.start(spec)
    assert "field 'args'" in str(info.value)
