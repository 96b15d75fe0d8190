"""Containment by default and start-what-can-start, on real processes through
`nannytree run` (docs/otp-semantics.md sections 15 and 16): the README's first tree
with one child SIGKILLed again and again keeps its other children (same pids) and
its metrics, and says which child failed and why; an optional child that cannot
start is `failed` in status, metrics and sd_notify's STATUS= while the rest run."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from pathlib import Path

from tests.cli.test_commands import Proc, _env, _until, cli, pids, status, workers
from tests.cli.test_host_fit import Manager
from tests.cli.test_monitoring import Samples, until

ROOT = Path(__file__).resolve().parents[2]
KILLS = 20  # at most; the child is failed long before (5 restarts in 30 s, then failed)


def readme_tree(port: int) -> str:
    """The README's first tree file, its web server on `port`."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S)
    assert block is not None
    return block[1].replace("8080", str(port))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def states(samples: Samples, cid: str) -> list[str]:
    return [
        dict(labels)["nannytree_child_state"]
        for (name, labels), value in samples.items()
        if name == "nannytree_child_state" and dict(labels)["child"] == cid and value
    ]


def kill_until_failed(sock: Path, env: dict[str, str], path: str) -> int:
    """SIGKILL the child's process each time it has one again, until it is failed (or
    KILLS kills); how many kills it took."""
    for kills in range(KILLS):
        row = _until(
            lambda: (r := workers(status(sock, env))[path])["state"] in ("running", "failed") and r
        )
        if row["state"] == "failed":
            return kills
        pid = row["pid"]
        os.kill(pid, signal.SIGKILL)
        _until(lambda pid=pid: workers(status(sock, env))[path]["pid"] != pid)
    return KILLS


