"""Daemons that fork themselves: pid files read safely, what a command left behind found.

The test process plays the launcher: a child subreaper that the processes a
command leaves behind are re-parented to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from actors._launcher import _bootstrap
from actors._launcher._daemons import (
    PID_FILE_MAX,
    TOKEN_ENV,
    ChildTree,
    PidFileError,
    child_token,
    daemonized_message,
    in_tree,
    left_behind,
    main_pid_from_file,
    read_pid_file,
)
from actors._launcher._procfs import boot_ticks, is_alive, proc_stat
from actors.testing import wait_gone

# A program that daemonizes as the classic ones do: a background process that
# leaves the session (setsid), writes its pid file, and a first process that exits 0.
DAEMONIZE = """
pidfile=$1
setsid sh -c 'echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 60' "$pidfile" &
exit 0
"""

# One that only backgrounds itself: it stays in the child's process group.
BACKGROUND = """
sleep 60 &
echo $! > "$1"
exit 0
"""


def _wait_file(path: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


class Started:
    """A script run as nannytree runs a command: its own process group, a token."""

    def __init__(self, script: str, pid_file: Path, *, token: str | None) -> None:
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        if token is not None:
            env[TOKEN_ENV] = token
        self.proc = subprocess.Popen(
            ["sh", "-c", script, "daemon", str(pid_file)], env=env, process_group=0
        )
        self.root = self.proc.pid
        self.code = self.proc.wait(timeout=10)
        _wait_file(pid_file)
        self.daemon = int(pid_file.read_text())

    def tree(self, token: str = "", *, born: int | None = None) -> ChildTree:
        """The child's tree as we (its subreaper) see it. By default it was spawned
        after its daemon started, so the start time ties nothing to it."""
        if born is None:
            st = proc_stat(self.daemon)
            assert st is not None
            born = st.start + 1
        return ChildTree(os.getpid(), self.root, self.root, born, token)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.daemon, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.daemon, 0)  # re-parented to us, the subreaper
        assert wait_gone([self.daemon]) == []


@pytest.fixture
def subreaper() -> Iterator[None]:
    """What a command leaves behind is re-parented to this process, as to the launcher."""
    _bootstrap.prctl(_bootstrap.PR_SET_CHILD_SUBREAPER, 1)
    try:
        yield
    finally:
        _bootstrap.prctl(_bootstrap.PR_SET_CHILD_SUBREAPER, 0)


@pytest.fixture
def daemons(subreaper: None) -> Iterator[list[Started]]:
    started: list[Started] = []
    yield started
    for d in started:
        d.kill()


def test_a_daemon_that_left_the_session_is_found_by_its_token(tmp_path, daemons):
    token = child_token()
    d = Started(DAEMONIZE, tmp_path / "d.pid", token=token)
    daemons.append(d)
    assert d.code == 0 and is_alive(d.daemon) and not is_alive(d.root)
    assert os.getsid(d.daemon) == d.daemon  # it really left: no group, no parent link
    tree = d.tree(token)
    assert main_pid_from_file(tmp_path / "d.pid", tree).pid == d.daemon
    assert left_behind(tree, known=(), groups=()) == [d.daemon]
    # Without the token nothing ties it to the child: the pid file is refused.
    stranger = replace(tree, token=child_token())
    with pytest.raises(PidFileError, match="not a process this child started"):
        main_pid_from_file(tmp_path / "d.pid", stranger)
    assert left_behind(stranger, known=(), groups=()) == []
    # Nor is a process the launcher knows as its own child.
    with pytest.raises(PidFileError, match="not a process this child started"):
        main_pid_from_file(tmp_path / "d.pid", tree, taken={d.daemon})


def test_a_daemon_that_overwrote_its_token_is_found_by_its_start_time(tmp_path, daemons):
    """nginx and redis overwrite their environment with their process title: a process
    re-parented to us that started since the child's spawn is taken as the child's."""
    born = boot_ticks() - 1
    d = Started(DAEMONIZE, tmp_path / "d.pid", token=None)
    daemons.append(d)
    tree = d.tree(child_token(), born=born)
    assert main_pid_from_file(tmp_path / "d.pid", tree).pid == d.daemon
    assert left_behind(tree, known=(), groups=()) == [d.daemon]
    # Unless it is in the process group of another child of ours.
    assert left_behind(tree, known=(), groups={os.getpgid(d.daemon)}) == []


def test_a_backgrounded_process_is_found_by_its_process_group(tmp_path, daemons):
    d = Started(BACKGROUND, tmp_path / "b.pid", token=None)
    daemons.append(d)
    assert d.code == 0 and os.getpgid(d.daemon) == d.root
    tree = d.tree()
    assert main_pid_from_file(tmp_path / "b.pid", tree).pid == d.daemon
    assert left_behind(tree, known=(), groups=()) == [d.daemon]
    message = daemonized_message("nginx", left_behind(tree, known=(), groups=()))
    assert f"pid {d.daemon} still runs" in message
    assert "set pid_file=" in message and "run it in the foreground" in message


def test_a_foreground_program_that_exited_leaves_no_descendant(subreaper):
    born = boot_ticks() - 1
    proc = subprocess.Popen(["sh", "-c", "exit 0"], process_group=0)
    assert proc.wait(timeout=10) == 0
    tree = ChildTree(os.getpid(), proc.pid, proc.pid, born, child_token())
    assert left_behind(tree, known=(), groups=()) == []


def test_a_descendant_through_its_parents_is_in_the_tree():
    code = "import subprocess, sys; subprocess.run(['sleep', '60'])"
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while not (kids := _children(parent.pid)):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (sleeper,) = kids
        assert in_tree(sleeper, parent.pid)
        assert not in_tree(parent.pid, sleeper)
        assert not in_tree(os.getpid(), parent.pid)
    finally:
        parent.kill()
        parent.wait()
        for kid in kids:
            os.kill(kid, signal.SIGKILL)
        wait_gone(kids)


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def test_a_pid_file_naming_a_stranger_is_refused(tmp_path):
    stranger = subprocess.Popen(["sleep", "60"])  # ours, but started before the child
    try:
        st = proc_stat(stranger.pid)
        assert st is not None
        child = subprocess.Popen(["sh", "-c", "exit 0"], process_group=0)
        child.wait(timeout=10)
        tree = ChildTree(os.getpid(), child.pid, child.pid, st.start + 1, child_token())
        for pid in (stranger.pid, os.getppid()):  # ours, and not ours to reap
            (tmp_path / "x.pid").write_text(f"{pid}\n")
            with pytest.raises(PidFileError, match=f"names pid {pid}, which is not a process"):
                main_pid_from_file(tmp_path / "x.pid", tree)
    finally:
        stranger.kill()
        stranger.wait()


def test_a_stale_pid_file_is_refused(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / "x.pid").write_text(f"{gone.pid}\n")
    tree = ChildTree(os.getpid(), gone.pid, gone.pid, 0, "")
    with pytest.raises(PidFileError, match=f"names pid {gone.pid}, which is not running"):
        main_pid_from_file(tmp_path / "x.pid", tree)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"", "not a process id"),
        (b"nginx\n", "not a process id"),
        (b"-5\n", "not a process id"),
        (b"0\n", "not a process id"),
        (b"12 13\n", "not a process id"),
        (b"99999999999\n", "not a process id"),
        (b"1" * (PID_FILE_MAX + 1), f"more than {PID_FILE_MAX} bytes"),
    ],
)
def test_a_malformed_pid_file_is_refused(tmp_path, content, fragment):
    (tmp_path / "x.pid").write_bytes(content)
    with pytest.raises(PidFileError, match=fragment):
        read_pid_file(tmp_path / "x.pid")


def test_a_pid_file_with_spaces_and_a_newline_reads(tmp_path):
    (tmp_path / "x.pid").write_text(" 1234\n")
    assert read_pid_file(tmp_path / "x.pid") == 1234


def test_a_missing_pid_file_is_not_there_yet(tmp_path):
    with pytest.raises(PidFileError, match="does not exist"):
        read_pid_file(tmp_path / "none.pid")


def test_a_symlinked_pid_file_is_not_followed(tmp_path):
    (tmp_path / "real.pid").write_text(f"{os.getpid()}\n")
    (tmp_path / "x.pid").symlink_to(tmp_path / "real.pid")
    with pytest.raises(PidFileError, match="symbolic link"):
        read_pid_file(tmp_path / "x.pid")


def test_a_pid_file_that_is_no_regular_file_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo.pid")  # a FIFO would block a naive reader forever
    with pytest.raises(PidFileError, match="not a regular file"):
        read_pid_file(tmp_path / "fifo.pid")
    (tmp_path / "dir.pid").mkdir()
    with pytest.raises(PidFileError):
        read_pid_file(tmp_path / "dir.pid")


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_a_pid_file_owned_by_another_user_is_refused(tmp_path):
    (tmp_path / "x.pid").write_text(f"{os.getpid()}\n")
    os.chown(tmp_path / "x.pid", 65534, 65534)
    with pytest.raises(PidFileError, match="owned by uid 65534"):
        read_pid_file(tmp_path / "x.pid")
