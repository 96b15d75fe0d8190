"""The fault proxy child (actors.testing.fault_proxy) between real children: an echo
server behind it, the test or a client child in front."""

from __future__ import annotations

import errno
import os
import socket
import time

import pytest

from actors import testing
from supervision import ChildSpec, EventKind, SupervisorSpec

READ = 0.5  # s a read waits before the test calls it timed out


def echo_server(port: int) -> None:
    """A TCP echo server: what comes in goes back."""
    import socketserver

    from actors import child

    class Echo(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            while data := self.request.recv(65536):
                self.request.sendall(data)

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True

    with Server(("127.0.0.1", port), Echo) as server:
        child.ready()
        server.serve_forever()


def echo_client(port: int) -> None:
    """Connect, have one line echoed, then wait for more and say how the wait ended."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"hello\n")
    print("echoed", s.recv(100), flush=True)
    try:
        got = s.recv(100)
    except OSError as e:
        print("client got", errno.errorcode.get(e.errno or 0, e), flush=True)
    else:
        print("client got", got or "EOF", flush=True)
    while True:
        time.sleep(3600)


def _tree(nanny_tree, client: bool = False):  # type: ignore[no-untyped-def]
    server_port = testing.free_port()
    proxy = testing.fault_proxy("db_proxy", upstream=("127.0.0.1", server_port))
    children = [
        ChildSpec(id="db", target=echo_server, args=(server_port,), ready="notify"),
        proxy.spec,
    ]
    if client:
        children.append(
            ChildSpec(id="client", target=echo_client, args=(proxy.port,), stdout="capture")
        )
    tree = nanny_tree(SupervisorSpec(id="app", children=children))
    return tree, proxy


def _connect(proxy: testing.FaultProxy) -> socket.socket:
    s = socket.create_connection(proxy.address, timeout=5)
    s.settimeout(5)
    return s


def _round_trip(s: socket.socket, data: bytes = b"ping\n") -> float:
    began = time.monotonic()
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        got += s.recv(65536)
    assert got == data
    return time.monotonic() - began


def _times_out(s: socket.socket) -> bool:
    s.settimeout(READ)
    try:
        s.recv(100)
    except TimeoutError:
        return True
    finally:
        s.settimeout(5)
    return False


def test_latency_grows_the_round_trip_by_at_least_the_latency(nanny_tree):
    _, proxy = _tree(nanny_tree)
    with _connect(proxy) as s:
        before = min(_round_trip(s) for _ in range(3))
        proxy.latency(150)  # each way
        both = min(_round_trip(s) for _ in range(3))
        proxy.heal()
        proxy.latency(150, jitter=20, direction="upstream")
        one = min(_round_trip(s) for _ in range(3))
        proxy.heal()
        after = min(_round_trip(s) for _ in range(3))
    # Lower bounds only: the added delay is certain, the rest is the host's load.
    assert both >= 0.300  # 150 ms each way
    assert one >= 0.130  # 150 ms less the jitter, one way only
    assert before < one < both and after < one  # one way adds half; heal takes it away


def test_bandwidth_caps_the_bytes_a_second(nanny_tree):
    _, proxy = _tree(nanny_tree)
    state = proxy.bandwidth(40_000, direction="downstream")
    assert state["toxics"]["downstream"]["bandwidth"] == 40_000
    assert state["toxics"]["upstream"]["bandwidth"] is None
    with _connect(proxy) as s:
        took = _round_trip(s, b"x" * 20_000)
    assert took >= 0.45  # 20,000 bytes at 40,000 a second


def test_partition_makes_reads_time_out_and_heal_delivers_what_was_held(nanny_tree):
    _, proxy = _tree(nanny_tree)
    with _connect(proxy) as s:
        _round_trip(s)
        proxy.partition()
        s.sendall(b"held\n")
        assert _times_out(s)
        with _connect(proxy) as new:  # a new connection is held too
            new.sendall(b"new\n")
            assert _times_out(new)
            proxy.heal()
            assert new.recv(100) == b"new\n"
        assert s.recv(100) == b"held\n"  # TCP would have retried it: it arrives


def test_a_partition_holds_a_bounded_amount_then_the_sender_waits(nanny_tree):
    _, proxy = _tree(nanny_tree)
    block = b"x" * (1 << 20)
    sent = 0
    with _connect(proxy) as s:
        _round_trip(s)  # an open connection: the proxy reads it
        proxy.partition()
        s.settimeout(1.0)  # a proxy that kept reading would take all 64 MiB at once
        with pytest.raises(TimeoutError):
            for _ in range(64):
                s.sendall(block)
                sent += len(block)
    # the proxy's 256 KiB and the kernel's socket buffers: far below what was offered
    assert sent < 32 << 20


def test_partition_with_refuse_refuses_new_connections_until_heal(nanny_tree):
    _, proxy = _tree(nanny_tree)
    assert proxy.partition(refuse=True)["refusing"] is True
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(proxy.address, timeout=5).close()
    proxy.heal()
    with _connect(proxy) as s:
        _round_trip(s)


def test_drop_throws_data_away_and_heal_does_not_bring_it_back(nanny_tree):
    _, proxy = _tree(nanny_tree)
    with _connect(proxy) as s:
        proxy.drop(direction="upstream")
        s.sendall(b"lost\n")
        assert _times_out(s)
        proxy.heal()
        _round_trip(s, b"found\n")  # only the new line comes back


def test_reset_gives_the_client_child_econnreset(nanny_tree):
    tree, proxy = _tree(nanny_tree, client=True)
    tree.wait_output("client", r"echoed b'hello\\n'", stream="stdout")
    assert proxy.status()["connections"] == 1
    proxy.reset()
    tree.wait_output("client", "client got ECONNRESET", stream="stdout")
    assert proxy.status()["connections"] == 0
    with _connect(proxy) as s:  # new connections go through
        _round_trip(s)


def test_the_proxy_is_a_child_of_the_tree_restarts_clean_and_leaves_nothing(nanny_tree):
    tree, proxy = _tree(nanny_tree)
    assert tree.child("db_proxy").state == "running"
    proxy.latency(100)
    pid = tree.kill("db_proxy")
    tree.wait_for(EventKind.CHILD_STARTED, "db_proxy", where=lambda e: e.pid != pid)
    assert proxy.status()["toxics"]["upstream"]["latency"] == 0.0  # a new process
    tree.stop()
    assert not os.path.exists(proxy.control)
    with pytest.raises(RuntimeError, match="fault proxy 'db_proxy' is not running"):
        proxy.status()
    folder = os.path.dirname(proxy.control)
    proxy.close()
    assert not os.path.exists(folder)


def test_bad_input_names_the_proxy_the_field_and_the_fix():
    with pytest.raises(TypeError, match=r"fault_proxy 'p': upstream=6379; expected \(host, port\)"):
        testing.fault_proxy("p", upstream=6379)  # type: ignore[arg-type]
    proxy = testing.fault_proxy("p", upstream=("127.0.0.1", 1))
    with pytest.raises(ValueError, match="direction='up'; expected one of both, upstream"):
        proxy.latency(10, direction="up")
    with pytest.raises(ValueError, match="latency=-1; expected milliseconds"):
        proxy.latency(-1)
    with pytest.raises(ValueError, match="bandwidth=0; expected a whole number"):
        proxy.bandwidth(0)
    proxy.close()
