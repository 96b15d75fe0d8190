"""`nannytree update` end to end on real processes (docs/update.md): the diff is
taken against the live tree and goes into nested supervisors, the file's order is
kept, run-time checks come before any stop, a failed start leaves a tree the next
update converges from, and every step is an event."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from actors.cli._control import call
from actors.testing import wait_gone
from tests.cli.test_commands import Proc, _env, cli, pids, status

HEAD = '[supervisor]\nid = "shop"\nintensity = 5\n'


def worker(cid: str, seconds: int, extra: str = "", nested: bool = False) -> str:
    table = "[[supervisor.children.children]]" if nested else "[[supervisor.children]]"
    return f'{table}\nid = "{cid}"\ncommand = ["sleep", "{seconds}"]\nshutdown = 2\n{extra}'


def apps(app_env: str = "1", more: str = "") -> str:
    return (
        '[[supervisor.children]]\nid = "apps"\n'
        + worker("redis", 601, nested=True)
        + worker("app", 602, f'env = {{ A = "{app_env}" }}\n', nested=True)
        + more
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return _env(tmp_path)


def order(answer: dict[str, Any]) -> list[str]:
    """Every child's path, in the order status shows them: start order, depth first."""
    found: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        for child in node["children"]:
            found.append(child["path"])
            walk(child)

    walk(answer["tree"])
    return found


def node(answer: dict[str, Any], path: str) -> dict[str, Any]:
    def walk(n: dict[str, Any]) -> dict[str, Any] | None:
        if n["path"] == path:
            return n
        for child in n["children"]:
            found = walk(child)
            if found is not None:
                return found
        return None

    found = walk(answer["tree"])
    assert found is not None, f"no {path} in {order(answer)}"
    return found


def update(sock: str, env: dict[str, str]) -> Any:
    return cli("update", "--socket", sock, env=env)


def events(sock: str, env: dict[str, str]) -> list[dict[str, Any]]:
    out = cli("events", "--json", "--last", "10000", "--socket", sock, env=env)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def update_events(sock: str, env: dict[str, str]) -> list[tuple[str, str]]:
    """(whom, what) of each update event: the supervisor's path, and the child's."""
    return [(e["who"], e["what"]) for e in events(sock, env) if e["what"].startswith("update_")]


def started(tree: Path, text: str, sock: str, env: dict[str, str], last: str) -> Proc:
    tree.write_text(text)
    run = Proc("run", str(tree), "--socket", sock, env=env)
    run.expect(rf"{last} child_started")
    return run


def test_a_typo_is_refused_and_a_start_failure_converges_once_the_file_is_fixed(tmp_path, env):
    """The operator's sequence: a command that cannot start, then the fix, then
    more edits of the same child. The check catches a program not on PATH before
    anything stops; a start that fails anyway leaves the child stopped with its
    new spec, the answer says so (exit 1), and the next update starts the fix."""
    tree, sock = tmp_path / "t.toml", str(tmp_path / "t.sock")
    good = HEAD + worker("ticker", 600) + worker("other", 603)
    with started(tree, good, sock, env, "shop/other") as run:
        before = pids(status(Path(sock), env))
        # 1. A typo in the program: refused, nothing stopped.
        tree.write_text(good.replace('"sleep", "600"', '"slepe", "600"'))
        out = update(sock, env)
        assert out.returncode == 1
        assert "update refused, nothing stopped" in out.stderr
        assert "child 'ticker': program 'slepe'" in out.stderr
        assert pids(status(Path(sock), env)) == before
        # 2. A command that runs but cannot start (it exits while awaited): the
        # old one is stopped, the new one fails, the old spec runs again (rolled
        # back); the answer says what failed and what runs.
        broken = '["sh", "-c", "echo no config >&2; exit 3"]\nready = 5.0\n'
        tree.write_text(good.replace('["sleep", "600"]\n', broken))
        out = update(sock, env)
        assert out.returncode == 1, out
        assert "failed: replace ticker: failed to start: exit code 3" in out.stderr, out
        assert "rolled back: ticker runs its previous spec again, pid" in out.stderr, out
        assert "fix the file and run `nannytree update` again" in out.stderr
        now = status(Path(sock), env)
        assert node(now, "shop/ticker")["state"] == "running"
        assert psutil.Process(node(now, "shop/ticker")["pid"]).cmdline() == ["sleep", "600"]
        assert node(now, "shop/other")["pid"] == before["shop/other"]
        assert order(now) == ["shop/ticker", "shop/other"]
        # 3. The same file again: the live spec is the old one, so it is tried again.
        out = update(sock, env)
        assert out.returncode == 1 and "rolled back: ticker" in out.stderr, out
        # 4. The fix: the next update sees the difference and starts it.
        tree.write_text(good.replace('"600"', '"604"'))
        out = update(sock, env)
        assert (out.returncode, out.stdout.strip()) == (0, "changed: ticker"), out
        ticker = node(status(Path(sock), env), "shop/ticker")
        assert ticker["state"] == "running"
        assert psutil.Process(ticker["pid"]).cmdline() == ["sleep", "604"]
        # 5. Later edits of that child work.
        tree.write_text(good.replace('"600"', '"605"'))
        assert update(sock, env).stdout.strip() == "changed: ticker"
        after = pids(status(Path(sock), env))
        assert psutil.Process(after["shop/ticker"]).cmdline() == ["sleep", "605"]
        assert after["shop/other"] == before["shop/other"]
        kinds = [k for _, k in update_events(sock, env)]
        assert kinds == [
            "update_refused",
            "update_step_failed",
            "update_rolled_back",
            "update_done",
            "update_step_failed",  # the same file again
            "update_rolled_back",
            "update_done",
            "update_child_replaced",
            "update_done",
            "update_child_replaced",
            "update_done",
        ]
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(set(before.values()) | set(after.values()))) == []


