"""What a bad replacement and a bad config cost the clients of a running service
(docs/update.md, section 4; docs/reference/cli.md, `restart`).

    .venv/bin/python tests/benchmarks/update_outage.py [--before CHECKOUT]

One tree, one HTTP child on a socket nannytree holds (docs/sockets.md), and a
client thread sending GETs back to back (one connection each, 2 s timeout):

- `update`: the child is updated to a replacement that crashes 0.3 s after it
  starts (settle 3 s, so that the crash falls within it on a
  loaded machine too); the client runs on for 3 s after the update's answer.
  Counted: requests answered, refused, failed (no answer in 2 s, or reset), the
  longest request, and whether the service answers at the end.
- `restart`: the child gets a reload check that fails (a config `nginx -t` would
  refuse), then is restarted as `nannytree restart` does (actors/_operate/_restart.py,
  the test harness's `restart`): does its old pid still run, does it answer?

`--before CHECKOUT` runs the same in a copy of an older tree (`git archive REV | tar
-x -C DIR`) first. Figures only, never assertions.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.support.held_socket_server import SERVER

HERE = Path(__file__).resolve().parents[2]


class Client(threading.Thread):
    def __init__(self, port: int) -> None:
        super().__init__()
        self.port, self.stop = port, threading.Event()
        self.answered = self.refused = self.failed = 0
        self.longest = 0.0

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.monotonic()
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                conn.request("GET", "/")
                conn.getresponse().read()
                self.answered += 1
            except ConnectionRefusedError:
                self.refused += 1
            except OSError:
                self.failed += 1
            finally:
                conn.close()
                self.longest = max(self.longest, time.monotonic() - began)


def answers(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def scenario() -> dict[str, object]:
    """Run in the checkout under test (its supervision and actors on sys.path)."""
    from actors import Tree
    from actors.testing import TreeHarness
    from supervision import ChildSpec, ListenSocket, Reload, SupervisorSpec

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = Path(tempfile.mkdtemp())
    (folder / "server.py").write_text(SERVER)

    def web(version: str, **env: str) -> ChildSpec:
        return ChildSpec(
            id="web",
            command=[sys.executable, str(folder / "server.py")],
            env={"VERSION": version, **env},
            sockets=[ListenSocket(f"127.0.0.1:{port}", name="http")],
            shutdown=5,
        )

    found: dict[str, object] = {}
    with Tree(SupervisorSpec(id="shop", children=[web("v1")])) as tree:
        client = Client(port)
        client.start()
        while client.answered < 20:
            time.sleep(0.01)
        began = time.monotonic()
        try:
            new = SupervisorSpec(id="shop", children=[web("v2", CRASH_AFTER="0.3")])
            tree.update(new, settle=3.0)
        except Exception as e:  # UpdateFailed
            found["update_answer"] = str(e).splitlines()[-1]
        found["update_s"] = round(time.monotonic() - began, 2)
        time.sleep(3.0)  # the clients' view after the answer
        client.stop.set()
        client.join()
        found.update(
            answered=client.answered,
            refused=client.refused,
            failed=client.failed,
            longest_request_s=round(client.longest, 2),
            answers_at_the_end=answers(port),
        )
    check = ["sh", "-c", "echo 'unknown directive'; exit 1"]
    spec = replace_reload(web("v1"), Reload(check=check))
    with TreeHarness(SupervisorSpec(id="shop", children=[spec])) as harness:
        old = harness.pid("web")
        try:
            harness.restart("web")
            found["restart_answer"] = "restarted"
        except Exception as e:
            found["restart_answer"] = f"{type(e).__name__}: {str(e)[:80]}"
        info = harness.nanny.which_child("web").get(timeout=10)
        found["restart_old_pid_runs"] = info.pid == old
        found["restart_answers"] = answers(port)
    return found


def replace_reload(spec: object, reload: object) -> object:
    from dataclasses import replace

    return replace(spec, reload=reload)  # type: ignore[type-var]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a copy of an older checkout")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(scenario()))
        return
    for name, checkout in (("before", args.before), ("after", HERE)):
        if checkout is None:
            continue
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--one"],
            env=env,
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = out.stdout.strip().splitlines()
        print(f"{name}: {lines[-1] if lines else out.stderr[-2000:]}")


if __name__ == "__main__":
    main()
