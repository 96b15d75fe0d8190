"""Length-prefixed pickled messages over a byte stream (socket or pipe).

A stream rather than SOCK_SEQPACKET because datagram-like sockets refuse large
payloads with EMSGSIZE. Each frame is an 8-byte big-endian length followed by
a plain ``pickle`` of a small tuple; payload functions travel already
cloudpickled as ``bytes`` inside it, so the launcher never needs cloudpickle to
read a request.
"""

from __future__ import annotations

import os
import pickle
import struct

TYPE_CHECKING = False  # typing costs a fresh child milliseconds; mypy knows this name
if TYPE_CHECKING:
    import socket
    from typing import Any

HEADER = struct.Struct("!Q")
# Refuse absurd lengths: a corrupt header must not make a reader buffer forever.
MAX_FRAME = 1 << 31


def encode(message: Any) -> bytes:
    """One frame: header + pickled message."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def send(sock: socket.socket, message: Any) -> None:
    """Send one message on a blocking socket."""
    sock.sendall(encode(message))


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a blocking fd (pipes may accept it in pieces)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Decoder:
    """Incremental decoder: feed it whatever bytes arrived, get whole messages."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[Any]:
        if self._buf:
            self._buf += data
            messages, used = _parse(self._buf)
            del self._buf[:used]
        else:
            # The common case (whole frames, nothing pending): parse in place, no copy.
            messages, used = _parse(data)
            with memoryview(data) as view:
                self._buf += view[used:]
        return messages

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame still buffered."""
        return len(self._buf)


def _parse(data: bytes | bytearray | memoryview) -> tuple[list[Any], int]:
    """Whole frames at the start of `data`, and how many bytes they used."""
    messages: list[Any] = []
    pos = 0
    size = HEADER.size
    # Views are released on exit: the caller may resize the buffer afterwards.
    with memoryview(data) as view:
        end = len(view)
        while end - pos >= size:
            (length,) = HEADER.unpack_from(view, pos)
            if length > MAX_FRAME:
                raise ValueError(f"corrupt frame header (length {length})")
            if end - pos - size < length:
                break
            start = pos + size
            with view[start : start + length] as frame:
                messages.append(pickle.loads(frame))
            pos = start + length
    return messages, pos


def read_available(fd: int, decoder: Decoder) -> tuple[list[Any], bool]:
    """Drain a non-blocking fd: (messages, eof)."""
    messages: list[Any] = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return messages, False
        if not chunk:
            return messages, True
        messages.extend(decoder.feed(chunk))
