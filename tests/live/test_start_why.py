"""Start failures that say why: the last lines the child wrote in the failure's message
(tee'd stderr, or its output file when nothing is tee'd), a `start_check` before each
start (systemd's ExecStartPre=, here `nginx -t`), a command that asks to daemonize
without pid_file refused at load, and `nannytree check` listing every problem of a
file in one pass."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from actors import Tree
from supervision import (
    ChildSpec,
    ConfigError,
    EventKind,
    SpecError,
    StartError,
    SupervisorSpec,
    TcpProbe,
    load_tree,
)
from tests.support import wait_event, wait_until
from tests.support.nginx import nginx_conf

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "actors.cli"]
DEADLINE = 20.0
needs_nginx = pytest.mark.skipif(
    shutil.which("nginx") is None, reason="nginx is not installed (apt install nginx-light)"
)


def _start_error(spec: ChildSpec) -> StartError:
    with pytest.raises(StartError) as info:
        Tree.start(SupervisorSpec(id="root", children=[spec]))
    return info.value


def test_a_failed_start_says_what_the_child_wrote_to_stderr() -> None:
    script = "echo starting >&2; echo 'config error: port 80 in use' >&2; exit 1"
    error = _start_error(ChildSpec(id="web", command=["sh", "-c", script], ready=5.0))
    text = str(error)
    assert text.startswith("supervisor 'root', child 'web': failed to start: exit code 1")
    assert text.endswith(
        "its output ended with:\n    | starting\n    | config error: port 80 in use"
    )


def test_a_child_writing_only_to_its_file_is_read_back_from_this_start_on(tmp_path: Path) -> None:
    out = tmp_path / "web.log"
    out.write_text("an older run's line\n")
    script = "echo 'listen: \x1b[31mport 80 in use'; exit 1"
    error = _start_error(
        ChildSpec(id="web", command=["sh", "-c", script], ready=5.0, stdout=str(out))
    )
    assert error.reason.stderr_tail == "listen: \x1b[31mport 80 in use"
    assert "an older run's line" not in str(error)  # what this incarnation wrote, only
    assert str(error).endswith("    | listen: \\x1b[31mport 80 in use")  # escaped
    assert "\x1b" not in str(error)


def test_a_file_only_childs_exit_carries_its_last_lines(tmp_path: Path) -> None:
    out = tmp_path / "job.log"
    script = "echo 'fatal: no such table'; exit 3"
    spec = ChildSpec(
        id="job",
        command=["sh", "-c", script],
        restart="temporary",
        stdout=str(out),
        stderr=str(out),
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        exited = wait_event(tree.ref, EventKind.CHILD_EXITED, "job")
        assert exited.reason is not None and exited.reason.stderr_tail == "fatal: no such table"
    finally:
        tree.stop()


def test_nannytree_runs_notice_shows_the_childs_last_lines(tmp_path: Path) -> None:
    tree = tmp_path / "shop.toml"
    tree.write_text(
        '[supervisor]\nid = "shop"\n[[supervisor.children]]\nid = "web"\n'
        'command = ["sh", "-c", "echo \'config error: bad port\' >&2; exit 1"]\n'
        "ready = 5.0\n"
    )
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*CLI, "run", str(tree)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    notice = done.stderr[done.stderr.index("could not start") :]
    assert "failed to start: exit code 1" in notice
    assert "its output ended with:\n    | config error: bad port" in notice


# -- start_check -----------------------------------------------------------------------


def test_a_start_check_that_fails_fails_the_start_with_its_output(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    error = _start_error(
        ChildSpec(
            id="app",
            command=["sh", "-c", f": > {marker}; exec sleep 600"],
            start_check=["sh", "-c", "echo 'bad setting: x' >&2; exit 2"],
        )
    )
    assert "its start_check" in str(error) and "exited 2" in str(error)
    assert error.reason.stderr_tail == "bad setting: x"
    assert not marker.exists()  # the child itself never ran


def test_a_start_check_that_hangs_is_bounded_by_its_timeout() -> None:
    error = _start_error(
        ChildSpec(
            id="app",
            command=["sleep", "600"],
            start_check=["sleep", "30"],
            start_check_timeout=0.3,
        )
    )
    assert "ran over 0.3s" in str(error)


def test_a_start_check_runs_before_every_start_and_no_restart_skips_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    spec = ChildSpec(
        id="app",
        command=["sh", "-c", 'echo start >> "$RUNS"; exec sleep 600'],
        env={"RUNS": str(runs)},
        cwd=str(tmp_path),
        start_check=["sh", "-c", 'echo "check in $PWD" >> "$RUNS"'],  # the child's env and cwd
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec], intensity=10, period=60))
    try:
        killed: int | None = None
        for kill in range(1, 6):
            # Killed once it has started for the kill-th time, and its supervisor knows
            # its pid: a kill before its first line would be a failed start, with no
            # "start" written.
            wait_until(
                lambda kill=kill, killed=killed: (
                    runs.read_text().splitlines().count("start") == kill
                    and tree.nanny.which_child("app").get().pid not in (None, killed)
                ),
                DEADLINE,
                f"start {kill}",
            )
            killed = tree.nanny.which_child("app").get().pid
            assert killed is not None
            os.kill(killed, signal.SIGKILL)
        wait_until(
            lambda: runs.read_text().splitlines().count("start") == 6, DEADLINE, "the 6th start"
        )
        # The child writes its line before its supervisor has said it started: wait.
        wait_until(
            lambda: sum(e.context is EventKind.CHILD_STARTED for e in tree.events()) == 6,
            DEADLINE,
            "the 6th child_started",
        )
        # Each start after its check: none started ahead of it (a restart the launcher
        # makes at the exit, before the supervisor's decision, would come first).
        assert runs.read_text().splitlines() == [f"check in {tmp_path}", "start"] * 6
    finally:
        tree.stop()


def test_a_start_check_child_is_never_armed_for_a_restart_ahead() -> None:
    from tests.support.fake_executor import running, worker

    ex = running(SupervisorSpec("sup", children=[worker("a"), worker("b", start_check=["true"])]))
    assert ex.sup.exit_plan("a") is not None
    assert ex.sup.exit_plan("b") is None  # the launcher would restart it without its check


def _nginx(tmp_path: Path, extra: str = "") -> tuple[ChildSpec, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = nginx_conf(tmp_path, port, extra=extra)
    where = ["-c", str(conf), "-p", str(tmp_path)]
    spec = ChildSpec(
        id="nginx",
        command=["nginx", *where],
        start_check=["nginx", "-t", *where],
        stop_signal="QUIT",
        ready=TcpProbe(port) if not extra else "started",
    )
    return spec, port


@needs_nginx
def test_nginx_starts_once_nginx_t_passes(tmp_path: Path) -> None:
    spec, port = _nginx(tmp_path)
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
        assert "test is successful" not in str(tree.events())  # a check that passed is quiet
    finally:
        tree.stop()


@needs_nginx
def test_nginx_with_a_broken_config_fails_its_start_with_nginx_t_s_words(tmp_path: Path) -> None:
    spec, _ = _nginx(tmp_path, extra="broken_directive on;")
    error = _start_error(spec)
    assert "its start_check 'nginx -t" in str(error) and "exited 1" in str(error)
    assert 'unknown directive "broken_directive"' in error.reason.stderr_tail
    assert "test failed" in str(error)
    assert not (tmp_path / "nginx.pid").exists()  # nginx itself never ran


# -- daemonized without pid_file ---------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (["nginx", "-g", "daemon on;"], "nginx -g 'daemon off;'"),
        (["redis-server", "--port", "7000", "--daemonize", "yes"], "--daemonize no"),
        (["memcached", "-d"], "drop -d"),
    ],
)
def test_a_command_asking_to_daemonize_without_pid_file_is_refused_at_load(
    argv: list[str], fix: str
) -> None:
    with pytest.raises(SpecError) as info:
        ChildSpec(id="d", command=argv)
    error = info.value
    assert error.child == "d" and error.field == "command"
    assert fix in str(error) and "pid_file" in str(error)
    ChildSpec(id="d", command=argv, pid_file="/run/d.pid")  # the forking way: accepted
    toml = '[supervisor]\nid = "t"\n[[supervisor.children]]\nid = "d"\ncommand = %s\n' % (
        "[" + ", ".join(f"'{a}'" for a in argv) + "]"
    )
    with pytest.raises(ConfigError) as loaded:
        load_tree(toml, "t.toml")
    assert "supervisor.children[0].command" in str(loaded.value) and fix in str(loaded.value)


def test_foreground_flags_are_not_refused() -> None:
    for argv in (
        ["nginx", "-g", "daemon off;"],
        ["redis-server", "--daemonize", "no"],
        ["memcached", "-p", "11211"],
    ):
        ChildSpec(id="d", command=argv)


# -- check: every problem in one pass -------------------------------------------------------

SEVEN = """
[supervisor]
id = "shop"

