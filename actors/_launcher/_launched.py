"""What the launcher knows of one child it started, and how a start fails."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from . import _wire
from ._control import CHILD_FRAME
from ._protocol import Arm, Failure

if TYPE_CHECKING:
    from ._tee import Sink


class SpawnError(Exception):
    """A child could not be started: the errno (if any) and what to tell the operator."""

    def __init__(self, err: int | None, message: str) -> None:
        super().__init__(message)
        self.errno = err
        self.message = message


class Launched:
    """One child of the launcher, from its spawn to its reaping (or a warm standby)."""

    __slots__ = (
        "arm",
        "beat",
        "born",
        "captures",
        "control_fd",
        "decoder",
        "error",
        "follow",
        "follow_grace",
        "pgid",
        "pid",
        "pid_deadline",
        "pid_file",
        "pid_owner",
        "pidfd",
        "sinks",
        "started",
        "template",
        "token",
    )

    def __init__(self, pid: int, control_fd: int | None, template: int) -> None:
        self.pid = pid
        self.control_fd = control_fd
        self.template = template
        self.decoder = _wire.Decoder(CHILD_FRAME)
        self.error: Failure | None = None
        self.captures: dict[int, int] = {}  # stream (1 or 2) -> read end of its pipe
        self.sinks: dict[int, Sink] = {}  # a tee'd stream -> where it goes on to
        self.started = time.monotonic()
        self.arm: Arm | None = None
        self.pidfd = -1
        self.beat = 0.0  # when its last heartbeat was reported
        self.pgid = pid  # its first process leads its group
        # A command's token (NANNYTREE_CHILD_TOKEN in its environment): what marks the
        # processes of its tree that left its group and were re-parented to us.
        self.token = ""
        self.pid_file: str | None = None  # a forking daemon's pid file
        self.pid_owner = -1  # the uid it runs as (-1: ours): its pid file may be its own
        self.pid_deadline = 0.0
        self.follow = 0  # MAINPID=: the main process once this one exits
        self.follow_grace = 0.0  # how long to wait for a MAINPID= after its first exit
        # Just before its spawn, on the clock of /proc's start times: a process that
        # started later may be one it forked, even once its environment (and token)
        # is overwritten, as nginx and redis do to show their process titles.
        self.born = 0
