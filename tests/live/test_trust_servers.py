"""What strangers and a child's user can reach of a root tree's servers: listen
sockets made without a path race, root's runtime folder, the metrics endpoint's
bounds, and tree files past the stated limits (issue 35)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from actors._launcher import _runtime_dir
from actors._launcher._launched import SpawnError
from actors._launcher._listeners import Listeners
from actors._launcher._runtime_dir import UnsafeDirectory, runtime_dir
from actors.cli._control import ControlError, find_socket, socket_for
from actors.host._http_server import MAX_CONNECTIONS, READ_TIMEOUT, REQUEST_BYTES, BoundedHTTPServer
from supervision import load_tree
from supervision.config._errors import (
    TooLarge,
)
from supervision.config._keys import (
    MAX_CHILDREN,
    MAX_DEPTH,
    MAX_FILE_BYTES,
)
from tests.cli.test_commands import Proc, cli
from tests.support import RACE_SECONDS, wait_until
from tests.support.users import User

# Today's code lost within 150-740 rounds (of 4 runs); 3,000 take about 1 s.
ROUNDS = 3000

# -- listen sockets ---------------------------------------------------------------------

# As the child's user: whenever app.sock is a socket, rename a symlink to root's file
# over it (atomic), so that whatever root does next by path lands on that file.
SWAPPER = """
import os, stat, sys
folder, target = sys.argv[1], sys.argv[2]
sock, link = os.path.join(folder, "app.sock"), os.path.join(folder, "link")
print("ready", flush=True)
while True:
    try:
        if not os.path.lexists(link):
            os.symlink(target, link)
        if stat.S_ISSOCK(os.lstat(sock).st_mode):
            os.rename(link, sock)
    except OSError:
        pass
"""


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder of root's that every user can reach (0755), as /run is (tmp_path is
    under a 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix="nannytree-servers-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def swapper(child_user: User, base: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(the socket's folder, the child's user's in one of root's, as /run/app; root's
    0600 file) with a process of the child's user racing every bind in that folder."""
    folder = base / "app"
    folder.mkdir()
    child_user.chown(folder, 0o755)
    secret = tmp_path / "secret"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    p = subprocess.Popen(
        ["/usr/bin/python3", "-c", SWAPPER, str(folder), str(secret)],
        user=child_user.uid,
        group=child_user.gid,
        extra_groups=[],
        stdout=subprocess.PIPE,
        cwd="/",
    )
    try:
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        yield folder, secret
    finally:
        p.kill()
        p.wait()
        assert p.stdout is not None
        p.stdout.close()


def _race(folder: Path, secret: Path, uid: int, rounds: int, seconds: float = 0.0) -> int:
    """Bind and close app.sock in `folder` as the launcher does, `rounds` times at
    least (and for `seconds`); the rounds the swapper won a rename in."""
    sock = folder / "app.sock"
    deadline = time.monotonic() + seconds
    swapped = done = 0
    while done < rounds or time.monotonic() < deadline:
        if os.path.lexists(sock):
            sock.unlink()
        listeners = Listeners()
        with contextlib.suppress(SpawnError):  # the swapper's symlink was there first
            listeners.fds(1, [["app", str(sock), 16]], uid)
        listeners.close_all()
        swapped += os.path.islink(sock)
        done += 1
        mode = stat.S_IMODE(secret.stat().st_mode)
        assert mode == 0o600, f"round {done}: root's file became {mode:04o}"
    return swapped


def test_a_socket_in_the_childs_folder_never_changes_a_file_of_roots(
    child_user: User, swapper: tuple[Path, Path]
) -> None:
    folder, secret = swapper
    _race(folder, secret, child_user.uid, rounds=ROUNDS)


@pytest.mark.soak
@pytest.mark.timeout(RACE_SECONDS + 600)
def test_soak_a_socket_in_the_childs_folder_never_changes_a_file_of_roots(
    child_user: User, swapper: tuple[Path, Path]
) -> None:
    folder, secret = swapper
    swapped = _race(folder, secret, child_user.uid, rounds=20 * ROUNDS, seconds=RACE_SECONDS)
    print(f"the swapper replaced the socket in {swapped} rounds; root's file kept 0600")


def _bind(path: Path, uid: int = -1) -> str:
    """The launcher's error binding a socket at `path` ("" if it binds)."""
    listeners = Listeners()
    try:
        listeners.fds(1, [["app", str(path), 16]], uid)
    except SpawnError as e:
        return str(e)
    finally:
        listeners.close_all()
    return ""


