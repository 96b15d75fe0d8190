"""`nannytree wait --ready` on real trees, and each child's health in `status`.

Every test runs `nannytree run` in a process of its own and `wait` in another, as an
operator's script would (`nannytree run tree.toml & nannytree wait --ready`). A
`wait` that must be waiting before something happens is known to be by the run's
side of its connection (an accepted socket on the control socket's path), never
by a sleep.
"""

from __future__ import annotations

import json
import re
import signal
import socket
from pathlib import Path

import psutil
import pytest

from actors._operate._ready import Ending, never_ready, ready
from actors._operate._records import Node, at_rest, done
from actors.testing import wait_gone
from tests.cli.test_commands import Proc, cli, env, pids, status, workers
from tests.support import wait_until

__all__ = ["env"]  # the fixture, shared with test_cli

DEADLINE = 30.0
READY, FAILED, NOT_RUNNING, TIMED_OUT = 0, 1, 3, 4


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _waiting_on(run: Proc, sock: Path) -> bool:
    """The run has accepted a connection on its control socket (a `wait` in flight)."""
    conns = psutil.Process(run.p.pid).net_connections("unix")
    return sum(1 for c in conns if c.laddr == str(sock)) >= 2  # the listener, and one more


def _finish(proc: Proc) -> tuple[int, str]:
    return proc.finish(timeout=DEADLINE * 2)


SLOW = """
[supervisor]
id = "slow"

[[supervisor.children]]
id = "warm"
command = ["sleep", "600"]
ready = 0.5

[[supervisor.children]]
id = "pool"

[[supervisor.children.children]]
id = "cache"
command = ["sleep", "600"]
ready = 0.5
"""


def test_wait_for_a_tree_not_started_yet_until_its_slow_children_are_ready(tmp_path, env):
    tree = tmp_path / "slow.toml"
    tree.write_text(SLOW)
    sock = tmp_path / "s.sock"
    with Proc("wait", "--socket", str(sock), "--ready", "--timeout", "60", env=env) as waiter:
        assert waiter.p.poll() is None  # no tree yet: it waits for one
        with Proc("run", str(tree), "--socket", str(sock), env=env) as run:
            rc, out = _finish(waiter)
            assert rc == READY, out
            assert out == "ready: tree 'slow' (3 children)"
            answer = status(sock, env)
            assert {p: n["state"] for p, n in workers(answer).items()} == {
                "slow/warm": "running",
                "slow/pool/cache": "running",
            }
            # By id or by path, as the other commands take them; a named child alone.
            named = cli("wait", "cache", "slow/warm", "--socket", str(sock), "--ready", env=env)
            assert named.returncode == READY, named.stderr
            assert named.stdout == "ready: cache, slow/warm (2 children)\n"
            unknown = cli("wait", "nope", "--socket", str(sock), "--ready", env=env)
            assert unknown.returncode == FAILED
            assert "no child 'nope' in tree 'slow'" in unknown.stderr
            seen = set(pids(answer).values())
            rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


LAGGING = """
[supervisor]
id = "lag"

[[supervisor.children]]
id = "quick"
command = ["sleep", "600"]

[[supervisor.children]]
id = "sluggish"
command = ["sleep", "600"]
ready = {{ file = "{flag}" }}
start_timeout = 60
"""


def test_a_timeout_exits_4_naming_what_is_not_ready_and_why(tmp_path, env):
    flag = tmp_path / "warmed-up"
    tree = tmp_path / "lag.toml"
    tree.write_text(LAGGING.format(flag=flag))
    sock = tmp_path / "l.sock"
    with Proc("run", str(tree), "--socket", str(sock), env=env) as run:
        run.expect(r"lag/quick child_started")
        out = cli("wait", "--ready", "--timeout", "0.5", "--socket", str(sock), env=env)
        assert out.returncode == TIMED_OUT, out
        lines = out.stderr.splitlines()
        assert lines[0] == "nannytree: tree 'lag' not ready after 0.5s; still waiting for:"
        assert lines[1:] == [
            f"  lag/sluggish: starting, waiting for the file {flag} (start_timeout 60s)"
        ]
        # What is ready is ready, whatever its siblings do.
        quick = cli("wait", "quick", "--ready", "--timeout", "5", "--socket", str(sock), env=env)
        assert quick.returncode == READY, quick.stderr
        flag.touch()
        run.expect(r"lag/sluggish child_started")
        seen = set(pids(status(sock, env)).values())
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []
    # No tree at all within the timeout: not running, as the other commands say.
    none = cli("wait", "--ready", "--timeout", "0.2", "--socket", str(sock), env=env)
    assert none.returncode == NOT_RUNNING
    assert "no tree is running at" in none.stderr and "(waited 0.2s)" in none.stderr


