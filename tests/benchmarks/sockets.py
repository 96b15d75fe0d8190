"""Connections refused while an HTTP child restarts, with sockets (nannytree holds the
listening socket: docs/sockets.md) and without (the child binds its own port).

    python -m tests.benchmarks.sockets [--restarts 100] [--clients 4] [--signal KILL]

One tree per mode, one HTTP child (a minimal server: it answers every GET with its
pid). While `--clients` threads send GETs back to back, one new connection each, the
child is killed `--restarts` times; each time the benchmark waits until a GET is
answered by the next incarnation. Counted: requests answered, refused
(ECONNREFUSED: nothing listened), and failed otherwise (a connection reset: the
request was in the hands of the process that died, or in its listen queue, which
died with it). SIGTERM (`--signal TERM`) is a graceful stop: the server answers
the request in hand, then exits. Restart time: from the kill to the first GET the new incarnation
answers. Figures only, never assertions.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import os
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from actors import Tree
from supervision import ChildSpec, ListenSocket, SupervisorSpec, parse_signal
from tests.benchmarks.ab import p95

print = functools.partial(print, flush=True)

# SIGTERM is a graceful stop: the request in hand is answered, then the process exits.
SERVER = r"""
import os, signal, socket, sys
stopping = []
signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(1))
if os.environ.get("LISTEN_PID") == str(os.getpid()):
    srv = socket.socket(fileno=3)
else:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(sys.argv[1])))
    srv.listen(4096)
srv.settimeout(0.02)  # how soon a stop is seen while no request comes
body = b"%d" % os.getpid()
answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (
    len(body), body)
while not stopping:
    try:
        conn, _ = srv.accept()
    except TimeoutError:
        continue
    conn.settimeout(None)
    try:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        conn.sendall(answer)
    except OSError:
        pass
    finally:
        conn.close()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int) -> int:
    """The pid that answered a GET; raises OSError (ConnectionRefusedError: refused)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/")
        response = conn.getresponse()
        return int(response.read())
    except http.client.HTTPException as e:
        raise ConnectionResetError(str(e)) from None
    finally:
        conn.close()


class Load:
    """Client threads sending GETs back to back, counting what became of each."""

    def __init__(self, port: int, clients: int) -> None:
        self.port = port
        self.counts = {"ok": 0, "refused": 0, "failed": 0}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(clients)]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                _get(self.port)
                what = "ok"
            except ConnectionRefusedError:
                what = "refused"
                time.sleep(0.0005)  # as a client retrying at once would, but not spinning
            except OSError:
                what = "failed"
            with self._lock:
                self.counts[what] += 1

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()


def _answered_by_new(port: int, old: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            if _get(port) != old:
                return True
        except OSError:
            time.sleep(0.0005)
    return False


def run(mode: str, restarts: int, clients: int, sig: int, script: Path) -> dict[str, object]:
    port = _free_port()
    with_sockets = mode == "sockets"
    spec = ChildSpec(
        id="web",
        command=[sys.executable, str(script), str(port)],
        sockets=[ListenSocket(f"127.0.0.1:{port}", name="http")] if with_sockets else (),
    )
    root = SupervisorSpec(id=mode, intensity=restarts * 2, period=1.0, children=[spec])
    times: list[float] = []
    with Tree(root) as tree:
        deadline = time.monotonic() + 10
        first = 0
        while not first and time.monotonic() < deadline:
            try:
                first = _get(port)
            except OSError:
                time.sleep(0.005)
        with Load(port, clients) as load:
            time.sleep(0.2)  # the load is steady before the first restart
            for _ in range(restarts):
                old = _get(port)
                start = time.monotonic()
                os.kill(old, sig)
                if not _answered_by_new(port, old, start + 10):
                    raise SystemExit(f"{mode}: no new incarnation answered within 10 s")
                times.append(time.monotonic() - start)
                time.sleep(0.02)  # some load on each incarnation
        assert tree.alive
    return {"mode": mode, **load.counts, "times": times}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--signal", default="KILL", help="what ends each incarnation")
    opts = parser.parse_args()
    sig = parse_signal(opts.signal)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(SERVER)
        results = [
            run(mode, opts.restarts, opts.clients, sig, script) for mode in ("sockets", "own port")
        ]
    print(
        f"{opts.restarts} restarts (SIG{signal.Signals(sig).name.removeprefix('SIG')}) of an "
        f"HTTP child under {opts.clients} clients sending GETs back to back:"
    )
    print(f"  {'mode':<9} {'answered':>9} {'refused':>8} {'failed':>7}  restart ms median / p95")
    for r in results:
        times = sorted(r["times"])  # type: ignore[type-var]
        median = statistics.median(times) * 1000
        slow = p95(times) * 1000
        print(
            f"  {r['mode']:<9} {r['ok']:>9} {r['refused']:>8} {r['failed']:>7}  "
            f"{median:.1f} / {slow:.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