def test_a_replacement_that_exits_at_once_fails_the_update_and_the_tree_runs_on(tmp_path, env):
    """A changed command that runs and exits at once (a bad flag) and has no readiness:
    counted as started once it runs, it would crash-loop into the root's intensity and
    end the whole tree. The update's settle (1 s by default) makes it a failed start:
    it is rolled back to the spec it ran, no restart is charged, every other child keeps
    its pid, and the fixed file converges. `--settle 0` keeps the old meaning."""
    tree, sock = tmp_path / "t.toml", str(tmp_path / "t.sock")
    good = HEAD + worker("ticker", 600) + apps()
    with started(tree, good, sock, env, "shop/apps/app") as run:
        before = pids(status(Path(sock), env))
        bad = '["sh", "-c", "echo unknown flag --frobnicate >&2; exit 3"]'
        tree.write_text(good.replace('["sleep", "600"]', bad))
        out = update(sock, env)
        assert out.returncode == 1, out
        assert "failed: replace ticker: failed to start: exit code 3" in out.stderr, out
        assert "unknown flag --frobnicate" in out.stderr, out
        now = status(Path(sock), env)
        ticker = node(now, "shop/ticker")  # rolled back: its old spec, a new process
        assert (ticker["state"], ticker["restarts"]) == ("running", 0)
        assert ticker["pid"] not in (None, before["shop/ticker"])
        assert node(now, "shop")["restarts"] == 0  # nothing charged
        alive = pids(now)
        assert {k: v for k, v in alive.items() if k != "shop/ticker"} == {
            k: v for k, v in before.items() if k != "shop/ticker"
        }
        kinds = [e["what"] for e in events(sock, env) if e.get("who", "").endswith("ticker")]
        assert "child_exited" not in kinds, kinds  # a failed start, not a crash
        # The fix converges.
        tree.write_text(good.replace('"600"', '"604"'))
        out = update(sock, env)
        assert (out.returncode, out.stdout.strip()) == (0, "changed: ticker"), out
        assert psutil.Process(pids(status(Path(sock), env))["shop/ticker"]).cmdline() == [
            "sleep",
            "604",
        ]
        # --settle 0: started once it runs; its own restart_limit contains the loop.
        limited = bad + "\nrestart_limit = { intensity = 2, period = 60 }"
        tree.write_text(good.replace('["sleep", "600"]', limited))
        out = cli("update", "--settle", "0", "--socket", sock, env=env)
        assert (out.returncode, out.stdout.strip()) == (0, "changed: ticker"), out
        run.expect(r"shop/ticker child_failed")
        now = status(Path(sock), env)
        assert node(now, "shop/ticker")["state"] == "failed"
        assert pids(now) == {k: v for k, v in alive.items() if k != "shop/ticker"}
        # A settle that is not a number of seconds is bad usage; a client that sends one
        # anyway is refused by the tree, naming the setting's meaning.
        for flag, said in (("-1", "seconds >= 0"), ("601", "seconds from 0 to 600")):
            refused = cli("update", "--settle", flag, "--socket", sock, env=env)
            assert refused.returncode == 2, refused
            assert f"argument --settle: expected {said}, not '{flag}'" in refused.stderr
        answer = call(Path(sock), {"op": "reload", "settle": -1})
        assert "settle must be seconds from 0 to 600, not -1" in answer["error"], answer
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(before.values())) == []


