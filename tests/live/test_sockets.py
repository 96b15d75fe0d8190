"""Sockets that outlive restarts (socket activation) and per-child user and group, on
real processes (docs/sockets.md)."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Tree
from supervision import ChildSpec, EventKind, ListenSocket, StartError, SupervisorSpec
from tests.support import children_by_id, wait_event, wait_until

# Writes what it inherited (its pid, the LISTEN_ variables, what each fd from 3 is)
# to argv[1], then accepts connections and closes each at once.
REPORT = """
import json, os, socket, sys
fds = {}
for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
    try:
        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
found = []
for i in range(int(os.environ.get("LISTEN_FDS", "0"))):
    s = socket.socket(fileno=3 + i)
    found.append([s.family.name, s.getsockname()])
    s.detach()
names = ("HOME", "USER", "LOGNAME")
env = {k: v for k, v in os.environ.items() if k.startswith("LISTEN_") or k in names}
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "env": env, "fds": fds, "sockets": found}, f)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
if int(os.environ.get("LISTEN_FDS", "0")):
    s = socket.socket(fileno=3)
    while True:
        c, _ = s.accept()
        c.close()
else:
    import time
    while True:
        time.sleep(1)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def report_child(tmp_path: Path, cid: str, **fields: Any) -> tuple[ChildSpec, Path]:
    script = tmp_path / "report.py"
    script.write_text(REPORT)
    out = tmp_path / f"{cid}.json"
    return ChildSpec(id=cid, command=[sys.executable, str(script), str(out)], **fields), out


def read_report(out: Path, pid: int | None = None) -> dict[str, Any]:
    def written() -> bool:
        if not out.exists():
            return False
        return pid is None or json.loads(out.read_text())["pid"] == pid

    wait_until(written, what=f"{out} written")
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def socket_links(pid: int) -> set[str]:
    links = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:"):
            links.add(link)
    return links


def test_fds_env_and_names_arrive_in_order(tmp_path: Path) -> None:
    port = free_port()
    path = str(tmp_path / "app.sock")
    spec, out = report_child(
        tmp_path,
        "web",
        sockets=[
            ListenSocket(f"127.0.0.1:{port}", name="http"),
            {"name": "admin", "listen": path},
            {"listen": f"[::1]:{free_port()}"},
        ],
    )
    with Tree(SupervisorSpec(id="root", children=[spec])) as tree:
        pid = children_by_id(tree.ref)["web"].pid
        got = read_report(out)
        assert got["pid"] == pid
        assert got["env"]["LISTEN_PID"] == str(pid)
        assert got["env"]["LISTEN_FDS"] == "3"
        assert got["env"]["LISTEN_FDNAMES"] == "http:admin:web"  # unnamed: the child's id
        families = [s[0] for s in got["sockets"]]
        assert families == ["AF_INET", "AF_UNIX", "AF_INET6"]
        assert got["sockets"][0][1] == ["127.0.0.1", port]
        assert got["sockets"][1][1] == path
        # 0-2 and the three sockets: nothing else.
        assert sorted(int(fd) for fd in got["fds"]) == [0, 1, 2, 3, 4, 5]
        assert os.stat(path).st_mode & 0o777 == 0o666
    assert not os.path.exists(path)  # removed with the tree