def test_the_readme_tree_keeps_its_other_children_when_one_is_killed_again_and_again(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    sock = tmp_path / "shop.sock"
    tree = tmp_path / "shop.toml"
    tree.write_text(readme_tree(free_port()))
    args = ("run", str(tree), "--socket", str(sock), "--plain", "--metrics", "0")
    with Proc(*args, env=env) as run:
        url = run.expect(r"^nannytree: metrics: (http://\S+)$")[1]
        run.expect(r"shop/workers/indexer child_started")
        before = pids(status(sock, env))
        began = time.monotonic()
        kills = kill_until_failed(sock, env, "shop/web")
        took = time.monotonic() - began
        assert kills == 6, kills  # 5 restarts in 30 s are allowed; the 6th exit fails it
        assert took < 60.0, took
        # Which child failed and why: the event, status and the metrics say it.
        line = run.expect(r"shop/web child_failed.*")[0]
        assert "reason=killed by SIGKILL" in line and "restart_limit intensity=5 period=30" in line
        after = status(sock, env)
        web = workers(after)["shop/web"]
        assert (web["state"], web["pid"]) == ("failed", None)
        assert web["restarts"] == 5 and "SIGKILL" in str(web["last_exit"])
        assert after["tree"]["state"] == "running"
        others = {p: pid for p, pid in pids(after).items() if p != "shop/web"}
        assert others == {p: pid for p, pid in before.items() if p != "shop/web"}
        assert set(others) == {"shop/workers/mailer", "shop/workers/indexer"}
        samples = until(url, lambda s: states(s, "web") == ["failed"], "web failed in metrics")
        shown = cli("status", "web", "--socket", str(sock), env=env)
        assert "● shop/web - failed" in shown.stdout, shown.stdout
        rc, output = run.finish(signal.SIGTERM)
    assert rc == 0, output
    assert samples  # the metrics served throughout


def test_opted_out_the_same_kills_end_the_whole_tree(tmp_path: Path) -> None:
    """What the default prevents: with `restart_limit = false` the kills are charged
    to the root (intensity 5 in 30 s), which gives up and stops every child."""
    env = _env(tmp_path)
    sock = tmp_path / "shop.sock"
    tree = tmp_path / "shop.toml"
    tree.write_text("[defaults]\nrestart_limit = false\n" + readme_tree(free_port()))
    with Proc("run", str(tree), "--socket", str(sock), "--plain", env=env) as run:
        run.expect(r"shop/workers/indexer child_started")
        kills = 0
        while run.p.poll() is None and kills < KILLS:
            try:
                row = workers(status(sock, env))["shop/web"]
            except (KeyError, AssertionError, ValueError):
                break  # the tree is going away
            if row["state"] == "running" and row["pid"]:
                os.kill(pid := row["pid"], signal.SIGKILL)
                kills += 1
                _until(lambda pid=pid: run.p.poll() is not None or _pid_changed(sock, env, pid))
        rc, output = run.finish()
    assert rc == 1, output
    assert "shop/web reached_max_restart_intensity" in output
    assert kills == 6, kills


def _pid_changed(sock: Path, env: dict[str, str], pid: int) -> bool:
    try:
        return bool(workers(status(sock, env))["shop/web"]["pid"] != pid)
    except (KeyError, AssertionError, ValueError):
        return True  # gone: the tree stopped


OPTIONAL = """
[supervisor]
id = "opt"

[[supervisor.children]]
id = "db"
command = ["sleep", "600"]

[[supervisor.children]]
id = "cache"
command = ["sh", "-c", "test -e {flag} || {{ echo 'no config' >&2; exit 1; }}; exec sleep 600"]
stderr = "capture"
ready = 0.5
required = false

[[supervisor.children]]
id = "web"
command = ["sleep", "600"]
"""


def test_an_optional_child_that_cannot_start_is_failed_and_the_rest_run(tmp_path: Path) -> None:
    flag = tmp_path / "configured"
    tree = tmp_path / "opt.toml"
    tree.write_text(OPTIONAL.format(flag=flag))
    sock = tmp_path / "o.sock"
    manager = Manager(tmp_path / "notify.sock")
    env = _env(tmp_path, NOTIFY_SOCKET=str(tmp_path / "notify.sock"))
    args = ("run", str(tree), "--socket", str(sock), "--plain", "--metrics", "0")
    try:
        with Proc(*args, env=env) as run:
            url = run.expect(r"^nannytree: metrics: (http://\S+)$")[1]
            ready = manager.next("READY")
            assert ready["STATUS"] == "2 children running, 1 failed (cache)"
            line = run.expect(r"opt/cache child_failed.*")[0]
            assert "reason=exit code 1" in line and "required = false" in line
            rows = workers(status(sock, env))
            assert {p: r["state"] for p, r in rows.items()} == {
                "opt/db": "running",
                "opt/cache": "failed",
                "opt/web": "running",
            }
            until(url, lambda s: states(s, "cache") == ["failed"], "cache failed in metrics")
            # `wait --ready` and `stop` name the cause: not a restart_limit here.
            waited = cli("wait", "cache", "--ready", "--socket", str(sock), env=env)
            assert waited.returncode == 1, waited
            assert (
                "child 'opt/cache' failed: its first start failed (required = false) "
                "(last: exit code 1 (no config))" in waited.stderr
            ), waited.stderr
            # `status cache` lists the failed start among its last exits, with its output.
            shown = cli("status", "cache", "--socket", str(sock), env=env).stdout
            assert "last exits (1):" in shown and "| no config" in shown, shown
            stopped = cli("stop", "cache", "--socket", str(sock), env=env)
            assert "opt/cache was not running (failed: its first start failed)" in stopped.stdout
            # Once its configuration is there, `nannytree start` starts it.
            flag.touch()
            out = cli("start", "cache", "--socket", str(sock), env=env)
            assert out.returncode == 0, out.stderr
            assert workers(status(sock, env))["opt/cache"]["state"] == "running"
            said = [manager.next("STATUS")["STATUS"]]
            while said[-1] != "3 children running" and len(said) < 5:
                said.append(manager.next("STATUS")["STATUS"])  # "starting cache" may come first
            assert said[-1] == "3 children running", said
            rc, output = run.finish(signal.SIGTERM)
        assert rc == 0, output
    finally:
        manager.close()


def test_a_required_child_that_cannot_start_still_ends_the_run_with_1(tmp_path: Path) -> None:
    tree = tmp_path / "opt.toml"
    tree.write_text(OPTIONAL.format(flag=tmp_path / "never").replace("required = false\n", ""))
    out = cli("run", str(tree), "--socket", str(tmp_path / "o.sock"), "--plain", env=_env(tmp_path))
    assert out.returncode == 1, out
    assert "opt/cache start_failed reason=exit code 1" in out.stdout
    assert "opt/db child_terminated" in out.stdout  # the others were stopped: OTP's init


CHARGED = """
[supervisor]
id = "shop"
intensity = {intensity}
period = 30

[[supervisor.children]]
id = "web"
command = ["sleep", "600"]
{web}

[[supervisor.children]]
id = "pool"
strategy = "one_for_all"
children = [{{ id = "a", command = ["sleep", "600"] }}]
"""


def test_check_warns_in_one_line_when_an_opted_out_child_would_end_the_tree(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "shop.toml"
    env = _env(tmp_path)
    tree.write_text(CHARGED.format(intensity=5, web="restart_limit = false"))
    out = cli("check", str(tree), env=env)
    assert out.returncode == 0, out.stderr
    (warning,) = out.stderr.splitlines()
    assert warning == (
        f"nannytree: {tree}: warning: child 'web' opted out of restart_limit (false): a crash "
        "loop of one is charged up to the root (intensity=5 period=30) and stops the whole "
        "tree; drop `restart_limit = false` (then 5 restarts in 30 s leave it failed, its "
        "siblings running) or raise the root's intensity"
    )
    # Contained (the default), or a root that takes many restarts: nothing to say; and a
    # one_for_all child is charged by design (its crash restarts its group).
    for web, intensity in (("", 5), ("restart_limit = false", 100)):
        tree.write_text(CHARGED.format(intensity=intensity, web=web))
        out = cli("check", str(tree), env=env)
        assert (out.returncode, out.stderr) == (0, ""), out.stderr
