"""A child's stdout and stderr while it is started: its own file, a captured pipe,
or a pipe tee'd through the launcher to a file or to the launcher's own streams
(docs/launcher.md, "Tee'd output"); what is given to the child and what is kept.
"""

from __future__ import annotations

import os

from ._exec import close_all
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
    if stdout is not None or stderr is not None:
        return stdout == stderr
    return own.one_file
