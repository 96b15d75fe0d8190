"""The files a root tree opens for its children, attacked as a child's user (or a
stranger) would, on real processes with real users (issue 35; docs/logs.md,
"Whose rights"): a symlink or hard link in place of a log, a FIFO that would block
the launcher, the rotation race, a swapped log folder base.

Every wait has a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from actors import Tree
from supervision import Backoff, ChildSpec, EventKind, SupervisorSpec, SupervisorStartError
from tests.live.test_forking_daemons import DAEMON
from tests.support import RACE_SECONDS, children_by_id, event_log, wait_until
from tests.support.users import User

SYSTEM_PY = "/usr/bin/python3"  # a user's own program: not under /work's venv
SECRET = b"root:only:0:0\n"


def as_user(user: User, *argv: str) -> None:
    subprocess.run(argv, user=user.uid, group=user.gid, check=True, timeout=30)


@pytest.fixture
def logs(child_user: User) -> Path:
    """A log folder of the child's user's own (an app's /var/log/app)."""
    folder = child_user.home / "logs"
    folder.mkdir()
    return child_user.chown(folder, 0o755)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A root file only root may read or write, in a folder only root reaches."""
    path = tmp_path / "secret"
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def untouched(path: Path) -> None:
    st = path.stat()
    assert path.read_bytes() == SECRET, "the tree wrote into a root file"
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)


def start_failures(ref: Any, child: str) -> list[str]:
    return [
        str(e)
        for e in event_log(ref).snapshot()
        if e.context is EventKind.START_FAILED and e.offender == child
    ]


def pid_of(ref: Any, child: str) -> int | None:
    return children_by_id(ref)[child].pid


def restarted(ref: Any, child: str, old: int) -> bool:
    pid = pid_of(ref, child)
    return pid is not None and pid != old


def spec(*children: ChildSpec) -> SupervisorSpec:
    return SupervisorSpec("root", children=list(children), intensity=1000, period=1)


def talker(user: User, log: Path, **more: Any) -> ChildSpec:
    """A child of `user`'s that says a line at each start, then waits."""
    return ChildSpec(
        "app",
        command=["sh", "-c", "echo started $$; exec sleep 600"],
        user=user.name,
        stdout=str(log),
        stderr=str(log),
        **{"backoff": Backoff(initial=0.2, max=1.0), **more},
    )


def kill_and_see_refusal(ref: Any, secret: Path, word: str) -> str:
    """Kill the child; its next start must be refused, the root file untouched."""
    old = pid_of(ref, "app")
    assert old is not None
    os.kill(old, signal.SIGKILL)
    wait_until(
        lambda: start_failures(ref, "app") or secret.read_bytes() != SECRET,
        what="the restart refused (or the root file written)",
    )
    untouched(secret)
    failure = start_failures(ref, "app")[0]
    assert word in failure, failure
    return failure


# -- a symlink, a hard link, a FIFO in place of the log ---------------------------------


@pytest.mark.parametrize("teed", [False, True], ids=["direct", "rotated"])
def test_a_symlink_swapped_in_before_a_restart_is_not_followed(
    tree: Any, child_user: User, logs: Path, secret: Path, teed: bool
) -> None:
    log = logs / "app.log"
    more = {"log_max_bytes": 1 << 20, "log_backups": 1} if teed else {}
    ref = tree(spec(talker(child_user, log, **more)))
    wait_until(lambda: b"started" in log.read_bytes(), what="the first line")
    as_user(child_user, "ln", "-sfn", str(secret), str(log))
    failure = kill_and_see_refusal(ref, secret, "symlink")
    assert str(log) in failure


def test_a_hard_link_to_a_root_file_is_refused(
    tree: Any, child_user: User, logs: Path, child_secret: Path
) -> None:
    log = logs / "app.log"
    ref = tree(spec(talker(child_user, log)))
    wait_until(lambda: b"started" in log.read_bytes(), what="the first line")
    log.unlink()
    os.link(child_secret, log)  # where fs.protected_hardlinks is 0, the user's own doing
    kill_and_see_refusal(ref, child_secret, "")
    assert log.stat().st_nlink == 2


def test_a_log_folder_swapped_for_a_symlink_redirects_nothing(
    tree: Any, child_user: User, logs: Path, root_only: Path
) -> None:
    log = logs / "app.log"
    ref = tree(spec(talker(child_user, log)))
    wait_until(lambda: b"started" in log.read_bytes(), what="the first line")
    as_user(child_user, "mv", str(logs), str(logs) + ".old")
    as_user(child_user, "ln", "-s", str(root_only), str(logs))
    old = pid_of(ref, "app")
    assert old is not None
    os.kill(old, signal.SIGKILL)
    # The folder walked at the first start is held: the restart writes there.
    moved = Path(f"{logs}.old") / "app.log"
    wait_until(lambda: moved.read_bytes().count(b"started") == 2, what="the restart's line")
    assert restarted(ref, "app", old)
    assert sorted(p.name for p in root_only.iterdir()) == ["secret"]
    untouched(root_only / "secret")


@pytest.fixture
def child_secret(child_user: User) -> Path:
    """A root-only file on the child's filesystem (a hard link stays on one)."""
    folder = child_user.home / "root-only"
    folder.mkdir(mode=0o700)
    os.chown(folder, 0, 0)
    path = folder / "secret"
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def test_a_fifo_in_place_of_the_log_does_not_stall_the_launcher(
    tree: Any, child_user: User, logs: Path, secret: Path
) -> None:
    log = logs / "app.log"
    sibling = ChildSpec("sibling", command=["sleep", "600"])
    other = ChildSpec("other", command=["sleep", "600"])
    ref = tree(spec(talker(child_user, log, backoff=None), sibling, other))
    wait_until(lambda: b"started" in log.read_bytes(), what="the first line")
    as_user(child_user, "rm", str(log))
    as_user(child_user, "mkfifo", str(log))
    old = pid_of(ref, "app")
    assert old is not None
    try:
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: start_failures(ref, "app"), 20, what="the restart tried")
        # The launcher goes on: a sibling's restart happens, another's stop is true.
        before = pid_of(ref, "sibling")
        assert before is not None
        os.kill(before, signal.SIGKILL)
        wait_until(lambda: restarted(ref, "sibling", before), 20, what="the sibling's restart")
        stopped = pid_of(ref, "other")
        ref.proxy().terminate_child("other").get(timeout=20)
        assert stopped is not None and not psutil.pid_exists(stopped)
        failure = start_failures(ref, "app")[0]
        assert "FIFO" in failure and str(log) in failure, failure
    finally:
        # Today's launcher is blocked in open(): a reader lets it go, for the teardown.
        reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)
        ref.proxy().terminate_child("app").get(timeout=30)
        os.close(reader)


