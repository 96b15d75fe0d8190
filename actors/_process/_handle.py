"""`ChildProcess`: one child the launcher started, as the host sees it.

The launcher client's reader thread sets its state from the launcher's reports
(its exit, readiness, a new main process, output); its owner (a worker) reads it
from its own thread, and waits on it. A successor started in its place ahead of
the core's decision (docs/acting-ahead.md) hangs on it until its owner takes it.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Callable

from .._launcher._procfs import is_alive
from .._runtime._flag import Flag
from ._port import OUTPUT_LIMIT, Note, ProcessExit

log = logging.getLogger("nannytree")

_BIRTHS = threading.Lock()  # a successor's birth against its abandonment
# An OutputTail's buffer against its total (a reader sees both or neither move), and
# the making of its Condition; held for no longer.
_OUTPUT = threading.Lock()


class OutputTail:
    """What a child's captured or tee'd streams said: the last OUTPUT_LIMIT bytes of
    each, and how many in all. Written by one thread (the launcher's reader); read and
    waited for anywhere. The Condition is made only when somebody waits (most children
    are never waited on for output: docs/scale.md counts the objects per child)."""

    __slots__ = ("_bufs", "_ended", "_totals", "_woken")

    def __init__(self) -> None:
        self._bufs: dict[int, bytearray] = {}
        self._totals: dict[int, int] = {}
        self._ended = False
        self._woken: threading.Condition | None = None

    def append(self, stream: int, data: bytes) -> None:
        with _OUTPUT:
            buf = self._bufs.setdefault(stream, bytearray())
            buf += data
            if len(buf) > OUTPUT_LIMIT:
                del buf[: len(buf) - OUTPUT_LIMIT]
            self._totals[stream] = self._totals.get(stream, 0) + len(data)
        self._wake()

    def end(self) -> None:
        """Nothing more will come: its process ended (its last words came before)."""
        with _OUTPUT:
            self._ended = True
        self._wake()

    def _wake(self) -> None:
        woken = self._woken
        if woken is not None:
            with woken:
                woken.notify_all()

    def tail(self, stream: int) -> bytes:
        with _OUTPUT:
            return bytes(self._bufs.get(stream, b""))

    def since(self, stream: int, offset: int) -> tuple[bytes, int]:
        with _OUTPUT:
            buf = self._bufs.get(stream)
            total = self._totals.get(stream, 0)
            if buf is None or offset >= total:
                return b"", total
            kept = total - len(buf)  # the total offset of buf[0]
            return bytes(buf[max(0, offset - kept) :]), total

    def wait(self, stream: int, offset: int, timeout: float) -> bool:
        with _OUTPUT:
            if self._woken is None:
                self._woken = threading.Condition()
            woken = self._woken
        with woken:
            woken.wait_for(
                lambda: self._totals.get(stream, 0) > offset or self._ended, max(0.0, timeout)
            )
        return self._totals.get(stream, 0) > offset


class ChildProcess:
    """A started child. Its state is set by the launcher's reader thread; read it anywhere.

    `notify(process, note)`, if given, is called on the reader thread once the
    child exited (after `exit` is set), when its control channel was closed, and, on
    a successor, once its pid is known or that it never comes ("born"): keep it
    cheap (tell an actor).
    """

    def __init__(self, pid: int, notify: Callable[[ChildProcess, Note], None] | None) -> None:
        self.pid = pid
        self.pgid = pid
        self._forked_main = False  # its main process is one its first process forked
        self._born = Flag()  # its pid is known (or it will never have one: pid 0)
        if pid:
            self._born.set()
        self._abandoned = False  # nobody waits for its birth any more: kill it then
        self._let_go = False  # its owner is done with it: a successor announced now is killed
        self._exit: ProcessExit | None = None
        self._ready = False
        self._exited = Flag()
        self._ready_or_exited = Flag()
        self._notify = notify
        self._output = OutputTail()
        self.channel_note = ""
        # The child the launcher started in this one's place (an armed exit), if any.
        self.successor: ChildProcess | None = None
        self.last_beat = 0.0  # monotonic time of its last heartbeat (a Python child's)

    def take_successor(self) -> ChildProcess | None:
        """(Its owner, done with it.) The child started in its place, if one was; one
        announced from now on is killed by the reader, unseen by anybody."""
        with _BIRTHS:
            self._let_go = True
            return self.successor

    def _announce_successor(self) -> ChildProcess | None:
        """(Reader thread.) A successor is being started: owned by whoever owns this
        one, or by nobody (None) once its owner let go of it."""
        with _BIRTHS:
            if not self._let_go:
                self.successor = ChildProcess.unborn(self._notify)
            return self.successor

    @classmethod
    def unborn(cls, notify: Callable[[ChildProcess, Note], None] | None) -> ChildProcess:
        """A successor the launcher is starting: its pid comes with `Respawned`."""
        return cls(0, notify)

    def wait_born(self, timeout: float | None) -> bool:
        """Whether it is a process (its pid known), waiting up to `timeout` for that.
        One that does not come in time is killed if it comes later."""
        self._born.wait(timeout)
        with _BIRTHS:
            if not self._born.is_set():
                self._abandoned = True
        return self.pid != 0

    def _born_as(self, pid: int) -> bool:
        """(Reader thread.) It was started as `pid`; False if nobody wants it now."""
        with _BIRTHS:
            self.pid = self.pgid = pid
            self._born.set()
            wanted = not self._abandoned
        self._tell("born")
        return wanted

    def _never_born(self) -> None:
        self._born.set()
        self._output.end()
        self._tell("born")

    def output(self, stream: int = 2) -> bytes:
        """What a captured or tee'd stream (1 stdout, 2 stderr) said: its last
        OUTPUT_LIMIT bytes."""
        return self._output.tail(stream)

    def output_since(self, stream: int, offset: int) -> tuple[bytes, int]:
        """What the stream said after its first `offset` bytes (as much as is kept), and
        how many bytes it said in all: pass that as the next `offset`."""
        return self._output.since(stream, offset)

    def wait_output(self, stream: int, offset: int, timeout: float) -> bool:
        """Whether the stream said more than `offset` bytes, waiting up to `timeout` s;
        the wait ends early once its exit is known (all it wrote came before)."""
        return self._output.wait(stream, offset, timeout)

    def _append_output(self, stream: int, data: bytes) -> None:
        self._output.append(stream, data)

    def __repr__(self) -> str:
        return f"<ChildProcess pid={self.pid} exit={self._exit}>"

    @property
    def exit(self) -> ProcessExit | None:
        return self._exit

    def wait(self, timeout: float | None = None) -> ProcessExit | None:
        self._exited.wait(timeout)
        return self._exit

    def send_signal(self, sig: int, *, group: bool = True) -> bool:
        """Signal the child's group (or the child alone); False once its exit was reported."""
        if self._exit is not None:
            return False
        if group and self._forked_main:
            return self._signal_current_group(sig)
        try:
            if group:
                os.killpg(self.pgid, sig)
            else:
                os.kill(self.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def _signal_current_group(self, sig: int) -> bool:
        """A daemon named by its pid file may leave its first process's group just
        after (nginx writes the file, then calls setsid): its group is the one it is
        in now, asked again if it moved between the asking and the signal. Never the
        old one: that id may be reused."""
        for _ in range(3):
            try:
                self.pgid = os.getpgid(self.pid)
                os.killpg(self.pgid, sig)
                return True
            except ProcessLookupError:
                continue  # it left that group (or is gone: then getpgid says so)
        return False

    def exit_watch(self) -> _PidfdWatch:
        """The OS's word that it is gone (its pidfd turns readable), ahead of the report."""
        return _PidfdWatch(self)

    def gone(self) -> bool:
        """Whether the process is dead (a zombie counts), asked of the OS, not the launcher.

        For a launcher that stopped answering: a pid is reused only after the
        launcher reaped it, and a reaped child would have been reported.
        """
        return not is_alive(self.pid)

    @property
    def ready(self) -> bool:
        return self._ready

    def wait_ready(self, timeout: float | None) -> bool:
        self._ready_or_exited.wait(timeout)
        return self._ready

    def _set_ready(self) -> None:
        if self._ready or self._exit is not None:
            return
        self._ready = True
        self._ready_or_exited.set()

    def _forked(self, main_pid: int, pgid: int) -> None:
        """Its first process handed over to `main_pid` (already re-keyed by the reader)."""
        self.pid, self.pgid = main_pid, pgid
        self._forked_main = True
        self._set_ready()
        self._tell("forked")

    def _set_exit(self, exit: ProcessExit) -> None:
        if self._exit is not None:
            return
        self._exit = exit
        self._exited.set()
        self._ready_or_exited.set()
        self._output.end()
        self._tell("exited")

    def _channel_closed(self, why: str) -> None:
        self.channel_note = why
        self._tell("channel_closed")

    def _tell(self, note: Note) -> None:
        if self._notify is not None:
            try:
                self._notify(self, note)
            except Exception:
                log.exception("nannytree: notifying the owner of pid %d failed", self.pid)


class _PidfdWatch:
    """A process's exit as the OS tells it (a pidfd), without waiting for the
    launcher's report of it; that report is the fallback where pidfds are missing."""

    def __init__(self, proc: ChildProcess) -> None:
        self._proc = proc
        self._fd: int | None = None
        self._gone = False
        try:
            self._fd = os.pidfd_open(proc.pid)
        except ProcessLookupError:
            self._gone = True  # exited and reaped already
        except (OSError, AttributeError):
            pass  # no pidfds here: the launcher's report it is

    def wait(self, timeout: float | None) -> bool:
        if self._gone or self._proc.exit is not None:
            return True
        if self._fd is None:
            return self._proc.wait(timeout) is not None
        poll = select.poll()
        poll.register(self._fd, select.POLLIN)
        self._gone = bool(poll.poll(None if timeout is None else timeout * 1000))
        return self._gone

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
