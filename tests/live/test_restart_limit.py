"""restart_limit and `nannytree reset` on real processes: a crash-looping child is
contained (its siblings keep their pids, the tree keeps running), `status` shows it
failed and exits 3, `start` brings it back, `reset` makes the next crashes count
from zero (docs/otp-semantics.md section 4.1)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
from pathlib import Path

import pytest

from actors import Tree
from actors.testing import wait_gone
from supervision import (
    ChildSpec,
    EventKind,
    ExitKind,
    ExitReason,
    Strategy,
    SupervisorSpec,
    TcpProbe,
)
from supervision.simulate import Scripted, call, event_sequence, simulate
from tests.cli.test_commands import Proc, _env, cli, pids, status, workers
from tests.support import wait_until
from tests.support.nginx import nginx_conf
from tests.targets import children

# The root gives up at its second restart in 30 s: any charge for flappy would end it.
TREE = """
[supervisor]
id = "shop"
intensity = 1
period = 30

[[supervisor.children]]
id = "db"
command = ["sleep", "600"]
shutdown = 2
restart_limit = false  # charged to the root, as OTP's (no default limit)

[[supervisor.children]]
id = "flappy"
command = ["sh", "-c", "if [ -e {flag} ]; then echo broken >&2; exit 1; fi; exec sleep 600"]
restart_limit = {{ intensity = 3, period = 60 }}
shutdown = 2