def test_a_replaced_subtree_whose_child_exits_at_once_fails_and_the_tree_runs_on(tmp_path, env):
    """The settle goes into a supervisor the update replaces whole (its strategy
    changed): a grandchild that exits at once fails the subtree's start, which is
    rolled back to its old spec; the root and its other child are untouched."""
    tree, sock = tmp_path / "t.toml", str(tmp_path / "t.sock")
    good = HEAD + worker("ticker", 600) + apps()
    with started(tree, good, sock, env, "shop/apps/app") as run:
        before = pids(status(Path(sock), env))
        broken = good.replace('id = "apps"\n', 'id = "apps"\nstrategy = "one_for_all"\n')
        broken = broken.replace('["sleep", "602"]', '["sh", "-c", "exit 5"]')
        tree.write_text(broken)
        out = update(sock, env)
        assert out.returncode == 1, out
        assert "failed: replace apps: failed to start: exit code 5" in out.stderr, out
        assert "rolled back: apps runs its previous spec again" in out.stderr, out
        now = status(Path(sock), env)
        assert node(now, "shop/apps")["state"] == "running"  # its old strategy and children
        assert node(now, "shop")["restarts"] == 0
        assert pids(now)["shop/ticker"] == before["shop/ticker"]
        assert psutil.Process(pids(now)["shop/apps/app"]).cmdline() == ["sleep", "602"]
        tree.write_text(broken.replace('["sh", "-c", "exit 5"]', '["sleep", "606"]'))
        out = update(sock, env)
        assert (out.returncode, out.stdout.strip()) == (0, "changed: apps"), out
        assert psutil.Process(pids(status(Path(sock), env))["shop/apps/app"]).cmdline() == [
            "sleep",
            "606",
        ]
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(before.values())) == []


def test_a_changed_env_in_a_nested_supervisor_restarts_only_that_child(tmp_path, env):
    tree, sock = tmp_path / "n.toml", str(tmp_path / "n.sock")
    text = HEAD + worker("ticker", 600) + apps("1") + worker("last", 603)
    with started(tree, text, sock, env, "shop/last") as run:
        before = pids(status(Path(sock), env))
        tree.write_text(HEAD + worker("ticker", 600) + apps("2") + worker("last", 603))
        out = update(sock, env)
        assert (out.returncode, out.stdout.strip()) == (0, "changed: apps/app"), out
        now = status(Path(sock), env)
        after = pids(now)
        assert after["shop/apps/app"] != before["shop/apps/app"]
        assert psutil.Process(after["shop/apps/app"]).environ()["A"] == "2"
        for kept in ("shop/ticker", "shop/apps/redis", "shop/last"):
            assert after[kept] == before[kept], kept
        assert order(now) == [
            "shop/ticker",
            "shop/apps",
            "shop/apps/redis",
            "shop/apps/app",
            "shop/last",
        ]
        assert update_events(sock, env) == [
            ("shop/apps/app", "update_child_replaced"),
            ("shop/apps", "update_spec_stored"),
            ("shop", "update_done"),
        ]
        # The parent keeps the new spec: its restart of the subtree starts it.
        out = cli("restart", "apps", "--socket", sock, env=env)
        assert out.returncode == 0, out.stderr
        again = pids(status(Path(sock), env))
        assert again["shop/apps/app"] != after["shop/apps/app"]
        assert psutil.Process(again["shop/apps/app"]).environ()["A"] == "2"
        assert update(sock, env).stdout.strip() == "no change"
        # The root's intensity changes in place (OTP's code_change), touching no child;
        # its strategy waits for the next run.
        tree.write_text(
            HEAD.replace("5", "6") + worker("ticker", 600) + apps("2") + worker("last", 603)
        )
        assert update(sock, env).stdout.strip() == "settings: shop (intensity 5 -> 6)"
        assert pids(status(Path(sock), env)) == again
        assert cli("status", "--socket", sock, env=env).stdout.splitlines()[1].strip() == (
            "one_for_one, max 6 restarts in 5s"
        )
        assert update(sock, env).stdout.strip() == "no change"
        # Their restart_limit written out: under one_for_all a worker gets none by
        # default (docs/otp-semantics.md section 15), which would change their specs.
        kept = "restart_limit = {}\n"
        tree.write_text(
            HEAD.replace("5", "6")
            + 'strategy = "one_for_all"\n'
            + worker("ticker", 600, kept)
            + apps("2")
            + worker("last", 603, kept)
        )
        assert update(sock, env).stdout.strip().splitlines() == [
            "no change",
            "note: the root supervisor's strategy changed; it applies when the tree starts again",
        ]
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    gone = set(before.values()) | set(after.values()) | set(again.values())
    assert wait_gone(sorted(gone)) == []


