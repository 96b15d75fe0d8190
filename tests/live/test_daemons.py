"""Real daemons on a live tree (issue 16): the stop signal and kill mode, and
sd_notify readiness for commands. Real processes, no installation needed."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from actors import Tree
from supervision import ChildSpec, EventKind, ExitKind, StartError, SupervisorSpec
from tests.support import wait_until

# A main process that starts a grandchild, then exits once the grandchild has. The
# grandchild traps the stop signal, writes which one it got, and exits. The main
# process either ignores the stop signal (only a signal to the group reaches the
# grandchild) or forwards it (as nginx's master does to its workers).
MAIN = textwrap.dedent(
    """
    import os, signal, subprocess, sys
    out, sig, forward = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "forward"
    grandchild = subprocess.Popen([sys.executable, "-c", '''
    import signal, sys, time
    def stop(signum, frame):
        open(sys.argv[1], "w").write(signal.Signals(signum).name)
        sys.exit(0)
    signal.signal(int(sys.argv[2]), stop)
    open(sys.argv[1] + ".ready", "w").close()
    while True:
        time.sleep(1)
    ''', out, str(sig)])
    if forward:
        signal.signal(sig, lambda signum, frame: grandchild.send_signal(signum))
    else:
        signal.signal(sig, signal.SIG_IGN)
    while True:
        try:
            grandchild.wait()
            break
        except InterruptedError:
            pass
    """
)


def _daemon(tmp_path: Path, **fields: object) -> tuple[Tree, Path]:
    out = tmp_path / "cleaned"
    sig = int(fields.pop("signal_number", 15))  # type: ignore[call-overload]
    mode = str(fields.pop("main_does", "ignore"))
    script = tmp_path / "main.py"
    script.write_text(MAIN)
    spec = ChildSpec(
        id="d",
        command=[sys.executable, str(script), str(out), str(sig), mode],
        shutdown=5.0 if mode == "forward" or fields.get("kill_mode") != "main" else 0.5,
        **fields,  # type: ignore[arg-type]
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    ready = Path(str(out) + ".ready")
    wait_until(ready.exists, 20, "the grandchild to trap its signal")
    return tree, out


def test_group_mode_reaches_a_grandchild_that_the_main_process_does_not_forward_to(
    tmp_path: Path,
) -> None:
    tree, out = _daemon(tmp_path, main_does="ignore")
    tree.nanny.terminate_child("d").get()
    reason = tree.nanny.which_child("d").get().last_exit
    tree.stop()
    assert out.read_text() == "SIGTERM"  # it got the signal, and cleaned up
    assert reason.kind is ExitKind.SHUTDOWN and "killed with SIGKILL" not in reason.message


def test_main_mode_signals_the_main_process_alone(tmp_path: Path) -> None:
    tree, out = _daemon(tmp_path, main_does="ignore", kill_mode="main")
    tree.nanny.terminate_child("d").get()
    reason = tree.nanny.which_child("d").get().last_exit
    tree.stop()
    assert not out.exists()  # the grandchild never got it; the group was killed at the end
    assert reason.message == "ignored SIGTERM for 0.5s; killed with SIGKILL"


def test_main_mode_lets_the_main_process_forward_the_stop(tmp_path: Path) -> None:
    tree, out = _daemon(tmp_path, main_does="forward", kill_mode="main")
    tree.nanny.terminate_child("d").get()
    reason = tree.nanny.which_child("d").get().last_exit
    tree.stop()
    assert out.read_text() == "SIGTERM"
    assert reason.kind is ExitKind.SHUTDOWN and "killed with SIGKILL" not in reason.message


@pytest.mark.parametrize("kill_mode", ["group", "main"])
def test_a_stop_signal_of_its_own(tmp_path: Path, kill_mode: str) -> None:
    import signal

    tree, out = _daemon(
        tmp_path,
        main_does="forward",
        kill_mode=kill_mode,
        stop_signal="QUIT",
        signal_number=int(signal.SIGQUIT),
    )
    tree.nanny.terminate_child("d").get()
    tree.stop()
    assert out.read_text() == "SIGQUIT"


NOTIFIER = textwrap.dedent(
    """
    import os, socket, sys, time
    time.sleep(float(sys.argv[1]))
    if sys.argv[2] == "ready":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.sendto(b"STATUS=warmed up\\nREADY=1", os.environ["NOTIFY_SOCKET"])
    while True:
        time.sleep(1)
    """
)


def test_sd_notify_readiness_holds_the_next_sibling(tmp_path: Path) -> None:
    script = tmp_path / "notifier.py"
    script.write_text(NOTIFIER)
    tree = Tree.start(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="db",
                    command=[sys.executable, str(script), "0.3", "ready"],
                    ready="sd_notify",
                    start_timeout=20.0,
                ),
                ChildSpec(id="app", command=["sleep", "60"]),
            ],
        )
    )
    try:
        order = [e.offender for e in tree.events() if e.context is EventKind.CHILD_STARTED]
        assert order == ["db", "app"]
        worker = tree.ref._actor_weakref()._children.workers["db"]  # type: ignore[attr-defined]
        assert worker.proxy().status.get() == "warmed up"
    finally:
        tree.stop()


def test_a_command_that_never_says_ready_fails_to_start(tmp_path: Path) -> None:
    script = tmp_path / "notifier.py"
    script.write_text(NOTIFIER)
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(
                id="mute",
                command=[sys.executable, str(script), "0", "mute"],
                ready="sd_notify",
                start_timeout=0.5,
            )
        ],
    )
    with pytest.raises(StartError) as info:
        Tree.start(spec)
    assert info.value.reason.kind is ExitKind.START_TIMEOUT


# -- the watchdog ---------------------------------------------------------------------------


def _watched(**fields: object) -> Tree:
    return Tree.start(
        SupervisorSpec(
            id="root",
            intensity=5,
            period=60.0,
            children=[ChildSpec(id="w", shutdown=0.5, watchdog=0.4, **fields)],  # type: ignore[arg-type]
        )
    )


def test_a_python_child_that_stops_beating_is_restarted_by_its_watchdog() -> None:
    from tests.targets import children

    tree = _watched(target=children.beat_then_hang, args=(6,))
    try:
        exited = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 20)
        assert exited.reason is not None and exited.reason.kind is ExitKind.WATCHDOG
        assert "0.4" in str(exited.reason)
        tree.log.wait_for(lambda e: e.context is EventKind.CHILD_STARTED and e.incarnation == 2, 10)
    finally:
        tree.stop()


def test_a_child_that_keeps_beating_is_left_alone() -> None:
    from tests.targets import children

    tree = _watched(target=children.beat_then_hang, args=(-1,))
    try:
        with pytest.raises(TimeoutError):
            tree.log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 1.5)
    finally:
        tree.stop()


BEATING_COMMAND = textwrap.dedent(
    """
    import os, socket, sys, time
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    for _ in range(int(sys.argv[1])):
        s.sendto(b"WATCHDOG=1", os.environ["NOTIFY_SOCKET"])
        time.sleep(0.05)
    while True:
        time.sleep(1)
    """
)


def test_a_command_beats_with_watchdog_1_on_its_notify_socket(tmp_path: Path) -> None:
    script = tmp_path / "beat.py"
    script.write_text(BEATING_COMMAND)
    tree = _watched(command=[sys.executable, str(script), "8"])
    try:
        exited = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 20)
        assert exited.reason is not None and exited.reason.kind is ExitKind.WATCHDOG
    finally:
        tree.stop()


# -- reload and signals ---------------------------------------------------------------------


def _reloadable(tmp_path: Path, reload: object) -> tuple[Tree, Path]:
    out = tmp_path / "reloaded"
    ready = tmp_path / "trapped"
    line = f"trap 'echo reloaded >> {out}' HUP; touch {ready}; while :; do sleep 0.05; done"
    tree = Tree.start(
        SupervisorSpec(
            id="root",
            children=[ChildSpec(id="web", command=["sh", "-c", line], reload=reload)],  # type: ignore[arg-type]
        )
    )
    wait_until(ready.exists, 10, "the shell to trap HUP")
    return tree, out


def test_reload_runs_the_check_then_signals_the_main_process(tmp_path: Path) -> None:
    tree, out = _reloadable(tmp_path, (["true"], "HUP"))
    try:
        tree.nanny.reload_child("web").get()
        wait_until(out.exists, 10, "the child to see SIGHUP")
        event = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_RELOADED, 5)
        assert event.detail == "SIGHUP" and event.offender == "web"
    finally:
        tree.stop()


def test_a_failed_check_refuses_the_reload_and_says_why(tmp_path: Path) -> None:
    from supervision import ReloadRefused

    tree, out = _reloadable(tmp_path, (["sh", "-c", "echo bad config >&2; exit 3"], "HUP"))
    try:
        with pytest.raises(ReloadRefused) as info:
            tree.nanny.reload_child("web").get()
        assert "exited 3: bad config" in str(info.value)
        assert not out.exists()
        assert not [e for e in tree.events() if e.context is EventKind.CHILD_RELOADED]
    finally:
        tree.stop()


def test_reload_needs_a_reload_in_the_spec_and_signals_are_events(tmp_path: Path) -> None:
    from supervision import ReloadRefused

    tree, out = _reloadable(tmp_path, None)
    try:
        with pytest.raises(ReloadRefused, match="no reload"):
            tree.nanny.reload_child("web").get()
        tree.nanny.signal_child("web", "HUP").get()
        event = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_SIGNALLED, 5)
        assert event.detail == "SIGHUP"
        wait_until(out.exists, 10, "the child to see SIGHUP")
    finally:
        tree.stop()


def test_stopping_a_child_with_its_dependents_stops_the_later_siblings_too() -> None:
    from supervision import Strategy

    tree = Tree.start(
        SupervisorSpec(
            id="root",
            strategy=Strategy.REST_FOR_ONE,
            children=[ChildSpec(id=c, command=["sleep", "60"]) for c in ("db", "app", "web")],
        )
    )
    try:
        tree.nanny.terminate_child("db", with_dependents=True).get()
        states = {i.id: i.state for i in tree.nanny.which_children().get()}
        assert states == {"db": "stopped", "app": "stopped", "web": "stopped"}
        stopped = [e.offender for e in tree.events() if e.context is EventKind.CHILD_TERMINATED]
        assert stopped == ["web", "app", "db"]
        # Nothing is restarted: they were stopped, not crashed.
        tree.nanny.restart_child("db").get()
        assert tree.nanny.which_child("app").get().state == "stopped"
    finally:
        tree.stop()
