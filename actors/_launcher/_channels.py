"""What a child writes to the launcher: its control pipe (untrusted records, see
`_control`) and its captured or tee'd stdout and stderr (bytes, reported as `Output`;
a tee'd stream also goes on to its destination, a `_tee.Sink`)."""

from __future__ import annotations

import contextlib
import os
import selectors
import time
from collections.abc import Callable

from . import _protocol, _wire
from ._control import ChildFailed, ChildHeartbeat, ChildReady
from ._launched import Launched
from ._protocol import ChannelClosed, Heartbeat, Output, Ready
from ._record import Record
from ._tee import Sink


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
        self._paused: dict[int, Launched] = {}  # fd -> its child, while its sink is full

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

    # -- captured and tee'd output ---------------------------------------------------

    @property
    def paused(self) -> int:
        """Pipes not read while their destination is full (not in the selector)."""
        return len(self._paused)

    def listen_output(self, child: Launched) -> None:
        for stream, fd in child.captures.items():
            self._listen(child, stream, fd)

    def _listen(self, child: Launched, stream: int, fd: int) -> None:
        self._sel.register(fd, selectors.EVENT_READ, lambda mask: self.read_output(child, stream))

    def read_output(self, child: Launched, stream: int, *, drain: bool = False) -> None:
        """Report what the child wrote (and pass a tee'd stream on to its destination):
        a chunk; or, at its exit (`drain`), all there is, whatever the destination holds."""
        fd = child.captures.get(stream)
        if fd is None:
            return
        sink = child.sinks.get(stream)
        if sink is not None and sink.full and not drain:
            self._pause(child, stream, fd, sink)  # its child blocks, as on a slow terminal
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
                if sink is not None:
                    sink.put(data)
                if drain:
                    continue
                return
            if data is None and not drain:
                return
            # EOF, or (when draining at the exit) nothing more for now: stop listening.
            self._close_output(child, stream, fd)
            return

    def drain_output(self, child: Launched) -> None:
        """What a child that ended wrote last, then its pipes closed."""
        for stream in list(child.captures):
            self.read_output(child, stream, drain=True)

    def _close_output(self, child: Launched, stream: int, fd: int) -> None:
        if self._paused.pop(fd, None) is None:
            with contextlib.suppress(KeyError):  # a standby's, never listened to
                self._sel.unregister(fd)
        os.close(fd)
        del child.captures[stream]
        sink = child.sinks.pop(stream, None)
        if sink is not None:
            sink.release()

    def _pause(self, child: Launched, stream: int, fd: int, sink: Sink) -> None:
        self._sel.unregister(fd)
        self._paused[fd] = child
        sink.when_room(lambda: self._resume(child, stream, fd))

    def _resume(self, child: Launched, stream: int, fd: int) -> None:
        if self._paused.get(fd) is child and child.captures.get(stream) == fd:
            del self._paused[fd]
            self._listen(child, stream, fd)
