"""Many TCP sockets in TIME_WAIT, as a busy CI host has: what a readiness check that
reads every socket of the host pays for (tests/launcher/test_sock_diag.py and
tests/benchmarks/readiness_sockets.py)."""

from __future__ import annotations

import socket
import threading

# Client ends bound here, below the ephemeral range and off 127.0.0.1: the sockets
# they leave in TIME_WAIT (a minute) take no port another test could be given.
SOURCE = "127.0.0.2"
FIRST_PORT = 2000


def make_time_wait(n: int) -> int:
    """Open and close `n` loopback connections (the client closing first), leaving
    about `n` sockets in TIME_WAIT; how many connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4096)
    address = server.getsockname()
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.5)
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.close()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    made = 0
    try:
        for port in range(FIRST_PORT, FIRST_PORT + n):
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                client.bind((SOURCE, port))
                client.connect(address)
                made += 1
            except OSError:
                pass  # a port someone holds: one fewer
            finally:
                client.close()
    finally:
        done.set()
        acceptor.join(5)
        server.close()
    return made


def count_time_wait() -> int:
    """Sockets in TIME_WAIT in this namespace (state 06 in /proc/net/tcp)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, "rb") as f:
                count += sum(1 for line in f if line.split()[3:4] == [b"06"])
        except OSError:
            pass
    return count
