"""Scripted test children (OTP's supervisor_1, for OS processes).

Module-level functions, so a child process imports them by reference: the
child gets the parent's sys.path. Sleeping here is the child's own behaviour,
not test synchronisation.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def exit_with(code: int) -> None:
    sys.exit(code)


def raise_value_error(message: str) -> None:
    raise ValueError(message)


def ignore_sigterm(marker: str | None = None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if marker:
        Path(marker).write_text("ignoring")
    sleep_forever()


def record_stop(path: str, name: str) -> None:
    """Run until stopped; on the way out append `name` to `path` (finally runs on SIGTERM).

    Use with ready="notify": it is ready once inside its try block.
    """
    from actors import child

    try:
        child.ready()
        sleep_forever()
    finally:
        with open(path, "a") as f:
            f.write(name + "\n")


def write_pid_then_sleep(path: str) -> None:
    Path(path).write_text(str(os.getpid()))
    sleep_forever()


def crash_after(seconds: float, code: int = 1) -> None:
    time.sleep(seconds)
    sys.exit(code)


def ready_after(seconds: float) -> None:
    from actors import child

    time.sleep(seconds)
    child.ready()
    sleep_forever()


def spawn_grandchildren(path: str) -> None:
    """Start a grandchild in our group and one that escapes it (setsid); write their pids."""
    import subprocess

    from actors import child

    inside = subprocess.Popen(["sleep", "300"])
    escaped = subprocess.Popen(["sleep", "301"], start_new_session=True)
    Path(path).write_text(f"{inside.pid} {escaped.pid}")
    child.ready()
    sleep_forever()


def leak_memory(step_mb: int) -> None:
    """Grow RSS by `step_mb` MiB every 50 ms, forever."""
    hoard = []
    while True:
        hoard.append(bytearray(step_mb * 1024 * 1024))
        for i in range(0, len(hoard[-1]), 4096):
            hoard[-1][i] = 1  # touch every page so it counts in RSS
        time.sleep(0.05)


def complain_and_exit(lines: int, code: int) -> None:
    for i in range(lines):
        print(f"complaint {i}", file=sys.stderr)
    sys.exit(code)


class Exploit:
    """A pickle that runs code when loaded: what a hostile child would send."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def send_pickle_to_launcher(marker: str, drop_to: int | None = None) -> None:
    """Write pickled frames that would run code in an unpickling reader, then run."""
    import pickle
    import struct

    from actors._launcher import _in_child

    if drop_to is not None:
        os.setgid(drop_to)
        os.setuid(drop_to)
    body = pickle.dumps(("ready", Exploit(marker)))
    fd = _in_child._control_fd
    assert fd is not None
    for header in (struct.pack("!Q", len(body)), struct.pack("!I", len(body))):
        try:
            os.write(fd, header + body)
        except OSError:
            break  # the launcher stopped listening: as it should
    sleep_forever()


def announce_huge_frame(megabytes: int) -> None:
    """Announce a 2 GiB frame on the control pipe, then send junk; then run."""
    import struct

    from actors._launcher import _in_child

    fd = _in_child._control_fd
    assert fd is not None
    junk = b"\xff" * (1 << 20)
    try:
        os.write(fd, struct.pack("!I", (1 << 31) - 1))
        for _ in range(megabytes):
            os.write(fd, junk)
    except OSError:
        pass  # the launcher closed the channel
    sleep_forever()


def raise_big(size: int) -> None:
    raise ValueError("x" * size)


def fork_escapee(path: str) -> None:
    """Fork a grandchild that leaves our session; write its pid; run."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        Path(path + ".tmp").write_text(str(os.getpid()))
        os.rename(path + ".tmp", path)
        while True:
            signal.pause()
    sleep_forever()


def beat_then_hang(beats: int) -> None:
    """Send `beats` heartbeats 50 ms apart (beats < 0: forever), then hang."""
    from actors import child

    n = 0
    while beats < 0 or n < beats:
        child.heartbeat()
        n += 1
        time.sleep(0.05)
    sleep_forever()


def ready_only_the_first_time(path: str) -> None:
    """Ready on its first start; every later start fails at once, before it is ready."""
    from actors import child

    flag = Path(path)
    if flag.exists():
        raise SystemExit(1)
    flag.write_text("started once")
    child.ready()
    sleep_forever()


def popen_escapee(path: str) -> None:
    """Start a grandchild in our group and one in a session of its own (`setsid sleep`);
    write both pids ("inside escaped") at once; run."""
    import subprocess

    inside = subprocess.Popen(["sleep", "300"])
    escaped = subprocess.Popen(["sleep", "301"], start_new_session=True)
    Path(path + ".tmp").write_text(f"{inside.pid} {escaped.pid}")
    os.rename(path + ".tmp", path)
    sleep_forever()


def retry_forever() -> None:
    """An app's own retry loop: every Exception is caught and the work goes on."""
    print("running", file=sys.stderr, flush=True)
    while True:
        try:
            time.sleep(0.05)
        except Exception:
            continue


def ready_then_crash(start: float, mean: float) -> None:
    """Ready after `start` seconds, then exit 1 after an exponential time of mean `mean`
    seconds, drawn from fresh entropy: forked children share the launcher's random state."""
    import random

    from actors import child

    time.sleep(start)
    child.ready()
    time.sleep(random.SystemRandom().expovariate(1.0 / mean))
    sys.exit(1)