def test_a_raised_intensity_holds_at_once_and_restarts_nothing(tmp_path, env):
    """An operator raises a flapping subtree's intensity: no child restarts, the
    dynamic children of a pool stay, and the crashes the old intensity would have
    given up on are now restarted. Each change is an event, old -> new."""
    tree, sock = tmp_path / "i.toml", str(tmp_path / "i.sock")

    def text(intensity: int, more: str = "", pool: str = "") -> str:
        return (
            HEAD
            + worker("a", 600)
            + f'[[supervisor.children]]\nid = "apps"\nintensity = {intensity}\nperiod = 600\n'
            + more
            + worker("redis", 601, nested=True)
            + '[[supervisor.children]]\nid = "pool"\nstrategy = "simple_one_for_one"\n'
            + pool
            + worker("job", 650, 'restart = "temporary"\n', nested=True)
        )

    with started(tree, text(1), sock, env, "shop/apps/redis") as run:
        assert cli("add", "pool", "--socket", sock, env=env).returncode == 0
        before = pids(status(Path(sock), env))
        tree.write_text(text(4, 'restart = "transient"\n', "max_children = 2\n"))
        out = update(sock, env)
        assert out.stdout.strip() == (
            "settings: apps (intensity 1 -> 4, restart permanent -> transient), "
            "pool (max_children None -> 2)"
        ), out
        assert pids(status(Path(sock), env)) == before  # the pool's job-1 included
        assert update_events(sock, env) == [
            ("shop/apps", "update_settings_changed"),
            ("shop/apps", "update_spec_stored"),
            ("shop/pool", "update_settings_changed"),
            ("shop/pool", "update_spec_stored"),
            ("shop", "update_done"),
        ]
        # Three kills of redis in its period: intensity 1 would have given up at the
        # second; 4 restarts it each time, and its siblings run on.
        for _ in range(3):
            old = pids(status(Path(sock), env))["shop/apps/redis"]
            psutil.Process(old).kill()
            run.expect(rf"shop/apps/redis child_started pid=(?!{old}\b)\d+")
        now = pids(status(Path(sock), env))
        assert {k: now[k] for k in ("shop/a", "shop/pool/job-1")} == {
            k: before[k] for k in ("shop/a", "shop/pool/job-1")
        }
        assert "max_intensity_reached" not in run.output
        assert update(sock, env).stdout.strip() == "no change"
        # The pool takes its new max_children: one more job, then no more.
        assert cli("add", "pool", "--socket", sock, env=env).returncode == 0
        full = cli("add", "pool", "--socket", sock, env=env)
        assert full.returncode == 1 and "max_children" in full.stderr, full
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(before.values())) == []


