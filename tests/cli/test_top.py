"""`nannytree top` (and `attach`): the live view of a tree run in the background, from
another process, through the control socket: read-only, until Ctrl-C (the tree runs
on) or the tree's end (said, exit 0)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_commands import CLI, DEADLINE, THREE, Proc, _env, cli, pids, status
from tests.support import LiveRun, wait_until


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return _env(tmp_path)


@pytest.fixture
def three(tmp_path: Path) -> Path:
    path = tmp_path / "three.toml"
    path.write_text(THREE)
    return path


def test_top_follows_a_background_tree_until_it_ends(tmp_path, env, three):
    sock = str(tmp_path / "t.sock")
    with Proc("run", str(three), "--socket", sock, "--plain", env=env) as run:
        run.expect(r"three/mailer child_started")
        with Proc("top", "--socket", sock, env=env) as top:  # no terminal: plain lines
            top.expect(r"^\S* ?three - running, pid \d+")
            top.expect(r"web\s+running\s+\d+")
            top.expect(r"three/mailer child_started")  # the backlog
            old = pids(status(Path(sock), env))["three/web"]
            os.kill(old, signal.SIGKILL)
            top.expect(rf"three/web child_exited pid={old} reason=killed by SIGKILL")
            top.expect(r"three/mailer child_started")  # one_for_all: all three again
            assert cli("shutdown", "--socket", sock, env=env).returncode == 0
            top.expect(r"three supervisor_stopped reason=shutdown")
            rc, output = top.finish()
        assert rc == 0, output
        assert output.endswith("nannytree: tree 'three' has ended (the tree stopped)")
        assert run.finish()[0] == 0


def test_attach_shows_the_live_view_on_a_terminal_and_ctrl_c_leaves_the_tree(tmp_path, env, three):
    sock = str(tmp_path / "t.sock")
    with Proc("run", str(three), "--socket", sock, "--plain", env=env) as run:
        run.expect(r"three/mailer child_started")
        with LiveRun(["attach", "--socket", sock, "--refresh", "0.2"], tmp_path, env) as view:
            view.wait_screen(r"nannytree three +one_for_all")
            view.wait_screen(r"Ctrl-C detaches \(the tree runs on\)")
            view.wait_screen(r"mailer +running +\d+")
            cli("stop", "worker", "--socket", sock, env=env)
            view.wait_screen(r"worker +stopped")  # the table follows the tree
            view.wait_screen(r"three/worker child_terminated")  # and the events panel
            view.p.send_signal(signal.SIGINT)
            assert view.p.wait(DEADLINE) == 0
            assert "detached; tree 'three' runs on" in view.text()
        answer = status(Path(sock), env)  # the tree runs on, untouched
        assert answer["tree"]["state"] == "running"
        assert run.finish(signal.SIGINT)[0] == 0


def test_top_live_off_a_terminal_ends_with_the_tree_and_says_so(tmp_path, env, three):
    sock = str(tmp_path / "t.sock")
    with Proc("run", str(three), "--socket", sock, "--plain", env=env) as run:
        run.expect(r"three/mailer child_started")
        top = subprocess.Popen(
            [*CLI, "top", "--live", "--refresh", "0.2", "--socket", sock],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            wait_until(lambda: _connected(top.pid), DEADLINE, "top following the events")
            assert cli("shutdown", "--socket", sock, env=env).returncode == 0
            out, err = top.communicate(timeout=DEADLINE)
        finally:
            if top.poll() is None:
                top.kill()
                top.wait()
        assert top.returncode == 0, err
        assert "the tree has ended (the tree stopped)" in out
        assert re.search(r"three supervisor_stopped reason=shutdown", out), out
        assert err == "nannytree: tree 'three' has ended (the tree stopped)\n"
        assert run.finish()[0] == 0


def test_top_without_a_tree_says_so(tmp_path, env):
    out = cli("top", "--socket", str(tmp_path / "none.sock"), env=env)
    assert out.returncode == 3
    assert "no tree is running at" in out.stderr


def _connected(pid: int) -> bool:
    """Whether `top` holds a connection (its events stream) to the control socket."""
    import psutil

    return bool(psutil.Process(pid).net_connections(kind="unix"))
