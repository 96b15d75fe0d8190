"""Files a root tree opens for its children, opened so that nothing a child's user
(or another local user) controls is followed with the tree's rights
(docs/logs.md, "Whose rights").

A path is walked from `/` one folder at a time (`openat`, `O_NOFOLLOW`), each
folder held by its fd: a symlink is followed only where it sits in a folder that
no one but root and the tree's owner can write. The file is opened relative to
its folder's fd, `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`, then `fstat`: a regular
file with one link (a character device too, such as /dev/null, in a folder
only root and the owner write). Rotation renames within that folder's fd.

A folder that someone else can write (the child's own /var/log/app) is used
with the child's own uid, gid and groups (the launcher is single-threaded: it
switches its effective ids around the calls), as logrotate's
`su` does; for a child that runs with the tree's own rights it is refused.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import stat
from collections.abc import Iterator

OUTPUT_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_APPEND
    | os.O_NOFOLLOW
    | os.O_NONBLOCK
    | os.O_NOCTTY
    | os.O_CLOEXEC
)
_DIR_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_HOPS = 40  # symlinks followed in one path, as the kernel's ELOOP
HELD = 16  # folders `Folders` keeps open, the least recently used closed first
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symlink",
}


class UnsafeFile(OSError):
    """A file (or its folder) that will not be opened; the message says why and the fix
    (an OSError: where a file cannot be opened, this is one more reason)."""


class Rights:
    """The ids a child runs with: its files in a folder others write are used with them.
    (A plain class: `nannytree logs` imports this module, and dataclasses costs 14 ms.)"""

    __slots__ = ("gid", "groups", "uid")

    def __init__(self, uid: int, gid: int, groups: tuple[int, ...]) -> None:
        self.uid = uid
        self.gid = gid
        self.groups = groups

    def _key(self) -> tuple[int, int, tuple[int, ...]]:
        return (self.uid, self.gid, self.groups)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rights) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Rights(uid={self.uid}, gid={self.gid}, groups={self.groups})"


def owners() -> frozenset[int]:
    """Whose folders are trusted: root's and the tree owner's (ours)."""
    return frozenset({0, os.geteuid()})


def rights_for(uid: int, gid: int, groups: list[int] | tuple[int, ...]) -> Rights | None:
    """A child's rights, or None when it runs with ours (no user, or an owner's uid)."""
    if uid < 0 or uid in owners():
        return None
    if gid < 0:  # the child keeps our group and groups (_listeners.become): so do we
        return Rights(uid, os.getegid(), tuple(os.getgroups()))
    return Rights(uid, gid, tuple(groups))


def writer(st: os.stat_result, trusted: frozenset[int]) -> str | None:
    """Who other than root and the owner can add, swap or remove entries of a folder
    (None: no one). A sticky folder's entries are swapped by their owners only."""
    if st.st_uid not in trusted:
        return f"user {_user(st.st_uid)} (its owner)"
    if st.st_mode & stat.S_ISVTX:
        return None
    if st.st_mode & 0o002:
        return "every user"
    if st.st_mode & 0o020 and st.st_gid != 0:
        return f"group {_group(st.st_gid)}"
    return None


