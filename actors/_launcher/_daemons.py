"""Programs that fork themselves into the background (systemd's Type=forking).

Running a program in the foreground is preferred; this is for those that cannot.
A child's *tree* is what nannytree may treat as that child:

- its main process (`root`) and every process whose parent chain reaches it;
- every process still in its process group (a child is spawned as the leader of
  its own group, so the group id is the root's pid, even after the root exited);
- every process whose environment carries the child's token
  (`NANNYTREE_CHILD_TOKEN`, see `child_token()`): what finds a daemon that left
  the group with setsid() and was re-parented away, as most daemons do.

The launcher, a subreaper, sees that tree as `ChildTree`: the processes
re-parented to it that are in the child's group, carry its token, or started
since its spawn. Nothing here trusts what a child wrote: a pid file is read
as `_safe_open` walks a path (no symlink another user could have put on the way,
none at the end), without blocking, bounded in size, a regular file of one link
owned by us or root, or by the child's own user in a folder only that user and
root can write (systemd's PIDFile= rule, so a `user =` daemon can write its
own); and the pid it names must be alive and in the child's tree
(docs/launcher.md, "Daemons that fork themselves").
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from ._launched import Launched
from ._procfs import ProcStat, children, environ, exiting, group_members, proc_stat
from ._safe_open import UnsafeFile, open_folder, owners

TOKEN_ENV = "NANNYTREE_CHILD_TOKEN"
PID_FILE_MAX = 64  # bytes: a pid and a newline, with room to spare
LEFT_BEHIND_MAX = 16  # processes named when a command daemonized itself
_PARENT_HOPS = 256  # a parent chain longer than this is not followed


def child_token() -> str:
    """A fresh token to put in a child's environment as TOKEN_ENV (one per start)."""
    return secrets.token_hex(16)


def token_of(pid: int) -> str | None:
    """The TOKEN_ENV value in the process's environment, if it has one."""
    prefix = f"{TOKEN_ENV}=".encode()
    for entry in environ(pid):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("ascii", "replace")
    return None


def has_token(pid: int, token: str) -> bool:
    """Whether the process's environment carries `token` as TOKEN_ENV."""
    return bool(token) and f"{TOKEN_ENV}={token}".encode() in environ(pid)


def in_tree(pid: int, root: int, *, token: str | None = None) -> bool:
    """True when `pid` belongs to the tree of the child whose main process is `root`
    (seen from anywhere: its parent chain, its group, its token)."""
    if pid <= 0 or root <= 0:
        return False
    st = proc_stat(pid)
    if st is None:
        return False
    if pid == root or st.pgid == root:
        return True
    current: ProcStat | None = st
    hops = 0
    while current is not None and current.ppid > 1 and hops < _PARENT_HOPS:
        if current.ppid == root:
            return True
        current, hops = proc_stat(current.ppid), hops + 1
    return token is not None and has_token(pid, token)


@dataclass(frozen=True)
class ChildTree:
    """One child's tree as its subreaper sees it, once its first process `root` exited."""

    reaper: int  # the subreaper its escaped processes are re-parented to (the launcher)
    root: int
    pgid: int
    born: int  # just before its spawn, on the clock of ProcStat.start
    token: str

    def holds(self, st: ProcStat) -> bool:
        """Whether a process re-parented to the reaper is of this tree."""
        return st.pgid == self.pgid or st.start >= self.born or has_token(st.pid, self.token)


class NotMainProcess(Exception):
    """The pid named cannot be the child's main process; `problem` says why."""

    def __init__(self, pid: int, problem: str) -> None:
        self.problem = f"names pid {pid}, which {problem}"
        super().__init__(self.problem)


def main_process(pid: int, tree: ChildTree, taken: Collection[int] = ()) -> ProcStat:
    """`pid`, checked as the child's new main process: alive, re-parented to the
    reaper (which can then reap it), not one of `taken`, and of the child's tree."""
    st = proc_stat(pid)
    if st is None or not st.alive:
        raise NotMainProcess(pid, "is not running")
    if st.ppid != tree.reaper or pid in taken or not tree.holds(st):
        raise NotMainProcess(pid, "is not a process this child started")
    return st


def left_behind(tree: ChildTree, known: Collection[int], groups: Collection[int]) -> list[int]:
    """Live processes a command left when its first process exited 0 (it daemonized
    itself): in its group, or re-parented to the reaper with its token or since its
    spawn. `known` are the reaper's own children, `groups` their process groups."""
    found: list[int] = []
    try:
        os.killpg(tree.pgid, 0)
        grouped = True
    except OSError:
        grouped = False
    for _ in range(3):  # again while an orphan is mid-exit: its children move to us
        unsettled = False
        for pid in children(tree.reaper):
            if pid in known:
                continue
            st = proc_stat(pid)
            if st is None:
                continue
            if not st.alive:
                unsettled = True
            elif (grouped and st.pgid == tree.pgid) or has_token(pid, tree.token):
                found.append(pid)
            elif st.start >= tree.born and st.pgid not in groups:
                found.append(pid)  # its token overwritten (setproctitle), not another's
            elif exiting(pid):
                # An intermediate of a double fork, exiting: its environment is gone,
                # but the daemon it forked is still its child for a moment.
                unsettled = True
                found.extend(p for p in children(pid) if has_token(p, tree.token))
        if found or not unsettled:
            break
    if grouped and not found:
        # Still in its group but not ours: its parent is another of its processes.
        found = [p for p in group_members(tree.pgid) if p != tree.root]
    return found[:LEFT_BEHIND_MAX]


