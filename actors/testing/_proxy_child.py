"""The fault proxy child's side (`_proxy` holds the test's): an asyncio proxy that
forwards a port to its upstream with the faults in force, and takes orders on a
unix socket. Imported only in the proxy's process: asyncio stays out of a test's
imports.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import struct
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ._proxy_wire import CHUNK, DIRECTIONS, LINE, MAX_CONNECTIONS, QUEUE, WHICH


@dataclass
class Toxics:
    """The faults of one direction."""

    latency: float = 0.0  # ms added to each chunk
    jitter: float = 0.0  # ms, +- around latency
    bandwidth: int | None = None  # bytes per second; None: as fast as it goes
    drop: bool = False  # data is read and thrown away (toxiproxy's timeout)
    partition: bool = False  # data is held (bounded) until heal, as TCP would retry


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
                except (ValueError, TypeError, OSError) as e:  # OSError: the port was taken
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


async def serve(host: str, port: int, up_host: str, up_port: int, control: str) -> None:
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
