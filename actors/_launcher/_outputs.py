"""A child's stdout and stderr while it is started: its own file, a captured pipe,
a socket connected to journald (`_journal`), or a pipe tee'd through the launcher
to a file, the journal or the launcher's own streams (docs/launcher.md, "Tee'd
output"); what is given to the child and what is kept.
"""

from __future__ import annotations

import os

from ._exec import close_all
from ._journal import STDERR_PRIORITY, STDOUT_PRIORITY, JournalAbsent, identifier_of
from ._journal import connect as connect_journal
from ._launched import SpawnError
from ._logsink import LogPolicy
from ._protocol import Template
from ._safe_open import Folders, Rights, UnsafeFile, rights_for
from ._tee import Sink, Tee

_WHICH = {1: "stdout", 2: "stderr"}


def _open_file(path: str, which: str, rights: Rights | None, folders: Folders) -> int:
    """The child's output file, as _safe_open opens it (SpawnError naming it if not)."""
    try:
        return folders.open_output(path, rights)
    except UnsafeFile as exc:
        raise SpawnError(None, f"cannot open its {which} file {path!r}: {exc}") from None
    except OSError as exc:
        raise SpawnError(
            exc.errno,
            f"cannot open its {which} file {path!r}: {exc.strerror}; "
            "check that the directory exists and is writable",
        ) from None


class OwnStreams:
    """What the launcher's own stdout and stderr are, asked once: they do not change
    while it runs, and asking costs four syscalls a start (issue 36)."""

    def __init__(self) -> None:
        self.terminal = os.isatty(1) or os.isatty(2)
        try:
            out, err = os.fstat(1), os.fstat(2)
        except OSError:
            self.one_file = False
        else:
            self.one_file = (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


class Outputs:
    """A child's stdout and stderr while it is started: the fds it gets, the read ends
    of its captured and tee'd pipes, and where its tee'd streams go on to."""

    def __init__(self, own: OwnStreams) -> None:
        self.own = own
        self.captures: dict[int, int] = {}
        self.sinks: dict[int, Sink] = {}
        self.given: list[int] = []  # the child's ends: closed once it has them
        self.out_fd: int | None = None
        self.err_fd: int | None = None
        self.rights: Rights | None = None

    def open(self, tee: Tee, template: Template, teeing: bool) -> None:
        policy = LogPolicy(template.log_max_bytes, template.log_backups, template.log_timestamps)
        self.rights = rights_for(template.uid, template.gid, template.groups)
        # A rotated or stamped file is written by its sink alone, fds to spare or not.
        wanted = template.tee if teeing or policy.active else ()
        if template.stdout is None and template.stderr is None and self.own.terminal:
            # A terminal is left as it is: a program that sees a pipe there changes
            # (no colours, stdout buffered in blocks), and the user reads it anyway.
            wanted = ()
        if wanted and _one_destination(template.stdout, template.stderr, self.own):
            # Both streams go to one file: through two pipes their order would be
            # lost, so the child gets one pipe on both, read (and kept) as stderr.
            self.err_fd = self._open(tee, template.stderr, 2, True, policy)
            if self.err_fd is not None:
                self.out_fd = self.err_fd
                return
        self.out_fd = self._open(tee, template.stdout, 1, 1 in wanted, policy)
        self.err_fd = self._open(tee, template.stderr, 2, 2 in wanted, policy)

    def _open(
        self, tee: Tee, path: str | None, stream: int, teed: bool, policy: LogPolicy
    ) -> int | None:
        if path == "capture":
            return self._pipe(stream)
        identifier = identifier_of(path)
        if identifier is not None:
            return self._journal(tee, identifier, stream, teed)
        if not teed:
            if path is None:
                return None
            return self._give(_open_file(path, _WHICH[stream], self.rights, tee.folders))
        if path is None:
            inherited = tee.inherited(stream)
            if inherited is None:
                return None  # we have no such stream to pass it on to: as without a tee
            try:
                write_end = self._pipe(stream)
            except OSError:  # no fd for the pipe: never a failed start for want of a tee
                return None
            sink = inherited
        else:
            which = _WHICH[stream]
            try:
                write_end = self._pipe(stream)
            except OSError:
                return self._give(_open_file(path, which, self.rights, tee.folders))
            rights, folders = self.rights, tee.folders
            sink = tee.file(path, lambda: _open_file(path, which, rights, folders), policy, rights)
        sink.attach()
        self.sinks[stream] = sink
        return write_end

    def _journal(self, tee: Tee, identifier: str, stream: int, teed: bool) -> int:
        """The child's end of its journal stream: the connected socket itself, or,
        for a tee'd stream (stderr: its tail explains an exit), a pipe the launcher
        reads and writes on to that socket."""
        which = _WHICH[stream]
        priority = STDOUT_PRIORITY if stream == 1 else STDERR_PRIORITY
        try:
            fd = connect_journal(identifier, priority)
        except JournalAbsent as exc:
            raise SpawnError(exc.errno, f"cannot connect its {which}: {exc.strerror}") from None
        except OSError as exc:
            raise SpawnError(
                exc.errno, f"cannot connect its {which} to the journal: {exc.strerror or exc}"
            ) from None
        if not teed:
            return self._give(fd)
        try:
            write_end = self._pipe(stream)
        except OSError:  # no fd for the pipe: the socket itself, as without a tee
            return self._give(fd)
        sink = tee.journal(fd)
        sink.attach()
        self.sinks[stream] = sink
        return write_end

    def _pipe(self, stream: int) -> int:
        read_end, write_end = os.pipe()  # both close-on-exec; dup2 onto 1/2 clears it
        os.set_blocking(read_end, False)
        self.captures[stream] = read_end
        return self._give(write_end)

    def _give(self, fd: int) -> int:
        self.given.append(fd)
        return fd

    def close_given(self) -> None:
        close_all(self.given)
        self.given.clear()

    def abandon(self) -> None:
        """The start failed: nothing is kept."""
        self.close_given()
        close_all(self.captures.values())
        self.captures.clear()
        for sink in self.sinks.values():
            sink.release()
        self.sinks.clear()


def _one_destination(stdout: str | None, stderr: str | None, own: OwnStreams) -> bool:
    """Whether a child's stdout and stderr go to the same file: one path, or both
    the launcher's own, which are one file (`2>&1`)."""
    if stdout == "capture" or stderr == "capture":
        return False
    if identifier_of(stdout) is not None or identifier_of(stderr) is not None:
        return False  # a journal stream each: their own priorities
    if stdout is not None or stderr is not None:
        return stdout == stderr
    return own.one_file