BREAKING = r"""
[supervisor]
id = "brk"
intensity = 3
period = 60

[[supervisor.children]]
id = "svc"
command = [
    "sh", "-c",
    'test -e {go} && {{ printf "bad config \033[2J\n" >&2; exit 3; }}; exec sleep 600',
]
ready = 0.2
stderr = "capture"
restart_limit = false  # charged to the root: its intensity ends the tree

[[supervisor.children]]
id = "gate"
command = ["sleep", "600"]
"""


def test_a_tree_that_crash_loops_into_its_intensity_ends_the_wait_at_once(tmp_path, env):
    """The wait does not sit out its timeout for a tree that gave up: it exits 1 at
    once, with the give-up and the child's stderr tail (escaped)."""
    go = tmp_path / "go"
    tree = tmp_path / "brk.toml"
    tree.write_text(BREAKING.format(go=go))
    sock = tmp_path / "b.sock"
    with Proc("run", str(tree), "--socket", str(sock), env=env) as run:
        run.expect(r"brk/gate child_started")
        seen = set(pids(status(sock, env)).values())
        assert cli("stop", "gate", "--socket", str(sock), env=env).returncode == 0
        # strict: gate, stopped on purpose, is not ready, and the wait goes on
        args = ("wait", "--ready", "--strict", "--timeout", "600", "--socket", str(sock))
        with Proc(*args, env=env) as waiter:
            wait_until(lambda: _waiting_on(run, sock), timeout=DEADLINE)
            go.touch()  # every run of svc from now on fails at once, before it is ready
            psutil.Process(pids(status(sock, env))["brk/svc"]).kill()
            rc, out = _finish(waiter)
        assert rc == FAILED, out  # not TIMED_OUT: it never waited out its 600 s
        assert "not ready after" not in out
        assert re.search(
            r"^nannytree: tree 'brk' gave up: child 'svc' ended too often "
            r"\(last: exit code 3 \(bad config \\x1b\[2J\)\); intensity=3 period=60",
            out,
            re.M,
        ), out
        assert "    | bad config \\x1b[2J" in out and "\x1b" not in out
        rc, _ = run.finish()
    assert rc == 1
    assert wait_gone(sorted(seen)) == []


FAILING_START = """
[supervisor]
id = "nostart"

[[supervisor.children]]
id = "ok"
command = ["sleep", "600"]

[[supervisor.children]]
id = "bad"
command = ["sh", "-c", "while [ ! -e {go} ]; do sleep 0.02; done; echo 'no config' >&2; exit 2"]
ready = 20
start_timeout = 30
stderr = "capture"
"""


def test_a_start_that_fails_ends_the_wait_at_once_with_its_stderr(tmp_path, env):
    go = tmp_path / "go"
    tree = tmp_path / "nostart.toml"
    tree.write_text(FAILING_START.format(go=go))
    sock = tmp_path / "n.sock"
    args = ("wait", "--ready", "--timeout", "600", "--socket", str(sock))
    with (
        Proc(*args, env=env) as waiter,
        Proc("run", str(tree), "--socket", str(sock), env=env) as run,
    ):
        run.expect(r"nostart/ok child_started")
        wait_until(lambda: _waiting_on(run, sock), timeout=DEADLINE)
        go.touch()
        rc, out = _finish(waiter)
        assert rc == FAILED, out
        assert out.splitlines() == [
            "nannytree: tree 'nostart' could not start: child nostart/bad failed to start "
            "(exit code 2 (no config))",
            "its stderr ended with:",
            "    | no config",
        ]
        rc, _ = run.finish()
    assert rc == 1


def _health_tree(web: int, dead: int) -> str:
    return f"""
[supervisor]
id = "h"

[[supervisor.children]]
id = "web"
command = ["python3", "-m", "http.server", "{web}", "--bind", "127.0.0.1"]
ready = {{ tcp = {web} }}
liveness = {{ tcp = {web}, period = 0.2 }}

[[supervisor.children]]
id = "sick"
command = ["sleep", "600"]
liveness = {{ tcp = {dead}, period = 0.1, failures = 1000000 }}
"""