def test_a_tree_whose_child_flaps_from_the_start_takes_commands_at_once(tmp_path, env):
    """A child that crash-loops within the intensity from the first start makes events
    without a pause: the run must still count as started (status shows the root
    running, not starting) and take an update, the operator's way out, at once.
    Before, `run` waited for a 50 ms lull in the events, up to 10 s, and every
    command in that time was refused as busy."""
    tree, sock = tmp_path / "f.toml", str(tmp_path / "f.sock")
    text = (
        '[supervisor]\nid = "shop"\nintensity = 1000\nperiod = 10\n'
        + worker("steady", 600)
        + '[[supervisor.children]]\nid = "flappy"\ncommand = ["sh", "-c", "sleep 0.02; exit 1"]\n'
        + "restart_limit = false\n"  # charged to the root, whose intensity the update changes
    )
    with started(tree, text, sock, env, "shop/flappy") as run:
        run.expect(r"shop/flappy child_exited")
        deadline = time.monotonic() + 5.0  # well below the 10 s the lull could take
        while status(Path(sock), env)["tree"]["state"] != "running":
            assert time.monotonic() < deadline, "the run still counts as starting"
            time.sleep(0.05)
        tree.write_text(text.replace("intensity = 1000", "intensity = 2000"))
        out = update(sock, env)
        assert (out.returncode, out.stdout.strip()) == (
            0,
            "settings: shop (intensity 1000 -> 2000)",
        ), out
        # Below the restarts already counted: the next exit ends the tree, maybe before
        # the update has read the tree back to answer.
        tree.write_text(text.replace("intensity = 1000", "intensity = 2"))
        out = update(sock, env)
        assert out.returncode == 0, out
        assert out.stdout.strip() in (
            "settings: shop (intensity 2000 -> 2)",
            "settings: shop (intensity 2000 -> 2)\nnote: the tree is stopping",
        ), out
        run.expect(r"shop supervisor_stopped")
        rc, output = run.finish()
    assert rc == 1, output  # the tree gave up: reached_max_restart_intensity
    assert "reached_max_restart_intensity" in output
    assert wait_gone(sorted({int(p) for p in re.findall(r"pid=(\d+)", output)})) == []


def test_the_start_order_after_an_update_is_the_files(tmp_path, env):
    """A changed child keeps its place; an added one, nested or not, goes where
    the file puts it; a kept one the file moved is moved without a restart."""
    tree, sock = tmp_path / "o.toml", str(tmp_path / "o.sock")
    text = HEAD + worker("a", 600) + worker("b", 601) + apps("1") + worker("c", 603)
    with started(tree, text, sock, env, "shop/c") as run:
        before = pids(status(Path(sock), env))
        tree.write_text(
            HEAD
            + worker("c", 603)
            + worker("new", 604)
            + worker("a", 600)
            + worker("b", 611)
            + apps("1", more=worker("extra", 605, nested=True))
        )
        out = update(sock, env)
        assert out.returncode == 0, out
        assert out.stdout.strip() == "added: new, apps/extra; changed: b; moved: c"
        now = status(Path(sock), env)
        assert order(now) == [
            "shop/c",
            "shop/new",
            "shop/a",
            "shop/b",
            "shop/apps",
            "shop/apps/redis",
            "shop/apps/app",
            "shop/apps/extra",
        ]
        after = pids(now)
        for kept in ("shop/a", "shop/c", "shop/apps/redis", "shop/apps/app"):
            assert after[kept] == before[kept], kept
        # The tree stops in reverse of that order.
        run.expect(r"shop update_done")  # the update's own stops are printed before it
        mark = len(run.output)
        rc, output = run.finish(signal.SIGINT)
    assert rc == 0
    stops = [
        line.split()[1]
        for line in output.splitlines()[mark:]
        if " child_terminated " in line and "reason=shutdown" in line
    ]
    workers_stopped = [s for s in stops if s != "shop/apps"]
    assert workers_stopped == [
        "shop/apps/extra",
        "shop/apps/app",
        "shop/apps/redis",
        "shop/b",
        "shop/a",
        "shop/new",
        "shop/c",
    ]
    assert wait_gone(sorted(set(before.values()) | set(after.values()))) == []