def test_a_socket_in_a_strangers_folder_is_refused_with_the_fix(
    child_user: User, other_user: User, base: Path
) -> None:
    theirs = base / "theirs"
    theirs.mkdir()
    other_user.chown(theirs, 0o755)
    assert _bind(theirs / "app.sock", child_user.uid) == (
        f"socket 'app': the folder {theirs} belongs to uid {other_user.uid}, who could make "
        "the socket's path lead elsewhere; use a folder of root's (a folder of the child's "
        f"user's is fine in one of root's, such as /run/app), `chown root {theirs}`, "
        "or another path"
    )
    assert not (theirs / "app.sock").exists()
    # A folder of the child's user's is fine as the last one only: above, it could
    # swap the next for a link (its home, say).
    inside = child_user.home / "run"
    inside.mkdir()
    child_user.chown(inside, 0o755)
    assert f"the folder {child_user.home} belongs to uid {child_user.uid}" in _bind(
        inside / "app.sock", child_user.uid
    )
    mine = base / "app"
    mine.mkdir()
    child_user.chown(mine, 0o755)
    listeners = Listeners()
    try:
        listeners.fds(1, [["app", str(mine / "app.sock"), 16]], child_user.uid)
        st = (mine / "app.sock").lstat()  # made 0666 (systemd's default), root's
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666
        assert st.st_uid == 0
    finally:
        listeners.close_all()
    assert not (mine / "app.sock").exists()


def test_a_folder_others_may_write_or_a_users_symlink_is_refused(
    child_user: User, base: Path
) -> None:
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert _bind(shared / "app.sock") == (
        f"socket 'app': the folder {shared} has mode 0777: other users may write it; "
        f"`chmod go-w {shared}`, or use another folder"
    )
    # In a sticky folder (as /tmp), the child's user points a link at /etc: not followed.
    shared.chmod(0o1777)
    link = shared / "run"
    os.symlink("/etc", link)
    os.lchown(link, child_user.uid, child_user.gid)
    assert _bind(link / "app.sock", child_user.uid) == (
        f"socket 'app': {link} is a symlink of uid {child_user.uid}, who could point it "
        "anywhere; give the real path"
    )
    assert not os.path.lexists("/etc/app.sock")
    # Nor a folder of its own there: it could rename it away and put a link instead.
    own = shared / "own"
    own.mkdir()
    child_user.chown(own, 0o755)
    assert f"the folder {own} belongs to uid {child_user.uid}" in _bind(
        own / "app.sock", child_user.uid
    )
    # Root's own links are followed (/var/run -> /run).
    os.symlink(base, base / "here")
    assert _bind(base / "here" / "app.sock") == ""


# -- root's runtime folder ------------------------------------------------------------------


def test_a_stranger_who_made_the_tmp_folder_first_no_longer_stops_root(
    other_user: User, base: Path, tmp_path: Path
) -> None:
    """Root without XDG_RUNTIME_DIR used $TMPDIR (or /tmp)/nannytree-0, which any user
    could make first; it now uses /run/nannytree (the real one: a tree of its own id)."""
    temp = base / "tmp"  # a /tmp of the test's: sticky, anyone may make a folder there
    temp.mkdir()
    temp.chmod(0o1777)
    squat = temp / "nannytree-0"
    squat.mkdir()
    other_user.chown(squat, 0o700)
    tree = f"servers{os.getpid()}"
    file = tmp_path / f"{tree}.toml"
    file.write_text(
        '[supervisor]\n\n[[supervisor.children]]\nid = "sleeper"\n'
        'command = ["sleep", "600"]\nshutdown = 2\n'
    )
    env = {**os.environ, "COLUMNS": "200", "TMPDIR": str(temp)}
    env["NANNYTREE_LOG_DIR"] = str(tmp_path / "logs")
    env.pop("XDG_RUNTIME_DIR", None)
    with Proc("run", str(file), "--plain", env=env) as run:
        run.expect(rf"{tree}/sleeper child_started")
        sock = _runtime_dir.ROOT_DIR / f"{tree}.sock"
        assert stat.S_ISSOCK(sock.lstat().st_mode)
        wait_until(
            lambda: cli("status", "--tree", tree, env=env).returncode == 0,
            what="status finds the tree in /run/nannytree",
        )
        listed = cli("ls", env=env)
        assert f"{tree}\tpid {run.p.pid}\t{sock}" in listed.stdout.splitlines()
        # Only root may connect: the stranger is refused by the folder's mode.
        assert _connect_as(other_user, sock) == errno.EACCES
        stopped = cli("stop", "--tree", tree, "sleeper", env=env)
        assert stopped.returncode == 0, stopped.stderr
    assert not sock.exists()
    st = _runtime_dir.ROOT_DIR.lstat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o700)
    assert list(squat.iterdir()) == []  # the stranger's folder was never used


