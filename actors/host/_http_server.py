"""A small HTTP/1.1 server for a WSGI app (the metrics endpoint) whose cost a
stranger cannot grow: two threads whatever the clients do, at most MAX_CONNECTIONS
connections held (a new one closes the oldest that is still reading its request or
taking its answer), REQUEST_BYTES of request, READ_TIMEOUT seconds to send it and
WRITE_TIMEOUT seconds to take the answer.

One thread reads requests and writes answers for every connection, non-blocking,
through a selector: an idle or slow client holds a buffer, never a thread. The
other calls the app, one complete request at a time. One request per connection
(`Connection: close`), as a Prometheus scrape is.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

MAX_CONNECTIONS = 32  # held at once: reading, waiting for the app, or being answered
REQUEST_BYTES = 8 * 1024  # a request's line and headers (no body is read)
READ_TIMEOUT = 5.0  # seconds from the accept to the request's end
WRITE_TIMEOUT = 10.0  # seconds for the client to take the whole answer
ACCEPTS_PER_TURN = 16  # so that a flood of connects never starves the reads

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Conn:
    __slots__ = ("deadline", "inbox", "outbox", "sock", "state")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.inbox = bytearray()
        self.outbox = memoryview(b"")
        self.state = "reading"  # then "waiting" (for the app), then "writing"
        self.deadline = now + READ_TIMEOUT


class BoundedHTTPServer:
    """Serves `app` on (host, port) from two threads; binds at once (OSError if the
    port is taken). `server_address` is the bound address."""

    def __init__(self, app: App, host: str, port: int) -> None:
        self._app = app
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listen = socket.create_server((host, port), family=family, backlog=128)
        self._listen.setblocking(False)
        self.server_address = self._listen.getsockname()
        self._conns: dict[int, _Conn] = {}  # by fd, oldest first
        self._work: queue.SimpleQueue[_Conn | None] = queue.SimpleQueue()
        self._answers: queue.SimpleQueue[tuple[_Conn, bytes]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._closing = threading.Event()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listen, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._threads = [
            threading.Thread(target=self._io_loop, name="nannytree-metrics-io", daemon=True),
            threading.Thread(target=self._app_loop, name="nannytree-metrics-app", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def close(self, timeout: float = 5.0) -> None:
        self._closing.set()
        self._work.put(None)
        self._wake()
        for t in self._threads:
            t.join(timeout)
        for conn in list(self._conns.values()):
            conn.sock.close()
        self._conns.clear()
        self._sel.close()
        self._listen.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    # -- the io thread ------------------------------------------------------------------

    def _io_loop(self) -> None:
        while not self._closing.is_set():
            now = time.monotonic()
            due = min(
                (c.deadline for c in self._conns.values() if c.state != "waiting"), default=None
            )
            events = self._sel.select(None if due is None else max(0.0, due - now))
            listening = False
            for key, _ in events:
                if key.fileobj is self._listen:
                    listening = True
                elif key.fileobj == self._wake_r:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 4096)
                else:
                    conn = key.data
                    if conn.state == "reading":
                        self._read(conn)
                    elif conn.state == "writing":
                        self._write(conn)
            while True:  # answers the app made meanwhile
                try:
                    conn, data = self._answers.get_nowait()
                except queue.Empty:
                    break
                if conn.sock.fileno() in self._conns:
                    conn.state, conn.outbox = "writing", memoryview(data)
                    conn.deadline = time.monotonic() + WRITE_TIMEOUT
                    self._sel.register(conn.sock, selectors.EVENT_WRITE, conn)
                    self._write(conn)
            if listening:
                self._accept()
            now = time.monotonic()
            for conn in [c for c in self._conns.values() if c.state != "waiting"]:
                if conn.deadline <= now:
                    self._drop(conn)

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_TURN):
            try:
                sock, _ = self._listen.accept()
            except (BlockingIOError, ConnectionAbortedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    return  # it waits in the backlog; a connection's end frees a descriptor
                raise
            if len(self._conns) >= MAX_CONNECTIONS:
                oldest = next((c for c in self._conns.values() if c.state != "waiting"), None)
                if oldest is None:  # every one waits for the app: this one waits its turn
                    sock.close()
                    continue
                self._drop(oldest)
            sock.setblocking(False)
            conn = _Conn(sock, time.monotonic())
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(REQUEST_BYTES + 1 - len(conn.inbox))
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.inbox += data
        end = conn.inbox.find(b"\r\n\r\n")
        if end < 0:
            end = conn.inbox.find(b"\n\n")
        if end < 0:
            if len(conn.inbox) > REQUEST_BYTES:
                self._drop(conn)  # no scrape is that long: no answer (it would be reset)
            return
        self._sel.unregister(conn.sock)
        conn.state = "waiting"
        self._work.put(conn)

    def _write(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbox)
        except BlockingIOError:
            return
        except OSError:
            self._drop(conn)
            return
        conn.outbox = conn.outbox[sent:]
        if not conn.outbox:
            self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        if self._conns.pop(fd, None) is None:
            return
        if conn.state != "waiting":
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(conn.sock)
        conn.sock.close()

    # -- the app thread -----------------------------------------------------------------

    def _app_loop(self) -> None:
        while True:
            conn = self._work.get()
            if conn is None or self._closing.is_set():
                return
            try:
                data = self._call(bytes(conn.inbox))
            except Exception as e:  # the app's bug: the client hears of it, we go on
                data = _response("500 Internal Server Error", [], f"{type(e).__name__}\n".encode())
            self._answers.put((conn, data))
            self._wake()

    def _call(self, request: bytes) -> bytes:
        head = request.split(b"\n\n" if b"\r\n" not in request else b"\r\n\r\n", 1)[0]
        lines = head.decode("latin-1").splitlines()
        parts = lines[0].split() if lines else []
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _response("400 Bad Request", [], b"a request line: GET /metrics HTTP/1.1\n")
        method, target, _ = parts
        path, _, query = target.partition("?")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.input": io.BytesIO(),
        }
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                key = "HTTP_" + name.strip().upper().replace("-", "_")
                environ[key] = value.strip()
        status: list[Any] = []

        def start_response(s: str, headers: list[tuple[str, str]], exc: Any = None) -> None:
            status[:] = [s, headers]

        body = b"".join(self._app(environ, start_response))
        return _response(status[0], status[1], b"" if method == "HEAD" else body)


def _response(status: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    head = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers)]
    head += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(head).encode("latin-1") + body