# -- the rotation race -------------------------------------------------------------------

RACER = """
import os, sys
folder, target = sys.argv[1], sys.argv[2]
names = ["app.log"] * 6 + ["app.log.1", "app.log.2"]
i = 0
while True:
    tmp = os.path.join(folder, ".swap")
    try:
        os.symlink("%s/f%d" % (target, i % 64), tmp)
        os.rename(tmp, os.path.join(folder, names[i % len(names)]))
    except OSError:
        pass
    i += 1
"""


def rotations(folder: Path) -> int:
    return sum(1 for p in folder.iterdir() if p.name.startswith("app.log."))


def race_rotations(user: User, root_only: Path, rounds: int) -> None:
    """The child's user swaps the log and its rotated names for symlinks into a
    root-only folder while the launcher rotates `rounds` times."""
    folder = user.home / f"logs{time.monotonic_ns()}"
    folder.mkdir()
    user.chown(folder, 0o755)
    lines = " ".join(str(n) for n in range(10))
    child = ChildSpec(
        "app",
        command=["sh", "-c", f"while :; do printf '%0100d\\n' {lines}; sleep 0.005; done"],
        user=user.name,
        stdout=str(folder / "app.log"),
        stderr=str(folder / "app.log"),
        log_max_bytes=1024,
        log_backups=rounds + 10,
    )
    tree = Tree.start(spec(child))
    racer = subprocess.Popen(
        [SYSTEM_PY, "-c", RACER, str(folder), str(root_only)], user=user.uid, group=user.gid
    )
    try:
        wait_until(
            lambda: rotations(folder) >= rounds or len(list(root_only.iterdir())) > 1,
            120 + rounds,
            what=f"{rounds} rotations",
        )
    finally:
        racer.kill()
        racer.wait(10)
        tree.stop()
    made = sorted(p.name for p in root_only.iterdir())
    seen = rotations(folder)
    assert made == ["secret"], f"root created {made} in a root-only folder ({seen} rotations)"


