"""The launcher's reports to the host: queued in order, sent as its socket takes them.

The socket is non-blocking: a host that reads slowly never blocks the loop. Past
OUTBOX_LIMIT bytes waiting, captured output is dropped (and the host told how
much); exits, spawns and errors never are, being bounded by the number of children.
"""

from __future__ import annotations

import contextlib
import socket

from . import _wire
from ._protocol import Output
from ._record import Record

OUTBOX_LIMIT = 8 << 20


class Reports:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._frames: list[bytes] = []
        self._bytes = 0
        self._dropped = 0  # bytes of output dropped since the last note of it

    @property
    def pending(self) -> bool:
        return bool(self._frames)

    def add(self, record: Record) -> None:
        frame = _wire.encode(record.pack())
        if isinstance(record, Output):
            if self._bytes + len(frame) > OUTBOX_LIMIT:
                self._dropped += len(record.data)
                return
            if self._dropped:
                note = (
                    f"\n[nannytree: {self._dropped} bytes of output dropped: "
                    "the supervisor did not keep up]\n"
                ).encode()
                self._dropped = 0
                self._queue(_wire.encode(Output(record.pid, record.stream, note).pack()))
        self._queue(frame)

    def _queue(self, frame: bytes) -> None:
        self._frames.append(frame)
        self._bytes += len(frame)

    def send(self) -> bool:
        """Send what the socket takes now; the rest waits. False: the host is gone."""
        while self._frames:
            data = b"".join(self._frames) if len(self._frames) > 1 else self._frames[0]
            try:
                sent = self._sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self.clear()
                return False
            rest = data[sent:]
            self._frames = [rest] if rest else []
            self._bytes = len(rest)
            if rest:
                break
        return True

    def clear(self) -> None:
        self._frames.clear()
        self._bytes = 0

    def send_all(self, timeout: float) -> None:
        """The last reports, blocking for at most `timeout` s per send."""
        self._sock.settimeout(timeout)
        with contextlib.suppress(OSError):
            self._sock.sendall(b"".join(self._frames))
