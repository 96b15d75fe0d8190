"""The nannytree command end to end: real `run` processes, controlled from second
processes over the Unix socket, stopped with SIGINT/SIGTERM; plus the live view
rendered through rich's recording console.

No test sleeps to synchronise: each waits for an output line or a socket answer,
with a deadline.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from rich.console import Console

from actors._launcher._runtime_dir import runtime_dir
from actors._operate._records import EventRecord, Node
from actors.cli._args import signal_arg
from actors.cli._control import ControlError
from actors.cli._control import call as control_call
from actors.cli._view import Header, LiveView, screen
from actors.host._server import AlreadyRunning, ControlSocket
from actors.testing import wait_gone
from tests.support import LiveRun, interrupt_run, wait_until

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "actors.cli"]
DEADLINE = 20.0
PID = r"(?: pid=\d+)?"  # events about a process may name it
EVENT_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} \S+ [a-z_]+( |$)")

THREE = """
[supervisor]
id = "three"
strategy = "one_for_all"
intensity = 5
period = 10

[[supervisor.children]]
id = "web"
command = ["sleep", "600"]
shutdown = 2

[[supervisor.children]]
id = "worker"
command = "sh -c 'while :; do sleep 1; done'"
shutdown = 2

[[supervisor.children]]
id = "mailer"
target = "tests.targets.children:sleep_forever"
shutdown = 2
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    logs = str(tmp_path / "logs")
    env = {**os.environ, "COLUMNS": "200", "XDG_RUNTIME_DIR": str(tmp_path), **extra}
    env["NANNYTREE_LOG_DIR"] = extra.get("NANNYTREE_LOG_DIR", logs)
    env.pop("NO_COLOR", None)
    return env


class Proc:
    """A CLI subprocess whose output lines arrive on a queue, read by a thread."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.p = subprocess.Popen(
            [*CLI, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=ROOT,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.output.append(line.rstrip("\n"))
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, pattern: str, timeout: float = DEADLINE) -> re.Match[str]:
        """Wait for the next output line matching `pattern` (a regex)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no line matching {pattern!r} within {timeout}s; output:\n"
                    + "\n".join(self.output)
                ) from None
            if line is None:
                self.lines.put(None)
                raise AssertionError(
                    f"exited ({self.p.poll()}) before a line matching {pattern!r}; output:\n"
                    + "\n".join(self.output)
                )
            match = re.search(pattern, line)
            if match:
                return match

    def finish(self, sig: int | None = None, timeout: float = 30.0) -> tuple[int, str]:
        """Send `sig` (if any), wait for the exit; the status and the whole output."""
        if sig is not None:
            self.p.send_signal(sig)
        rc = self.p.wait(timeout)
        self._reader.join(timeout)
        return rc, "\n".join(self.output)

    def close(self) -> None:
        """Never leave it behind: SIGINT, then SIGKILL with every descendant."""
        interrupt_run(self.p)
        self._reader.join(5)
        if self.p.stdout is not None:
            self.p.stdout.close()

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )


def status(sock: Path, env: dict[str, str]) -> dict[str, Any]:
    out = cli("status", "--json", "--socket", str(sock), env=env)
    assert out.returncode in (0, 3), out.stderr  # 3: some child is not running
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def workers(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """path -> node, for every worker in a status answer."""
    found: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any]) -> None:
        if node["type"] == "worker":
            found[node["path"]] = node
        for child in node["children"]:
            walk(child)

    walk(answer["tree"])
    return found


def pids(answer: dict[str, Any]) -> dict[str, int]:
    return {path: n["pid"] for path, n in workers(answer).items() if n["pid"] is not None}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return _env(tmp_path)


@pytest.fixture
def three(tmp_path: Path) -> Path:
    path = tmp_path / "three.toml"
    path.write_text(THREE)
    return path


# -- the whole story: three programs, one_for_all, controlled from another process --------


def test_run_status_restart_stop_start_and_ctrl_c(tmp_path, env, three):
    sock = tmp_path / "c.sock"
    seen: set[int] = set()
    with Proc("run", str(three), "--socket", str(sock), "--plain", env=env) as run:
        run.expect(r"^nannytree: tree 'three' running, pid \d+, control socket ")
        run.expect(r"three/mailer child_started pid=\d+")

        first = status(sock, env)
        before = pids(first)
        seen |= set(before.values())
        assert set(before) == {"three/web", "three/worker", "three/mailer"}
        assert all(n["state"] == "running" for n in workers(first).values())
        assert first["tree"]["strategy"] == "one_for_all"

        human = cli("status", "--socket", str(sock), env=env)
        assert human.returncode == 0, human.stderr
        assert human.stdout.startswith("● three - running, pid ")
        assert "one_for_all, max 5 restarts in 10s" in human.stdout
        for name, pid in (("├─ web", before["three/web"]), ("└─ mailer", before["three/mailer"])):
            assert re.search(rf"{name}\s+running\s+{pid}\s+\d+s\s+0\s", human.stdout), human.stdout

        # restart one from another process: only that one gets a new process
        out = cli("restart", "worker", "--socket", str(sock), env=env)
        assert out.returncode == 0, out.stderr
        new = int(
            re.fullmatch(
                rf"restarted three/worker: pid {before['three/worker']} -> (\d+)\n", out.stdout
            )[1]
        )  # type: ignore[index]
        run.expect(rf"three/worker child_started pid={new}")
        after = pids(status(sock, env))
        seen |= set(after.values())
        assert after == {**before, "three/worker": new}

        # a crash restarts all three (one_for_all), the others in reverse order first
        os.kill(after["three/web"], signal.SIGKILL)
        run.expect(rf"three/web child_exited{PID} reason=killed by SIGKILL")
        run.expect(r"three/mailer child_terminated")
        run.expect(r"three/worker child_terminated")
        run.expect(r"three/mailer child_started")
        crashed = pids(status(sock, env))
        seen |= set(crashed.values())
        assert not set(crashed.values()) & set(after.values())

        out = cli("stop", "mailer", "--socket", str(sock), env=env)
        assert out.stdout == f"stopped three/mailer (was pid {crashed['three/mailer']})\n"
        mailer = workers(status(sock, env))["three/mailer"]
        assert (mailer["state"], mailer["pid"]) == ("stopped", None)
        out = cli("start", "mailer", "--socket", str(sock), env=env)
        assert out.returncode == 0 and out.stdout.startswith("started three/mailer, pid ")
        out = cli("start", "mailer", "--socket", str(sock), env=env)
        assert out.returncode == 1 and "already running" in out.stderr
        final = pids(status(sock, env))
        seen |= set(final.values())

        rc, output = run.finish(signal.SIGINT)
    assert rc == 0, output
    assert "nannytree: tree 'three' stopped (SIGINT)" in output
    stops = re.findall(rf"three/(\w+) child_terminated{PID} reason=shutdown", output)
    assert stops[-3:] == ["mailer", "worker", "web"]  # reverse start order
    assert wait_gone(sorted(seen)) == []
    assert not sock.exists()

    # Without a terminal: one line per event (or a nannytree notice), no escape codes.
    assert "\x1b" not in output
    for line in output.splitlines():
        assert EVENT_LINE.match(line) or line.startswith("nannytree: "), line