class PidFileError(Exception):
    """The pid file is missing, unsafe or names no live process of the child's tree."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"pid file {path!r}: {problem}")


def read_pid_file(path: str | os.PathLike[str], owner: int = -1) -> int:
    """The pid a pid file holds, read as the module says; `owner` is the uid the
    child runs as (-1: ours), whose own file is taken from a folder of its own.

    Raises PidFileError saying what is wrong; FileNotFoundError is a PidFileError
    too (the daemon may not have written it yet: the caller retries until its
    start_timeout).
    """
    name = os.path.abspath(os.fspath(path))
    trusted = owners()
    try:
        folder = open_folder(os.path.dirname(name), None, reading=True)
    except FileNotFoundError:
        raise PidFileError(name, "is in a folder that does not exist") from None
    except OSError as e:
        raise PidFileError(name, f"cannot be reached ({e.strerror or e})") from None
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(os.path.basename(name), flags, dir_fd=folder.fd)
        folder_st = folder.stat
    except FileNotFoundError:
        raise PidFileError(name, "does not exist (yet)") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise PidFileError(
                name, "is a symbolic link; point pid_file at the file itself"
            ) from None
        raise PidFileError(name, f"cannot be opened ({e.strerror})") from None
    finally:
        folder.close()
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PidFileError(name, "is not a regular file")
        if info.st_nlink != 1:
            raise PidFileError(name, "is a hard link (a file of several names); remove it")
        if info.st_uid not in trusted:
            problem = _owner_problem(info.st_uid, owner, folder_st)
            if problem:
                raise PidFileError(name, problem)
        data = os.read(fd, PID_FILE_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > PID_FILE_MAX:
        raise PidFileError(name, f"holds more than {PID_FILE_MAX} bytes; expected one pid")
    text = data.strip()
    if not text.isdigit() or not 0 < int(text) < 1 << 22:
        shown = text[:20].decode("ascii", "backslashreplace")
        raise PidFileError(name, f"holds {shown!r}, not a process id")
    return int(text)


def pid_file_problem(path: str, owner: int) -> str | None:
    """What `read_pid_file` will refuse of a `user =` child's pid file for its folder,
    before the daemon writes it (for `nannytree check`); None if nothing."""
    name = os.path.abspath(path)
    try:
        folder = open_folder(os.path.dirname(name), None, reading=True)
    except OSError as e:
        return str(e) if isinstance(e, UnsafeFile) else None
    folder.close()
    st = folder.stat
    if owner < 0 or owner in owners():
        return None
    return _owner_problem(owner, owner, st)


def _owner_problem(uid: int, owner: int, folder: os.stat_result) -> str | None:
    """Why a pid file of `uid`'s is not taken (None: it is): only the child's own
    user's, in a folder no one but that user and root can write (systemd's rule)."""
    if uid != owner or owner < 0:
        return f"is owned by uid {uid}, not by us, root or the child's user"
    others = folder.st_mode & 0o002 or (folder.st_mode & 0o020 and folder.st_gid != 0)
    if folder.st_uid not in (0, os.geteuid(), owner) or others:
        return (
            "is the child's user's, in a folder others can write too; put it in a folder "
            "only that user and root can write (e.g. one of its own, chmod 0755)"
        )
    return None


def main_pid_from_file(
    path: str | os.PathLike[str], tree: ChildTree, taken: Collection[int] = (), owner: int = -1
) -> ProcStat:
    """The process a daemon's pid file names, checked as `main_process` does.

    Raises PidFileError when the file is unsafe, malformed, or names a process
    that is dead or not the child's (a stale file, another program's pid).
    """
    pid = read_pid_file(path, owner)
    try:
        return main_process(pid, tree, taken)
    except NotMainProcess as e:
        raise PidFileError(os.fspath(path), e.problem) from None


def daemonized_message(child: str, pids: list[int]) -> str:
    """What to tell the operator when a first process exited 0 but left a daemon behind."""
    shown = ", ".join(map(str, pids[:5]))
    return (
        f"child {child!r}: the program daemonized itself (its first process exited 0, "
        f"pid {shown} still runs); set pid_file=... to the file it writes its pid to, "
        "or run it in the foreground (preferred, e.g. nginx -g 'daemon off;')"
    )


class ForkingDaemons:
    """The launcher's commands that may fork themselves, until their main process is known.

    A command with a pid file, or that speaks sd_notify (its MAINPID= comes as
    `follow`), may hand over to a process it forked when its first process exits
    0. The launcher's part is passed in: `adopted(child, first_pid)` once the
    child's main process changed (it is re-keyed by then), `ended(child)` when
    its MAINPID= never came (it exited 0), `failed(child, why)` when its pid file
    named no main process in time.
    """

    def __init__(
        self,
        reaper: int,
        children: Mapping[int, Launched],
        adopted: Callable[[Launched, int], None],
        ended: Callable[[Launched], None],
        failed: Callable[[Launched, str], None],
    ) -> None:
        self.reaper = reaper
        self._children = children
        self._adopted = adopted
        self._ended = ended
        self._failed = failed
        # First process exited 0: first pid -> child, until its pid file names its
        # main process (or its pid_timeout passes), or its MAINPID= comes.
        self.waiting: dict[int, Launched] = {}
        # May fork itself, by token: what it forks is spared by the orphan scan
        # until it is settled.
        self.may_fork: dict[str, Launched] = {}

    def started(self, child: Launched) -> None:
        if child.pid_file is not None or child.follow_grace:
            self.may_fork[child.token] = child

    def settled(self, child: Launched) -> None:
        """The child ended: what it forked is no longer spared."""
        self.may_fork.pop(child.token, None)

    def tree(self, child: Launched) -> ChildTree:
        return ChildTree(self.reaper, child.pid, child.pgid, child.born, child.token)

    def left_behind(self, child: Launched) -> list[int]:
        """What a command whose first process exited 0 left running (`left_behind`)."""
        groups = {c.pgid for c in self._children.values()}
        return left_behind(self.tree(child), self._children, groups)

    def first_exited(self, child: Launched, code: int) -> bool:
        """Whether the exit of a command's first process hands over to its main process
        (MAINPID=, or a pid file still to be read) instead of ending the child."""
        if child.follow and self._adopt(child, child.follow):
            return True
        if code != 0 or child.pgid != child.pid:
            return False
        if child.pid_file is not None:
            self.waiting[child.pid] = child  # its pid file is looked for from now on
            return True
        if child.follow_grace and (child.follow or self.left_behind(child)):
            # It speaks sd_notify and left a process behind: its MAINPID= may be on
            # its way through the host (or came, and its process was not ours yet to
            # adopt: it is tried again). Wait a little for it before calling it gone.
            child.pid_deadline = time.monotonic() + child.follow_grace
            self.waiting[child.pid] = child
            return True
        return False

    def follow(self, pid: int, main_pid: int) -> None:
        """The child `pid` said MAINPID=`main_pid` (through the host)."""
        child = self._children.get(pid)
        if child is not None and child.token:
            child.follow = main_pid
        waiting = self.waiting.get(pid)
        if waiting is not None and waiting.pid_file is None:
            waiting.follow = main_pid  # tried again while waited for, if not ours yet
            if self._adopt(waiting, main_pid):
                del self.waiting[pid]

    def look(self) -> None:
        """Read the pid files of the daemons waited for; end the waits that ran out."""
        now = time.monotonic()
        for first, child in list(self.waiting.items()):
            if child.pid_file is None:  # waiting for a MAINPID=
                if child.follow and self._adopt(child, child.follow):
                    del self.waiting[first]
                    continue
                if now >= child.pid_deadline:
                    del self.waiting[first]
                    self._ended(child)
                continue
            try:
                st = main_pid_from_file(
                    child.pid_file, self.tree(child), self._children, child.pid_owner
                )
            except PidFileError as e:
                if now >= child.pid_deadline:
                    del self.waiting[first]
                    self._failed(child, f"pid file {child.pid_file!r} {e.problem}")
                continue
            del self.waiting[first]
            self._hand_over(child, st)

    def spares(self) -> Callable[[ProcStat], bool] | None:
        """What the orphan scan must leave alone now (None: nothing): a process that may
        be a daemon a child is still forking (by its token), and while a pid file is
        awaited, any that started since that child did (its token may be overwritten)."""
        if not self.may_fork:
            return None
        tokens = self.may_fork
        pending = [c.born for c in tokens.values() if c.pid_file is not None]
        after = min(pending) if pending else None

        def spared(st: ProcStat) -> bool:
            return token_of(st.pid) in tokens or (after is not None and st.start >= after)

        return spared

    def _adopt(self, child: Launched, main: int) -> bool:
        try:
            st = main_process(main, self.tree(child), self._children)
        except NotMainProcess:
            return False
        self._hand_over(child, st)
        return True

    def _hand_over(self, child: Launched, st: ProcStat) -> None:
        first = child.pid
        child.pid, child.pgid, child.follow = st.pid, st.pgid, 0
        child.pid_file = None  # found: its main process's exit is the child's exit
        self.settled(child)
        self._adopted(child, first)