@pytest.fixture
def root_only(tmp_path: Path) -> Path:
    folder = tmp_path / "root-only"
    folder.mkdir(mode=0o700)
    (folder / "secret").write_bytes(SECRET)
    (folder / "secret").chmod(0o600)
    return folder


def test_the_rotation_race_never_makes_root_write_outside_the_folder(
    child_user: User, root_only: Path
) -> None:
    race_rotations(child_user, root_only, 400)  # today's code lost in 26-137
    untouched(root_only / "secret")


@pytest.mark.soak
@pytest.mark.timeout(RACE_SECONDS + 600)
def test_the_rotation_race_soak(child_user: User, root_only: Path) -> None:
    """At least 200 rotations raced, in rounds of 400, for RACE_SECONDS."""
    end = time.monotonic() + RACE_SECONDS
    done = 0
    while done < 200 or time.monotonic() < end:
        race_rotations(child_user, root_only, 400)
        done += 400
    untouched(root_only / "secret")


# -- a folder someone else can write, for a child with the tree's own rights ---------------


def test_a_root_child_s_log_in_a_folder_its_user_writes_is_refused(
    tree: Any, child_user: User, logs: Path
) -> None:
    """The first start fails, so the tree's start does."""
    root_child = ChildSpec("app", command=["sleep", "600"], stdout=str(logs / "app.log"))
    with pytest.raises(SupervisorStartError) as refused:
        tree(spec(root_child))
    failure = str(refused.value)
    assert f"can be written by user {child_user.name}" in failure, failure
    assert "user = ..." in failure and f"chmod go-w {logs}" in failure
    assert not (logs / "app.log").exists()


CLI = [sys.executable, "-m", "actors.cli"]


def check(tree_file: Path, body: str) -> str:
    tree_file.write_text('[supervisor]\nid = "t"\n' + body)
    out = subprocess.run(
        [*CLI, "check", str(tree_file)], capture_output=True, text=True, timeout=60
    )
    return out.stderr


def test_check_reports_what_run_refuses(tmp_path: Path, child_user: User, logs: Path) -> None:
    (logs / "fifo.log").unlink(missing_ok=True)
    os.mkfifo(logs / "fifo.log")
    (logs / "link.log").symlink_to("/etc/passwd")
    ok = logs / "ok.log"
    shared = child_user.home / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    child = '[[supervisor.children]]\nid = "{id}"\ncommand = ["true"]\nstdout = "{out}"\n'
    err = check(
        tmp_path / "t.toml",
        child.format(id="root-child", out=ok)
        + child.format(id="fifo", out=logs / "fifo.log")
        + f'user = "{child_user.name}"\n'
        + child.format(id="link", out=logs / "link.log")
        + f'user = "{child_user.name}"\n'
        + child.format(id="fine", out=ok)
        + f'user = "{child_user.name}"\npid_file = "{logs}/fine.pid"\n'
        + child.format(id="shared", out=ok)
        + f'user = "{child_user.name}"\npid_file = "{shared}/d.pid"\n',
    )
    assert f"child 'root-child': stdout '{ok}': folder {logs} can be written by user" in err, err
    assert f"child 'fifo': stdout '{logs}/fifo.log': {logs}/fifo.log is a FIFO" in err, err
    assert f"child 'link': stdout '{logs}/link.log': {logs}/link.log is a symlink" in err, err
    assert f"child 'shared': pid_file '{shared}/d.pid' is the child's user's, in a folder" in err
    assert "'fine'" not in err
    assert "4 problems" in err


