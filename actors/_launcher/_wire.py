"""Plain data over a byte stream: length-prefixed frames, no pickle anywhere.

Every message between the host, the launcher and a Python child is a frame: a
4-byte big-endian length, then one value in a small tagged format that can
carry only None, bools, 64-bit ints, floats, str, bytes, lists, tuples and
dicts. Decoding such a value can never run code, so a child (or anything that
writes to these pipes) can at worst send garbage, which the reader refuses:
`WireError`. A reader gives each stream a frame limit, checked before any
byte of the frame is buffered.

A Python target travels as cloudpickled bytes inside a frame from the host to
its own child (the parent wrote it); only that child unpickles it.
"""

from __future__ import annotations

import os
import struct

TYPE_CHECKING = False  # typing costs a fresh child milliseconds; mypy knows this name
if TYPE_CHECKING:
    import socket
    from typing import Any

HEADER = struct.Struct("!I")
_I64 = struct.Struct("!q")
_F64 = struct.Struct("!d")
_U32 = struct.Struct("!I")
MAX_DEPTH = 8


class WireError(ValueError):
    """A frame that is not plain data of the expected shape, or over its limit."""


# -- encoding -----------------------------------------------------------------------


def _put(value: Any, out: list[bytes], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise WireError("value nested too deep")
    if value is None:
        out.append(b"N")
    elif value is True:
        out.append(b"T")
    elif value is False:
        out.append(b"F")
    elif type(value) is int:
        out.append(b"i" + _I64.pack(value))
    elif type(value) is float:
        out.append(b"f" + _F64.pack(value))
    elif type(value) is str:
        data = value.encode("utf-8", "surrogateescape")
        out.append(b"s" + _U32.pack(len(data)))
        out.append(data)
    elif type(value) is bytes or type(value) is bytearray or type(value) is memoryview:
        data = bytes(value)
        out.append(b"b" + _U32.pack(len(data)))
        out.append(data)
    elif type(value) is tuple or type(value) is list:
        out.append((b"t" if type(value) is tuple else b"l") + _U32.pack(len(value)))
        for item in value:
            _put(item, out, depth + 1)
    elif type(value) is dict:
        out.append(b"d" + _U32.pack(len(value)))
        for key, item in value.items():
            _put(key, out, depth + 1)
            _put(item, out, depth + 1)
    else:
        raise WireError(f"cannot send a {type(value).__name__}: only plain data crosses")


def dumps(value: Any) -> bytes:
    """The body of a frame: `value` in the tagged format."""
    out: list[bytes] = []
    _put(value, out, 0)
    return b"".join(out)


def encode(value: Any) -> bytes:
    """One frame: header + body."""
    body = dumps(value)
    return HEADER.pack(len(body)) + body


def send(sock: socket.socket, value: Any) -> None:
    """Send one frame on a blocking socket."""
    sock.sendall(encode(value))


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to a blocking fd (pipes may accept it in pieces)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- decoding -----------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data)

    def take(self, n: int) -> Any:
        start = self.pos
        if n > self.end - start:
            raise WireError("truncated value")
        self.pos = start + n
        return self.data[start : start + n]

    def u32(self) -> int:
        start = self.pos
        if self.end - start < 4:
            raise WireError("truncated value")
        self.pos = start + 4
        return int(_U32.unpack_from(self.data, start)[0])

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise WireError("value nested too deep")
        tag = self.take(1)[0]
        if tag == 0x4E:  # N
            return None
        if tag == 0x54:  # T
            return True
        if tag == 0x46:  # F
            return False
        if tag == 0x69:  # i
            return _I64.unpack(self.take(8))[0]
        if tag == 0x66:  # f
            return _F64.unpack(self.take(8))[0]
        if tag == 0x73:  # s
            return bytes(self.take(self.u32())).decode("utf-8", "surrogateescape")
        if tag == 0x62:  # b
            return bytes(self.take(self.u32()))
        if tag in (0x74, 0x6C):  # t, l
            n = self.u32()
            if n > self.end - self.pos:  # every item takes a byte at least
                raise WireError("truncated value")
            items = [self.value(depth + 1) for _ in range(n)]
            return tuple(items) if tag == 0x74 else items
        if tag == 0x64:  # d
            n = self.u32()
            if 2 * n > self.end - self.pos:
                raise WireError("truncated value")
            result = {}
            for _ in range(n):
                key = self.value(depth + 1)
                if not isinstance(key, str | int):
                    raise WireError("a dict key must be a str or an int")
                result[key] = self.value(depth + 1)
            return result
        raise WireError(f"unknown tag {tag:#x}")


def loads(body: bytes | bytearray | memoryview) -> Any:
    """The value of one frame's body; WireError if it is not exactly one plain value."""
    reader = _Reader(body)
    try:
        value = reader.value(0)
    except (IndexError, struct.error) as e:  # pragma: no cover - take() checks lengths
        raise WireError(f"malformed value: {e}") from None
    if reader.pos != reader.end:
        raise WireError("trailing bytes after the value")
    return value


class Decoder:
    """Incremental decoder: feed it what arrived, get whole values.

    A header announcing more than `limit` bytes raises WireError before any of
    the frame is buffered, so a writer cannot make the reader hold more than
    one frame's limit.
    """

    __slots__ = ("_buf", "limit")

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()
        self.limit = limit

    def feed(self, data: bytes | bytearray | memoryview) -> list[Any]:
        if self._buf:
            self._buf += data
            values, used = _parse(self._buf, self.limit)
            del self._buf[:used]
        else:
            # The common case (whole frames, nothing pending): parse in place, no copy.
            values, used = _parse(data, self.limit)
            with memoryview(data) as view:
                self._buf += view[used:]
        return values

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame still buffered."""
        return len(self._buf)


def _parse(data: bytes | bytearray | memoryview, limit: int) -> tuple[list[Any], int]:
    """Whole frames at the start of `data`, and how many bytes they used."""
    values: list[Any] = []
    pos = 0
    size = HEADER.size
    # Views are released on exit: the caller may resize the buffer afterwards.
    with memoryview(data) as view:
        end = len(view)
        while end - pos >= size:
            (length,) = HEADER.unpack_from(view, pos)
            if length > limit:
                raise WireError(f"a frame of {length} bytes, over the limit of {limit}")
            if end - pos - size < length:
                break
            start = pos + size
            with view[start : start + length] as body:
                values.append(loads(body))
            pos = start + length
    return values, pos


def read_available(fd: int, decoder: Decoder) -> tuple[list[Any], bool]:
    """Drain a non-blocking fd: (values, eof). Raises WireError on garbage."""
    values: list[Any] = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return values, False
        if not chunk:
            return values, True
        values.extend(decoder.feed(chunk))
