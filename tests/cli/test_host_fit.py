"""nannytree in its host: `nannytree run` speaks sd_notify to the service manager
that started it (READY=1 once the tree is up, STATUS=, STOPPING=1, WATCHDOG=1),
the guardian, the launcher and forked children carry titles naming the tree, and
a stopped child's sd_notify STATUS= text goes with it."""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from actors import Tree
from actors._operate._records import Node
from actors.host._host_notify import notify_address, summary, watchdog_period
from supervision import ChildSpec, SupervisorSpec
from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 20.0


class Manager:
    """The service manager's side: a datagram socket that collects what is sent."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.got: list[tuple[float, dict[str, str]]] = []

    def next(self, key: str, timeout: float = DEADLINE) -> dict[str, str]:
        """The next message with `key` (those before it are kept in `got`)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                break
            fields = dict(line.split("=", 1) for line in data.decode().splitlines())
            self.got.append((time.monotonic(), fields))
            if key in fields:
                return fields
        raise AssertionError(f"no {key} within {timeout}s; got {self.got}")

    def close(self) -> None:
        self.sock.close()


TREE = """
[supervisor]
id = "shop"

[[supervisor.children]]
id = "web"
command = ["sleep", "600"]
ready = 1.0

[[supervisor.children]]
id = "app"
command = ["sh", "-c", "env > {env}; : > {up}; exec sleep 600"]
"""


