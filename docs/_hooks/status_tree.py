"""The picture of a tree as `nannytree status` draws it, from a real run.

    python docs/_hooks/status_tree.py OUT.svg

Writes a small tree file (a web server, a Python worker, and a one_for_all
subtree of two shell workers) into a temporary folder, runs it with
`nannytree run`, waits until it is ready, kills one worker with SIGKILL so that
a restart and an exit reason show, then runs `nannytree status` in a pseudo
terminal (so it paints as it does for a person) and saves what it printed as an
SVG with rich. Stops the tree with `nannytree shutdown` and leaves no process
behind. Run by the docs build (docs/_hooks/pictures.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pty
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TREE = """\
[supervisor]
id = "shop"
strategy = "one_for_one"
intensity = 3
period = 10

[[supervisor.children]]
id = "web"
command = ["python3", "-m", "http.server", "0", "--bind", "127.0.0.1"]

[[supervisor.children]]
id = "mailer"
target = "actors.cli._demo:steady"

[[supervisor.children]]
id = "workers"
strategy = "one_for_all"

[[supervisor.children.children]]
id = "worker-1"
command = "sh -c 'while :; do sleep 1; done'"

[[supervisor.children.children]]
id = "worker-2"
command = "sh -c 'while :; do sleep 1; done'"
"""

WIDTH = 110


def _cli(
    *args: str, env: dict[str, str], timeout: float = 30.0
) -> subprocess.CompletedProcess[Any]:
    return subprocess.run(
        [sys.executable, "-m", "actors.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _status(env: dict[str, str]) -> dict[str, Any]:
    done = _cli("status", "--tree", "shop", "--json", env=env)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _walk(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("children", []) for n in _walk(child))]


def _in_terminal(args: list[str], env: dict[str, str]) -> str:
    """What a command prints to a terminal of WIDTH columns (ANSI colours included)."""
    main, side = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 40, WIDTH, 0, 0))
    proc = subprocess.Popen(args, env=env, stdin=side, stdout=side, stderr=side, close_fds=True)
    os.close(side)
    out = bytearray()
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the command ended and closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    proc.wait(timeout=30)
    return out.decode("utf-8", "replace").replace("\r\n", "\n")


def capture(folder: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    env["XDG_RUNTIME_DIR"] = str(folder)
    env["TERM"] = "xterm-256color"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    (folder / "shop.toml").write_text(TREE)
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actors.cli",
            "run",
            "--log-dir",
            f"{folder}/log",
            f"{folder}/shop.toml",
        ],
        env=env,
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        done = _cli("wait", "--tree", "shop", "--ready", "--timeout", "30", env=env, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"the tree did not get ready: {done.stdout}{done.stderr}")
        victim = next(n for n in _walk(_status(env)["tree"]) if n["id"] == "worker-1")
        os.kill(victim["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while True:  # until its restart is done (the whole subtree: one_for_all)
            nodes = _walk(_status(env)["tree"])
            again = next(n for n in nodes if n["id"] == "worker-1")
            if again["restarts"] >= 1 and all(n["state"] == "running" for n in nodes):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker-1 was not restarted: {again}")
            time.sleep(0.05)
        return _in_terminal(
            [sys.executable, "-m", "actors.cli", "status", "--tree", "shop"], env=env
        )
    finally:
        _cli("shutdown", "--tree", "shop", env=env)
        try:
            run.wait(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
            run.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    from rich.console import Console
    from rich.text import Text

    with tempfile.TemporaryDirectory(prefix="shop-") as tmp:
        printed = capture(Path(tmp))
    console = Console(record=True, width=WIDTH, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(Text("$ nannytree status"))
    console.print(Text.from_ansi(printed.rstrip("\n")))
    args.out.write_text(console.export_svg(title="nannytree status"))
    console.file.close()
    print(f"{args.out}: {len(printed.splitlines())} lines")


if __name__ == "__main__":
    main()
