"""The sockets listening on a port, from the kernel's sock_diag (issue 38, item 4):
the same answer as /proc/net/tcp, at any number of TIME_WAIT sockets."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from actors._launcher import _procfs, _sock_diag
from actors._shell._ports import foreign_holder
from tests.support.time_wait import count_time_wait, make_time_wait


@pytest.fixture
def listeners() -> Iterator[tuple[int, list[socket.socket]]]:
    v4 = socket.socket()
    v4.bind(("127.0.0.1", 0))
    v4.listen()
    port = v4.getsockname()[1]
    v6 = socket.socket(socket.AF_INET6)
    v6.bind(("::1", port))
    v6.listen()
    try:
        yield port, [v4, v6]
    finally:
        v4.close()
        v6.close()


def _inode(sock: socket.socket) -> int:
    return os.stat(f"/proc/self/fd/{sock.fileno()}").st_ino


def test_sock_diag_finds_the_v4_and_v6_listeners_as_proc_does(
    listeners: tuple[int, list[socket.socket]],
) -> None:
    port, socks = listeners
    expected = {_inode(s) for s in socks}
    assert _sock_diag.listening_inodes(port) == expected
    assert _procfs.listening_inodes_from_proc(port) == expected


def test_a_connected_socket_on_the_port_is_not_a_listener(
    listeners: tuple[int, list[socket.socket]],
) -> None:
    port, socks = listeners
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = socks[0].accept()
    try:
        assert _sock_diag.listening_inodes(port) == {_inode(s) for s in socks}
        assert _sock_diag.listening_inodes(client.getsockname()[1]) == set()
    finally:
        client.close()
        accepted.close()


def test_a_closed_port_has_no_listener() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]  # bound, not listening
    try:
        assert _sock_diag.listening_inodes(port) == set()
    finally:
        probe.close()


def test_the_owner_is_found_among_20000_time_wait_sockets(
    listeners: tuple[int, list[socket.socket]],
) -> None:
    port, _ = listeners
    make_time_wait(20_000)
    assert count_time_wait() >= 15_000  # the host is as busy as the trial's CI host
    assert foreign_holder(port, [os.getpid()]) is None  # ours
    other = foreign_holder(port, [1])
    assert other is not None and f"held by pid {os.getpid()}" in other