class Folder:
    """A folder held by its fd, and whose rights its entries are used with."""

    def __init__(
        self, path: str, fd: int, st: os.stat_result, foreign: str | None, rights: Rights | None
    ) -> None:
        self.path = path
        self.fd = fd
        self.stat = st
        self.foreign = foreign  # who else can write it (None: root and the owner only)
        self.rights = rights if foreign is not None else None
        self.sticky = foreign is None and bool(st.st_mode & 0o022)
        self._acting = False

    def open(self, name: str) -> int:
        """`name` in it for appending, checked (UnsafeFile, OSError)."""
        where = os.path.join(self.path, name)
        with self.acting():
            try:
                fd = os.open(name, OUTPUT_FLAGS, 0o644, dir_fd=self.fd)
            except OSError as e:
                raise _refusal(e, where) from None
        try:
            st = os.fstat(fd)
            trusted = None
            if self.sticky:  # anyone may add a file here: it must be of someone we trust
                trusted = owners() | ({self.rights.uid} if self.rights else set())
            problem = _file_problem(st, trusted, self.foreign is None)
            if problem:
                raise UnsafeFile(f"{where} is {problem}")
            if not stat.S_ISREG(st.st_mode):
                os.set_blocking(fd, True)  # a terminal, say: the child's writes wait
        except BaseException:
            os.close(fd)
            raise
        return fd

    def rename(self, old: str, new: str) -> None:
        with self.acting():
            os.rename(old, new, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        with self.acting():
            os.unlink(name, dir_fd=self.fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """The calls within made with the rights the folder is used with (switched
        once for them all). Single-threaded, so the ids are the process's for these
        calls only; the launcher's signal handlers only set flags."""
        rights = self.rights
        if rights is None or self._acting:
            yield
            return
        euid, egid, groups = os.geteuid(), os.getegid(), os.getgroups()
        self._acting = True
        try:
            os.setgroups(list(rights.groups))
            os.setegid(rights.gid)
            os.seteuid(rights.uid)
            yield
        finally:
            os.seteuid(euid)
            os.setegid(egid)
            os.setgroups(groups)
            self._acting = False


def open_folder(path: str, rights: Rights | None, *, reading: bool = False) -> Folder:
    """The folder at `path` (absolute), walked without following a symlink that
    someone else could have put there; UnsafeFile if its files may not be written
    with the rights at hand (unless only `reading`), OSError if it cannot be reached."""
    trusted = owners()
    fd = os.open("/", _DIR_FLAGS | os.O_DIRECTORY)
    st = os.fstat(fd)  # the folder held: each one's stat serves its own step and the next
    done = ""  # the path walked so far, for messages
    parts = [p for p in path.split("/") if p and p != "."][::-1]
    hops = 0
    try:
        while parts:
            name = parts.pop()
            nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            nst = os.fstat(nfd)
            if stat.S_ISDIR(nst.st_mode):
                os.close(fd)
                fd, st = nfd, nst
                done = f"{done}/{name}"
                continue
            os.close(nfd)
            if not stat.S_ISLNK(nst.st_mode):
                raise NotADirectoryError(20, "not a folder", f"{done}/{name}")
            here = writer(st, trusted)
            if here is not None:
                raise UnsafeFile(
                    f"{done}/{name} is a symlink in {done or '/'}, a folder {here} can "
                    "write: it is not followed; give the real folder's path"
                )
            link = os.readlink(name, dir_fd=fd)
            hops += 1
            if hops > _MAX_HOPS:
                raise OSError(40, "too many levels of symbolic links", path)
            parts += [p for p in link.split("/") if p and p != "."][::-1]
            if link.startswith("/"):
                os.close(fd)
                fd = os.open("/", _DIR_FLAGS | os.O_DIRECTORY)
                st = os.fstat(fd)
                done = ""
        foreign = writer(st, trusted)
        if foreign is not None and rights is None and not reading:
            raise UnsafeFile(
                f"folder {path} can be written by {foreign}, and the child runs with the "
                f"tree's own rights (uid {os.geteuid()}): what they put there would be "
                "followed; run the child as that user (user = ...), or make the folder "
                f"only root's to write (chown root: {path}; chmod go-w {path})"
            )
        return Folder(path, fd, st, foreign, rights)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def open_output(path: str, rights: Rights | None) -> int:
    """A child's output file opened for appending (created 0644 if absent), as the
    module says; UnsafeFile or OSError."""
    path = os.path.abspath(path)
    folder = open_folder(os.path.dirname(path), rights)
    try:
        return folder.open(os.path.basename(path))
    finally:
        folder.close()


class Folders:
    """The folders of children's files, walked once and held by fd: a restart's open
    of its file is then one openat and one fstat, not a walk (a later swap of a
    folder on the way redirects nothing). At most HELD are kept; `clear` (a reopen
    asked for) has the next open walk again."""

    def __init__(self, limit: int = HELD) -> None:
        self._limit = limit
        self._held: dict[tuple[str, Rights | None], Folder] = {}

    def __len__(self) -> int:
        return len(self._held)  # fds held

    def open_output(self, path: str, rights: Rights | None) -> int:
        """As the module's `open_output`, through a held folder when there is one."""
        path = os.path.abspath(path)
        where, name = os.path.split(path)
        key = (where, rights)
        folder = self._held.pop(key, None)
        if folder is not None:
            try:
                fd = folder.open(name)
            except UnsafeFile:
                self._held[key] = folder
                raise
            except OSError:
                folder.close()  # gone, or no longer ours to reach: walk again
            else:
                self._held[key] = folder  # the most recently used last
                return fd
        folder = open_folder(where, rights)
        try:
            fd = folder.open(name)
        except BaseException:
            folder.close()
            raise
        self._held[key] = folder
        while len(self._held) > self._limit:
            self._held.pop(next(iter(self._held))).close()
        return fd

    def clear(self) -> None:
        for folder in self._held.values():
            folder.close()
        self._held.clear()


def _file_problem(st: os.stat_result, trusted: frozenset[int] | None, ours: bool) -> str | None:
    kind = stat.S_IFMT(st.st_mode)
    if kind == stat.S_IFREG:
        if st.st_nlink != 1:
            return (
                f"a hard link ({st.st_nlink} names for one file): remove it, "
                "nannytree writes only a file of one name"
            )
        if trusted is not None and st.st_uid not in trusted:
            return (
                f"a file of user {_user(st.st_uid)} in a folder every user can add to: "
                "remove it or write elsewhere"
            )
        return None
    if kind == stat.S_IFCHR and ours:
        return None  # /dev/null and its kind, where only root and the owner can put them
    return f"{_KINDS.get(kind, 'not a regular file')}, not a regular file: remove it"


def _refusal(e: OSError, where: str) -> Exception:
    if e.errno == errno.ELOOP:
        return UnsafeFile(f"{where} is a symlink, not a regular file: not followed; remove it")
    if e.errno == errno.ENXIO:
        return UnsafeFile(f"{where} is a FIFO or a socket, not a regular file: remove it")
    return e


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def open_read(path: str) -> int:
    """A child's file for reading (`nannytree logs`): reached as `open_folder` walks,
    never through a symlink, never blocking on a FIFO, a regular file of one link
    (a hard link could be any file of root's); UnsafeFile or OSError."""
    path = os.path.abspath(path)
    folder = open_folder(os.path.dirname(path), None, reading=True)
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:
            fd = os.open(os.path.basename(path), flags, dir_fd=folder.fd)
        except OSError as e:
            raise _refusal(e, path) from None
    finally:
        folder.close()
    st = os.fstat(fd)
    problem = _file_problem(st, None, False)
    if problem:
        os.close(fd)
        raise UnsafeFile(f"{path} is {problem}")
    return fd


def output_problem(path: str, rights: Rights | None) -> str | None:
    """What `open_output` would refuse of `path` as it is now (for `nannytree
    check`), without opening it; None if nothing (a folder that cannot be reached
    is said elsewhere)."""
    path = os.path.abspath(path)
    try:
        folder = open_folder(os.path.dirname(path), rights)
    except UnsafeFile as e:
        return str(e)
    except OSError:
        return None
    try:
        st = os.stat(os.path.basename(path), dir_fd=folder.fd, follow_symlinks=False)
        trusted = owners() | ({rights.uid} if rights else set())
        sticky = folder.sticky
        ours = folder.foreign is None
    except OSError:
        return None
    finally:
        folder.close()
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symlink, not a regular file: not followed; remove it"
    problem = _file_problem(st, trusted if sticky else None, ours)
    return f"{path} is {problem}" if problem else None