def test_a_python_target_gets_them_too(tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "target.json"

    def serve(out: str) -> None:
        s = socket.socket(fileno=3)
        names = os.environ["LISTEN_FDNAMES"]
        Path(out + ".tmp").write_text(
            json.dumps([os.environ["LISTEN_PID"], names, s.getsockname()])
        )
        os.rename(out + ".tmp", out)  # whole, once it exists
        while True:
            s.accept()[0].close()

    spec = ChildSpec(
        id="py", target=serve, args=(str(out),), sockets=[ListenSocket(f"127.0.0.1:{port}")]
    )
    with Tree(SupervisorSpec(id="root", children=[spec])) as tree:
        pid = children_by_id(tree.ref)["py"].pid
        wait_until(out.exists)
        assert json.loads(out.read_text()) == [str(pid), "py", ["127.0.0.1", port]]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


class Hammer:
    """A client that connects to 127.0.0.1:`port` without pause while in the `with`
    block, counting the connections made and those refused."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connected = self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=10).close()
                self.connected += 1
            except ConnectionRefusedError:
                self.refused += 1

    def __enter__(self) -> Hammer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_restarts_refuse_no_connection(tmp_path: Path) -> None:
    """A client connecting without pause while the child is SIGKILLed over and over
    is never refused: connections wait in the queue nannytree holds."""
    port = free_port()
    spec, out = report_child(tmp_path, "web", sockets=[{"listen": f"127.0.0.1:{port}"}])

    root = SupervisorSpec(id="root", intensity=100, period=60.0, children=[spec])
    with Tree(root) as tree:
        read_report(out)
        with Hammer(port) as client:
            for _ in range(15):
                pid = children_by_id(tree.ref)["web"].pid
                assert pid is not None
                read_report(out, pid)  # it accepts
                os.kill(pid, signal.SIGKILL)
                wait_until(lambda old=pid: children_by_id(tree.ref)["web"].pid not in (None, old))
    assert client.refused == 0
    assert client.connected > 15


def test_a_replaced_child_keeps_its_socket_and_refuses_nothing(tmp_path: Path) -> None:
    """`update` replaces a changed child by a new worker with a new template: the socket
    the old one leaves lingers until the new one takes it, so a client hammering
    through 10 replacements is never refused, and the socket is the very same one."""
    port = free_port()
    spec, out = report_child(tmp_path, "web", sockets=[{"listen": f"127.0.0.1:{port}"}])

    with Tree(SupervisorSpec(id="root", children=[spec])) as tree:
        first = socket_links(read_report(out)["pid"])
        with Hammer(port) as client:
            for n in range(10):
                old = children_by_id(tree.ref)["web"].pid
                changed = dataclasses.replace(spec, env={"ROUND": str(n)})
                tree.nanny.replace_child("web", changed).get()
                pid = children_by_id(tree.ref)["web"].pid
                assert pid not in (None, old)
                read_report(out, pid)
        assert socket_links(pid) & first  # the same socket, not one bound again
    assert client.refused == 0
    assert client.connected > 10


def test_a_bind_failure_names_child_socket_address_and_holder(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        spec = ChildSpec(
            id="web",
            command=["sleep", "60"],
            sockets=[{"name": "http", "listen": f"127.0.0.1:{port}"}],
        )
        with pytest.raises(StartError) as caught:
            Tree.start(SupervisorSpec(id="root", children=[spec]))
    message = str(caught.value)
    assert "'web'" in message
    assert f"socket 'http' cannot listen on 127.0.0.1:{port}: Address already in use" in message
    assert f"held by pid {os.getpid()}" in message


def test_a_deleted_child_closes_its_socket_but_not_a_shared_one(tmp_path: Path) -> None:
    own, shared = free_port(), free_port()
    path = tmp_path / "own.sock"
    a, out_a = report_child(
        tmp_path,
        "a",
        sockets=[
            {"listen": f"127.0.0.1:{own}"},
            {"listen": str(path), "name": "u"},
            {"listen": f"127.0.0.1:{shared}", "name": "s"},
        ],
    )
    b, out_b = report_child(tmp_path, "b", sockets=[{"listen": f"127.0.0.1:{shared}", "name": "s"}])
    with Tree(SupervisorSpec(id="root", children=[a, b])) as tree:
        read_report(out_a)
        read_report(out_b)
        nanny = tree.nanny
        nanny.terminate_child("a").get()
        # Stopped, not deleted: the socket stays, a connection waits in its queue.
        socket.create_connection(("127.0.0.1", own), timeout=5).close()
        nanny.delete_child("a").get()
        wait_until(lambda: _refused(own), what="the deleted child's socket closed")
        assert not path.exists()
        socket.create_connection(("127.0.0.1", shared), timeout=5).close()  # b still uses it
    assert _refused(shared)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_no_socket_leaks_into_other_children(tmp_path: Path) -> None:
    port = free_port()
    web, out = report_child(tmp_path, "web", sockets=[{"listen": f"127.0.0.1:{port}"}])

    def idle() -> None:
        time.sleep(60)

    children = [
        ChildSpec(id="before", command=["sleep", "60"]),
        web,
        ChildSpec(id="cmd", command=["sleep", "60"]),
        ChildSpec(id="py", target=idle),
    ]
    root = SupervisorSpec(id="root", intensity=10, children=children)
    with Tree(root) as tree:
        read_report(out)
        web_pid = children_by_id(tree.ref)["web"].pid
        assert web_pid is not None
        listening = socket_links(web_pid)
        assert listening
        os.kill(web_pid, signal.SIGKILL)  # and after a restart
        wait_until(lambda: children_by_id(tree.ref)["web"].pid not in (None, web_pid))
        for cid in ("before", "cmd", "py"):
            pid = children_by_id(tree.ref)[cid].pid
            assert pid is not None
            assert not socket_links(pid) & listening, cid


# -- user and group ------------------------------------------------------------------

root_only = pytest.mark.skipif(
    os.geteuid() != 0, reason="only root may run a child as another user"
)
# An interpreter another user may run (a virtualenv's may live under a private home).
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory another user can reach and write (tmp_path's parents are private)."""
    path = Path(tempfile.mkdtemp(prefix="nannytree-users-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _status(pid: int) -> dict[str, list[str]]:
    with open(f"/proc/{pid}/status") as f:
        return {k: v.split() for k, _, v in (line.partition(":") for line in f)}


@root_only
def test_a_child_runs_as_nobody_with_its_groups_and_variables(open_dir: Path) -> None:
    import grp
    import pwd

    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON}")
    nobody = pwd.getpwnam("nobody")
    log = open_dir / "out.log"
    spec, out = report_child(open_dir, "c", user="nobody", stdout=str(log), env={"LOGNAME": "mine"})
    assert spec.command is not None
    spec = dataclasses.replace(spec, command=[SYSTEM_PYTHON, *spec.command[1:]])
    script = ChildSpec(
        id="t",
        command=["sh", "-c", "echo written by $(id -un); sleep 60"],
        user=nobody.pw_uid,
        group="nogroup",
        stdout=str(log),
    )
    with Tree(SupervisorSpec(id="root", children=[spec, script])) as tree:
        got = read_report(out)
        status = _status(got["pid"])
        assert status["Uid"] == [str(nobody.pw_uid)] * 4
        assert status["Gid"] == [str(nobody.pw_gid)] * 4
        assert sorted(status["Groups"]) == sorted(
            map(str, os.getgrouplist("nobody", nobody.pw_gid))
        )
        assert got["env"]["HOME"] == nobody.pw_dir
        assert got["env"]["USER"] == "nobody"
        assert got["env"]["LOGNAME"] == "mine"  # the spec's env wins
        pid = children_by_id(tree.ref)["t"].pid
        assert pid is not None
        assert _status(pid)["Gid"][0] == str(grp.getgrnam("nogroup").gr_gid)
        # In a folder every user can write, the launcher opens the log with the
        # child's rights (docs/logs.md, "Whose rights"): nobody's file, still written.
        wait_until(lambda: "written by nobody" in log.read_text())
        assert log.stat().st_uid == nobody.pw_uid


@root_only
def test_a_python_target_runs_as_the_user(open_dir: Path) -> None:
    out = open_dir / "ids"

    def ids(out: str) -> None:
        # Only modules the launcher has loaded: nobody may not read this interpreter's
        # files (a Python under /root, as in CI); the next test covers that case.
        fd = os.open(out + ".tmp", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, f"{os.getuid()} {os.getgid()}".encode())
        os.close(fd)
        os.rename(out + ".tmp", out)
        time.sleep(60)

    import pwd

    nobody = pwd.getpwnam("nobody")
    spec = ChildSpec(id="py", target=ids, args=(str(out),), user="nobody")
    with Tree(SupervisorSpec(id="root", children=[spec])):
        wait_until(out.exists)
        assert out.read_text() == f"{nobody.pw_uid} {nobody.pw_gid}"


@root_only
def test_a_python_target_whose_user_cannot_read_the_interpreter_says_so(
    open_dir: Path,
) -> None:
    """The target's imports run as its user: where that user cannot read the stdlib,
    the failure names the folder; where it can, the target runs."""
    import colorsys  # a module the launcher never loads: unpickling the target imports it

    out = open_dir / "hsv"

    def convert(out: str) -> None:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, repr(colorsys.rgb_to_hsv(1, 0, 0)).encode())
        os.close(fd)
        time.sleep(60)

    stdlib = os.path.dirname(os.__file__)
    readable = subprocess.run(["test", "-r", stdlib, "-a", "-x", stdlib], user="nobody").returncode
    spec = ChildSpec(id="py", target=convert, args=(str(out),), user="nobody")
    with Tree(SupervisorSpec(id="root", children=[spec], intensity=0)) as tree:
        if readable == 0:
            wait_until(out.exists)
            assert out.read_text() == repr(colorsys.rgb_to_hsv(1, 0, 0))
            return
        exited = wait_event(tree.ref, EventKind.CHILD_EXITED, "py")
        assert exited.reason is not None
        message = exited.reason.message
        assert "No module named 'colorsys'" in message
        assert f"cannot read {stdlib}" in message
        assert not out.exists()


NOTIFIER = """
import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect(os.environ["NOTIFY_SOCKET"])
s.send(b"READY=1\\nSTATUS=serving as %d" % os.getuid())
while True:
    s.send(b"WATCHDOG=1")
    time.sleep(0.2)
"""


@root_only
def test_an_sd_notify_child_as_another_user_reaches_its_notify_socket(open_dir: Path) -> None:
    """Its notify socket (in a private folder) is the user's: READY=1 arrives, and the
    watchdog's pings keep it running past several watchdog periods."""
    import pwd

    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} is needed: another user may not run this venv's")
    script = open_dir / "notifier.py"
    script.write_text(NOTIFIER)
    script.chmod(0o644)
    spec = ChildSpec(
        id="svc",
        command=[SYSTEM_PYTHON, str(script)],
        user="nobody",
        ready="sd_notify",
        watchdog=1.0,
        start_timeout=10.0,
    )
    nobody = pwd.getpwnam("nobody").pw_uid
    with Tree.start(SupervisorSpec(id="root", children=[spec])) as tree:
        info = children_by_id(tree.ref)["svc"]
        assert info.pid is not None
        assert _status(info.pid)["Uid"][0] == str(nobody)
        first = info.pid
        deadline = time.monotonic() + 3.0  # three watchdog periods
        while time.monotonic() < deadline:
            assert children_by_id(tree.ref)["svc"].pid == first
            time.sleep(0.1)