# -- logs --reopen, and the log folder's base ---------------------------------------------

TALKER = """
[supervisor]
id = "t"
[[supervisor.children]]
id = "talker"
command = ["sh", "-c", "while :; do echo line; sleep 0.01; done"]
"""


class Run:
    """`nannytree run` in a subprocess, with no terminal (a service's)."""

    def __init__(self, tmp_path: Path, tree: str, *flags: str) -> None:
        self.sock = tmp_path / "t.sock"
        (tmp_path / "t.toml").write_text(tree)
        self.env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
        self.env.pop("NANNYTREE_LOG_DIR", None)
        argv = [*CLI, "run", str(tmp_path / "t.toml"), "--plain", "--socket", str(self.sock)]
        self.p = subprocess.Popen(
            [*argv, *flags],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [*CLI, *args, "--socket", str(self.sock)]
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)

    def end(self) -> str:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        _, err = self.p.communicate(timeout=30)
        return err


def test_logs_reopen_does_not_follow_a_symlink_the_child_put_there(
    tmp_path: Path, child_user: User, logs: Path, secret: Path
) -> None:
    log = logs / "talker.log"
    tree = TALKER + f'user = "{child_user.name}"\nstdout = "{log}"\nlog_timestamps = true\n'
    run = Run(tmp_path, tree)
    try:
        wait_until(lambda: log.exists() and b"line" in log.read_bytes(), what="the first lines")
        moved = logs / "talker.log.1"
        as_user(child_user, "mv", str(log), str(moved))
        as_user(child_user, "ln", "-s", str(secret), str(log))
        assert run.cli("logs", "--reopen").returncode == 0
        wait_until(lambda: b"cannot open" in moved.read_bytes(), what="the refusal noted")
    finally:
        run.end()
    untouched(secret)
    assert b"is a symlink" in moved.read_bytes()


def test_a_log_dir_base_a_stranger_made_is_refused(tmp_path: Path, other_user: User) -> None:
    base = other_user.home / "logs"  # made first by a user outside the tree (as under /tmp)
    base.mkdir()
    other_user.chown(base, 0o755)
    target = tmp_path / "root-only"  # /etc, say: root's folder with a `t` in it
    (target / "t").mkdir(parents=True)
    run = Run(tmp_path, TALKER, "--log-dir", str(base))
    try:
        wait_until(
            lambda: run.p.poll() is not None or (base / "t" / "t" / "talker.log").exists(),
            what="the run refused or its first log",
        )
        if run.p.poll() is None:  # today's run: the stranger swaps <tree> for a symlink
            as_user(other_user, "mv", str(base / "t"), str(base / "old"))
            as_user(other_user, "ln", "-s", str(target), str(base / "t"))
            run.cli("logs", "--reopen")
            wait_until(lambda: (target / "t" / "talker.log").exists(), 10, what="the redirect")
    finally:
        err = run.end()
    assert not (target / "t" / "talker.log").exists(), "root wrote where the stranger chose"
    assert run.p.returncode != 0
    assert f"log folder {base} can be written by user {other_user.name}" in err, err
    assert f"chmod go-w {base}" in err


# -- pid_file with user = ------------------------------------------------------------------


@pytest.fixture
def run_dir(child_user: User) -> Path:
    """The daemon's own folder (its /run/app): only its user and root write it."""
    folder = child_user.home / "run"
    folder.mkdir()
    child_user.chown(folder, 0o755)
    (child_user.home / "daemon.py").write_text(DAEMON)
    return folder


def daemon(user: User, folder: Path, mode: str, timeout: float = 10.0) -> ChildSpec:
    pid_file, marker = folder / "d.pid", folder / "marker"
    return ChildSpec(
        "d",
        command=[SYSTEM_PY, str(user.home / "daemon.py"), str(pid_file), mode, str(marker)],
        user=user.name,
        pid_file=str(pid_file),
        start_timeout=timeout,
    )


def marked(folder: Path) -> int:
    wait_until((folder / "marker").exists, 20, "the daemon's pid")
    return int((folder / "marker").read_text())


