"""Socket activation: an HTTP server that restarts without refusing a connection.

nannytree binds the child's socket once and passes it to every incarnation with
systemd's protocol (fd 3, LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES). The server
below is a plain http.server that takes its socket from fd 3 instead of binding
one. The example stops it (SIGTERM: it finishes the request in hand and exits) 20
times while a client keeps sending requests, and exits 0 only if no request was
refused or failed: while the server is down, connections wait in the listen
queue, which nannytree holds. (A SIGKILL also refuses nothing, but the one request
the server was answering when it died fails: tests/benchmarks/sockets.py counts both.)

    python examples/socket_activation.py            # the whole demonstration
    python examples/socket_activation.py --serve    # the child alone (needs LISTEN_FDS)

The same child in a tree file: examples/socket_activation.toml.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the server (--serve) needs nothing of nannytree: any python3 runs it
    from actors import Tree

RESTARTS = 20


def listen_socket(name: str) -> socket.socket:
    """The inherited socket called `name`, by systemd's protocol (sd_listen_fds)."""
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        sys.exit("no socket passed to this process: run it under nannytree with sockets=")
    names = os.environ["LISTEN_FDNAMES"].split(":")
    return socket.socket(fileno=3 + names.index(name))


class Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from pid {os.getpid()}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve() -> None:
    sock = listen_socket("http")
    server = HTTPServer(sock.getsockname()[:2], Hello, bind_and_activate=False)
    server.socket = sock  # the inherited one: no bind, no listen
    server.timeout = 0.05
    stopping = threading.Event()
    # A graceful stop: the request being answered is finished, then the process exits;
    # the connections that arrive meanwhile wait in the queue for the next incarnation.
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    while not stopping.is_set():
        server.handle_request()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client(port: int, stop: threading.Event, counts: dict[str, int]) -> None:
    """Requests one after another, as fast as they are answered."""
    while not stop.is_set():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", "/")
            ok = conn.getresponse().status == 200
            counts["ok" if ok else "failed"] += 1
        except ConnectionRefusedError:
            counts["refused"] += 1
        except OSError:
            counts["failed"] += 1
        finally:
            conn.close()


def main() -> int:
    from actors import Tree
    from supervision import ChildSpec, HttpProbe, ListenSocket, SupervisorSpec

    port = free_port()
    spec = SupervisorSpec(
        id="root",
        intensity=RESTARTS + 1,
        period=60.0,
        children=[
            ChildSpec(
                id="web",
                command=[sys.executable, os.path.abspath(__file__), "--serve"],
                sockets=[ListenSocket(f"127.0.0.1:{port}", name="http")],
                # Not a TcpProbe: nannytree itself listens, so a connect always succeeds.
                ready=HttpProbe(f"http://127.0.0.1:{port}/"),
                start_timeout=10.0,
            )
        ],
    )
    counts = {"ok": 0, "refused": 0, "failed": 0}
    stop = threading.Event()
    with Tree(spec) as tree:
        worker = threading.Thread(target=client, args=(port, stop, counts))
        worker.start()
        try:
            for _ in range(RESTARTS):
                pid = _pid(tree)
                os.kill(pid, signal.SIGTERM)  # it exits; its supervisor restarts it
                deadline = time.monotonic() + 10
                while _pid(tree) in (None, pid):
                    if time.monotonic() > deadline:
                        print("the server was not restarted within 10 s")
                        return 1
                    time.sleep(0.005)
        finally:
            stop.set()
            worker.join()
    print(
        f"{RESTARTS} restarts of the server under load: {counts['ok']} requests answered, "
        f"{counts['refused']} refused, {counts['failed']} failed"
    )
    return 0 if counts["refused"] == counts["failed"] == 0 and counts["ok"] > 0 else 1


def _pid(tree: Tree) -> int | None:
    for child in tree.nanny.which_children().get():
        if child.id == "web" and child.state == "running":
            return int(child.pid) if child.pid is not None else None
    return None


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        sys.exit(main())