def test_an_unknown_user_is_a_start_error_naming_child_and_field() -> None:
    spec = ChildSpec(id="web", command=["sleep", "60"], user="no-such-user-here")
    with pytest.raises(StartError) as caught:
        Tree.start(SupervisorSpec(id="root", children=[spec]))
    assert "child 'web': field 'user' is 'no-such-user-here': no such user" in str(caught.value)
    spec = ChildSpec(id="web", command=["sleep", "60"], group="no-such-group-here")
    with pytest.raises(StartError, match="field 'group' is 'no-such-group-here': no such group"):
        Tree.start(SupervisorSpec(id="root", children=[spec]))


def test_another_user_without_root_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from actors._shell import _account

    monkeypatch.setattr(_account.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(_account.os, "getegid", lambda: 1000)
    spec = ChildSpec(id="web", command=["true"], user="root")
    with pytest.raises(
        _account.AccountError,
        match="child 'web': field 'user' is 'root', but nannytree runs as uid 1000, not root",
    ):
        _account.resolve(spec)


def test_a_new_template_keeps_the_socket_of_the_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's environment changed: the restart defines a new template, which must
    take the old one's socket over (the very same socket), not bind it again."""
    port = free_port()
    spec, out = report_child(tmp_path, "web", sockets=[{"listen": f"127.0.0.1:{port}"}])
    with Tree(SupervisorSpec(id="root", intensity=5, children=[spec])) as tree:
        first = read_report(out)
        before = first["fds"]["3"]
        monkeypatch.setenv("NANNYTREE_TEST_CHANGED", "1")  # inherited: a new template
        os.kill(first["pid"], signal.SIGKILL)
        wait_until(lambda: children_by_id(tree.ref)["web"].pid not in (None, first["pid"]))
        second = read_report(out, children_by_id(tree.ref)["web"].pid)
        assert second["fds"]["3"] == before  # socket:[inode]: the same socket


def test_a_warm_standby_gets_its_sockets(tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "warm.json"

    def serve(out: str) -> None:
        s = socket.socket(fileno=3)
        Path(out + ".tmp").write_text(json.dumps([os.environ["LISTEN_PID"], os.getpid()]))
        os.rename(out + ".tmp", out)  # whole, once it exists
        while True:
            s.accept()[0].close()

    spec = ChildSpec(
        id="warm",
        target=serve,
        args=(str(out),),
        warm_start=True,
        sockets=[ListenSocket(f"127.0.0.1:{port}")],
    )
    with Tree(SupervisorSpec(id="root", intensity=5, children=[spec])) as tree:
        for _ in range(3):  # the first start, then restarts from the standby
            wait_until(out.exists)
            listen_pid, pid = json.loads(out.read_text())
            assert listen_pid == str(pid) == str(children_by_id(tree.ref)["warm"].pid)
            out.unlink()
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda old=pid: children_by_id(tree.ref)["warm"].pid not in (None, old))


def test_our_own_user_without_root_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    from actors._shell import _account
    from actors._shell._request import build_request

    me = pwd.getpwuid(os.geteuid())
    monkeypatch.setattr(_account.os, "geteuid", lambda: me.pw_uid)
    spec = ChildSpec(id="web", command=["true"], user=me.pw_name)
    resolved = _account.resolve(spec)
    assert resolved is not None and resolved[0][0] == me.pw_uid
    request = build_request(spec, None, None)
    assert request.env is not None and request.env["USER"] == me.pw_name
    if os.geteuid() == 0:
        assert request.account is not None  # root: the launcher sets the ids


def test_ids_the_kernel_refuses_are_a_clear_spawn_error() -> None:
    """Not "cannot execute": the ids could not be taken on (a container may forbid it)."""
    from actors._launcher._exec import fork_exec
    from actors._launcher._launched import SpawnError
    from actors._launcher._listeners import ChildSetup

    bad = ChildSetup([], [], 2**32 - 1, 2**32 - 1, [1])  # (uid_t)-1: EINVAL
    with pytest.raises(SpawnError, match="cannot take on uid 4294967295") as caught:
        fork_exec("/bin/true", ["true"], {}, None, None, None, bad)
    assert caught.value.errno in (errno.EINVAL, errno.EPERM)  # EPERM: not root


@root_only
def test_check_says_when_a_python_targets_user_cannot_read_the_interpreter(
    tmp_path: Path,
) -> None:
    root = Path(__file__).resolve().parents[2]
    tree = tmp_path / "t.toml"
    tree.write_text(
        '[supervisor]\nid = "t"\n[[supervisor.children]]\nid = "py"\n'
        'target = "tests.targets.children:sleep_forever"\nuser = "nobody"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "check", str(tree)],
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    stdlib = os.path.dirname(os.__file__)
    readable = [
        subprocess.run(["test", "-r", d, "-a", "-x", d], user="nobody").returncode == 0
        for d in (sys.prefix, stdlib)
    ]
    if all(readable):
        assert "who cannot read" not in done.stderr
        return
    assert done.returncode == 1
    assert "child 'py': field 'user' is 'nobody', who cannot read" in done.stderr
    assert (sys.prefix if not readable[0] else stdlib) in done.stderr


def test_a_forgotten_templates_sockets_close_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once one of a template's sockets refuses, its unix socket's file is gone too: no
    expiry pass closes some and leaves the rest (the clock moves between calls)."""
    from actors._launcher import _listeners

    clock = iter(range(1000))
    monkeypatch.setattr(_listeners.time, "monotonic", lambda: float(next(clock)))
    path = tmp_path / "u.sock"
    for _ in range(50):
        held = _listeners.Listeners()
        sockets: list[list[object]] = [
            ["t", f"127.0.0.1:{free_port()}", 8],
            ["u", str(path), 8],
        ]
        held.fds(1, sockets)
        held.release(1)
        held.expire()  # the clock has moved on past the first deadline only
        assert len(held) in (0, 2)
        held.close_all()
        assert not path.exists()