def test_a_user_daemon_writing_its_own_pid_file_is_supervised(
    tree: Any, child_user: User, run_dir: Path
) -> None:
    ref = tree(spec(daemon(child_user, run_dir, "prompt")))
    first = marked(run_dir)
    assert pid_of(ref, "d") == first  # the daemon, named by its own pid file
    assert (run_dir / "d.pid").stat().st_uid == child_user.uid
    (run_dir / "marker").unlink()
    os.kill(first, signal.SIGKILL)
    second = marked(run_dir)
    wait_until(lambda: pid_of(ref, "d") == second, what="the new daemon followed")
    ref.proxy().terminate_child("d").get(timeout=30)
    assert not psutil.pid_exists(second)


@pytest.mark.parametrize("names", ["pid 1", "another user's process", "a shared folder"])
def test_a_user_daemon_s_pid_file_is_still_checked(
    tree: Any, child_user: User, other_user: User, run_dir: Path, names: str
) -> None:
    pid_file = run_dir / "d.pid"
    stranger = None
    expected = "is not a process this child started"
    if names == "pid 1":
        pid = 1
    elif names == "another user's process":
        stranger = subprocess.Popen(["sleep", "600"], user=other_user.uid, group=other_user.gid)
        pid = stranger.pid
    else:
        pid = os.getpid()
        run_dir.chmod(0o777)
        expected = "in a folder others can write too"
    pid_file.write_text(f"{pid}\n")
    child_user.chown(pid_file, 0o644)
    try:
        with pytest.raises(SupervisorStartError) as refused:
            tree(spec(daemon(child_user, run_dir, "silent", 2.0)))
        assert expected in str(refused.value), refused.value
        assert str(pid_file) in str(refused.value)
        if stranger is not None:
            assert stranger.poll() is None  # refused, not killed
    finally:
        if stranger is not None:
            stranger.kill()
            stranger.wait(10)
    wait_until(lambda: not psutil.pid_exists(marked(run_dir)), 10, what="the daemon killed")


def test_an_event_log_path_a_stranger_controls_is_refused(
    tmp_path: Path, other_user: User, secret: Path
) -> None:
    folder = other_user.home / "events"  # a folder of a user outside the tree
    folder.mkdir()
    other_user.chown(folder, 0o755)
    as_user(other_user, "ln", "-s", str(secret), str(folder / "events.jsonl"))
    run = Run(tmp_path, TALKER, "--event-log", str(folder / "events.jsonl"))
    try:
        wait_until(
            lambda: run.p.poll() is not None or secret.read_bytes() != SECRET,
            what="the run refused (or the root file written)",
        )
    finally:
        err = run.end()
    untouched(secret)
    assert run.p.returncode != 0
    assert f"cannot write the event log {folder}/events.jsonl" in err, err
    assert f"can be written by user {other_user.name}" in err, err


def test_logs_reads_no_file_of_roots_that_the_child_links_in_place_of_its_log(
    child_user: User, logs: Path, child_secret: Path
) -> None:
    """`nannytree logs` is answered by the run's server, as root: a child's user who
    puts a symlink or a hard link to a root file in place of its log gets none of it
    shown, and a symlinked folder on the way is not followed either."""
    from actors.cli._logfile import tail_file

    log = logs / "app.log"
    as_user(child_user, "sh", "-c", f"echo mine > {log}")
    assert tail_file(str(log)) == "mine\n"
    as_user(child_user, "rm", str(log))
    as_user(child_user, "ln", "-s", str(child_secret), str(log))
    with pytest.raises(ValueError, match="symlink") as linked:
        tail_file(str(log))
    as_user(child_user, "rm", str(log))
    os.link(child_secret, log)  # as the child could, where hard links are not protected
    with pytest.raises(ValueError) as hard:
        tail_file(str(log))
    os.unlink(log)
    away = logs / "away"
    as_user(child_user, "ln", "-s", str(child_secret.parent), str(away))
    with pytest.raises(ValueError) as through:
        tail_file(str(away / child_secret.name))
    for refused in (linked, hard, through):
        assert SECRET.decode() not in str(refused.value)
