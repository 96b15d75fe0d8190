"""The control socket survives abuse (issue 10, items 2 and 6): descriptor
exhaustion, too many clients, slow followers, oversized requests, and files
planted at the lock path."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from actors import EventLog
from actors._launcher._runtime_dir import UnsafeDirectory, runtime_dir
from actors.cli._control import MAX_LINE, ControlError, call
from actors.host._controller import Controller
from actors.host._follow import MAX_PENDING, Follower
from actors.host._server import MAX_CLIENTS, ControlSocket
from supervision import Event, EventKind, ExitReason

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "actors.cli"]


def _event(detail: str = "") -> Event:
    return Event(
        time=time.monotonic(),
        supervisor="t",
        context=EventKind.CHILD_EXITED,
        offender="w",
        reason=ExitReason.normal(),
        detail=detail,
    )


def _connect(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))  # blocking: a full backlog waits rather than fails (EAGAIN)
    s.settimeout(20)
    return s


def _answer(s: socket.socket) -> dict[str, Any]:
    with s.makefile("rb") as lines:
        return json.loads(lines.readline())  # type: ignore[no-any-return]


def _until(check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "not true in time"
        time.sleep(0.02)
    return result


# -- bad paths: one clear line, nothing followed ----------------------------------------


def test_a_symlinked_lock_file_is_never_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    sock = tmp_path / "x.sock"
    (tmp_path / "x.sock.lock").symlink_to(victim)
    with pytest.raises(ControlError, match=r"x\.sock\.lock is a symlink; remove it"):
        ControlSocket.bind(sock)
    assert victim.read_text() == "precious\n"
    assert not sock.exists()


def _run_cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    tree = tmp_path / "t.toml"
    tree.write_text(
        '[supervisor]\nid = "t"\n[[supervisor.children]]\nid = "w"\ncommand = ["sleep", "600"]\n'
    )
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    return subprocess.run(
        [*CLI, "run", str(tree), "--plain", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=30,
    )


@pytest.mark.parametrize("plant", ["symlink", "fifo", "directory"])
def test_a_bad_lock_path_is_a_one_line_error_from_run(tmp_path, plant):
    lock = tmp_path / "x.sock.lock"
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    if plant == "symlink":
        lock.symlink_to(victim)
    elif plant == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    out = _run_cli("--socket", str(tmp_path / "x.sock"), tmp_path=tmp_path)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("nannytree: "), out.stderr
    assert "x.sock.lock" in out.stderr and "Traceback" not in out.stderr
    assert victim.read_text() == "precious\n"


def test_a_missing_folder_is_a_one_line_error_from_run(tmp_path):
    out = _run_cli("--socket", str(tmp_path / "no" / "such" / "x.sock"), tmp_path=tmp_path)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "does not exist" in out.stderr, out.stderr


# -- the runtime directory: private, or refused ---------------------------------------------


def test_the_runtime_dir_is_made_private_whatever_the_umask(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    old = os.umask(0o022)
    try:
        made = runtime_dir()
    finally:
        os.umask(old)
    assert made == tmp_path / "nannytree"
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert runtime_dir(create=False) == made


def test_without_xdg_it_lives_in_tmpdir_and_a_client_never_makes_it(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(os, "getuid", lambda: 1000)  # a user's; root's is /run/nannytree
    assert runtime_dir(create=False) is None
    assert not (tmp_path / "nannytree-1000").exists()
    (tmp_path / "nannytree-1000").mkdir(mode=0o700)
    os.chown(tmp_path / "nannytree-1000", 1000, 1000)
    assert runtime_dir(create=False) == tmp_path / "nannytree-1000"


def test_a_loose_runtime_dir_is_refused_not_repaired(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    loose = tmp_path / "nannytree"
    loose.mkdir()
    loose.chmod(0o755)
    with pytest.raises(UnsafeDirectory, match=rf"{loose} has mode 0755.*`chmod 700 {loose}`"):
        runtime_dir()
    assert stat.S_IMODE(loose.stat().st_mode) == 0o755
    # The CLI says it in one line, with its own way out, and exits 1.
    out = subprocess.run(
        [*CLI, "status"],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)},
        cwd=ROOT,
        timeout=30,
    )
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert f"chmod 700 {loose}" in out.stderr and "--socket PATH" in out.stderr


def test_a_runtime_dir_of_another_user_or_a_symlink_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "nannytree").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeDirectory, match="is not a directory; remove it"):
        runtime_dir()
    (tmp_path / "nannytree").unlink()
    (tmp_path / "nannytree").mkdir(mode=0o700)
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 1)  # as another user sees ours
    with pytest.raises(UnsafeDirectory, match=rf"belongs to uid {me}, not to you \(uid {me + 1}\)"):
        runtime_dir()


# -- accept survives descriptor exhaustion -------------------------------------------------

SERVER = textwrap.dedent(
    """
    import os, resource, sys, threading
    from pathlib import Path
    from actors.host._server import ControlSocket

    control = ControlSocket.bind(Path(sys.argv[1]))
    failures = []
    real = control._sock

    class Counting:
        # The listening socket, counting the accepts that failed for want of an fd.
        def fileno(self):
            return real.fileno()
        def accept(self):
            try:
                return real.accept()
            except OSError as e:
                failures.append(e.errno)
                raise
        def close(self):
            real.close()

    control._sock = Counting()
    control.serve(lambda request, send: send({"ok": True, "pong": request.get("n")}))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    fillers = []
    try:
        while True:
            fillers.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    print("full", flush=True)
    sys.stdin.readline()       # the test has connected a client
    while len(failures) < 3:   # accept failed, and was tried again
        threading.Event().wait(0.01)
    for fd in fillers:
        os.close(fd)
    print(f"freed after {len(failures)} failed accepts", flush=True)
    sys.stdin.readline()
    control.close()
    """
)


def test_accept_survives_fd_exhaustion_and_recovers(tmp_path):
    sock = tmp_path / "x.sock"
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(sock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None and server.stdin is not None
        assert server.stdout.readline() == "full\n"
        waiting = _connect(sock)  # queued in the backlog while no fd is free
        waiting.sendall(b'{"op": "ping", "n": 1}\n')
        server.stdin.write("go\n")
        server.stdin.flush()
        assert server.stdout.readline().startswith("freed after")
        assert _answer(waiting) == {"ok": True, "pong": 1}
        assert call(sock, {"op": "ping", "n": 2}, timeout=20) == {"ok": True, "pong": 2}
        waiting.close()
        server.stdin.write("done\n")
        server.stdin.close()
        assert server.wait(20) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()


# -- clients: capped, cheap, bounded --------------------------------------------------------


@pytest.fixture
def served(tmp_path):
    log = EventLog()
    control = ControlSocket.bind(tmp_path / "x.sock")
    controller = Controller(None, log, {"tree": "t"}, lambda why: None, control.closing)  # type: ignore[arg-type]
    control.serve(controller.handle)
    yield control, log, controller
    control.close(linger=5.0)
    controller.close()


def test_clients_over_the_cap_are_refused_with_a_reason(served):
    control, _, _ = served
    idle = [_connect(control.path) for _ in range(MAX_CLIENTS)]
    try:
        _until(lambda: len(control._connections) == MAX_CLIENTS)
        refused = _connect(control.path)
        answer = _answer(refused)
        refused.close()
        assert answer["ok"] is False and answer["kind"] == "Busy"
        assert f"too many clients ({MAX_CLIENTS} connected)" in answer["error"]
    finally:
        for s in idle:
            s.close()
    _until(lambda: not control._connections)
    assert call(control.path, {"op": "hello"}, timeout=20) == {"ok": True, "tree": "t"}


def test_a_following_client_costs_one_thread(served):
    control, log, controller = served
    before = threading.active_count()
    followers = []
    for _ in range(10):
        s = _connect(control.path)
        s.sendall(b'{"op": "events", "follow": true, "last": 0}\n')
        followers.append(s)
    _until(lambda: len(controller.fanout._followers) == 10)
    log.append(_event("hello"))
    for s in followers:
        with s.makefile("rb") as lines:
            assert json.loads(lines.readline())["event"]["detail"] == "hello"
    assert threading.active_count() - before <= 10 + 1
    for s in followers:
        s.close()
    _until(lambda: not control._connections)


def test_an_oversized_request_is_refused(served):
    control, _, _ = served
    s = _connect(control.path)
    s.sendall(b'{"op": "' + b"x" * (MAX_LINE + 10) + b'"}\n')
    answer = _answer(s)
    s.close()
    assert answer["kind"] == "BadRequest" and f"longer than {MAX_LINE} bytes" in answer["error"]


def test_a_follower_that_falls_behind_is_bounded_in_bytes():
    follower = Follower()
    big = _event("x" * 60_000)
    for _ in range(10 * MAX_PENDING // 60_000):
        follower.offer(big)
    assert follower._bytes <= MAX_PENDING
    assert follower.take(timeout=0) is None  # its stream ends, saying why


def test_a_follower_that_keeps_up_gets_every_event_once_in_order():
    follower = Follower()
    events = [_event(str(i)) for i in range(100)]
    for e in events:
        follower.offer(e)
    assert follower.take(timeout=0) == events
    assert follower.take(timeout=0) == []