def test_run_says_ready_once_the_tree_is_up_then_status_stopping_and_pings(
    tmp_path: Path,
) -> None:
    up, env_file = tmp_path / "app.up", tmp_path / "app.env"
    tree = tmp_path / "shop.toml"
    tree.write_text(TREE.format(env=env_file, up=up))
    manager = Manager(tmp_path / "notify.sock")
    env = {
        **os.environ,
        "NOTIFY_SOCKET": str(tmp_path / "notify.sock"),
        "WATCHDOG_USEC": "200000",
        "XDG_RUNTIME_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    cli = [sys.executable, "-m", "actors.cli"]
    run = subprocess.Popen(
        [*cli, "run", str(tree)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ready = manager.next("READY")
        # "app" starts only once "web" has been up 1 s: READY=1 came after both. Its
        # start counts once its process runs, a moment before its shell writes `up`.
        wait_until(up.exists, DEADLINE, "app's shell wrote its marker")
        assert ready["READY"] == "1" and ready["STATUS"] == "2 children running"
        assert ready["MAINPID"] == str(run.pid)
        assert "NOTIFY_SOCKET" not in env_file.read_text()  # the children's is not ours
        assert "WATCHDOG_USEC" not in env_file.read_text()
        subprocess.run([*cli, "stop", "app"], env=env, cwd=ROOT, check=True, capture_output=True)
        status = manager.next("STATUS")
        assert status["STATUS"] == "1 child running, 1 stopped"
        run.send_signal(signal.SIGTERM)
        stopping = manager.next("STOPPING")
        assert stopping["STOPPING"] == "1" and "SIGTERM" in stopping["STATUS"]
        assert run.wait(DEADLINE) == 0
        pings = [t for t, fields in manager.got if "WATCHDOG" in fields]
        assert len(pings) >= 5  # every 0.1 s over the 1 s of the start alone
        assert max(b - a for a, b in itertools.pairwise(pings)) < 1.0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        manager.close()


CRASHING = """
[supervisor]
id = "shop"
intensity = 50
period = 60

[[supervisor.children]]
id = "db"
command = ["sleep", "600"]

[[supervisor.children]]
id = "web"
command = ["sh", "-c", "sleep 2; exit 1"]
backoff = { initial = 2, jitter = 0 }
"""


def test_run_says_which_child_is_restarting(tmp_path: Path) -> None:
    tree = tmp_path / "shop.toml"
    tree.write_text(CRASHING)
    manager = Manager(tmp_path / "notify.sock")
    env = {
        **os.environ,
        "NOTIFY_SOCKET": str(tmp_path / "notify.sock"),
        "XDG_RUNTIME_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    run = subprocess.Popen(
        [sys.executable, "-m", "actors.cli", "run", str(tree)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert manager.next("READY")["STATUS"] == "2 children running"
        assert manager.next("STATUS")["STATUS"] == "restarting web"  # in its backoff
        assert manager.next("STATUS")["STATUS"] == "2 children running"  # started again
        run.send_signal(signal.SIGTERM)
        manager.next("STOPPING")
        assert run.wait(DEADLINE) == 0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        manager.close()


def test_without_notify_socket_run_sends_nothing_and_children_keep_their_env() -> None:
    assert notify_address({}) is None
    assert notify_address({"NOTIFY_SOCKET": "vsock:2:5"}) is None
    assert notify_address({"NOTIFY_SOCKET": "@name"}) == "\0name"
    assert watchdog_period({"WATCHDOG_USEC": "3000000"}, 7) == 1.5
    assert watchdog_period({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "8"}, 7) is None
    assert watchdog_period({"WATCHDOG_USEC": "x"}, 7) is None


def test_the_summary_names_what_is_restarting_first() -> None:
    def worker(cid: str, state: str) -> Node:
        return Node(id=cid, path=f"shop/{cid}", type="worker", state=state)

    root = Node(id="shop", path="shop", type="supervisor", state="running")
    root.children = [worker("web", "running"), worker("db", "running")]
    assert summary(root) == "2 children running"
    root.children[0] = worker("web", "backoff")
    assert summary(root) == "restarting web"
    root.children.append(worker("job", "restarting"))
    assert summary(root) == "restarting web, job"
    root.children = [worker("web", "running"), worker("db", "failed"), worker("job", "stopped")]
    assert summary(root) == "1 child running, 1 failed (db), 1 stopped"
    root.state = "stopped"
    assert summary(root) == "stopped"


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().rstrip(b"\0").replace(b"\0", b" ").decode()


def test_ps_tells_the_guardian_the_launcher_and_a_forked_child_apart(tmp_path: Path) -> None:
    pytest.importorskip("setproctitle")
    marker = tmp_path / "child.pid"
    spec = SupervisorSpec(
        id="shop",
        children=[ChildSpec(id="py", target=_write_pid_and_sleep, args=(str(marker),))],
    )
    tree = Tree.start(spec)
    try:
        launcher = tree.context.spawner
        assert launcher is not None
        assert _cmdline(launcher.pid) == "nannytree: launcher [shop]"  # type: ignore[attr-defined]
        guardian = launcher.guardian_pid  # type: ignore[attr-defined]
        assert _cmdline(guardian) == "nannytree: guardian [shop]"
        ps = subprocess.run(
            ["ps", "-o", "args=", "-p", str(guardian)], capture_output=True, text=True, check=True
        )
        assert ps.stdout.strip() == "nannytree: guardian [shop]"
        wait_until(marker.exists, DEADLINE, "the child to write its pid")
        child, title_env = marker.read_text().split()
        assert _cmdline(int(child)) == "nannytree: child [shop]"
        assert title_env == "False"  # the host's word to the launcher reaches no child
    finally:
        tree.stop()


def _write_pid_and_sleep(path: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {'NANNYTREE_TREE_TITLE' in os.environ}")
    os.rename(path + ".tmp", path)
    time.sleep(600)


STATUS_THEN_WAIT = textwrap.dedent(
    """
    import os, socket, sys, time
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"STATUS=serving 12 clients\\nREADY=1", os.environ["NOTIFY_SOCKET"])
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    sys.exit(0)
    """
)


@pytest.mark.parametrize("how", ["stopped", "exited"])
def test_a_stopped_childs_status_text_goes_with_it(tmp_path: Path, how: str) -> None:
    script, done = tmp_path / "status.py", tmp_path / "done"
    script.write_text(STATUS_THEN_WAIT)
    spec = ChildSpec(
        id="d",
        command=[sys.executable, str(script), str(done)],
        ready="sd_notify",
        restart="transient",
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        assert tree.nanny.child_status("d").get() == "serving 12 clients"
        if how == "stopped":
            tree.nanny.terminate_child("d").get()
        else:
            done.touch()  # it exits 0 by itself: a transient child stays stopped
            wait_until(
                lambda: tree.nanny.which_child("d").get().state == "stopped",
                DEADLINE,
                "the child to exit",
            )
        assert tree.nanny.child_status("d").get() == ""
        assert tree.nanny.which_tree().get()[0].status == ""
    finally:
        tree.stop()


UNIT = ROOT / "contrib" / "systemd" / "nannytree.service"


def _unit_commands() -> dict[str, list[str]]:
    """The unit's Exec lines (continuations joined), each split as systemd does."""
    text = UNIT.read_text().replace("\\\n", " ")
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.startswith("Exec"):
            found[key] = shlex.split(value)
    return found


def test_the_systemd_units_commands_are_what_the_cli_takes() -> None:
    from actors.cli._parser import _parser

    unit = UNIT.read_text()
    for line in (
        "Type=notify",
        "NotifyAccess=main",
        "KillMode=mixed",
        "RuntimeDirectory=nannytree",
    ):
        assert f"\n{line}\n" in unit
    commands = _unit_commands()
    assert set(commands) == {"ExecStartPre", "ExecStart", "ExecReload"}
    parsed = {key: _parser().parse_args(argv[1:]) for key, argv in commands.items()}
    assert parsed["ExecStart"].command == "run" and parsed["ExecStart"].live is False
    # Each child's lines in the journal under its own id, journald asked for first.
    assert parsed["ExecStart"].child_output == "journal"
    assert parsed["ExecStartPre"].child_output == "journal"
    assert parsed["ExecReload"].command == "update"
    assert parsed["ExecReload"].socket == parsed["ExecStart"].socket
    assert parsed["ExecStartPre"].command == "check"
    assert parsed["ExecStartPre"].file == parsed["ExecStart"].file


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_finds_nothing_wrong_with_the_unit(tmp_path: Path) -> None:
    unit = tmp_path / "nannytree.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/nannytree", "/bin/true"))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