[[supervisor.children]]
id = "web"
command = ["nginx", "-g", "daemon on;"]   # 1: daemonizes, no pid_file
restart = "sometimes"                     # 2: a bad restart
shutdown = -1                             # 3: a bad shutdown, same child

[[supervisor.children]]
id = "db"
comand = ["redis-server"]                 # 4: a typo

[[supervisor.children]]
id = "cache"
command = ["memcached-no-such-xyz"]       # 5: not on PATH
memory_limit = "lots"                     # 6: a bad size

[[supervisor.children]]
id = "app"
command = ["sleep", "600"]
cwd = "/no/such/dir/xyz"                  # 7: no such cwd

[[supervisor.children]]
id = "api"
command = ["sleep", "600"]
start_check = ["api-check-no-such-xyz"]   # 8: its check is not on PATH

[[supervisor.children]]
id = "proxy"
command = ["nginx", "-c", "{conf}"]        # a warning: nginx's config says nothing of daemon
"""


@needs_nginx
def test_check_reports_eight_mistakes_in_one_pass(tmp_path: Path) -> None:
    conf = tmp_path / "nginx.conf"
    conf.write_text("events {}\n")
    tree = tmp_path / "shop.toml"
    tree.write_text(SEVEN.format(conf=conf))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*CLI, "check", str(tree)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    err = done.stderr
    expected = [
        "supervisor.children[0].command is",
        'supervisor.children[0].restart is "sometimes"',
        "supervisor.children[0].shutdown is -1",
        'supervisor.children[1].comand is ["redis-server"]; unknown key; did you mean "command"?',
        'supervisor.children[2].memory_limit is "lots"',
        "child 'cache': program 'memcached-no-such-xyz' is not an executable file on PATH",
        "child 'app': cwd '/no/such/dir/xyz' does not exist",
        "child 'api': start_check 'api-check-no-such-xyz' is not an executable file on PATH",
    ]
    for text in expected:
        assert text in err, f"{text!r} missing from:\n{err}"
    assert "8 problems; the tree would not run as written" in err
    assert "warning: child 'proxy': nginx runs as a daemon unless told `daemon off;`" in err
    assert "children[1].command is missing" not in err  # the typo counts once
    conf.write_text("daemon off;\nevents {}\n")
    again = subprocess.run(
        [*CLI, "check", str(tree)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert "warning: child 'proxy'" not in again.stderr


def test_check_warns_of_a_redis_config_that_daemonizes(tmp_path: Path) -> None:
    (tmp_path / "redis.conf").write_text("port 7000\ndaemonize yes\n")
    tree = tmp_path / "t.toml"
    tree.write_text(
        '[supervisor]\nid = "t"\n[[supervisor.children]]\nid = "redis"\n'
        f'command = ["redis-server", "redis.conf"]\ncwd = "{tmp_path}"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*CLI, "check", str(tree)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert "warning: child 'redis': its config redis.conf says `daemonize yes`" in done.stderr


def test_check_names_a_pid_file_folder_and_accounts_missing_here_even_beside_load_errors(
    tmp_path: Path,
) -> None:
    """The run-time problems of a child are listed whether or not another child (or the
    supervisor) has load errors: a pid_file the daemon cannot write, an unknown user."""
    tree = tmp_path / "t.toml"
    body = (
        '[[supervisor.children]]\nid = "legacy"\ncommand = ["sleep", "60"]\n'
        'pid_file = "no-such-folder/legacy.pid"\nuser = "no-such-user-xyz"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for head in ('[supervisor]\nid = "t"\n', '[supervisor]\nid = "t"\nstrategy = "all"\n'):
        tree.write_text(head + body)
        done = subprocess.run(
            [*CLI, "check", str(tree)], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1
        folder = tmp_path / "no-such-folder"
        assert (
            f"child 'legacy': pid_file '{folder}/legacy.pid': folder '{folder}' does not exist; "
            "create it or fix the path"
        ) in done.stderr
        assert "child 'legacy': field 'user' is 'no-such-user-xyz': no such user" in done.stderr
        assert ("strategy" in head) == ('supervisor.strategy is "all"' in done.stderr)
    folder.mkdir()
    body = body.replace('user = "no-such-user-xyz"\n', "")
    probe = 'liveness = { exec = ["no-such-probe-y"] }\n'
    for extra, rc in ((probe, 1), ("", 0)):  # the checks `update` runs, `check` runs too
        tree.write_text('[supervisor]\nid = "t"\n' + body + extra)
        done = subprocess.run(
            [*CLI, "check", str(tree)], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == rc, done.stderr
        said = "child 'legacy': liveness probe program 'no-such-probe-y' is not an executable"
        assert (said in done.stderr) == bool(extra), done.stderr


def test_an_integer_beyond_toml_s_64_bits_is_a_load_error_not_an_overflow() -> None:
    with pytest.raises(ConfigError) as info:
        load_tree(f"[supervisor]\nid = 't'\nperiod = {10**400}\n", "t.toml")
    assert "supervisor.period" in str(info.value) and "64-bit" in str(info.value)