def test_sigterm_stops_the_tree_and_exits_0(tmp_path, env, three):
    sock = tmp_path / "c.sock"
    with Proc("run", str(three), "--socket", str(sock), env=env) as run:  # piped: plain
        run.expect(r"three/mailer child_started")
        children = pids(status(sock, env))
        rc, output = run.finish(signal.SIGTERM)
    assert rc == 0, output
    assert output.rstrip().endswith("nannytree: tree 'three' stopped (SIGTERM)")
    assert wait_gone(list(children.values())) == []


def test_a_tree_that_gives_up_exits_1_with_the_reason(tmp_path, env):
    tree = tmp_path / "doomed.toml"
    tree.write_text(
        "[supervisor]\nintensity = 1\nperiod = 30\n"
        '[[supervisor.children]]\nid = "crash"\ncommand = ["sh", "-c", "exit 1"]\n'
        "restart_limit = false\n"  # OTP's charging: its crashes end the tree
    )
    with Proc("run", str(tree), "--socket", str(tmp_path / "d.sock"), env=env) as run:
        rc, output = run.finish()
    assert rc == 1, output
    assert re.search(rf"doomed/crash reached_max_restart_intensity{PID} reason=exit code 1", output)
    assert re.search(
        r"nannytree: tree 'doomed' gave up: child 'crash' ended too often \(last: exit code 1\)",
        output,
    ), output


def test_run_refuses_an_invalid_file(tmp_path, env):
    tree = tmp_path / "bad.toml"
    tree.write_text('[supervisor]\n[[supervisor.children]]\nid = "a"\ncommand = 3\n')
    out = cli("run", str(tree), "--socket", str(tmp_path / "b.sock"), env=env)
    assert out.returncode == 1
    assert out.stderr == (
        f"nannytree: {tree}: supervisor.children[0].command is 3; "
        'expected an array of strings, e.g. ["sleep", "10"]\n'
    )


# -- the control socket -------------------------------------------------------------------


def test_socket_is_private_in_the_runtime_dir_and_a_second_run_refuses(tmp_path, three):
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    env = _env(tmp_path, XDG_RUNTIME_DIR=str(xdg))
    with Proc("run", str(three), "--plain", env=env) as run:
        run.expect(r"three/mailer child_started")
        sock = xdg / "nannytree" / "three.sock"
        assert stat.S_ISSOCK(sock.stat().st_mode)
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
        host = psutil.Process(run.p.pid)
        inet = host.net_connections if hasattr(host, "net_connections") else host.connections
        assert inet(kind="inet") == []  # no TCP (or UDP) socket at all

        # The only tree running: found by itself. Its root answers "starting" (exit 3)
        # until its start has returned, a moment after the last child_started line.
        answers: list[subprocess.CompletedProcess[str]] = []
        wait_until(
            lambda: answers.append(cli("status", "--json", env=env)) or answers[-1].returncode != 3,
            10.0,
            "the tree's start returned",
        )
        found = answers[-1]
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["socket"] == str(sock)
        assert cli("status", "--tree", "three", env=env).returncode == 0
        missing = cli("status", "--tree", "nope", env=env)
        assert missing.returncode == 3 and "no tree is running" in missing.stderr

        second = cli("run", str(three), "--plain", env=env)
        assert second.returncode == 1
        assert f"another `nannytree run` (pid {run.p.pid}) is serving {sock}" in second.stderr
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert not sock.exists()
    gone = cli("status", env=env)
    assert gone.returncode == 3 and "no running tree found" in gone.stderr


def test_a_stale_socket_from_a_killed_run_is_detected_and_replaced(tmp_path, env, three):
    sock = tmp_path / "s.sock"
    with Proc("run", str(three), "--socket", str(sock), env=env) as run:
        run.expect(r"three/mailer child_started")
        children = pids(status(sock, env))
        run.p.kill()  # no cleanup at all: the socket file stays
        run.finish()
    # The launcher sees its lifeline close and kills every child.
    assert wait_gone(list(children.values()), timeout=10) == []
    assert sock.exists()
    stale = cli("status", "--socket", str(sock), env=env)
    assert stale.returncode == 3 and "stale" in stale.stderr
    with Proc("run", str(three), "--socket", str(sock), env=env) as again:
        again.expect(rf"^nannytree: replaced a stale socket left by a run that was killed: {sock}")
        again.expect(r"three/mailer child_started")
        assert status(sock, env)["pid"] == again.p.pid
        rc, _ = again.finish(signal.SIGINT)
    assert rc == 0


