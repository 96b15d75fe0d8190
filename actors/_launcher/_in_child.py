"""What a Python child's own code calls: the body of the public `actors.child`.

The bootstrap (`_bootstrap`) sets this module's state in a child started by
nannytree; elsewhere it stays unset and every call is a harmless no-op.
"""

from __future__ import annotations

import contextlib
import os

from . import _wire
from ._control import ChildHeartbeat, ChildReady

# Set by actors._launcher._bootstrap in a child started by nannytree; None elsewhere.
_control_fd: int | None = None
_stop_requested: bool = False
_ready_sent: bool = False

_READY_FRAME = _wire.encode(ChildReady().pack())
_HEARTBEAT_FRAME = _wire.encode(ChildHeartbeat().pack())


def ready() -> None:
    """Tell the supervisor that this child has finished starting.

    Only children whose spec says ``ready="notify"`` wait for it; for the
    others it is harmless. Calling it again, or outside nannytree, does
    nothing.
    """
    global _ready_sent
    fd = _control_fd
    if fd is None or _ready_sent:
        return
    _ready_sent = True
    # One small write (< PIPE_BUF) is atomic, so no lock is needed; OSError means
    # the launcher is gone, which the supervisor learns another way.
    with contextlib.suppress(OSError):
        os.write(fd, _READY_FRAME)


def heartbeat() -> None:
    """Tell the supervisor this child is alive and working (its spec's `watchdog`).

    A child with `watchdog=SECONDS` that goes that long without calling it is
    stopped and restarted, with the reason `watchdog`. Cheap: call it from the
    child's main loop. Outside nannytree it does nothing.
    """
    fd = _control_fd
    if fd is None:
        return
    # Never blocks: a beat that does not fit in the pipe right now is not needed.
    with contextlib.suppress(OSError):
        os.write(fd, _HEARTBEAT_FRAME)


def stop_requested() -> bool:
    """True once this child received the supervisor's stop signal (SIGTERM).

    Always False outside nannytree.
    """
    return _stop_requested