[[supervisor.children]]
id = "app"
command = ["sleep", "600"]
shutdown = 2
"""


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    flag = tmp_path / "broken"
    path = tmp_path / "shop.toml"
    path.write_text(TREE.format(flag=flag))
    return path, flag


def _kill_and_wait_restart(run: Proc, sock: Path, env: dict[str, str]) -> int:
    old = pids(status(sock, env))["shop/flappy"]
    os.kill(old, signal.SIGKILL)
    run.expect(rf"shop/flappy child_exited pid={old} reason=killed by SIGKILL")
    return int(run.expect(r"shop/flappy child_started pid=(\d+)")[1])


def test_a_crash_loop_is_contained_then_started_and_reset(tmp_path):
    env = _env(tmp_path)
    sock = tmp_path / "c.sock"
    path, flag = _tree(tmp_path)
    flag.touch()  # flappy cannot start: it exits 1 at once, again and again
    seen: set[int] = set()
    with Proc("run", str(path), "--socket", str(sock), "--plain", env=env) as run:
        run.expect(r"^nannytree: tree 'shop' running")
        run.expect(
            r"shop/flappy child_failed reason=exit code 1.* restart_limit intensity=3 period=60"
        )
        # The crash loop can end before the tree's start has returned: wait for that.
        wait_until(lambda: status(sock, env)["tree"]["state"] == "running", what="tree started")
        answer = status(sock, env)
        nodes = workers(answer)
        assert nodes["shop/flappy"]["state"] == "failed"
        assert nodes["shop/flappy"]["pid"] is None
        assert (nodes["shop/db"]["state"], nodes["shop/app"]["state"]) == ("running", "running")
        siblings = {p: n["pid"] for p, n in nodes.items() if p != "shop/flappy"}
        seen |= set(siblings.values())

        human = cli("status", "--socket", str(sock), env=env)
        assert human.returncode == 3, human.stdout + human.stderr
        assert re.search(r"flappy\s+failed\b", human.stdout), human.stdout
        events = cli("events", "--json", "--socket", str(sock), env=env)
        kinds = [json.loads(line)["what"] for line in events.stdout.splitlines()]
        assert kinds.count("child_failed") == 1
        assert "reached_max_restart_intensity" not in kinds
        detail = cli("status", "flappy", "--socket", str(sock), env=env)
        assert detail.returncode == 3
        assert "limit: max 3 restarts in 60s, then failed (restart_limit)" in detail.stdout
        assert "| broken" in detail.stdout  # its last exits carry its stderr
        never = cli("wait", "flappy", "--ready", "--timeout", "10", "--socket", str(sock), env=env)
        assert never.returncode == 1, never.stdout + never.stderr
        assert "child 'shop/flappy' failed: its restart_limit was exceeded" in never.stderr

        out = cli("stop", "flappy", "--socket", str(sock), env=env)
        assert out.stdout == (
            "shop/flappy was not running (failed: its restart_limit was exceeded)\n"
        )
        assert workers(status(sock, env))["shop/flappy"]["state"] == "failed"

        # Fixed: `start` brings it back, with a fresh window.
        flag.unlink()
        out = cli("start", "flappy", "--socket", str(sock), env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("started shop/flappy, pid ")
        assert cli("status", "--socket", str(sock), env=env).returncode == 0

        # Two crashes of three allowed, then reset: three more fit, the fourth fails it.
        for _ in range(2):
            seen.add(_kill_and_wait_restart(run, sock, env))
        out = cli("reset", "flappy", "--socket", str(sock), env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout == (
            "reset shop/flappy: forgot 2 restarts counted by its restart_limit "
            "(at most 3 in 60 s)\n"
        )
        run.expect(r"shop/flappy restarts_reset restart_limit intensity=3 period=60 forgotten=2")
        for _ in range(3):
            seen.add(_kill_and_wait_restart(run, sock, env))
        assert workers(status(sock, env))["shop/flappy"]["state"] == "running"
        old = pids(status(sock, env))["shop/flappy"]
        os.kill(old, signal.SIGKILL)
        run.expect(r"shop/flappy child_failed reason=killed by SIGKILL")
        out = cli("reset", "flappy", "--socket", str(sock), env=env)
        # The exit it was failed for was counted too: four, one more than allowed.
        assert out.stdout == (
            "reset shop/flappy: forgot 4 restarts counted by its restart_limit (at most 3 in "
            "60 s); it is stopped, not failed: `nannytree start flappy` starts it\n"
        )
        assert workers(status(sock, env))["shop/flappy"]["state"] == "stopped"

        # The siblings never moved, and the root was never charged.
        final = pids(status(sock, env))
        assert {p: final[p] for p in siblings} == siblings
        rc, output = run.finish(signal.SIGINT)
    assert rc == 0, output
    assert "reached_max_restart_intensity" not in output
    assert wait_gone(sorted(seen)) == []


def test_reset_of_the_root_and_of_a_child_without_a_limit(tmp_path):
    env = _env(tmp_path)
    sock = tmp_path / "c.sock"
    path, _ = _tree(tmp_path)
    with Proc("run", str(path), "--socket", str(sock), "--plain", env=env) as run:
        run.expect(r"^nannytree: tree 'shop' running")
        run.expect(r"shop/app child_started pid=\d+")
        db = pids(status(sock, env))["shop/db"]
        os.kill(db, signal.SIGKILL)  # one restart: the root's window (1 in 30 s) is full
        run.expect(r"shop/db child_started pid=\d+")

        refused = cli("reset", "db", "--socket", str(sock), env=env)
        assert refused.returncode == 1
        assert "no restart_limit of its own" in refused.stderr
        assert "reset the supervisor 'shop' instead" in refused.stderr

        out = cli("reset", "shop", "--socket", str(sock), env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout == (
            "reset shop: forgot 1 restart counted by its intensity (at most 1 in 30 s); "
            "the next restarts count from zero\n"
        )
        run.expect(r"shop restarts_reset intensity=1 period=30 forgotten=1")
        # Without the reset this second crash would end the tree.
        db = pids(status(sock, env))["shop/db"]
        os.kill(db, signal.SIGKILL)
        run.expect(r"shop/db child_started pid=\d+")
        assert status(sock, env)["tree"]["state"] == "running"
        rc, output = run.finish(signal.SIGINT)
    assert rc == 0, output


# -- live and simulated agree ------------------------------------------------------------


def test_a_contained_crash_loop_live_and_simulated_alike(nanny_tree):
    """Under one_for_all, f (crashing at once, every run) is restarted alone, then
    failed; reset and restart_child start it again; the same events in both."""
    spec = SupervisorSpec(
        id="root",
        strategy=Strategy.ONE_FOR_ALL,
        intensity=1,
        period=60.0,
        children=[
            ChildSpec(id="a", target=children.sleep_forever),
            ChildSpec(id="z", target=children.sleep_forever),
            ChildSpec(id="f", target=children.exit_with, args=(1,), restart_limit=(2, 60.0)),
        ],
    )
    at_once = Scripted([(0.0, ExitReason(ExitKind.EXIT_CODE, code=1))], relative=True, repeat=True)
    calls = [call(5.0, "reset_restarts", "f"), call(6.0, "restart_child", "f")]
    simulated = simulate(spec, {"f": at_once}, duration=20.0, calls=calls)
    expected = event_sequence(simulated.events)
    assert expected.count(("root", "child_failed", "f")) == 2
    assert ("root", "reached_max_restart_intensity", "f") not in expected
    assert simulated.calls[0].value == 3

    tree = nanny_tree(spec)
    failed = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_FAILED, 20)
    assert tree.nanny.reset_restarts("f").get(timeout=10) == 3
    tree.nanny.restart_child("f").get(timeout=10)
    tree.log.wait_for(lambda e: e.context is EventKind.CHILD_FAILED and e is not failed, 20)
    tree.log.wait_for(lambda e: True, 10, start=len(expected) - 1)
    assert event_sequence(tree.log.snapshot()) == expected
    states = {c.id: c.state for c in tree.nanny.which_children().get(timeout=10)}
    assert states == {"a": "running", "z": "running", "f": "failed"}


# -- the finding, with nginx and redis ---------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _shop(tmp_path: Path, contained: bool) -> tuple[SupervisorSpec, int]:
    web, db = _free_port(), _free_port()
    conf = nginx_conf(tmp_path, web)
    nginx = ChildSpec(
        id="nginx",
        command=["nginx", "-c", str(conf), "-p", str(tmp_path)],
        ready=TcpProbe(web),
        stop_signal="QUIT",
        restart_limit=(3, 30.0) if contained else None,
    )
    redis = ChildSpec(
        id="redis",
        command=["redis-server", "--port", str(db), "--save", "", "--dir", str(tmp_path)],
        ready=TcpProbe(db),
    )
    app = ChildSpec(id="app", command=["sleep", "600"])
    return SupervisorSpec("shop", intensity=3, period=30.0, children=[redis, nginx, app]), db


@pytest.mark.skipif(
    shutil.which("nginx") is None or shutil.which("redis-server") is None,
    reason="needs nginx and redis-server (apt install nginx-light redis-server)",
)
@pytest.mark.parametrize("contained", [True, False], ids=["restart_limit", "without"])
def test_a_flapping_nginx_is_contained_and_redis_keeps_serving(tmp_path, contained):
    """The issue's finding: kill -9 of nginx's master once more than the intensity
    allows. Without the key the whole tree stops (OTP's rule); with it, nginx alone
    is left failed and redis, the app and the tree run on, their pids unchanged."""
    spec, db = _shop(tmp_path, contained)
    tree = Tree.start(spec)
    try:
        before = {c.id: c.pid for c in tree.nanny.which_children().get(timeout=10)}
        for incarnation in range(4):
            master = tree.nanny.which_child("nginx").get(timeout=10).pid
            mark = len(tree.log.snapshot())
            os.kill(master, signal.SIGKILL)
            if incarnation < 3:  # restarted, and serving again (its ready is its port)
                tree.log.wait_for(
                    lambda e: e.context is EventKind.CHILD_STARTED and e.offender == "nginx",
                    30,
                    start=mark,
                )
        if not contained:
            gave_up = tree.log.wait_for(lambda e: e.context is EventKind.MAX_INTENSITY_REACHED, 30)
            assert (gave_up.supervisor, gave_up.offender) == ("shop", "nginx")
            tree.log.wait_for(lambda e: e.context is EventKind.SUPERVISOR_STOPPED, 30)
            # redis and the app went down with it: the finding.
            assert wait_gone([before["redis"], before["app"]]) == []
            return
        failed = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_FAILED, 30)
        assert failed.offender == "nginx" and failed.reason is not None
        assert failed.reason.kind is ExitKind.KILLED
        after = {c.id: (c.state, c.pid) for c in tree.nanny.which_children().get(timeout=10)}
        assert after == {
            "redis": ("running", before["redis"]),
            "nginx": ("failed", None),
            "app": ("running", before["app"]),
        }
        with socket.create_connection(("127.0.0.1", db), timeout=10) as conn:
            conn.sendall(b"PING\r\n")
            assert conn.recv(64) == b"+PONG\r\n"
        kinds = [e.context for e in tree.log.snapshot()]
        assert EventKind.MAX_INTENSITY_REACHED not in kinds
        # Fixed: start it again.
        info = tree.nanny.restart_child("nginx").get(timeout=30)
        assert info.state == "running"
    finally:
        tree.stop()