def test_failing_run_time_checks_refuse_the_update_with_every_problem(tmp_path, env):
    tree, sock = tmp_path / "c.toml", str(tmp_path / "c.sock")
    text = HEAD + worker("a", 600) + apps("1") + worker("c", 603)
    with started(tree, text, sock, env, "shop/c") as run:
        before = pids(status(Path(sock), env))
        missing = tmp_path / "nowhere"
        tree.write_text(
            HEAD
            + worker("a", 610, f'cwd = "{missing}"\n')
            + apps("2").replace('"sleep", "601"', '"no-such-program-x", "601"')
            + worker("c", 613, f'pid_file = "{missing}/c.pid"\n')
            + worker("d", 614, 'ready = { exec = ["no-such-probe-y"] }\n')
        )
        out = update(sock, env)
        assert out.returncode == 1
        assert "update refused, nothing stopped: 4 problems" in out.stderr, out.stderr
        for problem in (
            f"child 'a': cwd '{missing}' does not exist",
            "child 'redis': program 'no-such-program-x'",
            f"child 'c': pid_file '{missing}/c.pid': folder '{missing}' does not exist",
            "child 'd': ready probe program 'no-such-probe-y'",
        ):
            assert problem in out.stderr, (problem, out.stderr)
        assert pids(status(Path(sock), env)) == before
        assert order(status(Path(sock), env)) == [
            "shop/a",
            "shop/apps",
            "shop/apps/redis",
            "shop/apps/app",
            "shop/c",
        ]
        assert [k for _, k in update_events(sock, env)] == ["update_refused"]
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(before.values())) == []


def test_every_step_is_an_event_naming_its_supervisor(tmp_path, env):
    tree, sock = tmp_path / "e.toml", str(tmp_path / "e.sock")
    text = HEAD + worker("a", 600) + worker("drop", 601) + apps("1") + worker("c", 603)
    with started(tree, text, sock, env, "shop/c") as run:
        before = pids(status(Path(sock), env))
        tree.write_text(
            HEAD
            + worker("c", 603)
            + worker("a", 610)
            + apps("2", more=worker("more", 605, nested=True))
            + worker("new", 604)
        )
        out = update(sock, env)
        assert out.returncode == 0, out
        got = update_events(sock, env)
        assert got == [
            ("shop/drop", "update_child_removed"),
            ("shop/c", "update_child_moved"),
            ("shop/a", "update_child_replaced"),
            ("shop/apps/app", "update_child_replaced"),
            ("shop/apps/more", "update_child_added"),
            ("shop/apps", "update_spec_stored"),
            ("shop/new", "update_child_added"),
            ("shop", "update_done"),
        ]
        done = next(e for e in events(sock, env) if e["what"] == "update_done")
        assert done["detail"] == out.stdout.strip()
        after = pids(status(Path(sock), env))
        replaced = [e for e in events(sock, env) if e["what"] == "update_child_replaced"]
        assert {e["who"]: e["pid"] for e in replaced} == {
            "shop/a": after["shop/a"],
            "shop/apps/app": after["shop/apps/app"],
        }
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(set(before.values()) | set(after.values()))) == []


def test_an_added_child_that_fails_to_start_is_added_by_the_next_update(tmp_path, env):
    tree, sock = tmp_path / "a.toml", str(tmp_path / "a.sock")
    text = HEAD + worker("a", 600) + worker("c", 603)
    with started(tree, text, sock, env, "shop/c") as run:
        before = pids(status(Path(sock), env))
        broken = (
            '[[supervisor.children]]\nid = "b"\ncommand = ["sh", "-c", "exit 4"]\nready = 5.0\n'
        )
        tree.write_text(HEAD + worker("a", 600) + broken + worker("c", 603))
        out = update(sock, env)
        assert out.returncode == 1
        assert "failed: add b: failed to start: exit code 4" in out.stderr, out
        assert order(status(Path(sock), env)) == ["shop/a", "shop/c"]
        tree.write_text(HEAD + worker("a", 600) + worker("b", 601) + worker("c", 603))
        out = update(sock, env)
        assert (out.returncode, out.stdout.strip()) == (0, "added: b"), out
        now = status(Path(sock), env)
        assert order(now) == ["shop/a", "shop/b", "shop/c"]
        after = pids(now)
        assert (after["shop/a"], after["shop/c"]) == (before["shop/a"], before["shop/c"])
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(set(before.values()) | set(after.values()))) == []
