"""What a Python child and its launcher agree on: the control pipe and the crash signal.

A Python child writes these records on its control pipe (its fd number in
CONTROL_FD_ENV for a fresh interpreter); the launcher reads them as untrusted
input, in frames of at most CHILD_FRAME bytes, every text within its bound
(`_protocol.child_failure`). docs/launcher.md, "The protocol", has the streams.

Written once, here, for both sides, and lean: a fresh child imports this
before its target (with `python -X importtime`, `_protocol` costs a fresh
interpreter about 18 ms for its dataclasses and typing; this, under 1 ms).
"""

from __future__ import annotations

import signal

from ._record import Record

CONTROL_FD_ENV = "NANNYTREE_CONTROL_FD"
CHILD_FRAME = 64 * 1024  # what a child may send in one frame
# Bounds of what a child's error report may carry, in characters.
MAX_TYPE = 256
MAX_MESSAGE = 8 * 1024
MAX_TRACEBACK = 32 * 1024
# Sent to a Python child to make it raise an injected exception (actors._launcher._faults).
CRASH_SIGNAL = signal.SIGRTMIN + 7


class ChildReady(Record):
    """`actors.child.ready()` was called."""

    __slots__ = ()
    TAG = "child_ready"


class ChildHeartbeat(Record):
    """`actors.child.heartbeat()` was called (a watchdog's beat)."""

    __slots__ = ()
    TAG = "child_heartbeat"


class ChildFailed(Record):
    """The target raised: its type, message and traceback, each within its bound."""

    __slots__ = ("message", "traceback", "type")
    TAG = "child_failed"
    FIELDS = ("type", "message", "traceback")
    TYPES = (str, str, str)

    def __init__(self, type: str, message: str, traceback: str) -> None:
        self.type = type
        self.message = message
        self.traceback = traceback