def test_health_in_wait_and_status_with_a_real_listener(tmp_path, env):
    """Needs the live probes (actors/_shell): web is ready once its port answers;
    sick runs but its liveness probe fails, so the tree is never ready."""
    web, dead = _port(), _port()
    tree = tmp_path / "h.toml"
    tree.write_text(_health_tree(web, dead))
    sock = tmp_path / "h.sock"
    with Proc("run", str(tree), "--socket", str(sock), env=env) as run:
        waited = cli("wait", "web", "--ready", "--timeout", "30", "--socket", str(sock), env=env)
        assert waited.returncode == READY, waited.stderr
        socket.create_connection(("127.0.0.1", web), timeout=5).close()  # it listens

        def healths() -> dict[str, object]:
            return {p: n["health"] for p, n in workers(status(sock, env)).items()}

        wait_until(
            lambda: (
                (h := healths())["h/web"]
                == {
                    "status": "healthy",
                    "failures": 0,
                    "threshold": 3,
                    "error": "",
                }
                and (h["h/sick"] or {}).get("status") == "failing"
            ),
            timeout=DEADLINE,
        )
        out = cli("wait", "--ready", "--timeout", "0.3", "--socket", str(sock), env=env)
        assert out.returncode == TIMED_OUT, out
        assert re.search(
            rf"^  h/sick: running, failing \d+/1000000: nothing listens on port {dead}",
            out.stderr,
            re.M,
        ), out.stderr
        assert "h/web" not in out.stderr

        shown = cli("status", "--socket", str(sock), env=env)
        header = next(line for line in shown.stdout.splitlines() if line.startswith("tree"))
        assert header.split()[:3] == ["tree", "state", "health"]
        assert re.search(r"├─ web\s+running\s+healthy\s+\d+", shown.stdout), shown.stdout
        assert re.search(r"└─ sick\s+running\s+failing \d+/1000000: nothing", shown.stdout)
        one = cli("status", "sick", "--socket", str(sock), env=env)
        assert re.search(r"^\s+health: failing \d+/1000000: nothing listens", one.stdout, re.M)
        as_json = json.loads(cli("status", "sick", "--json", "--socket", str(sock), env=env).stdout)
        assert as_json["detail"]["health"]["threshold"] == 1000000
        assert as_json["tree"]["children"][0]["health"]["status"] == "failing"
        seen = set(pids(status(sock, env)).values())
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_status_has_no_health_column_without_a_probe(tmp_path, env):
    from io import StringIO

    from actors.cli._plain import Painter, status_lines

    root = Node(id="t", path="t", type="supervisor", state="running")
    root.strategy, root.intensity, root.period = "one_for_one", 3, 5.0
    root.children = [Node(id="a", path="t/a", type="worker", state="running")]
    header = status_lines(Painter(StringIO()), {"pid": 1}, root)[4]
    assert "health" not in header.split()


@pytest.mark.parametrize(
    ("fields", "is_ready"),
    [
        ({"state": "running"}, True),
        ({"state": "running", "health": {"status": "unknown"}}, True),
        ({"state": "running", "health": {"status": "failing", "failures": 1}}, False),
        ({"state": "starting"}, False),
        ({"state": "backoff"}, False),
        ({"state": "paused"}, False),
        # a one-shot step that did its work, and one that was only stopped
        ({"state": "stopped", "restart": "transient", "last_exit_kind": "normal"}, True),
        ({"state": "stopped", "restart": "transient", "last_exit_kind": "shutdown"}, False),
        ({"state": "stopped", "restart": "permanent", "last_exit_kind": "normal"}, False),
    ],
)
def test_what_counts_as_ready_strictly(fields, is_ready):
    node = Node(id="a", path="t/a", type="worker", **fields)
    assert ready(node, strict=True) is is_ready
    assert done(node) is (fields["state"] == "stopped" and is_ready)


@pytest.mark.parametrize(
    ("fields", "is_ready"),
    [
        # stopped on purpose: fine, whatever its restart
        ({"state": "stopped", "restart": "permanent", "last_exit_kind": "shutdown"}, True),
        ({"state": "stopped", "restart": "transient", "last_exit_kind": "shutdown"}, True),
        # a supervisor's give-up is a stop too, and not on purpose
        (
            {
                "state": "stopped",
                "last_exit_kind": "shutdown",
                "last_exit": "shutdown: reached_max_restart_intensity",
            },
            False,
        ),
        # stopped after a crash (its restart_limit: failed), or never started
        ({"state": "failed", "last_exit_kind": "exit_code"}, False),
        ({"state": "stopped", "restart": "permanent", "last_exit_kind": "exit_code"}, False),
        ({"state": "stopped"}, False),
        ({"state": "paused"}, False),
    ],
)
def test_a_child_stopped_on_purpose_is_ready_unless_strict(fields, is_ready):
    for kind in ("worker", "supervisor"):
        node = Node(id="a", path="t/a", type=kind, **fields)
        assert ready(node) is is_ready, (kind, fields)
        assert at_rest(node) is is_ready
        assert ready(node, strict=True) is False


