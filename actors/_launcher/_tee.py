"""Where a tee'd stream goes on to: the file its child's spec named, or the launcher's
own stdout/stderr (the host's, which the child would otherwise have inherited).

A tee'd stream (`Template.tee`) reaches the launcher through a pipe that `_channels`
reads and reports as `Output`; a `Sink` here writes the same bytes on, in the order
they were read, without ever blocking the loop (docs/launcher.md, "Tee'd output"):

- a regular file or a block device: a plain write, at once;
- anything else (a pipe, a socket, a terminal): at most PIPE_BUF bytes a write
  (atomic against the other writers of a pipe; cut after a line's end when one is
  in it), with RWF_NOWAIT where the kernel takes it (a pipe, a socket: a write that
  would block fails instead), else only when poll says it is writable. Never
  O_NONBLOCK: fds 1 and 2 share their file description with the host.

Each destination has one sink, so one writer. It holds at most SINK_LIMIT bytes
before `full` says so, and the reader stops reading the pipes that feed it (their
children block on their writes, as they would on a slow terminal) until it is
below SINK_RESUME. A child's exit is reported only once its pipe is drained, so
an exit may add a pipe's worth past the limit; past SINK_MAX such bytes are dropped,
and the destination is told how many.

A child's file has one sink however many children and incarnations write to it
(keyed by its path, open while a pipe feeds it): its `_logsink.LogFile` rotates it,
stamps its lines and reopens it after an external move (docs/logs.md).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import selectors
import stat
import time
from collections.abc import Callable, Collection

from ._logsink import LogFile, LogPolicy
from ._safe_open import Folders, Rights

SINK_LIMIT = 256 * 1024  # bytes waiting for a destination before its pipes are not read
SINK_RESUME = 64 * 1024  # ... until it is below this
SINK_MAX = 32 << 20  # what children's exits may add past SINK_LIMIT before bytes are dropped
WRITES_PER_TURN = 16  # PIPE_BUF writes per wake-up: one destination must not hog the loop
_CHUNK = select.PIPE_BUF
_NOT_NOWAIT = (errno.EOPNOTSUPP, errno.EINVAL)  # RWF_NOWAIT refused: a terminal, a device


class Sink:
    """One destination of tee'd bytes, written in the order they were put."""

    __slots__ = (
        "_broken",
        "_buf",
        "_dropped",
        "_feeds",
        "_nowait",
        "_plain",
        "_poll",
        "_tee",
        "_waiting",
        "_watched",
        "fd",
        "log",
        "owned",
        "path",
    )

    def __init__(self, tee: Tee, fd: int, *, owned: bool) -> None:
        self._tee = tee
        self.fd = fd
        self.owned = owned  # a file opened for one child (closed once done), not our fd 1/2
        mode = os.fstat(fd).st_mode
        self._plain = stat.S_ISREG(mode) or stat.S_ISBLK(mode)
        self._nowait = not self._plain and hasattr(os, "RWF_NOWAIT")
        self._buf = bytearray()
        self._feeds = 0  # the pipes that feed it
        self._waiting: list[Callable[[], None]] = []  # pipes to read again once there is room
        self._watched = False  # registered with the selector, to write when it is writable
        self._poll: select.poll | None = None
        self._dropped = 0
        self._broken = False
        self.log: LogFile | None = None  # a regular file of a child's: it keeps it
        self.path: str | None = None  # a child's file: its path, the sink's key

    @property
    def full(self) -> bool:
        return len(self._buf) >= SINK_LIMIT

    def attach(self) -> None:
        self._feeds += 1

    def release(self) -> None:
        """A pipe that fed it is closed; a child's own file is closed once written."""
        self._feeds -= 1
        if self.log is not None:
            self.log.end_line()
            self.fd = self.log.fd
        self._settle()

    def when_room(self, resume: Callable[[], None]) -> None:
        """Call `resume` once it is below SINK_RESUME (or broken)."""
        self._waiting.append(resume)

    def put(self, data: bytes) -> None:
        if self._broken:
            return
        if self.log is not None:
            self.log.put(data)
            self.fd = self.log.fd  # a rotation opened a new file
            return
        if self._plain:
            self._write_plain(data)
            return
        if len(self._buf) + len(data) > SINK_MAX:
            self._dropped += len(data)
            return
        if self._dropped:
            note = f"\n[nannytree: {self._dropped} bytes dropped: this output did not keep up]\n"
            self._buf += note.encode()
            self._dropped = 0
        self._buf += data
        if not self._watched:
            self._write_some(writable=False)

    def _write_plain(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:  # someone set O_NONBLOCK on it: wait like a pipe
                self._plain = False
                self._buf += view
                self._settle()
                return
            except OSError:
                return  # a full disk, a file too large: lost, as the child's write would be
            view = view[n:]

    def _chunk(self) -> int:
        """How much to write next: PIPE_BUF at most, cut after a line's end if one is in it."""
        if len(self._buf) <= _CHUNK:
            return len(self._buf)
        end = self._buf.rfind(b"\n", 0, _CHUNK)
        return end + 1 if end >= 0 else _CHUNK

    def _writable(self) -> bool:
        if self._poll is None:
            self._poll = select.poll()
            self._poll.register(self.fd, select.POLLOUT)
        return bool(self._poll.poll(0))

    def _write_some(self, *, writable: bool) -> None:
        """Write what the destination takes now (`writable`: the selector just said so)."""
        turns = WRITES_PER_TURN
        while self._buf and turns:
            if not (writable or self._nowait or self._writable()):
                break
            size = self._chunk()
            try:
                with memoryview(self._buf) as view, view[:size] as chunk:
                    if self._nowait:
                        n = os.pwritev(self.fd, [chunk], -1, os.RWF_NOWAIT)
                    else:
                        n = os.write(self.fd, chunk)
            except BlockingIOError:
                break
            except OSError as exc:
                if self._nowait and exc.errno in _NOT_NOWAIT:
                    self._nowait = False  # a terminal: poll decides
                    continue
                self._break()
                return
            del self._buf[:n]
            writable = False
            turns -= 1
        self._settle()

    def _on_writable(self, mask: int) -> None:
        self._write_some(writable=True)

    def _break(self) -> None:
        """The destination is gone (its reader exited, a terminal hung up): what
        comes for it is dropped; it is still reported to the host."""
        self._broken = True
        self._buf.clear()
        self._settle()

    def _settle(self) -> None:
        """Watch for writability while something waits; let the pipes feed it again
        once there is room; close a child's file once nothing more can come."""
        want = bool(self._buf)
        if want != self._watched and not self._tee.watch(self, want):
            self._plain = True  # it cannot be polled (/dev/null): it never blocks either
            data, self._buf = bytes(self._buf), bytearray()
            self._write_plain(data)
        if self._waiting and len(self._buf) < SINK_RESUME:
            waiting, self._waiting = self._waiting, []
            for resume in waiting:
                resume()
        if self.owned and self._feeds <= 0 and not self._buf:
            self._tee.close(self)

    def flush(self, deadline: float) -> None:
        """(At the launcher's exit.) Write what waits, blocking until `deadline` at most."""
        while self._buf and not self._broken:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            poll = select.poll()
            poll.register(self.fd, select.POLLOUT)
            if not poll.poll(left * 1000):
                return
            self._write_some(writable=True)


def own_stdio(reserved: Collection[int]) -> dict[int, int]:
    """Our stdout and stderr (stream -> fd), looked at before we open any fd: one
    that is closed, or was handed to us as something else, is no destination."""
    found = {}
    for stream in (1, 2):
        if stream in reserved:
            continue
        try:
            os.fstat(stream)
        except OSError:
            continue
        found[stream] = stream
    return found


class Tee:
    """The sinks: one over each of our stdout and stderr, shared by every child that
    inherits it, and one over each file opened for a child's tee'd stream."""

    def __init__(self, sel: selectors.BaseSelector, stdio: dict[int, int]) -> None:
        self._sel = sel
        self._stdio: dict[int, Sink] = {}
        for stream, fd in stdio.items():
            with contextlib.suppress(OSError):
                self._stdio[stream] = Sink(self, fd, owned=False)
        self._watched: set[Sink] = set()
        self._files: dict[str, Sink] = {}  # a child's file -> its one sink
        self._files_open = 0
        self.folders = Folders()  # the folders of children's files, held open

    @property
    def owned(self) -> int:
        """Open fds of children's files and their folders: the loop counts them
        against its limit."""
        return self._files_open + len(self.folders)

    @property
    def watched(self) -> int:
        """Sinks registered with the selector (counted there already)."""
        return len(self._watched)

    def inherited(self, stream: int) -> Sink | None:
        """The sink over our own stdout or stderr (None: we have none)."""
        return self._stdio.get(stream)

    def file(
        self, path: str, opener: Callable[[], int], policy: LogPolicy, rights: Rights | None
    ) -> Sink:
        """The sink over a child's file: the one already open for `path`, or one over
        the fd `opener` gives (it owns that fd from then on). The latest policy (and
        the rights its folder is used with) holds."""
        sink = self._files.get(path)
        if sink is None or sink.fd < 0:
            fd = opener()
            sink = Sink(self, fd, owned=True)
            sink.path = path
            self._files_open += 1
            if sink._plain and stat.S_ISREG(os.fstat(fd).st_mode):
                sink.log = LogFile(path, fd, policy, rights)
            self._files[path] = sink
        elif sink.log is not None:
            sink.log.policy = policy
            sink.log.rights = rights
        return sink

    def journal(self, fd: int) -> Sink:
        """A sink over a child's own journal stream (`_journal`); it owns `fd`."""
        sink = Sink(self, fd, owned=True)
        self._files_open += 1
        return sink

    def reopen(self) -> None:
        """Open every child's file anew by its path (an external rotation moved it);
        the next start walks its file's folders again too."""
        self.folders.clear()
        for sink in list(self._files.values()):
            if sink.log is not None and sink.fd >= 0:
                sink.log.reopen()
                sink.fd = sink.log.fd

    def watch(self, sink: Sink, want: bool) -> bool:
        """Have the selector say when `sink` is writable (or stop); False: it cannot."""
        if want:
            try:
                self._sel.register(sink.fd, selectors.EVENT_WRITE, sink._on_writable)
            except PermissionError:
                return False
            self._watched.add(sink)
        else:
            self._sel.unregister(sink.fd)
            self._watched.discard(sink)
        sink._watched = want
        return True

    def close(self, sink: Sink) -> None:
        if sink._watched:
            self.watch(sink, False)
        if sink.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(sink.fd)
            sink.fd = -1
            self._files_open -= 1
            if sink.path is not None and self._files.get(sink.path) is sink:
                del self._files[sink.path]

    def flush(self, timeout: float) -> None:
        """(At the launcher's exit.) Write what waits, for `timeout` s at most in all."""
        deadline = time.monotonic() + timeout
        for sink in list(self._watched):
            sink.flush(deadline)
