"""A fault proxy between two children (TCP, loopback), in toxiproxy's vocabulary.

The proxy is a child of the tree under test (a Python target running an asyncio
proxy), put between a client child and a server child: the client connects to the
proxy's port, the proxy to the server. The test switches faults on and off through
`FaultProxy`, over a unix socket in a private folder (JSON lines, bounded; never
pickle: the proxy is a child, and children are untrusted).

Upstream is the client's data on its way to the server, downstream the server's
answer on its way back. Every buffer is bounded: a direction holds at most
QUEUE chunks of CHUNK bytes (then it stops reading, and TCP's own window makes
the sender wait, as a slow network would).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import random
import shutil
import signal
import socket
import struct
import tempfile
import time
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

from supervision import ChildSpec

CHUNK = 16 * 1024  # bytes read from a socket at once
QUEUE = 16  # chunks in flight per direction and connection: 256 KiB at most
MAX_CONNECTIONS = 256  # past this a new connection is closed at once
LINE = 64 * 1024  # bytes of one control line, either way
CONTROL_TIMEOUT = 5.0  # seconds a control call waits for the proxy's answer
DIRECTIONS = ("upstream", "downstream")
WHICH = ("both", *DIRECTIONS)


@dataclass
class Toxics:
    """The faults of one direction."""

    latency: float = 0.0  # ms added to each chunk
    jitter: float = 0.0  # ms, +- around latency
    bandwidth: int | None = None  # bytes per second; None: as fast as it goes
    drop: bool = False  # data is read and thrown away (toxiproxy's timeout)
    partition: bool = False  # data is held (bounded) until heal, as TCP would retry


# -- the child -----------------------------------------------------------------------


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close with RST: SO_LINGER 0, then close without flushing."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    task: asyncio.Task[None] | None = None


@dataclass(eq=False)
class _Proxy:
    listen: tuple[str, int]
    upstream: tuple[str, int]
    toxics: dict[str, Toxics] = field(default_factory=lambda: {d: Toxics() for d in DIRECTIONS})
    links: set[_Link] = field(default_factory=set)
    refusing: bool = False
    server: asyncio.Server | None = None
    passable: dict[str, asyncio.Event] = field(default_factory=dict)

    async def start(self) -> None:
        for d in DIRECTIONS:
            self.passable[d] = asyncio.Event()
            self.passable[d].set()
        await self._listen()

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(
            self._accept, *self.listen, reuse_address=True, limit=CHUNK
        )

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.links) >= MAX_CONNECTIONS:
            _rst(writer)
            return
        link = _Link(client=writer, task=asyncio.current_task())
        self.links.add(link)
        try:
            await self.passable["upstream"].wait()  # a partition holds a new connection too
            try:
                up_reader, link.server = await asyncio.open_connection(*self.upstream, limit=CHUNK)
            except OSError:
                _rst(writer)  # nothing listens behind the proxy: the client sees a reset
                return
            await asyncio.gather(
                self._pump(reader, link.server, "upstream"),
                self._pump(up_reader, writer, "downstream"),
            )
        except asyncio.CancelledError:
            pass
        finally:
            self.links.discard(link)
            for w in (link.client, link.server):
                if w is not None:
                    w.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str
    ) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUE)

        async def read() -> None:
            while True:
                try:
                    data = await reader.read(CHUNK)
                except OSError:
                    _rst(writer)  # a reset on one side resets the other
                    data = b""
                await queue.put((time.monotonic(), data))
                if not data:
                    return

        async def write() -> None:
            while True:
                stamp, data = await queue.get()
                await self.passable[direction].wait()
                tox = self.toxics[direction]
                if not data:
                    if not writer.is_closing() and writer.can_write_eof():
                        with contextlib.suppress(OSError):
                            writer.write_eof()
                    return
                if tox.drop:
                    continue
                delay = max(0.0, tox.latency + random.uniform(-tox.jitter, tox.jitter)) / 1000
                wait = stamp + delay - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                await self._send(writer, data, direction)

        await asyncio.gather(read(), write())

    async def _send(self, writer: asyncio.StreamWriter, data: bytes, direction: str) -> None:
        if writer.is_closing():
            return
        rate = self.toxics[direction].bandwidth
        step = len(data) if rate is None else max(1, rate // 20)  # 50 ms slices
        for i in range(0, len(data), step):
            piece = data[i : i + step]
            writer.write(piece)
            try:
                await writer.drain()
            except OSError:
                return
            if rate is not None:
                await asyncio.sleep(len(piece) / rate)

    # -- control ------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "toxics": {d: asdict(t) for d, t in self.toxics.items()},
            "connections": len(self.links),
            "refusing": self.refusing,
        }

    async def apply(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "set":
            for d in _directions(request.get("direction", "both")):
                for key, value in request.get("toxics", {}).items():
                    if key not in Toxics.__dataclass_fields__:
                        raise ValueError(f"unknown fault {key!r}")
                    setattr(self.toxics[d], key, value)
                self._gate(d)
        elif op == "heal":
            for d in _directions(request.get("direction", "both")):
                self.toxics[d] = Toxics()
                self._gate(d)
            await self._refuse(False)
        elif op == "reset":
            for link in list(self.links):
                for w in (link.client, link.server):
                    if w is not None:
                        _rst(w)
                if link.task is not None:
                    link.task.cancel()
        elif op == "refuse":
            await self._refuse(bool(request.get("on", True)))
        elif op != "status":
            raise ValueError(f"unknown op {op!r}")
        return self.state()

    def _gate(self, direction: str) -> None:
        if self.toxics[direction].partition:
            self.passable[direction].clear()
        else:
            self.passable[direction].set()

    async def _refuse(self, on: bool) -> None:
        if on and not self.refusing and self.server is not None:
            self.server.close()  # new connections are refused; the open ones stay
            await self.server.wait_closed()
        elif not on and self.refusing:
            await self._listen()
        self.refusing = on

    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    request = json.loads(line)
                    if not isinstance(request, dict):
                        raise ValueError("a request is a JSON object")
                    answer = {"ok": True, **(await self.apply(request))}
                except (ValueError, TypeError) as e:
                    answer = {"ok": False, "error": str(e)[:1000]}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        except (OSError, ValueError):  # a line over LINE, or the test went away
            pass
        finally:
            writer.close()


def _directions(which: str) -> tuple[str, ...]:
    if which == "both":
        return DIRECTIONS
    if which in DIRECTIONS:
        return (which,)
    raise ValueError(f"direction {which!r}: expected one of {', '.join(WHICH)}")


def serve(host: str, port: int, up_host: str, up_port: int, control: str) -> None:
    """The proxy child's target: listen on (host, port), forward to (up_host,
    up_port), take orders on the unix socket `control`; stop on SIGTERM."""
    asyncio.run(_serve(host, port, up_host, up_port, control))


async def _serve(host: str, port: int, up_host: str, up_port: int, control: str) -> None:
    from .. import child

    proxy = _Proxy((host, port), (up_host, up_port))
    await proxy.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(control)  # a restarted proxy's predecessor's socket
    orders = await asyncio.start_unix_server(proxy.control, control, limit=LINE)
    child.ready()
    try:
        await stop.wait()
    finally:
        orders.close()
        if proxy.server is not None:
            proxy.server.close()
        for link in list(proxy.links):
            if link.task is not None:
                link.task.cancel()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(control)


# -- the test's side -----------------------------------------------------------------


class FaultProxy:
    """A fault proxy child and the switches the test holds: put `spec` in the tree
    between a client and its server (the client connects to `port`), then call
    `latency`, `bandwidth`, `drop`, `partition`, `reset` and `heal`.

    Each call returns once the proxy applies it (the data it reads afterwards
    meets the new faults) and returns the proxy's state: {"toxics": {"upstream":
    {...}, "downstream": {...}}, "connections": n, "refusing": bool}. `direction`
    is "both" (default), "upstream" (client to server) or "downstream" (server to
    client). A restarted proxy starts with no faults, as a new process.
    """

    def __init__(
        self,
        id: str,
        upstream: tuple[str, int],
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        **spec_fields: Any,
    ) -> None:
        from . import free_port  # the package's; it imports this module

        if not (
            isinstance(upstream, tuple)
            and len(upstream) == 2
            and isinstance(upstream[0], str)
            and isinstance(upstream[1], int)
        ):
            raise TypeError(
                f"fault_proxy {id!r}: upstream={upstream!r}; expected (host, port), "
                'e.g. ("127.0.0.1", 6379)'
            )
        self.id = id
        self.host = host
        self.port = free_port(host) if port is None else port
        self.upstream = upstream
        self._dir = tempfile.mkdtemp(prefix="nannytree-proxy-")  # 0700: ours alone
        self.control = os.path.join(self._dir, "control")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, True)
        self.spec = ChildSpec(
            id=id,
            target=serve,
            args=(host, self.port, upstream[0], upstream[1], self.control),
            ready="notify",
            **spec_fields,
        )

    @property
    def address(self) -> tuple[str, int]:
        """Where the client connects: (host, port)."""
        return self.host, self.port

    def latency(self, ms: float, jitter: float = 0.0, direction: str = "both") -> dict[str, Any]:
        """Delay each chunk by `ms` milliseconds, +- `jitter` (order kept)."""
        _number(self.id, "latency", ms)
        _number(self.id, "jitter", jitter)
        return self._set(direction, latency=float(ms), jitter=float(jitter))

    def bandwidth(self, bytes_per_s: int | None, direction: str = "both") -> dict[str, Any]:
        """Forward at most `bytes_per_s` bytes a second (None: no limit)."""
        if bytes_per_s is not None and (
            not isinstance(bytes_per_s, int) or isinstance(bytes_per_s, bool) or bytes_per_s < 1
        ):
            raise ValueError(
                f"fault proxy {self.id!r}: bandwidth={bytes_per_s!r}; expected a whole "
                "number of bytes per second >= 1, or None for no limit"
            )
        return self._set(direction, bandwidth=bytes_per_s)

    def drop(self, direction: str = "both") -> dict[str, Any]:
        """Read and throw away what is sent (toxiproxy's timeout): the connection
        stays open, and the reader's read times out."""
        return self._set(direction, drop=True)

    def partition(self, direction: str = "both", *, refuse: bool = False) -> dict[str, Any]:
        """Let nothing through: open and new connections are held (what they send
        waits, bounded, until heal; a read times out). `refuse=True` also closes the
        proxy's port, so that a new connect is refused (ECONNREFUSED)."""
        state = self._set(direction, partition=True)
        return self._call({"op": "refuse", "on": True}) if refuse else state

    def heal(self, direction: str = "both") -> dict[str, Any]:
        """Take every fault of `direction` away (and listen again after a refusing
        partition): what a partition held goes on."""
        _direction(self.id, direction)
        return self._call({"op": "heal", "direction": direction})

    def reset(self) -> dict[str, Any]:
        """Close every open connection with RST, both ways: the client's next read
        or write gets ECONNRESET. New connections go through as before."""
        return self._call({"op": "reset"})

    def status(self) -> dict[str, Any]:
        """The proxy's faults and its number of open connections."""
        return self._call({"op": "status"})

    def close(self) -> None:
        """Remove the control socket's folder (done anyway when the handle goes)."""
        self._cleanup()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _set(self, direction: str, **toxics: Any) -> dict[str, Any]:
        _direction(self.id, direction)
        return self._call({"op": "set", "direction": direction, "toxics": toxics})

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(request).encode() + b"\n"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(CONTROL_TIMEOUT)
                s.connect(self.control)
                s.sendall(data)
                answer = _read_line(s)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            raise RuntimeError(
                f"fault proxy {self.id!r} is not running (no one at {self.control}): put "
                f"its .spec in the tree and start the tree first"
            ) from e
        except OSError as e:
            raise RuntimeError(
                f"fault proxy {self.id!r} did not answer {request['op']!r}: "
                f"{errno.errorcode.get(e.errno or 0, '')} {e}"
            ) from e
        try:
            reply = json.loads(answer)
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or not reply.get("ok"):
            said = reply.get("error") if isinstance(reply, dict) else answer[:200]
            raise RuntimeError(f"fault proxy {self.id!r} refused {request['op']!r}: {said!r}")
        reply.pop("ok")
        return reply


def _read_line(s: socket.socket) -> bytes:
    got = b""
    while not got.endswith(b"\n"):
        part = s.recv(LINE)
        if not part:
            raise ConnectionResetError(errno.ECONNRESET, "the proxy closed the control socket")
        got += part
        if len(got) > LINE:
            raise OSError(errno.EMSGSIZE, f"an answer over {LINE} bytes")
    return got


def _direction(id: str, direction: str) -> None:
    if direction not in WHICH:
        raise ValueError(
            f"fault proxy {id!r}: direction={direction!r}; expected one of {', '.join(WHICH)}"
        )


def _number(id: str, name: str, value: object) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise ValueError(
            f"fault proxy {id!r}: {name}={value!r}; expected milliseconds, a number >= 0"
        )


def fault_proxy(
    id: str,
    upstream: tuple[str, int],
    *,
    port: int | None = None,
    host: str = "127.0.0.1",
    **spec_fields: Any,
) -> FaultProxy:
    """A fault proxy child named `id` that forwards `host:port` (default: a free
    port on 127.0.0.1) to `upstream`, and the switches to its faults. Put its
    `.spec` in the tree (further ChildSpec fields in `spec_fields`) and point the
    client at its `.port`:

        proxy = fault_proxy("db_proxy", upstream=("127.0.0.1", db_port))
        spec = SupervisorSpec(id="app", children=[db, proxy.spec, client])
        ...
        proxy.latency(200)      # each chunk, both ways, 200 ms late
        proxy.partition()       # nothing passes; reads time out
        proxy.heal()            # every fault gone
    """
    return FaultProxy(id, upstream, port=port, host=host, **spec_fields)