def test_a_temporary_child_stopped_on_purpose_and_removed_is_not_never_ready():
    root = Node(id="r", path="r", type="supervisor", state="running")
    gone = Node(id="t", path="r/t", type="worker", state="stopped", restart="temporary")
    gone.last_exit, gone.last_exit_kind = "shutdown", "shutdown"
    assert never_ready([gone], root, Ending("r")) is None
    why = never_ready([gone], root, Ending("r"), strict=True)
    assert why == "child 'r/t' ended (shutdown) and is not restarted"


AT_REST = """
[supervisor]
id = "rest"

[[supervisor.children]]
id = "migrate"
command = ["true"]
restart = "transient"
ready = "exited"

[[supervisor.children]]
id = "web"
command = ["sleep", "600"]
"""


def test_status_and_wait_count_a_finished_one_shot_and_a_stopped_child_as_fine(tmp_path, env):
    tree = tmp_path / "rest.toml"
    tree.write_text(AT_REST)
    sock = tmp_path / "r.sock"
    where = ("--socket", str(sock))
    with Proc("run", str(tree), *where, env=env) as run:
        run.expect(r"rest/web child_started")
        # A finished one-shot step: not running, and fine.
        assert cli("status", *where, env=env).returncode == READY
        assert cli("status", "--strict", *where, env=env).returncode == NOT_RUNNING
        seen = set(pids(status(sock, env)).values())
        assert cli("stop", "web", *where, env=env).returncode == READY
        # Stopped on purpose: fine too, unless strict.
        assert cli("status", *where, env=env).returncode == READY
        assert cli("status", "web", *where, env=env).returncode == READY
        assert cli("status", "--strict", *where, env=env).returncode == NOT_RUNNING
        out = cli("wait", "--ready", "--timeout", "10", *where, env=env)
        assert (out.returncode, out.stdout) == (READY, "ready: tree 'rest' (2 children)\n")
        strict = cli("wait", "web", "--ready", "--strict", "--timeout", "0.3", *where, env=env)
        assert strict.returncode == TIMED_OUT, strict.stderr
        assert "  rest/web: stopped; last exit: shutdown" in strict.stderr
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_a_supervisor_that_gave_up_for_good_isnever_ready():
    """A transient nested supervisor that gave up stays stopped (its give-up is a
    normal exit): waiting for it, or for what is under it, ends at once; a permanent
    one is restarted by its parent (or the parent gives up: the tree's end)."""
    root = Node(id="r", path="r", type="supervisor", state="running")
    pool = Node(id="pool", path="r/pool", type="supervisor", state="stopped")
    pool.restart, pool.last_exit = "transient", "shutdown: reached_max_restart_intensity"
    root.children = [pool, Node(id="w", path="r/w", type="worker", state="running")]
    ending = Ending("r")
    why = never_ready([root], root, ending)
    assert why is not None
    assert why.startswith("supervisor 'r/pool' gave up and is not restarted (restart = transient)")
    assert never_ready([root.children[1]], root, ending) is None  # w does not need pool
    pool.restart = "permanent"
    assert never_ready([root], root, ending) is None


def test_check_reports_every_probe_mistake_of_a_file_at_once(tmp_path, env):
    bad = tmp_path / "probes.toml"
    children = [
        "ready = { tcp = 70000 }",
        'ready = { http = "ftp://127.0.0.1/" }',
        "liveness = { tcp = 8000, failures = 0 }",
        "liveness = { exec = [], period = 1 }",
        'ready = { log = "(" }',
        "ready = { tcp = 8000, perod = 1 }",
        'liveness = { http = "http://127.0.0.1:1/", timeout = -1 }',
        'ready = "exited"',  # a permanent one-shot step
    ]
    text = '[supervisor]\nid = "p"\n' + "".join(
        f'[[supervisor.children]]\nid = "c{i}"\ncommand = ["true"]\n{line}\n'
        for i, line in enumerate(children)
    )
    bad.write_text(text)
    out = cli("check", str(bad), env=env)
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    where = [
        "children[0].ready.tcp is 70000",
        'children[1].ready.http is "ftp://127.0.0.1/"',
        "children[2].liveness.failures is 0",
        "children[3].liveness.exec is []",
        'children[4].ready.log is "("',
        'children[5].ready.perod is 1; unknown key; did you mean "period"?',
        "children[6].liveness.timeout is -1",
        'children[7].ready is "exited"',
    ]
    assert len(lines) == len(where) + 1, out.stderr
    for line, part in zip(lines, where, strict=False):
        assert f"supervisor.{part}" in line, (line, part)
    assert lines[-1] == f"nannytree: {bad}: 8 problems; the tree would not run as written"
