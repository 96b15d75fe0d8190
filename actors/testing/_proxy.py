"""A fault proxy between two children (TCP, loopback), in toxiproxy's vocabulary.

The proxy is a child of the tree under test (a Python target running an asyncio
proxy), put between a client child and a server child: the client connects to the
proxy's port, the proxy to the server. The test switches faults on and off through
`FaultProxy`, over a unix socket in a private folder (JSON lines, bounded; never
pickle: the proxy is a child, and children are untrusted).

Upstream is the client's data on its way to the server, downstream the server's
answer on its way back. Every buffer is bounded: a direction holds at most
QUEUE chunks of CHUNK bytes (_proxy_wire) (then it stops reading, and TCP's own window makes
the sender wait, as a slow network would).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import tempfile
import weakref
from typing import Any

from supervision import ChildSpec

from ._proxy_wire import LINE, WHICH

CONTROL_TIMEOUT = 5.0  # seconds a control call waits for the proxy's answer


def serve(host: str, port: int, up_host: str, up_port: int, control: str) -> None:
    """The proxy child's target: listen on (host, port), forward to (up_host,
    up_port), take orders on the unix socket `control`; stop on SIGTERM."""
    import asyncio

    from ._proxy_child import serve

    asyncio.run(serve(host, port, up_host, up_port, control))


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
        self.port = _free_port(host) if port is None else port
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


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


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
