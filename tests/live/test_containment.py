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
from tests.support import wait_until
from tests.targets import children

ROOT = Path(__file__).resolve().parents[2]


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


# -- 4. nothing survives the death of the host, the launcher or the guardian -----------------
# (docs/launcher.md, "Who kills what": every kill is covered but one, tested last)

HOST = textwrap.dedent(
    """
    import json, signal, sys, threading
    from actors import Tree
    from supervision import ChildSpec, SupervisorSpec
    from tests.targets import children

    tmp = sys.argv[1]
    masked = sys.argv[2:] == ["masked"]
    if masked:  # every thread of the host blocks these
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, signal.SIGTERM})

    def publish(name):  # the shell's last background pid, written at once to tmp/name
        return f"echo $! > {tmp}/{name}.tmp; mv {tmp}/{name}.tmp {tmp}/{name}"

    # A command's escapee; and an escapee (its own session) whose child leaves it too.
    sh = f"setsid sleep 61 & {publish('sh')}; wait"
    deep = f"setsid sleep 63 & {publish('deep')}; wait"
    nested = f"setsid sh -c '{deep}' & {publish('mid')}; wait"
    commands = [
        ChildSpec(id="cmd", command=["sleep", "60"]),
        ChildSpec(id="sh", command=["sh", "-c", sh]),
        ChildSpec(id="nested", command=["sh", "-c", nested]),
    ]
    python = [
        ChildSpec(id="py", target=children.fork_escapee, args=(tmp + "/py",)),
        ChildSpec(id="fresh", target=children.fork_escapee, args=(tmp + "/fresh",),
                  fresh_interpreter=True),
        ChildSpec(id="popen", target=children.popen_escapee, args=(tmp + "/popen",)),
    ]
    # Masked, commands only: a fork of a Python child would reset the launcher's mask.
    specs = commands if masked else commands + python
    tree = Tree.start(SupervisorSpec(id="host", children=specs))
    launcher = tree.context.spawner
    pids = {c.id: c.pid for c in tree.nanny.which_children().get()}
    print(json.dumps({"launcher": launcher.pid, "guardian": launcher.guardian_pid,
                      "children": pids}), flush=True)
    threading.Event().wait()
    """
)


def _read_pids(path: Path) -> list[int]:
    wait_until(path.exists, 20, f"{path} to be written")
    return [int(p) for p in path.read_text().split()]


class _Host:
    """A host process running a tree whose every kind of child has a descendant that
    left its group: `escapees`; `tree` is every other process of it: the guardian, the
    launcher, the `python` children, the `commands` and `grouped` (a Python child's
    grandchild in its group)."""

    def __init__(self, tmp_path: Path, *options: str) -> None:
        script = tmp_path / "host.py"
        script.write_text(HOST)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path), *options],
            stdout=subprocess.PIPE,
            env=env,
        )
        self.escapees: list[psutil.Process] = []
        self.processes: list[psutil.Process] = []
        try:
            self._read(tmp_path)
        except BaseException:
            self.close()
            raise

    def _read(self, tmp_path: Path) -> None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        assert ready, "the host script did not report its children"
        info = json.loads(self.proc.stdout.readline())
        self.launcher: int = info["launcher"]
        self.guardian: int = info["guardian"]
        children: dict[str, int] = info["children"]
        self.python = [children[name] for name in ("py", "fresh", "popen") if name in children]
        self.commands = [children[name] for name in ("cmd", "sh", "nested")]
        names = ["sh", "mid", "deep"] + (["py", "fresh"] if self.python else [])
        left = [_read_pids(tmp_path / name)[0] for name in names]
        self.grouped: list[int] = []
        if self.python:
            grouped, escaped = _read_pids(tmp_path / "popen")
            self.grouped, left = [grouped], [*left, escaped]
        self.escapees = [psutil.Process(p) for p in left]
        self.tree = [self.guardian, self.launcher, *self.python, *self.commands, *self.grouped]
        self.processes = [psutil.Process(p) for p in self.tree]
        assert len(self.escapees) == (6 if self.python else 3) and all(p > 0 for p in self.tree)
        # Each escapee left its child's group: a group kill of the children misses it.
        groups = {os.getpgid(p) for p in children.values()}
        assert all(os.getpgid(p) in groups for p in self.grouped)
        assert all(os.getpgid(p.pid) not in groups for p in self.escapees)

    def close(self) -> None:
        """Kill the host, then whatever of its tree the test left (escapees outlive it)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        left = [*self.processes, *self.escapees]
        for p in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        assert wait_gone([p.pid for p in left], 5.0) == []


def _kill(host: _Host, victims: str) -> None:
    for victim in victims.split("+"):
        if victim == "host":
            host.proc.kill()
        elif victim == "frozen":
            os.kill(host.proc.pid, signal.SIGSTOP)
        else:
            os.kill(host.launcher if victim == "launcher" else host.guardian, signal.SIGKILL)


@pytest.mark.parametrize(
    "victims",
    # frozen: the host is stopped, so only the launcher's death signal tells it (trap 17)
    ["host", "launcher", "host+launcher", "guardian", "host+guardian", "frozen+guardian"],
)
def test_nothing_survives_the_death_of_a_helper(tmp_path: Path, victims: str) -> None:
    host = _Host(tmp_path)
    try:
        everything = [*host.tree, *(p.pid for p in host.escapees)]
        _kill(host, victims)
        survivors = wait_gone(everything, 1.0)
        assert survivors == [], f"alive 1 s after the {victims} died: {survivors}"
    finally:
        host.close()


@pytest.mark.parametrize("victims", ["launcher", "frozen+guardian"])
def test_a_signal_mask_inherited_from_the_host_changes_nothing(
    tmp_path: Path, victims: str
) -> None:
    """The guardian waits for SIGCHLD, the launcher for SIGTERM: neither stays blocked
    (the host runs only commands here: a Python child's fork resets the launcher's mask)."""
    host = _Host(tmp_path, "masked")
    try:
        everything = [*host.tree, *(p.pid for p in host.escapees)]
        _kill(host, victims)
        survivors = wait_gone(everything, 1.0)
        assert survivors == [], f"alive 1 s after the {victims} died: {survivors}"
    finally:
        host.close()


@pytest.mark.parametrize("with_host", [False, True], ids=["host-alive", "host-too"])
def test_only_escapees_survive_a_kill_of_guardian_and_launcher_at_once(
    tmp_path: Path, with_host: bool
) -> None:
    """The one case nothing covers: neither the launcher nor the guardian is left to sweep."""
    host = _Host(tmp_path)
    try:
        assert os.getpgid(host.launcher) == host.guardian  # one group: one kill takes both
        if with_host:
            os.kill(host.proc.pid, signal.SIGSTOP)  # it must not kill a group before it dies
        os.killpg(host.guardian, signal.SIGKILL)
        if with_host:
            host.proc.kill()
        left = [p.pid for p in host.escapees]
        if with_host:  # nobody kills the children's groups: only Python children die
            left += host.commands + host.grouped
        # Python children die with the launcher; a live host kills every child's group.
        assert wait_gone([p for p in host.tree if p not in left], 5.0) == []
        # The rest is alive, out of the tree's reach: nothing of it is left to kill them.
        assert wait_gone(left, 0.0) == sorted(left)
    finally:
        host.close()


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