def _connect_as(user: User, path: Path) -> int:
    """The errno of a connect to `path` by `user` (0: it connected), in a forked child
    that takes on the user's ids and does nothing else."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 0
        try:
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(str(path))
        except OSError as e:
            code = e.errno or 255
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_run_nannytree_not_roots_is_refused_with_the_fix(
    other_user: User, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = base / "nannytree"  # in place of /run/nannytree, which other tests use
    fake.mkdir()
    other_user.chown(fake, 0o700)
    monkeypatch.setattr(_runtime_dir, "ROOT_DIR", fake)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    why = (
        f"{fake} belongs to uid {other_user.uid}, not to you (uid 0); remove it (as its "
        "owner or root) or set XDG_RUNTIME_DIR to a directory of yours"
    )
    with pytest.raises(UnsafeDirectory) as made:
        runtime_dir(create=True)
    assert str(made.value) == why
    for finding in (lambda: socket_for("app"), lambda: find_socket("app"), find_socket):
        with pytest.raises(ControlError) as found:
            finding()
        assert str(found.value) == f"{why}; or pass --socket PATH"
    # Root's own XDG_RUNTIME_DIR (pam_systemd's /run/user/0) is still used; one of
    # another user's (sudo keeps it) is not.
    theirs = base / "xdg"
    theirs.mkdir()
    other_user.chown(theirs, 0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(theirs))
    with pytest.raises(UnsafeDirectory):
        runtime_dir(create=True)
    assert not (theirs / "nannytree").exists()
    fake.rmdir()
    assert runtime_dir(create=True) == fake


# -- one meaning for ${NAME} ------------------------------------------------------------------

ARGV_TREE = """\
[supervisor]
id = "vars"

[[supervisor.children]]
id = "echo"
restart = "temporary"
stdout = "argv.json"
command = "python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' ${MSG} '${MSG}' x${MSG}"
"""


def test_a_variable_in_a_command_string_is_one_argument_to_check_and_to_run(
    tmp_path: Path,
) -> None:
    """As systemd's ${NAME}: its value stays in its word, spaces and quotes and all;
    `check` passes the file that `run` runs, and shows the same argv."""
    file = tmp_path / "vars.toml"
    file.write_text(ARGV_TREE)
    msg = "a b 'c"  # a space and a lone quote: split, it would be three words, or an error
    env = {**os.environ, "COLUMNS": "200", "XDG_RUNTIME_DIR": str(tmp_path), "MSG": msg}
    env["NANNYTREE_LOG_DIR"] = str(tmp_path / "logs")
    checked = cli("check", str(file), env=env)
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr == ""
    assert shlex.join([msg, msg, "x" + msg]) in checked.stdout  # the argv, as loaded
    out = tmp_path / "argv.json"
    with Proc("run", str(file), "--plain", env=env):
        wait_until(lambda: out.exists() and out.read_text().endswith("\n"), what="argv.json")
    assert json.loads(out.read_text()) == [msg, msg, "x" + msg]


# -- the metrics endpoint ---------------------------------------------------------------------

# As another user: open N connections to the endpoint and send nothing; say when all
# are open, then when the server has closed every one.
IDLER = """
import selectors, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sel = selectors.DefaultSelector()
for _ in range(n):
    s = socket.create_connection((host, port))
    sel.register(s, selectors.EVENT_READ)
print("open", flush=True)
start = time.monotonic()
while sel.get_map():
    for key, _ in sel.select():
        if not key.fileobj.recv(4096):
            sel.unregister(key.fileobj)
            key.fileobj.close()
