"""Tier 1: a Ray head that requires a token (`RAY_AUTH_MODE=token`), and a run or a
RayEngine without it: the failure says it is one of authentication and how to give
the token, and Ray's own warnings (one a second while its client retries) stay in
Ray's log, not the terminal. One head for the module."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support import import_ray

ray = import_ray()

pytestmark = pytest.mark.ray
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _without_token(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in AUTH_VARS}
    return {**env, **extra}


@pytest.fixture(scope="module")
def token_head() -> Iterator[str]:
    """A Ray head requiring a token; its address. Its processes are found by its temp
    folder and killed at the end (never `ray stop`: other clusters run here)."""
    tmp = tempfile.mkdtemp(prefix="nta", dir="/tmp")  # short: AF_UNIX paths <= 107 bytes
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    ray_cli = str(Path(sys.executable).with_name("ray"))
    argv = [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=0"]
    argv += ["--include-dashboard=false", f"--temp-dir={tmp}"]
    try:
        subprocess.run(argv, env={**env, "RAY_TMPDIR": tmp}, check=True, capture_output=True)
        yield f"127.0.0.1:{port}"
    finally:
        found: set[psutil.Process] = set()
        for process in psutil.process_iter(["cmdline"]):
            if any(tmp in part for part in process.info["cmdline"] or ()):
                found.add(process)
                with contextlib.suppress(psutil.Error):
                    found.update(process.children(recursive=True))
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(list(found), timeout=30)


TREE = """
[engine]
address = "{address}"

[supervisor]
id = "at"

[[supervisor.children]]
id = "ingest"
placement = {{}}

[[supervisor.children.children]]
id = "reader"
command = ["sleep", "300"]
"""


def test_a_run_refused_for_its_token_says_so_and_how_to_fix_it(
    token_head: str, tmp_path: Path
) -> None:
    (tmp_path / "tree.toml").write_text(TREE.format(address=token_head))
    sock = tmp_path / "at.sock"
    argv = [sys.executable, "-m", "actors.cli", "run", str(tmp_path / "tree.toml")]
    argv += ["--plain", "--socket", str(sock)]
    done = subprocess.run(argv, capture_output=True, text=True, env=_without_token(), timeout=180)
    terminal = done.stdout + done.stderr
    assert done.returncode != 0, terminal
    assert "requires an authentication token" in terminal, terminal
    assert "RAY_AUTH_MODE=token" in terminal and "RAY_AUTH_TOKEN" in terminal, terminal
    assert "InvalidAuthToken: Authentication token is missing" not in terminal, terminal
    ray_log = tmp_path / "at.ray.log"  # named beside the control socket
    assert "InvalidAuthToken" in ray_log.read_text(errors="replace")


DRIVER = """
import sys
from actors.ray import RayEngine
engine = RayEngine(sys.argv[1], lease_timeout=None)
try:
    engine.nodes()
except Exception as e:
    print(type(e).__name__, engine.log_file, sep="\\n")
    print(e)
"""


def test_the_python_api_refused_for_its_token_raises_ray_auth_error_quietly(
    token_head: str,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, token_head],
        capture_output=True,
        text=True,
        env=_without_token(),
        timeout=180,
    )
    kind, log_file, message = done.stdout.split("\n", 2)
    assert kind == "RayAuthError", done.stdout + done.stderr
    assert "RAY_AUTH_MODE=token" in message and log_file in message
    assert "InvalidAuthToken" not in done.stderr, done.stderr
    assert "InvalidAuthToken" in Path(log_file).read_text(errors="replace")
