"""What a child writes to the launcher: its control pipe (untrusted records, see
`_control`) and its captured stdout and stderr (bytes, reported as `Output`)."""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable

from . import _protocol, _wire
from ._control import ChildFailed, ChildHeartbeat, ChildReady
from ._launched import Launched
from ._protocol import ChannelClosed, Heartbeat, Output, Ready
from ._record import Record


class Channels:
    """Reads each child's pipes as the loop's selector says they are readable.

    `running(pid)` tells a child from a standby: a standby's target runs only
    after "go", so what it says before is not reported.
    """

    def __init__(
        self,
        sel: selectors.BaseSelector,
        report: Callable[[Record], None],
        running: Callable[[int], bool],
    ) -> None:
        self._sel = sel
        self._report = report
        self._running = running

    # -- the control pipe -----------------------------------------------------------

    def listen_control(self, child: Launched) -> None:
        if child.control_fd is not None:
            self._sel.register(
                child.control_fd, selectors.EVENT_READ, lambda mask: self.read_control(child)
            )

    def read_control(self, child: Launched) -> None:
        fd = child.control_fd
        if fd is None:
            return
        try:
            values, eof = _wire.read_available(fd, child.decoder)
            for value in values:
                record = _protocol.decode(value, _protocol.CHILD_RECORDS)
                if isinstance(record, ChildReady):
                    if self._running(child.pid):
                        self._report(Ready(child.pid))
                elif isinstance(record, ChildFailed):
                    child.error = _protocol.child_failure(record)
                elif isinstance(record, ChildHeartbeat):
                    now = time.monotonic()
                    if self._running(child.pid) and now - child.beat >= _protocol.HEARTBEAT_EVERY:
                        child.beat = now
                        self._report(Heartbeat(child.pid))
        except _wire.WireError as e:
            self.close_control(child)
            self._report(ChannelClosed(child.pid, f"its control pipe carried {e}"))
            return
        if eof:
            self.close_control(child)

    def close_control(self, child: Launched) -> None:
        if child.control_fd is not None:
            self._sel.unregister(child.control_fd)
            os.close(child.control_fd)
            child.control_fd = None

    # -- captured output ---------------------------------------------------------------

    def listen_output(self, child: Launched) -> None:
        for stream, fd in child.captures.items():
            self._sel.register(
                fd, selectors.EVENT_READ, lambda mask, s=stream: self.read_output(child, s)
            )

    def read_output(self, child: Launched, stream: int, *, drain: bool = False) -> None:
        fd = child.captures.get(stream)
        if fd is None:
            return
        while True:
            try:
                data = os.read(fd, _protocol.OUTPUT_CHUNK)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data:
                self._report(Output(child.pid, stream, data))
                if drain:
                    continue
                return
            if data is None and not drain:
                return
            # EOF, or (when draining at the exit) nothing more for now: stop listening.
            self._sel.unregister(fd)
            os.close(fd)
            del child.captures[stream]
            return

    def drain_output(self, child: Launched) -> None:
        """What a child that ended wrote last, then its captures closed."""
        for stream in list(child.captures):
            self.read_output(child, stream, drain=True)
