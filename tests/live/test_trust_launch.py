"""What a child is launched with (issue 35): a `user =` Python target holds nothing of
other children, `no_new_privileges` and resource `limits`; on real processes, as root,
with real unprivileged users (tests/support/users.py)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors import Tree
from supervision import (
    ChildSpec,
    ConfigError,
    EventKind,
    ListenSocket,
    SpecError,
    StartError,
    SupervisorSpec,
    load_tree,
)
from tests.live.test_sockets import free_port
from tests.live.test_warm_start import _launcher_children
from tests.support import RACE_SECONDS, children_by_id, wait_event, wait_until
from tests.support.users import User

SYSTEM_PYTHON = "/usr/bin/python3"


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        entries = f.read().split(b"\0")
    return dict(e.decode().partition("=")[::2] for e in entries if e)


def _memory_holds(pid: int, needles: list[bytes]) -> list[bytes]:
    """The needles found anywhere in the process's readable memory (read as root)."""
    found: set[bytes] = set()
    longest = max(len(n) for n in needles)
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if fields[1][0] != "r" or (len(fields) > 5 and fields[5] == "[vvar]"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            tail = b""
            for at in range(start, end, 1 << 20):
                try:
                    mem.seek(at)
                    chunk = mem.read(min(1 << 20, end - at))
                except OSError:
                    break
                window = tail + chunk
                found.update(n for n in needles if n in window)
                tail = window[-longest:]
    return sorted(found)


def _notifier(folder: Path) -> Path:
    script = folder / "notifier.py"
    script.write_text(
        "import os, socket, time\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "s.connect(os.environ['NOTIFY_SOCKET'])\n"
        "s.send(b'READY=1')\n"
        "time.sleep(600)\n"
    )
    script.chmod(0o644)
    return script


@pytest.mark.parametrize("warm", [False, True], ids=["started", "warm_start"])
def test_a_user_python_target_holds_no_other_childs_secret(
    warm: bool, child_user: User, other_user: User
) -> None:
    """A neighbour's env secret and notify socket, in the launcher's memory as its
    template, must not be in a `user =` target's memory (forked, it would be)."""
    secret = "s3cr3t-" + secrets.token_hex(12)
    script = _notifier(other_user.chown(other_user.home, 0o755))
    db = ChildSpec(
        id="db",
        command=[SYSTEM_PYTHON, str(script)],
        env={"DB_PASSWORD": secret},
        user=other_user.name,
        ready="sd_notify",
        start_timeout=20.0,
    )

    def idle() -> None:  # by value, and only modules loaded: the user may not read a venv
        time.sleep(600)

    app = ChildSpec(id="app", target=idle, user=child_user.name, warm_start=warm)
    with Tree.start(SupervisorSpec(id="root", children=[db, app])) as tree:
        children = children_by_id(tree.ref)
        db_pid, app_pid = children["db"].pid, children["app"].pid
        assert db_pid is not None and app_pid is not None
        db_env = _environ(db_pid)
        assert db_env["DB_PASSWORD"] == secret
        needles = [secret.encode(), db_env["NOTIFY_SOCKET"].encode()]
        needles += [db_env[k].encode() for k in db_env if k == "NANNYTREE_CHILD_TOKEN"]
        # The search finds what is there.
        assert _memory_holds(db_pid, [secret.encode()]) == [secret.encode()]
        wait_until(lambda: _status(app_pid)["Uid"][0] == str(child_user.uid))
        assert _memory_holds(app_pid, needles) == []
        if not warm:
            return
        # Its standby (the next incarnation, waiting) is a fresh interpreter too, and
        # the restart runs it.
        wait_until(lambda: len(_launcher_children(tree.ref)) == 3, what="the standby")
        standby = next(
            p.pid for p in _launcher_children(tree.ref) if p.pid not in children_pids(tree)
        )
        wait_until(lambda: _status(standby)["Uid"][0] == str(child_user.uid))
        assert _memory_holds(standby, needles) == []
        os.kill(app_pid, signal.SIGKILL)
        event = wait_event(
            tree.ref, EventKind.CHILD_STARTED, "app", where=lambda e: e.incarnation == 2
        )
        assert event.pid == standby


def children_pids(tree: Tree) -> set[int | None]:
    return {c.pid for c in children_by_id(tree.ref).values()}


def _status(pid: int) -> dict[str, list[str]]:
    with open(f"/proc/{pid}/status") as f:
        return {k: v.split() for k, _, v in (line.partition(":") for line in f)}


def _limits(pid: int) -> dict[str, tuple[str, str]]:
    """/proc/<pid>/limits: {"Max open files": (soft, hard)}."""
    out = {}
    with open(f"/proc/{pid}/limits") as f:
        next(f)
        for line in f:
            m = re.match(r"(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)", line)
            if m:
                out[m.group(1)] = (m.group(2), m.group(3))
    return out


# -- sockets in a fresh interpreter ---------------------------------------------------


@pytest.mark.parametrize("as_user", [False, True], ids=["fresh_interpreter", "user"])
def test_a_fresh_interpreter_gets_its_sockets(as_user: bool, child_user: User) -> None:
    """Fds from 3 and the LISTEN_ variables, in a target exec'd afresh (as a user, or
    asked for), and the socket answers."""
    out = str(child_user.home / "report")
    port = free_port()

    def report(out: str) -> None:  # os and stat only: the user may not read a venv
        import stat

        fd = os.open(out + ".tmp", os.O_WRONLY | os.O_CREAT, 0o644)
        names = [os.environ.get(k, "") for k in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")]
        names.append(os.environ.get("HOME", "-"))
        names += [str(stat.S_ISSOCK(os.fstat(3).st_mode)), str(os.getuid())]
        os.write(fd, " ".join(names).encode())
        os.close(fd)
        os.rename(out + ".tmp", out)
        time.sleep(600)

    account = {"user": child_user.name} if as_user else {"fresh_interpreter": True}
    spec = ChildSpec(
        id="py",
        target=report,
        args=(out,),
        sockets=[ListenSocket(f"127.0.0.1:{port}", name="web")],
        **account,  # type: ignore[arg-type]
    )
    with Tree.start(SupervisorSpec(id="root", children=[spec])) as tree:
        pid = children_by_id(tree.ref)["py"].pid
        wait_until(lambda: os.path.exists(out))
        ours = (0, os.environ.get("HOME", "-"))
        uid, home = (child_user.uid, str(child_user.home)) if as_user else ours
        got = Path(out).read_text().split()
        assert got == [str(pid), "1", "web", home, "True", str(uid)]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


# -- limits and no_new_privileges ----------------------------------------------------

LIMITS = {
    "nofile": "256:512",
    "core": 0,
    "fsize": "1M",
    "as": "8G",
    "memlock": "64K",
    "stack": "8M:16M",
    "cpu": "infinity",
    "nproc": "100:200",
}
SHOWN = {
    "Max open files": ("256", "512"),
    "Max core file size": ("0", "0"),
    "Max file size": (str(1 << 20),) * 2,
    "Max address space": (str(8 << 30),) * 2,
    "Max locked memory": (str(64 << 10),) * 2,
    "Max stack size": (str(8 << 20), str(16 << 20)),
    "Max cpu time": ("unlimited", "unlimited"),
    "Max processes": ("100", "200"),
}


def _sleeper(kind: str, user: User) -> dict[str, Any]:
    """A child of each way the launcher starts one, as fields of a ChildSpec."""

    def sleep() -> None:
        time.sleep(600)

    if kind == "command":
        return {"command": ["sleep", "600"], "user": user.name}
    if kind == "target":
        return {"target": sleep}  # forked from the launcher
    return {"target": sleep, "user": user.name}  # a fresh interpreter


KINDS = ["command", "target", "target as user"]


@pytest.mark.parametrize("kind", KINDS)
def test_limits_and_no_new_privileges_are_the_childs(kind: str, child_user: User) -> None:
    spec = ChildSpec(id="c", **_sleeper(kind, child_user), limits=LIMITS, no_new_privileges=True)
    with Tree.start(SupervisorSpec(id="root", children=[spec])) as tree:
        pid = children_by_id(tree.ref)["c"].pid
        assert pid is not None
        uid = 0 if kind == "target" else child_user.uid
        wait_until(lambda: _status(pid)["Uid"][0] == str(uid))  # a fresh one: once it is
        assert _status(pid)["NoNewPrivs"] == ["1"]
        shown = _limits(pid)
        assert {k: shown[k] for k in SHOWN} == SHOWN


@pytest.mark.parametrize("kind", KINDS)
def test_without_them_a_child_has_nannytrees_limits_and_may_gain_privileges(
    kind: str, child_user: User
) -> None:
    """The rule when `limits` is unset: the limits nannytree was started with."""
    import resource

    own = resource.getrlimit(resource.RLIMIT_NOFILE)
    spec = ChildSpec(id="c", **_sleeper(kind, child_user))
    with Tree.start(SupervisorSpec(id="root", children=[spec])) as tree:
        pid = children_by_id(tree.ref)["c"].pid
        assert pid is not None
        wait_until(lambda: _status(pid)["Uid"][0] == str(0 if kind == "target" else child_user.uid))
        assert _limits(pid)["Max open files"] == tuple(map(str, own))
        assert _status(pid)["NoNewPrivs"] == ["0"]


def test_a_setuid_program_gains_nothing_under_no_new_privileges(child_user: User) -> None:
    """A setuid-root copy of `id`: run by the user, it is root; with no_new_privileges,
    it stays the user."""
    suid = child_user.home / "id-suid"
    shutil.copy2("/usr/bin/id", suid)
    os.chown(suid, 0, 0)
    suid.chmod(0o4755)

    def child(cid: str, **more: Any) -> ChildSpec:
        out = child_user.home / cid
        script = f'"{suid}" -u > "{out}.tmp" && mv "{out}.tmp" "{out}"; exec sleep 600'
        return ChildSpec(id=cid, command=["sh", "-c", script], user=child_user.name, **more)

    children = [child("plain"), child("sealed", no_new_privileges=True)]
    with Tree.start(SupervisorSpec(id="root", children=children)):
        for cid in ("plain", "sealed"):
            wait_until((child_user.home / cid).exists, what=cid)
        assert (child_user.home / "plain").read_text().strip() == "0"  # the setuid works
        assert (child_user.home / "sealed").read_text().strip() == str(child_user.uid)


@pytest.mark.parametrize("kind", KINDS)
def test_a_limit_the_kernel_refuses_fails_the_start_naming_it(kind: str, child_user: User) -> None:
    too_many = _nr_open() + 1
    spec = ChildSpec(id="c", **_sleeper(kind, child_user), limits={"nofile": too_many})
    with pytest.raises(StartError) as caught:
        Tree.start(SupervisorSpec(id="root", children=[spec], intensity=0))
    message = str(caught.value)
    assert f"cannot set its limit nofile to {too_many}:{too_many}" in message
    assert "lower limits.nofile" in message


def _nr_open() -> int:
    with open("/proc/sys/fs/nr_open") as f:
        return int(f.read())


# -- bad values: refused by the spec, by the tree file and by check, with the fix ----


@pytest.mark.parametrize(
    ("limits", "field", "says"),
    [
        ({"nofiles": 1024}, "limits.nofiles", "did you mean 'nofile'?"),
        ({"nofile": "4096:1024"}, "limits.nofile", "give SOFT:HARD with SOFT <= HARD"),
        ({"nofile": "infinity"}, "limits.nofile", "never infinity; give a number"),
        ({"cpu": "5M"}, "limits.cpu", 'expected seconds, "infinity", or "SOFT:HARD"'),
        ({"core": -1}, "limits.core", "never negative"),
        ({"core": True}, "limits.core", "expected bytes"),
        ({"nice": 41}, "limits.nice", "at most 40"),
        ({"as": "4X"}, "limits.as", "expected bytes (a number, or with K, M, G, T, P)"),
        ({"fsize": 1 << 63}, "limits.fsize", "at most"),
        ("nofile=1024", "limits", "expected a table of limits"),
    ],
)
def test_bad_limits_are_refused_naming_child_field_and_fix(
    limits: Any, field: str, says: str
) -> None:
    with pytest.raises(SpecError) as caught:
        ChildSpec(id="web", command=["true"], limits=limits)
    assert (caught.value.child, caught.value.field) == ("web", field)
    assert says in str(caught.value)
    assert str(caught.value).startswith(f"child 'web': field '{field}'")


def test_limits_take_systemds_forms() -> None:
    spec = ChildSpec(
        id="web",
        command=["true"],
        limits={
            "nofile": 4096,
            "as": "4G",
            "nproc": "64:128",
            "core": "0:infinity",
            "cpu": "infinity",
            "stack": (1 << 20, "8M"),
        },
    )
    assert spec.limits == {
        "nofile": (4096, 4096),
        "as": (4 << 30, 4 << 30),
        "nproc": (64, 128),
        "core": (0, None),
        "cpu": (None, None),
        "stack": (1 << 20, 8 << 20),
    }
    with pytest.raises(SpecError, match="expected True or False"):
        ChildSpec(id="web", command=["true"], no_new_privileges="yes")  # type: ignore[arg-type]


TREE = '[supervisor]\nid = "t"\n[[supervisor.children]]\nid = "web"\ncommand = ["true"]\n'


def test_the_tree_file_keys() -> None:
    web = load_tree(
        TREE + 'no_new_privileges = true\nlimits = { nofile = "1024:4096", core = 0 }\n', "t.toml"
    ).children[0]
    assert isinstance(web, ChildSpec)
    assert web.no_new_privileges is True
    assert web.limits == {"nofile": (1024, 4096), "core": (0, 0)}
    for text, path, says in [
        ('limits = { nofile = "lots" }\n', "limits.nofile", "expected open files"),
        ("limits = 1024\n", "limits", "expected a table, e.g. { nofile = 4096 }"),
        ('no_new_privileges = "yes"\n', "no_new_privileges", "expected"),
    ]:
        with pytest.raises(ConfigError) as caught:
            load_tree(TREE + text, "t.toml")
        (error,) = caught.value.errors
        assert error.path == f"supervisor.children[0].{path}"
        assert says in str(error)


def _check(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    tree = tmp_path / "t.toml"
    tree.write_text(TREE + text)
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-m", "actors.cli", "check", str(tree)],
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_says_a_bad_limit_with_the_fix(tmp_path: Path) -> None:
    done = _check(tmp_path, 'limits = { nofile = "4096:1024" }\n')
    assert done.returncode == 1
    assert 'supervisor.children[0].limits.nofile is "4096:1024"' in done.stderr
    assert "give SOFT:HARD with SOFT <= HARD" in done.stderr


def test_check_says_nofile_past_nr_open(tmp_path: Path) -> None:
    """Refused by the kernel even to root: said before anything runs."""
    done = _check(tmp_path, f"limits = {{ nofile = {_nr_open() + 1} }}\n")
    assert done.returncode == 1
    assert f"child 'web': limits.nofile: {_nr_open() + 1} is above fs.nr_open" in done.stderr
    assert "lower limits.nofile or raise fs.nr_open" in done.stderr
    assert _check(tmp_path, f"limits = {{ nofile = {_nr_open()} }}\n").returncode == 0


def test_check_says_a_hard_limit_only_root_may_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    from actors._operate._preflight import _limit_problems

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    above = ChildSpec(id="web", command=["true"], limits={"nofile": hard + 1, "core": 0})
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    (problem,) = _limit_problems(above)
    assert problem == (
        f"child 'web': limits.nofile: hard limit {hard + 1} is above nannytree's own "
        f"({hard}), which only root may raise; lower limits.nofile to at most {hard}, or "
        "run nannytree as root"
    )
    assert _limit_problems(ChildSpec(id="web", command=["true"], limits={"nofile": hard})) == []


# -- looped: every way of launching a confined child, restarted, leaks nothing -------


def _crash_loopers(user: User, port: int) -> list[ChildSpec]:
    def crash() -> None:
        raise SystemExit(3)

    confined: dict[str, Any] = {"limits": {"nofile": 512, "core": 0}, "no_new_privileges": True}
    sockets = [ListenSocket(f"127.0.0.1:{port}")]
    return [
        ChildSpec(id="fresh", target=crash, user=user.name, sockets=sockets, **confined),
        ChildSpec(id="warm", target=crash, user=user.name, warm_start=True, **confined),
        ChildSpec(id="forked", target=crash, **confined),
        ChildSpec(id="command", command=["sh", "-c", "exit 3"], user=user.name, **confined),
    ]


def _restart_rounds(user: User, until: Callable[[int], bool]) -> None:
    """Crash-looping children of each launch path; the launcher's fds and children
    are the same after the rounds as before them."""
    specs = _crash_loopers(user, free_port())
    root = SupervisorSpec(id="root", intensity=10**9, period=1.0, children=specs)
    with Tree.start(root) as tree:
        nanny = tree.ref.proxy()
        log = tree.ref.proxy().event_log().get()
        launcher = int(tree.context.spawner.pid)  # type: ignore[union-attr]

        def starts(cid: str, n: int) -> None:
            log.wait_for(
                lambda e: (
                    e.context is EventKind.CHILD_STARTED
                    and e.offender == cid
                    and (e.incarnation or 0) >= n
                ),
                60,
            )

        def stopped_fds() -> int:
            for spec in specs:
                nanny.terminate_child(spec.id).get()
            wait_until(lambda: not _launcher_children(tree.ref), what="children gone")
            return len(os.listdir(f"/proc/{launcher}/fd"))

        for spec in specs:
            starts(spec.id, 3)  # warmed up: the sockets bound, the paths cached
        before = stopped_fds()
        rounds = 0
        while not until(rounds):
            for spec in specs:
                nanny.restart_child(spec.id).get()
            for spec in specs:  # three crashes and restarts each
                starts(spec.id, (nanny.which_child(spec.id).get().incarnation or 0) + 3)
            rounds += 1
            assert len(os.listdir(f"/proc/{launcher}/fd")) < before + 64  # no growth
            for spec in specs:
                nanny.terminate_child(spec.id).get()
        stopped_fds()
        # No more than before (a pidfd or a pipe of the last exit may still be closing).
        fds = f"/proc/{launcher}/fd"
        wait_until(lambda: len(os.listdir(fds)) <= before, what=f"the launcher's {before} fds")


def test_restarts_of_every_launch_path_leak_nothing(child_user: User) -> None:
    _restart_rounds(child_user, lambda rounds: rounds >= 3)


@pytest.mark.soak
@pytest.mark.timeout(RACE_SECONDS + 300)
def test_restarts_of_every_launch_path_leak_nothing_soak(child_user: User) -> None:
    deadline = time.monotonic() + RACE_SECONDS
    _restart_rounds(child_user, lambda rounds: time.monotonic() > deadline)