print(f"closed {time.monotonic() - start:.1f}", flush=True)
"""


def test_idle_connections_hold_no_thread_and_a_scrape_still_answers(
    other_user: User, tmp_path: Path
) -> None:
    file = tmp_path / "mon.toml"
    file.write_text(
        '[supervisor]\n\n[[supervisor.children]]\nid = "web"\ncommand = ["sleep", "600"]\n'
    )
    env = {**os.environ, "COLUMNS": "200", "XDG_RUNTIME_DIR": str(tmp_path)}
    env["NANNYTREE_LOG_DIR"] = str(tmp_path / "logs")
    with Proc("run", str(file), "--plain", "--metrics", "0", env=env) as run:
        url = run.expect(r"^nannytree: metrics: (http://\S+)$")[1]
        run.expect(r"mon/web child_started")
        host, port = url.removeprefix("http://").split("/")[0].rsplit(":", 1)
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.status == 200
        threads = psutil.Process(run.p.pid).num_threads()
        idler = subprocess.Popen(
            ["/usr/bin/python3", "-c", IDLER, host, port, str(8 * MAX_CONNECTIONS)],
            user=other_user.uid,
            group=other_user.gid,
            extra_groups=[],
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        try:
            assert idler.stdout is not None
            assert idler.stdout.readline() == "open\n"
            # Held connections cost no thread (today's server: one each, for ever).
            assert psutil.Process(run.p.pid).num_threads() <= threads + 2  # 2: slack
            with urllib.request.urlopen(url, timeout=10) as answer:
                assert answer.status == 200
                assert b"nannytree_tree_up" in answer.read()
            # Every idle one is closed, the last READ_TIMEOUT after it was accepted.
            idler.wait(READ_TIMEOUT + 10)
            said = idler.stdout.readline().split()
            assert said[0] == "closed" and float(said[1]) <= READ_TIMEOUT + 5
        finally:
            idler.kill()
            idler.wait()
            if idler.stdout is not None:
                idler.stdout.close()


def _hello(environ: dict[str, object], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"hello {environ['PATH_INFO']}\n".encode()]


def _get(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        return b"".join(iter(lambda: s.recv(65536), b""))


def test_a_slow_or_oversized_request_is_closed_within_its_bounds() -> None:
    server = BoundedHTTPServer(_hello, "127.0.0.1", 0)
    port = server.server_address[1]
    try:
        assert _get(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").endswith(b"hello /metrics\n")
        big = b"GET / HTTP/1.1\r\nX: " + b"x" * REQUEST_BYTES + b"\r\n\r\n"
        with pytest.raises((ConnectionResetError, BrokenPipeError)):  # closed, unread
            _get(port, big)
        # A client that trickles its request a byte at a time never finishes it: it is
        # closed READ_TIMEOUT after its accept, however steadily the bytes come.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
            start = time.monotonic()
            with contextlib.suppress(OSError):
                while time.monotonic() - start < READ_TIMEOUT + 5:
                    slow.sendall(b"G")
                    slow.settimeout(0.2)
                    with contextlib.suppress(TimeoutError):
                        if slow.recv(1) == b"":
                            break
            took = time.monotonic() - start
        assert READ_TIMEOUT - 0.5 <= took < READ_TIMEOUT + 4, took
        assert _get(port, b"GET /x HTTP/1.0\r\n\r\n").endswith(b"hello /x\n")
    finally:
        server.close()


# -- tree files past the limits ---------------------------------------------------------------


def _children(n: int, inline: bool) -> str:
    """A tree of n workers: as [[supervisor.children]] tables, or one inline array
    (about 32 bytes a child: 100,000 of them fit in 4 MiB)."""
    if inline:
        rows = "".join(f'{{id="c{i}",command=["true"]}},\n' for i in range(n))
        return f'[supervisor]\nid = "big"\nchildren = [\n{rows}]\n'
    rows = "".join(f'[[supervisor.children]]\nid = "c{i}"\ncommand = ["true"]\n' for i in range(n))
    return f'[supervisor]\nid = "big"\n\n{rows}'


def _nested(levels: int) -> str:
    """Supervisors nested `levels` deep below the root, a worker in the last."""
    text = '[supervisor]\nid = "deep"\n'
    for k in range(1, levels + 1):
        text += f'[[supervisor{".children" * k}]]\nid = "s{k}"\n'
        text += 'command = ["true"]\n' if k == levels else 'strategy = "one_for_one"\n'
    return text


FIX = "split it into several trees (a `nannytree run` each)"


def test_a_tree_file_past_the_limits_is_refused_by_check_and_run(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200", "XDG_RUNTIME_DIR": str(tmp_path)}
    env["NANNYTREE_LOG_DIR"] = str(tmp_path / "logs")
    tables, inline, deep = tmp_path / "tables.toml", tmp_path / "inline.toml", tmp_path / "d.toml"
    tables.write_text(_children(100_000, inline=False))
    inline.write_text(_children(100_000, inline=True))
    deep.write_text(_nested(MAX_DEPTH + 1))
    assert tables.stat().st_size > MAX_FILE_BYTES > inline.stat().st_size
    said = {
        tables: f"larger than 4 MiB (4,194,304 bytes), the limit of a tree file; {FIX}",
        inline: f"more than 10,000 children, the limit of a tree file; {FIX}",
        deep: "children nested more than 32 levels below the root, the limit of a tree "
        f"file; flatten it, or {FIX}",
    }
    for file, why in said.items():
        for command in ("check", "run"):
            done = cli(command, str(file), env=env)
            assert (done.returncode, done.stderr) == (1, f"nannytree: {file}: {why}\n")
            assert done.stdout == ""


def test_a_tree_file_at_the_limits_loads() -> None:
    spec = load_tree(_children(MAX_CHILDREN, inline=True), "big.toml", vars={})
    assert len(spec.children) == MAX_CHILDREN
    deep = load_tree(_nested(MAX_DEPTH), "deep.toml", vars={})
    for _ in range(MAX_DEPTH - 1):
        deep = deep.children[0]
    assert deep.children[0].id == f"s{MAX_DEPTH}"
    with pytest.raises(TooLarge):
        load_tree(_children(MAX_CHILDREN + 1, inline=True), "big.toml")
    with pytest.raises(TooLarge):
        load_tree(_nested(MAX_DEPTH + 1), "deep.toml")
    with pytest.raises(TooLarge):
        load_tree("#" * MAX_FILE_BYTES + "\n", "big.toml")


def test_update_refuses_a_file_past_the_limits_and_the_tree_runs_on(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200", "XDG_RUNTIME_DIR": str(tmp_path)}
    env["NANNYTREE_LOG_DIR"] = str(tmp_path / "logs")
    file = tmp_path / "big.toml"
    file.write_text(_children(1, inline=False).replace('["true"]', '["sleep", "600"]'))
    with Proc("run", str(file), "--plain", env=env) as run:
        run.expect(r"big/c0 child_started")
        wait_until(lambda: cli("status", env=env).returncode == 0, what="the tree started")
        file.write_text(_children(MAX_CHILDREN + 1, inline=True))
        done = cli("update", env=env)
        assert done.returncode == 1
        assert f"more than 10,000 children, the limit of a tree file; {FIX}" in done.stderr
        assert cli("status", "c0", env=env).returncode == 0


def test_check_refuses_a_socket_folder_the_launcher_would(
    child_user: User, other_user: User, base: Path, tmp_path: Path
) -> None:
    theirs, mine = base / "theirs", base / "app"
    for folder, owner in ((theirs, other_user), (mine, child_user)):
        folder.mkdir()
        owner.chown(folder, 0o755)
    file = tmp_path / "s.toml"
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "COLUMNS": "200"}
    child = '[[supervisor.children]]\nid = "web"\ncommand = ["sleep", "600"]\nuser = "{}"\n'
    file.write_text(
        "[supervisor]\n"
        + child.format(child_user.name)
        + f'sockets = [{{ name = "http", listen = "{theirs}/app.sock" }}]\n'
    )
    done = cli("check", str(file), env=env)
    assert done.returncode == 1
    assert done.stderr == (
        f"nannytree: {file}: child 'web': socket 'http': the folder {theirs} belongs to uid "
        f"{other_user.uid}, who could make the socket's path lead elsewhere; use a folder of "
        "root's (a folder of the child's user's is fine in one of root's, such as /run/app), "
        f"`chown root {theirs}`, or another path\n"
        f"nannytree: {file}: 1 problem; the tree would not run as written\n"
    )
    file.write_text(
        "[supervisor]\n"
        + child.format(child_user.name)
        + f'sockets = [{{ name = "http", listen = "{mine}/app.sock" }}]\n'
    )
    done = cli("check", str(file), env=env)
    assert done.returncode == 0, done.stderr
