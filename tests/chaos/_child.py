"""The chaos run's worker: a Python target that waits for its instruction.

It opens a fifo and gives it its pid for a name in the run's directory, then
blocks reading one line: "exit CODE" or "raise". So a fault lands when the
runner says, on the process the runner looked up. It imports nothing of the
tree (not even actors.child), so that a restart costs a fork, not imports.
"""

from __future__ import annotations

import os
import sys
import time


class ChaosError(RuntimeError):
    """What a worker raises when told to (its exit's exc_type: tests.chaos._child.ChaosError)."""


def obey(directory: str, *extra: object) -> None:
    """Wait for one instruction on `directory`/<pid>, then carry it out."""
    path = os.path.join(directory, str(os.getpid()))
    os.mkfifo(path + ".new")
    # Read-write: the open never blocks. Renamed once open, so that the name appears
    # only when a writer's open finds a reader.
    fd = os.open(path + ".new", os.O_RDWR)
    os.rename(path + ".new", path)
    line = b""
    while not line.endswith(b"\n"):
        line += os.read(fd, 64)
    word, *rest = line.decode().split()
    if word == "exit":
        sys.exit(int(rest[0]))
    raise ChaosError("told to raise")


def listening(directory: str, pid: int, timeout: float) -> bool:
    """Wait up to `timeout` s until the worker `pid` waits for its instruction."""
    path = os.path.join(directory, str(pid))
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)  # a poll of the file's appearance, with a deadline
    return True


def tell(directory: str, pid: int, instruction: str) -> None:
    """Send `instruction` ("exit 3", "raise") to the worker with `pid`."""
    fd = os.open(os.path.join(directory, str(pid)), os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, instruction.encode() + b"\n")
    finally:
        os.close(fd)
