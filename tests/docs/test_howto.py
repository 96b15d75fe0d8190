"""The how-to guides' files and commands (docs/how-to/): what a page tells a reader
to run, run here.

- from-xprocess-mirakuru.md: examples/how-to/test_web_service.py, the fixtures the
  page shows, passes under pytest with the plugin.
- container.md: contrib/container/Dockerfile cannot be built here (no container
  engine), so its pieces are checked one by one: the tree file it copies passes
  `nannytree check`, its CMD line runs that tree with the children's output and
  the events on stdout, its HEALTHCHECK answers, `docker stop`'s SIGTERM stops the
  tree with exit 0 well within 10 s, and what the page says of PID 1 (nannytree
  run does not reap orphans; under tini they are reaped) holds in a PID namespace.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.cli.test_commands import CLI, ROOT, Proc, _env, cli
from tests.support import run_pytest, wait_until

CONTAINER = ROOT / "contrib" / "container"
EXAMPLES = ROOT / "examples" / "how-to"
IN_IMAGE = "/etc/nannytree/tree.toml"  # where the Dockerfile copies tree.toml


def instruction(name: str) -> list[str]:
    """The exec-form (JSON) argv of a Dockerfile instruction, continuation lines joined."""
    text = (CONTAINER / "Dockerfile").read_text().replace("\\\n", " ")
    found = re.findall(rf"^{name}\s.*?(\[.*\])\s*$", text, re.MULTILINE)
    assert len(found) == 1, f"one {name} in exec form expected, found {found}"
    argv = json.loads(found[0])
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    return argv


def here(argv: list[str]) -> list[str]:
    """An argv of the image as it runs here: this nannytree, the tree file in contrib/."""
    assert argv[0] == "nannytree", argv
    return [a.replace(IN_IMAGE, str(CONTAINER / "tree.toml")) for a in argv[1:]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_dockerfile_copies_a_tree_that_checks() -> None:
    dockerfile = (CONTAINER / "Dockerfile").read_text()
    assert f"COPY tree.toml {IN_IMAGE}" in dockerfile
    assert f"RUN nannytree check {IN_IMAGE}" in dockerfile
    assert instruction("ENTRYPOINT") == ["/usr/bin/tini", "--"]
    out = subprocess.run(
        [*CLI, "check", str(CONTAINER / "tree.toml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tree 'app', 2 workers" in out.stdout


def test_the_containers_command_logs_to_stdout_answers_its_healthcheck_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = _env(tmp_path, PORT=str(port))
    command = here(instruction("CMD"))
    assert command[0] == "run" and "--plain" in command
    with Proc(*command, env=env) as run:
        run.expect(r"^\d\d:\d\d:\d\d\.\d{3} app/web child_started")
        run.expect(r"^worker: tick$")  # a child's own output, on nannytree's stdout
        health = cli(*here(instruction("HEALTHCHECK")), env=env)
        assert health.returncode == 0, health.stdout + health.stderr
        assert f"port {port}" in "\n".join(run.output)  # http.server's line: ${PORT} reached it
        started = time.monotonic()
        rc, output = run.finish(signal.SIGTERM)
        took = time.monotonic() - started
    assert rc == 0, output
    assert "stopped (SIGTERM)" in output
    assert took < 10.0, f"the stop took {took:.1f} s: docker stop would SIGKILL at 10 s"


def _pid_namespace_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return False
    try:
        done = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _orphans_of_pid_1(prefix: list[str], tmp_path: Path) -> tuple[list[str], int, str]:
    """Run the container's command as PID 1 of a new PID namespace (after `prefix`),
    leave two orphans in it, SIGTERM PID 1. What PID 1's children were once the
    orphans had exited; the exit status; the output."""
    env = _env(tmp_path, PORT=str(free_port()))
    argv = [*CLI, *here(instruction("CMD"))]
    unshare = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", *prefix, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        # Once the tree runs: a SIGTERM before nannytree handles it (while Python
        # imports) is dropped by the kernel for a PID 1, and ends it at once under tini.
        ready = cli("wait", "--ready", "--timeout", "20", env=env)
        assert ready.returncode == 0, ready.stdout + ready.stderr
        pid_1 = psutil.Process(unshare.pid).children()[0]
        # As `docker exec app sh -c 'sleep 600 &'` does: its sleeps outlive it and
        # are re-parented to PID 1 (before nsenter hears that sh ended). They end when
        # the test kills them, not after a time a loaded machine could outrun.
        subprocess.run(
            ["nsenter", "-t", str(pid_1.pid), "-p", "-m", "sh", "-c", "sleep 600 & sleep 600 &"],
            check=True,
            timeout=10,
        )

        def sleeps() -> list[str]:
            """PID 1's sleeps, each with its status; one reaped as we read is gone."""
            found = []
            for p in pid_1.children():
                with contextlib.suppress(psutil.NoSuchProcess):
                    if p.name() == "sleep":
                        found.append(f"sleep {p.status()}")
            return found

        # Forked by sh, they may not have exec'd `sleep` yet (named "sh" until then).
        wait_until(lambda: len(sleeps()) == 2, what="the orphans are PID 1's sleeps")
        for orphan in pid_1.children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if orphan.name() == "sleep":
                    orphan.kill()

        wait_until(
            lambda: all(s == f"sleep {psutil.STATUS_ZOMBIE}" for s in sleeps()),
            what="the orphans exited",
        )
        left = sleeps()
        pid_1.send_signal(signal.SIGTERM)
        out, _ = unshare.communicate(timeout=30)
        return left, unshare.returncode, out
    finally:
        if unshare.poll() is None:
            with contextlib.suppress(psutil.NoSuchProcess):
                for p in psutil.Process(unshare.pid).children(recursive=True):
                    with contextlib.suppress(psutil.NoSuchProcess):
                        p.kill()
            unshare.kill()
            unshare.communicate()  # reaped, its pipe closed


@pytest.mark.skipif(not _pid_namespace_works(), reason="no PID namespace here (unshare)")
def test_as_pid_1_nannytree_stops_on_sigterm_but_leaves_orphans_unreaped(tmp_path: Path) -> None:
    left, rc, out = _orphans_of_pid_1([], tmp_path)
    assert left == ["sleep zombie", "sleep zombie"], out
    assert rc == 0 and "stopped (SIGTERM)" in out, out


@pytest.mark.skipif(
    not _pid_namespace_works() or shutil.which("tini") is None, reason="needs unshare and tini"
)
def test_under_tini_orphans_are_reaped_and_sigterm_reaches_nannytree(tmp_path: Path) -> None:
    tini = shutil.which("tini")
    assert tini is not None
    left, rc, out = _orphans_of_pid_1([tini, "--"], tmp_path)
    assert left == [], out
    assert rc == 0 and "stopped (SIGTERM)" in out, out


def test_the_pytest_example_replacing_xprocess_and_mirakuru_passes() -> None:
    example = EXAMPLES / "test_web_service.py"
    done = run_pytest("-q", str(example), cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^4 passed", done.stdout, re.MULTILINE), done.stdout
