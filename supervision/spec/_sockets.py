"""Sockets a child inherits (socket activation) and the user it runs as: the spec side.

`ListenSocket(name, listen)` is one listening stream socket that nannytree binds
once and passes to every incarnation of its child with systemd's protocol
(docs/sockets.md). `listen` is an IPv4 `host:port`, an IPv6 `[host]:port`, an
absolute unix socket path, or `@name` (a unix socket in the abstract namespace).
Only literal addresses: a host name would need a lookup the spec cannot make.

`user` and `group` are checked here for their shape only (a name or an id); the
user database is read when the child starts (docs/sockets.md, "Users").
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import SpecError
from ._probes import Liveness, TcpProbe

# systemd's LISTEN_FDNAMES: names are joined with ':' and at most 255 characters.
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,255}$")
_PORT = re.compile(r"^[0-9]{1,5}$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*\$?$")  # useradd's NAME_REGEX, roughly
SOCKET_KEYS = ("name", "listen", "backlog")


@dataclass(frozen=True)
class ListenSocket:
    """A listening stream socket bound by nannytree and passed to its child.

    - `name`: what LISTEN_FDNAMES calls it (letters, digits, `_.-`); None: the
      child's id.
    - `listen`: "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:80", "/run/app.sock" or
      "@app" (abstract unix socket).
    - `backlog`: the listen queue (default 4096, Linux's SOMAXCONN); connections wait in it
      while the child restarts.
    """

    listen: str
    name: str | None = None
    backlog: int = 4096  # Linux's SOMAXCONN; the kernel caps it at net.core.somaxconn

    def __post_init__(self) -> None:
        if self.name is not None and (not isinstance(self.name, str) or not _NAME.match(self.name)):
            raise SpecError(
                None,
                "sockets.name",
                self.name,
                "expected a name of letters, digits, '_', '.' or '-' (LISTEN_FDNAMES)",
            )
        parse_listen(self.listen)
        backlog = self.backlog
        if not isinstance(backlog, int) or isinstance(backlog, bool) or backlog < 1:
            raise SpecError(None, "sockets.backlog", backlog, "expected an integer >= 1")

    @property
    def family(self) -> str:
        """ "tcp" or "unix"."""
        return parse_listen(self.listen)[0]

    @property
    def port(self) -> int | None:
        """The TCP port (None for a unix socket)."""
        kind, address = parse_listen(self.listen)
        return int(address[1]) if kind == "tcp" else None


def parse_listen(value: Any) -> tuple[str, Any]:
    """("tcp", (host, port)) or ("unix", path); SpecError naming the fix otherwise."""
    fix = (
        'expected "HOST:PORT" with a literal address ("127.0.0.1:8080", "[::1]:8080", '
        '"0.0.0.0:80"), an absolute unix socket path, or "@name"'
    )
    if not isinstance(value, str) or not value or "\0" in value:
        raise SpecError(None, "sockets.listen", value, fix)
    if value.startswith("/"):
        if (
            len(value.encode("utf-8", "surrogateescape")) > 107
        ):  # sun_path is 108 bytes with its NUL
            raise SpecError(
                None, "sockets.listen", value, "a unix socket path of 107 bytes at most"
            )
        return "unix", value
    if value.startswith("@"):
        if len(value) < 2 or len(value.encode()) > 107:
            raise SpecError(None, "sockets.listen", value, "an abstract name of 1-106 bytes")
        return "unix", value
    host, sep, port = value.rpartition(":")
    if not sep or not _PORT.match(port) or not 0 < int(port) < 65536:
        raise SpecError(None, "sockets.listen", value, fix)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise SpecError(None, "sockets.listen", value, fix) from None
    else:
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise SpecError(None, "sockets.listen", value, fix) from None
    return "tcp", (host, int(port))


def as_sockets(value: Any, cid: str) -> tuple[ListenSocket, ...]:
    """A child's `sockets`: ListenSocket values, or tables of the same keys; named."""
    if isinstance(value, str | bytes | Mapping | ListenSocket) or not isinstance(value, Iterable):
        raise SpecError(
            cid,
            "sockets",
            value,
            'expected a list, e.g. [ListenSocket("127.0.0.1:8080", name="http")]',
        )
    out: list[ListenSocket] = []
    for item in value:
        try:
            if isinstance(item, Mapping):
                unknown = sorted(set(item) - set(SOCKET_KEYS))
                if unknown or "listen" not in item:
                    raise SpecError(
                        None,
                        "sockets",
                        dict(item),
                        f'each takes listen = "HOST:PORT" and optional {SOCKET_KEYS[0]!r}, '
                        f"{SOCKET_KEYS[2]!r}"
                        + (f"; unknown key(s) {', '.join(map(repr, unknown))}" if unknown else ""),
                    )
                item = ListenSocket(**item)
            elif not isinstance(item, ListenSocket):
                raise SpecError(None, "sockets", item, "expected ListenSocket(...) or a table")
        except SpecError as e:
            raise SpecError(cid, e.field, e.value, e.expected) from None
        if item.name is None:
            item = ListenSocket(item.listen, name=cid, backlog=item.backlog)
        out.append(item)
    names = [s.name for s in out]
    addresses = [parse_listen(s.listen) for s in out]
    for i, s in enumerate(out):
        if names.index(s.name) != i:
            raise SpecError(cid, "sockets", s.name, "each socket needs a name of its own")
        if addresses.index(addresses[i]) != i:
            raise SpecError(cid, "sockets", s.listen, "an address is listed twice")
    return tuple(out)


def check_socket_probes(
    sockets: tuple[ListenSocket, ...], ready: Any, liveness: Any, cid: str
) -> None:
    """A TcpProbe on a port nannytree itself listens on passes at once: refused."""
    ports = {s.port for s in sockets if s.port is not None}
    for name, probe in (
        ("ready", ready),
        ("liveness", liveness.probe if isinstance(liveness, Liveness) else None),
    ):
        if isinstance(probe, TcpProbe) and probe.port in ports:
            raise SpecError(
                cid,
                name,
                str(probe),
                f"port {probe.port} is one of the child's sockets: nannytree listens on it, so "
                "a connection succeeds whether the child runs or not; use an HttpProbe "
                '(answered only once the child accepts), a LogLine, or ready="sd_notify"',
            )


def check_account(value: Any, cid: str, name: str) -> str | int | None:
    """A `user` or `group`: None, a name, or a numeric id (an int, or digits)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < 2**32 - 1:
            return value
    elif isinstance(value, str):
        if value.isascii() and value.isdigit() and int(value) < 2**32 - 1:
            return int(value)
        if _USER.match(value) and len(value) <= 256:
            return value
    raise SpecError(cid, name, value, 'expected a name ("nobody") or a numeric id, or None')
