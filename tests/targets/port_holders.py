"""Children for tests/launcher/test_group_wait.py: a port held by a grandchild whose exit after
a SIGKILL takes milliseconds. Kept lean (a restart imports it again in each child, and
a slow import would hide the race it is there to show)."""

from __future__ import annotations

import errno
import mmap
import os
import signal
import socket
import time

BIND_PATIENCE = 5.0  # s a child retries its bind before it gives up


def bind_counting(port: int) -> tuple[socket.socket, int]:
    """A listening socket on 127.0.0.1:`port` (SO_REUSEADDR, as servers set it; never
    SO_REUSEPORT), and how many tries its bind took (1: the port was free)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tries, deadline = 1, time.monotonic() + BIND_PATIENCE
    while True:
        try:
            sock.bind(("127.0.0.1", port))
            break
        except OSError as e:
            if e.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            tries += 1
            time.sleep(0.001)
    sock.listen()
    return sock, tries


def grandchild_holds_port(port: int, megabytes: int, log: str) -> None:
    """Bind `port`, hand the socket to a grandchild (same process group) that holds
    `megabytes` of touched memory, and sleep. A SIGKILLed process releases its memory
    before it closes its files, so the grandchild keeps the port for milliseconds after
    a SIGKILL of the group (about 27 ms per GiB here). Appends "PID GRANDCHILD TRIES"
    to `log` once the grandchild holds both."""
    sock, tries = bind_counting(port)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        # A stop's signal is its parent's to act on (as nginx's master does for its
        # workers): this one goes only with the SIGKILL of its group.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.close(r)
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
        memory = mmap.mmap(-1, megabytes << 20, flags=flags)
        os.write(w, b"x")
        while memory:
            time.sleep(3600)
        os._exit(0)
    os.close(w)
    sock.close()  # the grandchild's now, alone
    os.read(r, 1)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, f"{os.getpid()} {pid} {tries}\n".encode())
    os.close(fd)
    while True:
        time.sleep(3600)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def linger_in_group_of(pid_file: str, ready_file: str) -> None:
    """Put a process of ours into the process group `pid_file` names (once it names
    one) and never reap it: SIGKILLed with that group, it stays our zombie, a member
    of the group for as long as we live. Touches `ready_file` once it is in."""
    deadline = time.monotonic() + BIND_PATIENCE
    while not (text := _read(pid_file)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no pid in {pid_file}")
        time.sleep(0.005)
    pgid = int(text)
    pid = os.fork()
    if pid == 0:
        while True:
            time.sleep(3600)
    os.setpgid(pid, pgid)
    open(ready_file, "w").close()
    while True:
        time.sleep(3600)