def test_nested_children_by_path_pause_resume_signal(tmp_path, env):
    tree = tmp_path / "nest.toml"
    tree.write_text(
        "[supervisor]\nintensity = 5\n"
        '[[supervisor.children]]\nid = "w"\ncommand = ["sleep", "600"]\nshutdown = 1\n'
        '[[supervisor.children]]\nid = "pool"\nintensity = 5\n'
        '[[supervisor.children.children]]\nid = "w"\ncommand = ["sleep", "600"]\nshutdown = 1\n'
        '[[supervisor.children.children]]\nid = "solo"\ncommand = ["sleep", "600"]\nshutdown = 1\n'
    )
    sock = str(tmp_path / "n.sock")
    with Proc("run", str(tree), "--socket", sock, env=env) as run:
        run.expect(r"nest/pool child_started")
        before = pids(status(Path(sock), env))
        assert set(before) == {"nest/w", "nest/pool/w", "nest/pool/solo"}

        ambiguous = cli("restart", "w", "--socket", sock, env=env)
        assert ambiguous.returncode == 1
        assert "'w' names several children (nest/w, nest/pool/w); give its path" in ambiguous.stderr
        for key in ("pool/w", "nest/pool/w"):
            out = cli("restart", key, "--socket", sock, env=env)
            assert out.returncode == 0 and out.stdout.startswith("restarted nest/pool/w: pid ")
        for command in ("restart", "status"):
            unknown = cli(command, "nope", "--socket", sock, env=env)
            assert (unknown.returncode, unknown.stderr) == (
                1,
                "nannytree: no child 'nope' in tree 'nest'; `nannytree status` lists them\n",
            )

        solo = before["nest/pool/solo"]
        out = cli("pause", "solo", "--socket", sock, env=env)
        assert out.stdout == f"paused nest/pool/solo (pid {solo}, SIGSTOP to its process group)\n"
        # A stop signal takes effect once the kernel runs the process: not at once on a
        # loaded machine.
        stopped = lambda: psutil.Process(solo).status() == psutil.STATUS_STOPPED  # noqa: E731
        wait_until(stopped, 10, "solo stopped")
        only = cli("status", "solo", "--socket", sock, env=env).stdout
        assert re.search(rf"solo\s+paused\s+{solo}\s", only) and "nest/w" not in only
        assert cli("resume", "solo", "--socket", sock, env=env).returncode == 0
        assert workers(status(Path(sock), env))["nest/pool/solo"]["state"] == "running"

        refused = cli("pause", "pool", "--socket", sock, env=env)
        assert refused.returncode == 1 and "nest/pool is a supervisor" in refused.stderr
        assert cli("signal", "solo", "NOPE", "--socket", sock, env=env).returncode == 2
        out = cli("signal", "solo", "term", "--socket", sock, env=env)
        assert out.stdout == f"sent SIGTERM to nest/pool/solo (pid {solo})\n"
        run.expect(rf"nest/pool/solo child_exited{PID} reason=killed by SIGTERM")
        run.expect(r"nest/pool/solo child_started")
        seen = set(before.values()) | set(pids(status(Path(sock), env)).values())
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_events_follow_streams_until_the_tree_stops(tmp_path, env, three):
    sock = str(tmp_path / "e.sock")
    with Proc("run", str(three), "--socket", sock, env=env) as run:
        run.expect(r"three/mailer child_started")
        with Proc("events", "--follow", "-n", "100", "--socket", sock, env=env) as follow:
            follow.expect(r"three supervisor_started one_for_all")  # the backlog first
            out = cli("restart", "web", "--socket", sock, env=env)
            new = out.stdout.split()[-1]
            follow.expect(rf"three/web child_started pid={new}$")
            past = cli("events", "-n", "2", "--json", "--socket", sock, env=env)
            assert [json.loads(line)["who"] for line in past.stdout.splitlines()] == [
                "three/web",
                "three/web",
            ]
            done = cli("shutdown", "--socket", sock, env=env)
            assert done.stdout == "stopping tree 'three'\n"
            follow.expect(r"three supervisor_stopped reason=shutdown")
            assert follow.finish()[0] == 0
        rc, output = run.finish()
    assert rc == 0
    assert re.search(r"stopped \(`nannytree shutdown` from pid \d+\)", output)


