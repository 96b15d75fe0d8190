"""A child's log file as its one writer keeps it: rotated at a line's end, reopened
after an external move, each line stamped if asked (docs/logs.md).

A `LogFile` sits under the `_tee.Sink` of a regular file that a child's tee'd
streams go to; the sink is the only writer of that path in the launcher, so the
renames of a rotation race no other writer of ours. Writes are plain writes to a
regular file, as the sink's: they never wait on a reader.

With rotation or stamps on, only whole lines are written: the unfinished end of
what a pipe gave is held (at most LINE_HOLD bytes, or log_max_bytes if smaller)
until its line ends, the pipe closes (the line is ended with a newline then), or
it outgrows the hold (then it is written as it is, and the line may be split
across files).

Reopens and rotations go through `_safe_open` (no symlink followed, regular files
of one link only, renames within the folder's fd, a folder others write used with
the child's rights). One that is refused leaves the file held as it is, and says
why in a line of its own there.
"""

from __future__ import annotations

import contextlib
import os
import time

from ._safe_open import Folder, Rights, UnsafeFile, open_folder, open_output

LINE_HOLD = 64 * 1024  # the longest unfinished line held back for its end


class LogPolicy:
    """How one log file is kept: rotated past `max_bytes` (0: never) into `backups`
    older files, each line stamped with its UTC time if `stamps`."""

    __slots__ = ("backups", "max_bytes", "stamps")

    def __init__(self, max_bytes: int = 0, backups: int = 0, stamps: bool = False) -> None:
        self.max_bytes = max(0, max_bytes)
        self.backups = max(0, backups)
        self.stamps = stamps

    @property
    def active(self) -> bool:
        return bool(self.max_bytes or self.stamps)


def stamp(now: float | None = None) -> bytes:
    """UTC ISO 8601 with milliseconds, and a space: `2026-01-31T12:00:00.123Z `."""
    now = time.time() if now is None else now
    whole = int(now)
    millis = int((now - whole) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)).encode() + b".%03dZ " % millis


class LogFile:
    """The writing end of one child's log file (its fd belongs to the sink above)."""

    __slots__ = ("_held", "_line_start", "_pending", "fd", "path", "policy", "rights", "size")

    def __init__(self, path: str, fd: int, policy: LogPolicy, rights: Rights | None = None) -> None:
        self.path = os.path.abspath(path)  # the launcher's cwd moves with each start
        self.fd = fd
        self.policy = policy
        self.rights = rights
        self.size = _size(fd)
        self._held = bytearray()
        self._line_start = True  # the file's last byte ends a line (or it is empty)
        self._pending = False  # reopen once the line begun in this file ends

    def put(self, data: bytes) -> None:
        if not self.policy.active:
            if self._pending:  # a line begun before the move ends in its file
                end = data.find(b"\n")
                if end < 0:
                    self._write(data)
                    return
                self._write(memoryview(data)[: end + 1])
                self._swap()
                data = data[end + 1 :]
            self._write(data)
            return
        self._held += data
        end = self._held.rfind(b"\n")
        if end >= 0:
            lines = bytes(self._held[: end + 1])
            del self._held[: end + 1]
            self._write_lines(lines)
        hold = min(LINE_HOLD, self.policy.max_bytes or LINE_HOLD)
        if len(self._held) >= hold:  # no end in sight: written as it is
            part, self._held = bytes(self._held), bytearray()
            self._write_lines(part)

    def end_line(self) -> None:
        """A pipe that fed it closed: what it left unfinished is a line of its own."""
        if self._held:
            part, self._held = bytes(self._held) + b"\n", bytearray()
            self._write_lines(part)
        if self._pending:
            self._swap()

    def reopen(self) -> None:
        """Open the path anew (an external rotation moved it), between two lines: a
        line begun in the old file is finished there first."""
        if self._line_start or self.policy.active:  # whole lines only: at one's end now
            self._swap()
        else:
            self._pending = True

    def _swap(self) -> bool:
        """The path opened anew in place of the fd we hold (False: it cannot be; the
        old fd is kept)."""
        self._pending = False
        try:
            fd = open_output(self.path, self.rights)
        except (OSError, UnsafeFile) as e:
            self._note(e)
            return False
        self._take(fd)
        return True

    def _take(self, fd: int) -> None:
        old, self.fd = self.fd, fd
        with contextlib.suppress(OSError):
            os.close(old)
        self.size = _size(fd)
        self._line_start = True

    def _note(self, e: Exception) -> None:
        """Why the file could not be opened anew, in the one still held."""
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        text = f"[nannytree: cannot open {self.path} anew: {why}; writing on here]\n"
        self._write(("" if self._line_start else "\n").encode() + text.encode(errors="replace"))

    def _write_lines(self, data: bytes) -> None:
        policy = self.policy
        if policy.stamps:
            data = self._stamped(data)
        limit = policy.max_bytes
        if not limit:
            self._write(data)
            return
        pos, end = 0, len(data)
        while pos < end:
            room = limit - self.size
            if end - pos <= room:
                self._write(memoryview(data)[pos:])
                return
            cut = data.rfind(b"\n", pos, pos + room) + 1 if room > 0 else 0
            if cut:
                self._write(memoryview(data)[pos:cut])
                pos = cut
            elif not (self.size and self._line_start) and room > 0:
                # One line longer than a file may be (or begun past the hold): split.
                self._write(memoryview(data)[pos : pos + room])
                pos += room
            self._rotate()  # the next line (or the rest of this one) starts a new file

    def _stamped(self, data: bytes) -> bytes:
        mark = stamp()
        body, last = (data[:-1], b"\n") if data.endswith(b"\n") else (data, b"")
        out = body.replace(b"\n", b"\n" + mark) + last
        return mark + out if self._line_start else out

    def _write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        if not view:
            return
        self._line_start = view[-1] == 0x0A  # a line feed
        while view:
            try:
                n = os.write(self.fd, view)
            except OSError:
                return  # a full disk: lost, as the child's own write would be
            self.size += n
            view = view[n:]

    def _rotate(self) -> None:
        """file -> file.1 -> ... -> file.N (the oldest dropped); then a new file, all
        within the folder's fd."""
        name, backups = os.path.basename(self.path), self.policy.backups
        try:
            folder = open_folder(os.path.dirname(self.path), self.rights)
        except (OSError, UnsafeFile) as e:
            self._note(e)
            self.size = 0  # cannot rotate here: keep writing, try again a file later
            return
        try:
            with folder.acting():
                self._rename_all(folder, name, backups)
        finally:
            folder.close()

    def _rename_all(self, folder: Folder, name: str, backups: int) -> None:
        try:
            if backups == 0:
                folder.unlink(name)
            else:
                for i in range(backups - 1, 0, -1):
                    with contextlib.suppress(FileNotFoundError):
                        folder.rename(f"{name}.{i}", f"{name}.{i + 1}")
                folder.rename(name, f"{name}.1")
        except FileNotFoundError:
            pass  # moved away already (an external rotation not yet signalled)
        except OSError:
            self.size = 0
            return
        try:
            fd = folder.open(name)
        except (OSError, UnsafeFile) as e:
            self._note(e)
            self.size = 0
            return
        self._take(fd)


def _size(fd: int) -> int:
    try:
        return os.fstat(fd).st_size
    except OSError:
        return 0
