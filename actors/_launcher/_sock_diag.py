"""The sockets listening on a TCP port, asked of the kernel (netlink sock_diag, as
`ss -ltn` does) instead of read from /proc/net/tcp.

/proc/net/tcp lists every TCP socket of the namespace: on a busy CI host with
20,000 sockets in TIME_WAIT, reading it for one port took 0.2-0.3 s per readiness
check. A sock_diag dump asked for LISTEN sockets only walks the kernel's listening
table, whatever the number of connections. None when the kernel refuses netlink
(a seccomp filter, an old kernel): the caller reads /proc/net/tcp instead.
"""

from __future__ import annotations

import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCP_LISTEN = 10

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
# inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid (48 bytes)
_REQUEST = struct.Struct("=BBBBI48s")
# inet_diag_msg: family, state, timer, retrans; sockid (sport, dport big-endian first);
# expires, rqueue, wqueue, uid, inode
_MESSAGE = struct.Struct("=BBBB2s2s44sIIIII")
_BUFFER = 1 << 16
_MAX_BYTES = 8 << 20  # what one dump may read: far more than any listening table


def listening_inodes(port: int) -> set[int] | None:
    """The inodes of the sockets listening on TCP `port` (v4 and v6); None if the
    kernel cannot be asked this way."""
    inodes: set[int] = set()
    family = getattr(socket, "AF_NETLINK", None)
    if family is None:  # not Linux
        return None
    try:
        sock = socket.socket(family, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG)
    except OSError:
        return None
    with sock:
        sock.settimeout(5.0)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
            found = _dump(sock, family, seq, port)
            if found is None:
                return None
            inodes |= found
    return inodes


def _dump(sock: socket.socket, family: int, seq: int, port: int) -> set[int] | None:
    request = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN, b"\0" * 48)
    header = _HEADER.pack(
        _HEADER.size + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0
    )
    try:
        sock.send(header + request)
    except OSError:
        return None
    inodes: set[int] = set()
    read = 0
    while read < _MAX_BYTES:
        try:
            data = sock.recv(_BUFFER)
        except OSError:
            return None
        read += len(data)
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, kind, _, got_seq, _ = _HEADER.unpack_from(data, offset)
            if length < _HEADER.size:
                return None  # malformed: do not trust the rest
            if got_seq == seq:
                if kind == NLMSG_DONE:
                    return inodes
                if kind == NLMSG_ERROR:
                    return None
                if kind == SOCK_DIAG_BY_FAMILY and length >= _HEADER.size + _MESSAGE.size:
                    fields = _MESSAGE.unpack_from(data, offset + _HEADER.size)
                    state, sport, inode = fields[1], fields[4], fields[11]
                    if state == TCP_LISTEN and int.from_bytes(sport, "big") == port:
                        inodes.add(inode)
            offset += (length + 3) & ~3  # NLMSG_ALIGN
    return None
