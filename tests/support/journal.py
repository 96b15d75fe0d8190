"""A fake journald stream socket for the journal tests: a real unix stream server
that reads each connection as systemd-journald does (journald-stream.c): the
seven header lines, then one entry per line, a `<N>` level prefix honoured when
the header allows it. Entries and headers are kept for the test to wait on."""

from __future__ import annotations

import os
import selectors
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

HEADER_LINES = 7  # identifier, unit id, priority, level_prefix, syslog, kmsg, console


@dataclass(frozen=True)
class Header:
    identifier: str
    unit_id: str
    priority: int
    level_prefix: bool
    forward: tuple[int, int, int]


@dataclass(frozen=True)
class Entry:
    identifier: str
    priority: int
    message: str
    uid: int  # the connecting process's, as journald reads it (SO_PEERCRED)


class _Stream:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.header: Header | None = None
        self.fields: list[str] = []
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        self.uid = int.from_bytes(creds[4:8], "little")


class FakeJournal:
    """`with FakeJournal(path) as journal:` serves until the block ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[Entry] = []
        self.headers: list[Header] = []
        self._lock = threading.Lock()
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        os.chmod(path, 0o666)  # as journald's: any local user may connect
        self._server.listen(64)
        self._sel.register(self._server, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "stop")
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> FakeJournal:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        os.write(self._wake_w, b"x")
        self._thread.join(10)
        for key in list(self._sel.get_map().values()):
            if isinstance(key.data, _Stream):
                key.data.sock.close()
        self._sel.close()
        self._server.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _serve(self) -> None:
        while True:
            for key, _ in self._sel.select():
                if key.data == "stop":
                    return
                if key.data is None:
                    conn, _ = self._server.accept()
                    self._sel.register(conn, selectors.EVENT_READ, _Stream(conn))
                else:
                    self._read(key.data)

    def _read(self, stream: _Stream) -> None:
        data = stream.sock.recv(65536)
        if not data:
            self._sel.unregister(stream.sock)
            stream.sock.close()
            return
        stream.buf += data
        while b"\n" in stream.buf:
            line, stream.buf = stream.buf.split(b"\n", 1)
            self._line(stream, line.decode(errors="replace"))

    def _line(self, stream: _Stream, line: str) -> None:
        if stream.header is None:
            stream.fields.append(line)
            if len(stream.fields) == HEADER_LINES:
                ident, unit, prio, level, syslog, kmsg, console = stream.fields
                forward = (int(syslog), int(kmsg), int(console))
                stream.header = Header(ident, unit, int(prio), level == "1", forward)
                with self._lock:
                    self.headers.append(stream.header)
            return
        priority = stream.header.priority
        prefixed = len(line) >= 3 and line[0] == "<" and line[1].isdigit() and line[2] == ">"
        if stream.header.level_prefix and prefixed:
            priority, line = int(line[1]), line[3:]
        with self._lock:
            self.entries.append(Entry(stream.header.identifier, priority, line, stream.uid))

    def lines(self, identifier: str) -> list[tuple[int, str]]:
        """(priority, message) of each entry under `identifier`, in arrival order."""
        with self._lock:
            return [(e.priority, e.message) for e in self.entries if e.identifier == identifier]
