"""The sd_notify endpoint, with real processes speaking the protocol (no packages)."""

from __future__ import annotations

import os
import selectors
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from actors._shell._sd_notify import MAX_DATAGRAM, MAX_STATUS, Notification, NotifyEndpoint

SEND = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for message in {messages!r}:
    s.sendto(message, os.environ["NOTIFY_SOCKET"])
sys.stdin.read()  # stay in the tree until the test is done
"""

# A child that runs SEND in a grandchild, so the sender is a descendant.
GRANDCHILD = """
import subprocess, sys
code = {code!r}
subprocess.run([sys.executable, "-c", code], stdin=sys.stdin, check=True)
"""


def _python(code: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, **env}, stdin=subprocess.PIPE
    )


def _finish(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
    for proc in procs:
        proc.wait(timeout=10)


def _read_until(
    endpoint: NotifyEndpoint, count: int, *, refused: int = 0, timeout: float = 10.0
) -> list[Notification]:
    """Notifications until `count` accepted and `refused` refused, or the deadline."""
    notes: list[Notification] = []
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(endpoint.fileno(), selectors.EVENT_READ)
        while len(notes) < count or endpoint.refused_count < refused:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if sel.select(left):
                notes.extend(endpoint.read())
    return notes


@pytest.fixture
def endpoint() -> Iterator[NotifyEndpoint]:
    with NotifyEndpoint("web", watchdog=2.5) as ep:
        yield ep


def test_the_socket_is_private_and_close_removes_it():
    ep = NotifyEndpoint("web")
    mode = os.stat(ep.directory).st_mode
    assert stat.S_IMODE(mode) == 0o700 and os.stat(ep.directory).st_uid == os.getuid()
    assert stat.S_ISSOCK(os.stat(ep.path).st_mode)
    ep.close()
    assert not os.path.exists(ep.directory)
    ep.close()  # idempotent


def test_the_child_gets_notify_socket_and_the_watchdog_variables(endpoint):
    assert endpoint.env() == {"NOTIFY_SOCKET": endpoint.path, "WATCHDOG_USEC": "2500000"}
    assert endpoint.env(pid=42)["WATCHDOG_PID"] == "42"
    with NotifyEndpoint("quiet") as plain:
        assert plain.env() == {"NOTIFY_SOCKET": plain.path}


def test_the_main_process_is_heard_and_every_field_is_parsed(endpoint):
    messages = [
        b"STATUS=loading\nREADY=1\nX_UNKNOWN=1",
        b"WATCHDOG=1",
        b"RELOADING=1\nSTATUS=reloading \x1b[31m",
        b"STOPPING=1",
        b"WATCHDOG=trigger",
    ]
    child = _python(SEND.format(messages=messages), endpoint.env())
    endpoint.attach(child.pid)
    try:
        notes = _read_until(endpoint, 5)
    finally:
        _finish(child)
    assert notes == [
        Notification(child.pid, ready=True, status="loading"),
        Notification(child.pid, watchdog=True),
        Notification(child.pid, reloading=True, status="reloading \x1b[31m"),
        Notification(child.pid, stopping=True),
        Notification(child.pid, watchdog_trigger=True),
    ]
    assert endpoint.refused_count == 0


def test_a_descendant_is_heard_as_systemd_notify_access_all(endpoint):
    code = GRANDCHILD.format(code=SEND.format(messages=[b"READY=1"]))
    child = _python(code, endpoint.env())
    endpoint.attach(child.pid)
    try:
        (note,) = _read_until(endpoint, 1)
    finally:
        _finish(child)
    assert note.ready and note.pid != child.pid


def test_a_process_outside_the_tree_is_refused(endpoint):
    inside = _python("import sys; sys.stdin.read()", {})
    endpoint.attach(inside.pid)
    outsider = _python(SEND.format(messages=[b"READY=1"]), endpoint.env())
    try:
        notes = _read_until(endpoint, 0, refused=1)
    finally:
        _finish(inside, outsider)
    assert notes == []
    assert [(r.pid, r.why) for r in endpoint.refused] == [
        (outsider.pid, "sender is not a process of this child")
    ]


def test_nothing_is_heard_before_the_child_is_attached(endpoint):
    sender = _python(SEND.format(messages=[b"READY=1"]), endpoint.env())
    try:
        assert _read_until(endpoint, 0, refused=1) == []
    finally:
        _finish(sender)
    assert endpoint.refused_count == 1


def test_an_oversized_datagram_is_dropped_whole_and_the_next_is_heard(endpoint):
    big = b"READY=1\nSTATUS=" + b"x" * MAX_DATAGRAM
    child = _python(SEND.format(messages=[big, b"STATUS=ok"]), endpoint.env())
    endpoint.attach(child.pid)
    try:
        notes = _read_until(endpoint, 1, refused=1)
    finally:
        _finish(child)
    assert notes == [Notification(child.pid, status="ok")]
    assert "larger than 4096 bytes" in endpoint.refused[0].why


def test_a_long_status_is_cut_to_its_bound(endpoint):
    child = _python(SEND.format(messages=[b"STATUS=" + b"y" * 3000]), endpoint.env())
    endpoint.attach(child.pid)
    try:
        (note,) = _read_until(endpoint, 1)
    finally:
        _finish(child)
    assert note.status == "y" * MAX_STATUS


MAINPIDS = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"MAINPID={stranger}", os.environ["NOTIFY_SOCKET"])
s.sendto(b"MAINPID=%d" % os.getpid(), os.environ["NOTIFY_SOCKET"])
sys.stdin.read()
"""


def test_mainpid_outside_the_tree_is_refused_and_inside_it_is_honoured(endpoint):
    stranger = _python("import sys; sys.stdin.read()", {})
    # A grandchild names a stranger, then itself, as the main process.
    code = GRANDCHILD.format(code=MAINPIDS.format(stranger=stranger.pid))
    child = _python(code, endpoint.env())
    endpoint.attach(child.pid)
    try:
        notes = _read_until(endpoint, 2, refused=1)
    finally:
        _finish(child, stranger)
    first, second = notes
    assert first.main_pid is None
    assert second.main_pid == second.pid != child.pid
    assert endpoint.main_pid == second.pid
    assert [r.why for r in endpoint.refused] == [
        f"MAINPID={stranger.pid} is not a live process of this child"
    ]


def test_passed_file_descriptors_are_closed_unread(endpoint):
    endpoint.attach(os.getpid())  # the test itself is the child here
    r, w = os.pipe()
    before = len(os.listdir("/proc/self/fd"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.connect(endpoint.path)
        for _ in range(3):
            socket.send_fds(s, [b"READY=1"], [r, w])
    notes = _read_until(endpoint, 3)
    os.close(r)
    os.close(w)
    assert len(notes) == 3 and all(n.ready for n in notes)
    assert len(os.listdir("/proc/self/fd")) == before - 2


def test_a_sender_gone_before_the_read_is_refused_as_unverifiable(endpoint):
    inside = _python("import sys; sys.stdin.read()", {})
    endpoint.attach(inside.pid)
    code = SEND.format(messages=[b"READY=1"]).replace("sys.stdin.read()", "")
    quick = subprocess.run([sys.executable, "-c", code], env={**os.environ, **endpoint.env()})
    try:
        assert quick.returncode == 0
        assert _read_until(endpoint, 0, refused=1) == []
    finally:
        _finish(inside)
    assert endpoint.refused[0].why == "sender exited before its message could be checked"