def test_clients_without_a_tree_say_so(tmp_path, env):
    out = cli("status", "--socket", str(tmp_path / "none.sock"), env=env)
    assert out.returncode == 3
    assert "no tree is running at" in out.stderr and "nannytree run FILE" in out.stderr
    empty = _env(tmp_path, XDG_RUNTIME_DIR=str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    out = cli("restart", "web", env=empty)
    assert out.returncode == 3 and "no running tree found" in out.stderr


def test_exit_codes_listing_version_and_resume_of_a_running_child(tmp_path, three):
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    env = _env(tmp_path, XDG_RUNTIME_DIR=str(xdg))
    other = tmp_path / "other.toml"
    other.write_text(THREE.replace('id = "three"', 'id = "other"'))
    with (
        Proc("run", str(three), "--plain", env=env) as run,
        Proc("run", str(other), "--plain", env=env) as run2,
    ):
        run.expect(r"three/mailer child_started")
        run2.expect(r"other/mailer child_started")
        seen = set(pids(status(xdg / "nannytree" / "three.sock", env)).values())
        seen |= set(pids(status(xdg / "nannytree" / "other.sock", env)).values())
        listed = cli("ls", env=env)
        assert listed.returncode == 0
        assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["other", "three"]
        assert f"pid {run.p.pid}\t{xdg / 'nannytree' / 'three.sock'}" in listed.stdout
        ambiguous = cli("status", env=env)  # two trees, none named: a usage error
        assert ambiguous.returncode == 2 and "pick one with --tree ID" in ambiguous.stderr
        assert cli("status", "--tree", "three", env=env).returncode == 0  # all running
        assert cli("stop", "web", "--tree", "three", env=env).returncode == 0
        down = cli("status", "--strict", "--tree", "three", env=env)  # stopped on purpose
        assert down.returncode == 3 and re.search(r"web\s+stopped", down.stdout)
        assert cli("status", "mailer", "--tree", "three", env=env).returncode == 0
        resumed = cli("resume", "mailer", "--tree", "three", env=env)
        assert resumed.returncode == 1
        assert "three/mailer is not paused (it is running)" in resumed.stderr
        rc, _ = run.finish(signal.SIGINT)
        rc2, _ = run2.finish(signal.SIGINT)
    assert rc == rc2 == 0
    assert wait_gone(sorted(seen)) == []
    none = cli("ls", env=env)  # says so, on stderr, rather than printing nothing
    assert (none.returncode, none.stdout) == (3, "")
    assert "no tree is running" in none.stderr
    version = cli("--version", env=env)
    assert version.returncode == 0 and re.match(r"nannytree \d+\.\d+", version.stdout)
    from importlib.metadata import version as installed

    assert version.stdout == f"nannytree {installed('nannytree')}\n"  # one source of truth
    assert cli("status", "--bogus", env=env).returncode == 2


def test_a_crash_shows_its_stderr_tail_in_events_status_and_the_give_up(tmp_path, env):
    (tmp_path / "flaky.sh").write_text(
        'echo "starting up" >&2\necho "fatal: bad config line 7" >&2\n'
        "if [ -e marker ]; then exec sleep 600; fi\ntouch marker\nexit 3\n"
    )
    tree = tmp_path / "crash.toml"
    tree.write_text(
        '[supervisor]\nid = "crash"\nintensity = 1\nperiod = 30\n'
        '[[supervisor.children]]\nid = "flaky"\ncommand = ["sh", "flaky.sh"]\n'
        f'cwd = "{tmp_path}"\nstderr = "capture"\n'
        '[[supervisor.children]]\nid = "crashy"\ncommand = ["python3", "crashy.py"]\n'
        f'cwd = "{tmp_path}"\nstderr = "capture"\nrestart = "temporary"\n'
    )
    sock = str(tmp_path / "c.sock")
    with Proc("run", str(tree), "--socket", sock, env=env) as run:
        run.expect(r"crash/flaky child_exited pid=\d+ reason=exit code 3")
        run.expect(r"^    \| starting up$")
        run.expect(r"^    \| fatal: bad config line 7$")
        run.expect(r"crash/crashy child_exited pid=\d+ reason=exit code 2")
        run.expect(r"^    \| .*can't open file .*crashy\.py")
        _until(lambda: workers(status(Path(sock), env))["crash/flaky"]["restarts"] == 1)
        seen = set(pids(status(Path(sock), env)).values())
        shown = cli("status", "flaky", "--socket", sock, env=env)
        assert shown.returncode == 0, shown.stderr
        text = shown.stdout
        assert re.search(r"● crash/flaky - running", text)
        assert "runs: sh flaky.sh" in text and re.search(r"restarts: 1", text)
        assert re.search(
            r"\d\d:\d\d:\d\d pid \d+: exit code 3\n\s+\| starting up\n"
            r"\s+\| fatal: bad config line 7",
            text,
        ), text
        events = cli("events", "--socket", sock, env=env).stdout
        assert "    | fatal: bad config line 7" in events
        detail = json.loads(cli("status", "flaky", "--json", "--socket", sock, env=env).stdout)
        assert detail["detail"]["exits"][0]["stderr"].endswith("fatal: bad config line 7")
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_the_give_up_message_carries_the_stderr_tail(tmp_path, env):
    tree = tmp_path / "give.toml"
    tree.write_text(
        '[supervisor]\nid = "give"\nintensity = 1\nperiod = 30\n'
        '[[supervisor.children]]\nid = "crashy"\ncommand = ["python3", "crashy.py"]\n'
        f'cwd = "{tmp_path}"\nstderr = "capture"\n'
        "restart_limit = false\n"  # OTP's charging: its crashes end the tree
    )
    out = subprocess.run(
        [*CLI, "run", str(tree), "--plain", "--socket", str(tmp_path / "g.sock")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 1
    assert re.search(
        r"gave up: child 'crashy' ended too often \(last: exit code 2\).*\n"
        r"its stderr ended with:\n    \| .*can't open file .*crashy\.py",
        out.stderr,
    ), out.stderr


def test_status_answers_at_once_during_a_slow_start(tmp_path, env):
    tree = tmp_path / "slow.toml"
    tree.write_text(
        '[supervisor]\nid = "slow"\n'
        '[[supervisor.children]]\nid = "quick"\ncommand = ["sleep", "600"]\n'
        '[[supervisor.children]]\nid = "sluggish"\ncommand = ["sleep", "600"]\nready = 8\n'
        "start_timeout = 20\n"
        '[[supervisor.children]]\nid = "later"\ncommand = ["sleep", "600"]\n'
    )
    sock = tmp_path / "s.sock"
    with Proc("run", str(tree), "--socket", str(sock), env=env) as run:
        _until(sock.exists)  # served from before the start
        _until(lambda: workers(status(sock, env))["slow/quick"]["state"] == "running")
        # The plain event lines come as they happen: quick's start is printed while
        # sluggish is still starting, not once the whole start is done.
        run.expect(r"slow/quick child_started")
        assert workers(status(sock, env))["slow/sluggish"]["state"] == "starting"
        # `sluggish` needs 8 s to count as started; status must not wait for it:
        # 'later' still shows as starting, so this answer came during the start.
        answer = status(sock, env)
        states = {p: n["state"] for p, n in workers(answer).items()}
        assert states["slow/quick"] == "running"
        assert states["slow/sluggish"] == "starting" and states["slow/later"] == "starting"
        text = cli("status", "--socket", str(sock), env=env)
        assert text.returncode == 3 and re.search(r"later\s+starting", text.stdout)
        seen = {n["pid"] for n in workers(answer).values() if n["pid"]}
        run.expect(r"slow/later child_started", timeout=30)
        seen |= set(pids(status(sock, env)).values())
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_add_to_a_simple_one_for_one_and_restart_all(tmp_path, env):
    tree = tmp_path / "pool.toml"
    tree.write_text(
        '[supervisor]\nid = "top"\n'
        '[[supervisor.children]]\nid = "web"\ncommand = ["sleep", "600"]\n'
        '[[supervisor.children]]\nid = "pool"\nstrategy = "simple_one_for_one"\n'
        '[[supervisor.children.children]]\nid = "job"\ncommand = ["sleep"]\n'
    )
    sock = str(tmp_path / "p.sock")
    with Proc("run", str(tree), "--socket", sock, env=env) as run:
        run.expect(r"top/pool child_started")
        added = cli("add", "pool", "600", "--socket", sock, env=env)
        assert added.returncode == 0, added.stderr
        assert re.match(r"added top/pool/job-\d+, pid \d+$", added.stdout.strip())
        before = pids(status(Path(sock), env))
        assert set(before) == {"top/web", next(p for p in before if p.startswith("top/pool/job"))}
        job = next(p for p in before if p.startswith("top/pool/"))
        assert psutil.Process(before[job]).cmdline() == ["sleep", "600"]
        refused = cli("add", "web", "--socket", sock, env=env)
        assert refused.returncode == 1 and "top/web is a worker" in refused.stderr
        everything = cli("restart", "all", "--socket", sock, env=env)
        assert everything.returncode == 0, everything.stderr
        assert everything.stdout.strip() == "restarted 2 children of top: web, pool"
        after = pids(status(Path(sock), env))
        assert after["top/web"] != before["top/web"]
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(set(before.values()) | set(after.values()))) == []


def test_reload_applies_the_edited_file(tmp_path, env):
    tree = tmp_path / "r.toml"
    head = '[supervisor]\nid = "r"\n'
    keep = '[[supervisor.children]]\nid = "keep"\ncommand = ["sleep", "600"]\n'
    tree.write_text(
        head
        + keep
        + '[[supervisor.children]]\nid = "edit"\ncommand = ["sleep", "600"]\n'
        + '[[supervisor.children]]\nid = "drop"\ncommand = ["sleep", "600"]\n'
    )
    sock = str(tmp_path / "r.sock")
    with Proc("run", str(tree), "--socket", sock, env=env) as run:
        run.expect(r"r/drop child_started")
        before = pids(status(Path(sock), env))
        tree.write_text(
            head
            + keep
            + '[[supervisor.children]]\nid = "edit"\ncommand = ["sleep", "601"]\n'
            + '[[supervisor.children]]\nid = "new"\ncommand = ["sleep", "600"]\n'
        )
        out = cli("reload", "--socket", sock, env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "added: new; changed: edit; removed: drop"
        after = pids(status(Path(sock), env))
        assert set(after) == {"r/keep", "r/edit", "r/new"}
        assert after["r/keep"] == before["r/keep"]  # untouched
        assert psutil.Process(after["r/edit"]).cmdline() == ["sleep", "601"]
        assert cli("reload", "--socket", sock, env=env).stdout.strip() == "no change"
        tree.write_text("not toml [")
        bad = cli("reload", "--socket", sock, env=env)
        assert bad.returncode == 1 and "nothing changed" in bad.stderr
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(set(before.values()) | set(after.values()))) == []


# -- check and demo ---------------------------------------------------------------------------


def test_check_reports_every_run_time_problem_without_importing_targets(tmp_path, env):
    (tmp_path / "jobs.py").write_text(
        "open(__file__ + '.imported', 'w').close()\n\ndef work():\n    pass\n"
    )
    tree = tmp_path / "bad.toml"
    tree.write_text(
        '[supervisor]\nid = "bad"\n'
        '[[supervisor.children]]\nid = "ghost"\ncommand = ["no-such-program-xyz"]\n'
        '[[supervisor.children]]\nid = "homeless"\ncommand = ["sleep", "1"]\n'
        'cwd = "/no/such/dir"\n'
        '[[supervisor.children]]\nid = "piped"\ncommand = "echo $HOME | wc"\n'
        '[[supervisor.children]]\nid = "argued"\ncommand = ["sleep"]\nargs = [1]\n'
        '[[supervisor.children]]\nid = "typo"\ntarget = "jobs:wrok"\n'
        '[[supervisor.children]]\nid = "fine"\ntarget = "jobs:work"\n'
    )
    out = cli("check", str(tree), env=env)
    assert out.returncode == 1
    err = out.stderr
    assert "child 'ghost': program 'no-such-program-xyz' is not an executable file on PATH" in err
    assert "child 'homeless': cwd '/no/such/dir' does not exist" in err
    assert "child 'piped': command 'echo $HOME | wc' runs without a shell" in err
    assert "child 'argued': args/kwargs are for a Python target" in err
    assert "child 'typo': target 'jobs:wrok': jobs defines no 'wrok'" in err
    assert "'fine'" not in err
    assert "5 problems" in err
    assert not (tmp_path / "jobs.py.imported").exists()  # never ran the module


def test_check_prints_the_tree_it_would_start(env):
    out = cli("check", "examples/tree.toml", env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "examples/tree.toml: ok: tree 'shop', 3 workers under 1 supervisor"
    assert re.match(r"shop\s+one_for_all\s+-\s+-\s+max 3 restarts in 10s$", lines[3])
    assert re.match(r"├─ web\s+worker\s+permanent\s+2.0\s+python3 -m http.server 8765", lines[4])
    assert re.match(r"├─ worker\s+worker\s+permanent\s+2.0\s+sh -c 'while :;", lines[5])
    assert re.match(r"└─ mailer\s+worker\s+permanent\s+2.0\s+actors.cli._demo:steady$", lines[6])


def test_check_reports_what_is_wrong(tmp_path, env):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[supervisor]\nstrategy = "one_for_all"\n'
        + '[[supervisor.children]]\nid = "a"\ncommand = ["true"]\n' * 1
        + '[[supervisor.children]]\nid = "b"\ncommand = ["true"]\n'
        + '[[supervisor.children]]\nid = "c"\ncommand = ["true"]\nrestart = "always"\n'
    )
    out = cli("check", str(bad), env=env)
    assert out.returncode == 1
    assert out.stderr == (
        f'nannytree: {bad}: supervisor.children[2].restart is "always"; '
        'expected one of "permanent", "transient", "temporary"\n'
    )


def test_demo_shows_restarts_strategies_and_escalation(tmp_path, env):
    with Proc("demo", "--plain", "--socket", str(tmp_path / "demo.sock"), env=env) as demo:
        demo.expect(r"demo/pipeline/sink child_started")
        demo.expect(rf"demo/fragile/crasher child_exited{PID} reason=exit code 3")
        demo.expect(r"demo/fragile/crasher reached_max_restart_intensity")
        demo.expect(r"demo/fragile child_exited reason=shutdown: reached_max_restart_intensity")
        demo.expect(r"demo/fragile supervisor_started")  # escalated: demo restarts it
        rc, output = demo.finish(signal.SIGINT)
    assert rc == 0, output
    assert re.search(rf"demo/flaky child_exited{PID} reason=exit code 1", output)


def test_demo_is_bounded_by_its_duration(tmp_path, env):
    with Proc("demo", "--duration", "0.5", "--socket", str(tmp_path / "d.sock"), env=env) as demo:
        rc, output = demo.finish()
    assert rc == 0, output
    assert output.rstrip().endswith("nannytree: tree 'demo' stopped (--duration 0.5s)")


# -- the live view ---------------------------------------------------------------------------


def _sample_tree() -> Node:
    mib = 1024 * 1024
    return Node(
        id="shop",
        path="shop",
        type="supervisor",
        state="running",
        uptime=65,
        strategy="one_for_all",
        intensity=3,
        period=10.0,
        cpu=1.5,
        rss=60 * mib,
        children=[
            Node(
                "web", "shop/web", "worker", "running", pid=4243, uptime=65, cpu=0.5, rss=20 * mib
            ),
            Node(
                "worker",
                "shop/worker",
                "worker",
                "running",
                pid=4251,
                uptime=3,
                restarts=2,
                cpu=1.0,
                rss=4 * mib,
                last_exit="exit code 1",
                last_exit_normal=False,
            ),
            Node(
                "pool",
                "shop/pool",
                "supervisor",
                "running",
                uptime=65,
                strategy="one_for_one",
                intensity=1,
                period=5.0,
                rss=36 * mib,
                children=[
                    Node("mailer", "shop/pool/mailer", "worker", "paused", pid=4245, uptime=3725)
                ],
            ),
        ],
    )


def _events() -> list[EventRecord]:
    return [
        EventRecord(
            time.time(), "shop/worker", "child_exited", reason="exit code 1", abnormal=True
        ),
        EventRecord(time.time(), "shop/worker", "child_started", pid=4251),
    ]


HEADER = Header("shop", 4242, "/run/user/1000/nannytree/shop.sock", "/tmp/shop.log")


def test_the_live_view_renders_tree_and_events():
    console = Console(record=True, width=100, file=io.StringIO(), force_terminal=True)
    console.print(screen(_sample_tree(), _events(), HEADER, height=40))
    lines = [line.rstrip() for line in console.export_text(clear=False).splitlines()]
    assert lines[:3] == [
        "nannytree shop  one_for_all, max 3 restarts in 10s  pid 4242  up 1m05s",
        "Ctrl-C stops the tree  ·  children's output: /tmp/shop.log",
        "from another shell: nannytree status --socket /run/user/1000/nannytree/shop.sock",
    ]
    assert re.match(r"tree\s+state\s+pid\s+uptime\s+restarts\s+cpu\s+rss\s+last exit$", lines[3])
    assert set(lines[4]) == {"─"}
    rows = [
        r"shop \(one_for_all\)\s+running\s+-\s+1m05s\s+0\s+1.5%\s+60.0M\s+-",
        r"├─ web\s+running\s+4243\s+1m05s\s+0\s+0.5%\s+20.0M\s+-",
        r"├─ worker\s+running\s+4251\s+3s\s+2\s+1.0%\s+4.0M\s+exit code 1",
        r"└─ pool \(one_for_one\)\s+running\s+-\s+1m05s\s+0\s+-\s+36.0M\s+-",
        r"   └─ mailer\s+paused\s+4245\s+1h02m\s+0\s+-\s+-\s+-",
    ]
    for line, row in zip(lines[5:10], rows, strict=True):
        assert re.fullmatch(row, line), (line, row)
    assert lines[10].startswith("╭─ events ─")
    assert re.fullmatch(
        r"│ \d\d:\d\d:\d\d\.\d{3} shop/worker child_exited reason=exit code 1\s+│", lines[11]
    )
    assert re.fullmatch(
        r"│ \d\d:\d\d:\d\d\.\d{3} shop/worker child_started pid=4251\s+│", lines[12]
    )
    assert lines[13].startswith("╰─") and len(lines) == 14
    styled = console.export_text(styles=True)
    assert "\x1b[31mexit code 1" in styled  # an abnormal exit is red
    assert "\x1b[32mrunning" in styled and "\x1b[33mpaused" in styled


def test_the_live_view_draws_its_last_frame_when_it_ends():
    console = Console(record=True, width=100, file=io.StringIO(), force_terminal=True)
    with LiveView(console, HEADER) as view:
        for record in _events():
            view.add(record)
        view.update(_sample_tree(), busy=True)
        view.refresh()
        view.header.note = "stopping (SIGINT)..."
    frames = console.export_text().split("nannytree shop ")
    last = frames[-1]
    assert "a supervisor is busy; showing its last answer" in last
    assert "stopping (SIGINT)..." in last
    assert re.search(r"└─ mailer\s+paused\s+4245", last)


def test_the_screen_keeps_the_latest_events_that_fit():
    console = Console(record=True, width=80, file=io.StringIO())
    records = [EventRecord(time.time(), f"t/c{i}", "child_started", pid=i) for i in range(50)]
    console.print(screen(None, records, Header("t", 1, "/s.sock"), height=12))
    text = console.export_text()
    assert "t/c49 " in text and "t/c40 " not in text
    assert "a supervisor is busy" not in text


def test_run_shows_the_live_view_on_a_terminal_and_stops_on_ctrl_c(tmp_path, env, three):
    """On a terminal (a pty), `run` draws the live view; SIGINT stops it cleanly."""
    sock = tmp_path / "l.sock"
    with LiveRun(["run", str(three), "--socket", str(sock)], ROOT, env) as run:
        run.wait_screen(r"mailer\s+running\s+\d+", DEADLINE)
        children = pids(status(sock, env))
        text = run.text()
        assert "nannytree three  one_for_all, max 5 restarts in 10s" in text
        assert f"children's output: {tmp_path / 'logs' / 'l'}" in text
        assert re.search(r"├─ web\s+running\s+\d+", text)
        run.p.send_signal(signal.SIGINT)
        run.wait_screen(r"nannytree: tree 'three' stopped \(SIGINT\)", DEADLINE)
        assert run.p.wait(30) == 0
        assert re.search(r"└─ mailer\s+stopped\s+-", run.text())
    assert wait_gone(list(children.values())) == []


@pytest.mark.parametrize("attempt", range(3))
def test_the_stopped_view_shows_a_child_added_just_before_the_stop(tmp_path, env, three, attempt):
    """`update` adds a child and `shutdown` follows at once (over the socket, no CLI
    start in between), inside one refresh of the view: the last frame still lists the
    new child, because the view reads the tree once more before the stop."""
    sock = tmp_path / "u.sock"
    with LiveRun(["run", str(three), "--socket", str(sock)], ROOT, env) as run:
        run.wait_screen(r"mailer\s+running\s+\d+", DEADLINE)
        with three.open("a") as f:
            f.write('\n[[supervisor.children]]\nid = "late"\ncommand = ["sleep", "600"]\n')
        assert control_call(sock, {"op": "reload"})["message"] == "added: late"
        children = [c.pid for c in psutil.Process(run.p.pid).children(recursive=True)]
        control_call(sock, {"op": "shutdown"})
        assert run.p.wait(30) == 0
        run.reader.join(5)
        assert re.search(r"└─ late\s+stopped\s+-", run.text()), run.text()
    assert wait_gone(children) == []


# -- pieces ------------------------------------------------------------------------------------


def test_the_control_socket_is_0600_locked_and_cleaned_up(tmp_path):
    path = tmp_path / "sub" / "x.sock"
    control = ControlSocket.bind(path)
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        with pytest.raises(AlreadyRunning, match=rf"pid {os.getpid()}\) is serving {path}"):
            ControlSocket.bind(path)
    finally:
        control.close()
    assert not path.exists() and not path.with_name("x.sock.lock").exists()
    path.write_text("not a socket")
    with pytest.raises(ControlError, match="exists and is not a socket"):
        ControlSocket.bind(path)
    with pytest.raises(ControlError, match="socket path too long"):
        ControlSocket.bind(tmp_path / ("x" * 120))


def test_the_runtime_dir_falls_back_to_a_private_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    path = runtime_dir(create=True)
    assert path == Path("/run/nannytree" if os.getuid() == 0 else f"/tmp/nannytree-{os.getuid()}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert runtime_dir(create=True) == tmp_path / "nannytree"


@pytest.mark.parametrize("tree", ["../../etc", "a/b", "", ".."])
def test_a_tree_option_that_is_no_tree_id_is_bad_usage(tmp_path, tree):
    """`--tree` names a socket in the runtime directory, never a path out of it."""
    (tmp_path / "nannytree").mkdir(mode=0o700)
    out = cli("status", "--tree", tree, env=_env(tmp_path))
    assert (out.returncode, out.stderr) == (
        2,
        f"nannytree: --tree {tree!r} is not a tree id; `nannytree ls` lists them\n",
    )


@pytest.mark.parametrize(
    ("text", "number"), [("HUP", 1), ("sigterm", 15), ("SIGUSR1", 10), ("9", 9)]
)
def test_signals_by_name_or_number(text, number):
    assert signal_arg(text) == number


def test_the_cli_signal_parser_agrees_with_the_core():
    """The client parses signals with the stdlib alone (importing the core would cost
    half a command); it must take and refuse exactly what `parse_signal` does."""
    from supervision import parse_signal

    names = list(signal.Signals.__members__)
    texts = names + [n.lower() for n in names] + [n[3:] for n in names]
    texts += [str(n) for n in range(0, 80)] + ["SIG_DFL", "DFL", "NOPE", "", "SIG"]
    texts += ["\uff28UP", "\uff11"]  # full-width letters and digits
    for text in texts:
        try:
            expected: int | None = parse_signal(int(text) if text.isdigit() else text)
        except ValueError:
            expected = None
        try:
            got: int | None = signal_arg(text)
        except argparse.ArgumentTypeError:
            got = None
        assert got == expected, text


def _until(check: Any, timeout: float = DEADLINE) -> Any:
    """Call check() until it returns something true; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s: last {result!r}")
        time.sleep(0.05)


def test_logs_shows_what_a_child_wrote(tmp_path, env):
    tree = tmp_path / "talk.toml"
    tree.write_text(
        '[supervisor]\nid = "talk"\n'
        '[[supervisor.children]]\nid = "talker"\n'
        'command = ["sh", "-c", "echo hello; echo oops >&2; exec sleep 600"]\n'
        'stdout = "capture"\nstderr = "capture"\nready = 0.2\n'
        '[[supervisor.children]]\nid = "quiet"\n'
        'command = ["sh", "-c", "echo one; echo two >&2; echo three; exec sleep 600"]\n'
    )
    sock = str(tmp_path / "t.sock")
    with Proc("run", str(tree), "--socket", sock, env=env) as run:
        run.expect(r"children's output: .*logs/t/talk/<child>\.log")
        run.expect(r"talk/quiet child_started")
        seen = set(pids(status(Path(sock), env)).values())
        assert cli("logs", "talker", "--socket", sock, env=env).stdout == "oops\n"
        assert cli("logs", "talker", "--stdout", "--socket", sock, env=env).stdout == "hello\n"
        # A child without capture writes to its own file (supervisord style), and
        # `logs` reads it there: stdout and stderr in the order written.
        assert (tmp_path / "logs" / "t" / "talk" / "quiet.log").is_file()
        _until(lambda: cli("logs", "quiet", "--socket", sock, env=env).stdout.count("\n") == 3)
        assert cli("logs", "quiet", "--socket", sock, env=env).stdout == "one\ntwo\nthree\n"
        assert cli("logs", "quiet", "-n", "2", "--socket", sock, env=env).stdout == "two\nthree\n"
        rc, output = run.finish(signal.SIGINT)
    assert rc == 0
    assert not re.search(r"^(one|two|three)$", output, re.M)  # not on the run's terminal
    assert wait_gone(sorted(seen)) == []


def test_logs_follow_prints_new_lines_and_ends_with_the_tree(tmp_path, env):
    tree = tmp_path / "tick.toml"
    tree.write_text(
        '[supervisor]\nid = "tick"\n'
        '[[supervisor.children]]\nid = "ticker"\n'
        'command = ["sh", "-c", "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done"]\n'
        '[[supervisor.children]]\nid = "capturer"\nstdout = "capture"\n'
        'command = ["sh", "-c", "i=0; while :; do i=$((i+1)); echo cap $i; sleep 0.1; done"]\n'
    )
    sock = str(tmp_path / "t.sock")
    with Proc("run", str(tree), "--socket", sock, env=env) as run:
        run.expect(r"tick/capturer child_started")
        seen = set(pids(status(Path(sock), env)).values())
        with (
            Proc("logs", "-f", "-n", "1", "ticker", "--socket", sock, env=env) as follow,
            Proc("logs", "-f", "--stdout", "capturer", "--socket", sock, env=env) as cap,
        ):
            first = int(follow.expect(r"^tick (\d+)$").group(1))
            later = int(follow.expect(r"^tick (\d+)$").group(1))
            assert later == first + 1  # each new line once, in order
            assert int(follow.expect(r"^tick (\d+)$").group(1)) == later + 1
            n = int(cap.expect(r"^cap (\d+)$").group(1))
            cap.expect(rf"^cap {n + 5}$")  # new lines keep coming from the capture
            # `logs -f | head -1`: the reader goes away; the follower ends, no traceback.
            head = subprocess.Popen(
                [*CLI, "logs", "-f", "ticker", "--socket", sock],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=ROOT,
            )
            assert head.stdout is not None and head.stdout.readline().startswith(b"tick ")
            head.stdout.close()
            _, err = head.communicate(timeout=DEADLINE)
            assert (head.returncode, err) == (1, b"")
            rc, _ = run.finish(signal.SIGINT)
            assert rc == 0
            assert follow.finish()[0] == 0  # -f ends when the tree does
            assert cap.finish()[0] == 0
    assert wait_gone(sorted(seen)) == []


def test_logs_previous_shows_the_run_before(tmp_path, env):
    (tmp_path / "twice.sh").write_text(
        'if [ -e ran ]; then echo "second run" >&2; exec sleep 600; fi\n'
        'touch ran\necho "first run, about to fail" >&2\nexit 4\n'
    )
    tree = tmp_path / "prev.toml"
    tree.write_text(
        '[supervisor]\nid = "prev"\n'
        '[[supervisor.children]]\nid = "twice"\ncommand = ["sh", "twice.sh"]\n'
        f'cwd = "{tmp_path}"\nstderr = "capture"\n'
    )
    sock = str(tmp_path / "p.sock")
    with Proc("run", str(tree), "--socket", sock, env=env) as run:
        run.expect(r"prev/twice child_exited .*exit code 4")
        _until(lambda: "second run" in cli("logs", "twice", "--socket", sock, env=env).stdout)
        assert cli("logs", "twice", "--socket", sock, env=env).stdout == "second run\n"
        previous = cli("logs", "twice", "--previous", "--socket", sock, env=env)
        assert previous.returncode == 0, previous.stderr
        assert previous.stdout == "first run, about to fail\n"
        seen = set(pids(status(Path(sock), env)).values())
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_logs_of_a_child_writing_to_the_terminal_says_how_to_keep_it(tmp_path, env, three):
    sock = str(tmp_path / "t.sock")
    with Proc("run", str(three), "--child-output", "inherit", "--socket", sock, env=env) as run:
        run.expect(r"three/mailer child_started")
        seen = set(pids(status(Path(sock), env)).values())
        refused = cli("logs", "web", "--socket", sock, env=env)
        assert refused.returncode == 1 and 'stderr = "capture"' in refused.stderr
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_the_client_path_imports_nothing_heavy():
    """What `status`, `logs`, `events` and the other client commands import: no rich,
    pykka, psutil, ray or dataclasses (they are what made a command slow)."""
    code = (
        "import sys\n"
        "import actors.cli._parser, actors.cli._control, actors.cli._plain\n"
        "heavy = ('rich', 'pykka', 'psutil', 'ray', 'dataclasses', 'supervision')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_check_imports_no_rich_pykka_or_psutil():
    """`check` loads the spec (the pure core) but draws its table without rich and
    never touches the live layer's imports."""
    code = (
        "import sys\n"
        "from actors.cli._parser import main\n"
        "rc = main(['check', 'examples/tree.toml'])\n"
        "heavy = ('rich', 'pykka', 'psutil', 'ray')\n"
        "print(rc, sorted({m.split('.')[0] for m in sys.modules} & set(heavy)), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "├─ web" in out.stdout
    assert out.stderr.strip() == "0 []"


DAEMONS = """
[supervisor]
id = "d"
strategy = "rest_for_one"
intensity = 5

[[supervisor.children]]
id = "db"
command = ["sh", "-c", "trap 'echo reloaded >> {marker}' HUP; while true; do sleep 0.05; done"]
reload = {{ signal = "HUP", check = ["sh", "-c", "test -e {ok}"] }}

[[supervisor.children]]
id = "app"
command = ["sleep", "600"]

[[supervisor.children]]
id = "client"
command = ["sleep", "600"]
"""


def test_reload_ids_and_stop_with_dependents(tmp_path):
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    env = _env(tmp_path, XDG_RUNTIME_DIR=str(xdg))
    marker, ok = tmp_path / "reloads", tmp_path / "config-ok"
    tree = tmp_path / "d.toml"
    tree.write_text(DAEMONS.format(marker=marker, ok=ok))
    with Proc("run", str(tree), "--plain", env=env) as run:
        run.expect(r"d/client child_started")
        sock = xdg / "nannytree" / "d.sock"
        seen = set(pids(status(sock, env)).values())
        # A failed check refuses the reload and says why; nothing is signalled.
        refused = cli("reload", "db", env=env)
        assert refused.returncode == 1 and "its check" in refused.stderr, refused.stderr
        assert not marker.exists()
        ok.touch()
        done = cli("reload", "db", env=env)
        assert done.returncode == 0 and done.stdout.startswith("reloaded d/db (pid "), done
        _until(lambda: marker.exists() and marker.read_text() == "reloaded\n")
        run.expect(r"d/db child_reloaded")
        no_reload = cli("reload", "app", env=env)
        assert no_reload.returncode == 1 and "has no reload" in no_reload.stderr
        unchanged = cli("update", env=env)  # supervisorctl's name for "apply the file"
        assert unchanged.returncode == 0, unchanged.stderr
        # A plain stop leaves the dependents running (OTP); --with-dependents stops them.
        assert cli("stop", "app", env=env).returncode == 0
        states = {p: n["state"] for p, n in workers(status(sock, env)).items()}
        assert states == {"d/db": "running", "d/app": "stopped", "d/client": "running"}
        assert cli("start", "app", env=env).returncode == 0
        seen |= set(pids(status(sock, env)).values())
        both = cli("stop", "--with-dependents", "db", env=env)
        assert both.returncode == 0, both.stderr
        assert both.stdout == "stopped d/db and its dependents: d/client, d/app\n"
        states = {p: n["state"] for p, n in workers(status(sock, env)).items()}
        assert set(states.values()) == {"stopped"}
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_check_reports_every_config_error_in_one_run(tmp_path, env):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        "[supervisor]\n"
        '[[supervisor.children]]\nid = "a"\ncommand = ["true"]\nrestart = "always"\n'
        '[[supervisor.children]]\nid = "b"\ncommand = ["true"]\nshutdwn = 5\nreddy = 1\n'
        '[[supervisor.children]]\nid = "pool"\nstrategy = "one_for_one"\n'
        '[[supervisor.children.children]]\nid = "w"\ncommand = ["true"]\nmemory_limit = "lots"\n'
        '[[supervisor.children]]\nid = "ok"\ncommand = ["true"]\n'
    )
    out = cli("check", str(bad), env=env)
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert 'supervisor.children[0].restart is "always"' in lines[0]
    assert "supervisor.children[1].shutdwn" in lines[1] and 'did you mean "shutdown"' in lines[1]
    assert "supervisor.children[1].reddy" in lines[2] and 'did you mean "ready"' in lines[2]
    assert "supervisor.children[2].children[0].memory_limit" in lines[3]
    assert lines[4] == f"nannytree: {bad}: 4 problems; the tree would not run as written"
    assert len(lines) == 5


def test_load_tree_raises_one_error_carrying_them_all():
    from supervision import ConfigError, load_tree

    text = (
        "[supervisor]\nid = 'r'\n"
        "[[supervisor.children]]\nid = 'a'\ncommand = ['true']\nrestart = 'x'\n"
        "[[supervisor.children]]\nid = 'a'\ncommand = ['true']\n"
    )
    with pytest.raises(ConfigError) as info:
        load_tree(text, "t.toml")
    assert [e.path for e in info.value.errors] == [
        "supervisor.children[0].restart",
        "supervisor.children[1].id",
    ]
    assert str(info.value).startswith("t.toml: 2 problems:\n  t.toml: supervisor.children[0]")


def test_stop_with_dependents_in_one_for_all_and_one_for_one(tmp_path):
    """In a one_for_all group, as in rest_for_one, the siblings started after the child
    stop with it, newest first (those before it run on); under one_for_one the child
    has no dependents."""
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    env = _env(tmp_path, XDG_RUNTIME_DIR=str(xdg))
    tree = tmp_path / "all.toml"
    tree.write_text(
        '[supervisor]\nid = "o"\n'
        '[[supervisor.children]]\nid = "solo"\ncommand = ["sleep", "600"]\n'
        '[[supervisor.children]]\nid = "g"\nstrategy = "one_for_all"\n'
        + "".join(
            f'[[supervisor.children.children]]\nid = "{c}"\ncommand = ["sleep", "600"]\n'
            for c in ("a", "b", "c")
        )
    )
    with Proc("run", str(tree), "--plain", env=env) as run:
        run.expect(r"o/g/c child_started")
        sock = xdg / "nannytree" / "o.sock"
        seen = set(pids(status(sock, env)).values())
        group = cli("stop", "--with-dependents", "g/b", env=env)
        assert group.returncode == 0, group.stderr
        assert group.stdout == "stopped o/g/b and its dependents: o/g/c\n"
        states = {p: n["state"] for p, n in workers(status(sock, env)).items()}
        assert states == {
            "o/solo": "running",
            "o/g/a": "running",
            "o/g/b": "stopped",
            "o/g/c": "stopped",
        }
        alone = cli("stop", "--with-dependents", "solo", env=env)
        assert alone.returncode == 0, alone.stderr
        assert workers(status(sock, env))["o/solo"]["state"] == "stopped"
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_the_update_help_names_the_hosts_settle_default(capsys: pytest.CaptureFixture[str]):
    """The client writes the default out (it does not import supervision); it is the
    one the host applies."""
    from actors.cli._parser import main
    from supervision import UPDATE_SETTLE

    with pytest.raises(SystemExit):
        main(["update", "--help"])
    said = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert f"(default {UPDATE_SETTLE:g}; 0: once it runs)" in said
