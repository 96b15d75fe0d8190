"""Starting children: a command exec'd, a Python target forked or run in a fresh
interpreter, a warm standby forked ahead; and runs of starts (chains).

`Starter` only makes processes and says what it made (a `Launched`); the loop
(`_loop`) watches them, reads them and reports them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import stat
import sys
import time
from collections.abc import Iterable
from typing import Any

from . import _bootstrap, _listeners, _wire
from ._confine import Confinement
from ._control import CONTROL_FD_ENV
from ._daemons import TOKEN_ENV, child_token
from ._launched import Launched, SpawnError
from ._listeners import ChildSetup
from ._logsink import LogPolicy
from ._procfs import boot_ticks
from ._protocol import Template
from ._safe_open import Folders, Rights, UnsafeFile, rights_for
from ._tee import Sink, Tee

CATCHABLE = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
# The directory holding the `actors` package (actors/_launcher/ is two below it),
# for fresh interpreters.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A fresh interpreter that becomes a user (argv: the package's folder, then main's).
_AS_USER = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from actors._launcher._bootstrap import main; main(sys.argv[2:])"
)
# Runs of starts cancelled or failed, remembered so their later spawns start nothing;
# a supervisor names a new chain per run, so only the recent ones matter.
FAILED_CHAINS = 1024
_WHICH = {1: "stdout", 2: "stderr"}


def close_all(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _which(command: str, path: str) -> str:
    """PATH lookup in the *child's* PATH (glibc's posix_spawnp uses ours)."""
    if "/" in command:
        return command
    denied = False
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory or ".", command)
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if os.access(candidate, os.X_OK):
            return candidate
        denied = True
    if denied:
        raise SpawnError(
            errno.EACCES,
            f"command {command!r} is on PATH but not executable; fix its permissions (chmod +x)",
        )
    raise SpawnError(
        errno.ENOENT,
        f"command {command!r} not found on PATH {path!r}; install it, give its full path, "
        "or set PATH in the child's env",
    )


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


class _Outputs:
    """A child's stdout and stderr while it is started: the fds it gets, the read ends
    of its captured and tee'd pipes, and where its tee'd streams go on to."""

    def __init__(self) -> None:
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
        if template.stdout is None and template.stderr is None and _a_terminal():
            # A terminal is left as it is: a program that sees a pipe there changes
            # (no colours, stdout buffered in blocks), and the user reads it anyway.
            wanted = ()
        if wanted and _one_destination(template.stdout, template.stderr):
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


def _a_terminal() -> bool:
    return os.isatty(1) or os.isatty(2)


def _one_destination(stdout: str | None, stderr: str | None) -> bool:
    """Whether a child's stdout and stderr go to the same file: one path, or both
    the launcher's own, which are one file (`2>&1`)."""
    if stdout == "capture" or stderr == "capture":
        return False
    if stdout is not None or stderr is not None:
        return stdout == stderr
    try:
        out, err = os.fstat(1), os.fstat(2)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


def _dup_actions(out_fd: int | None, err_fd: int | None) -> list[tuple[int, int, int]]:
    actions = []
    if out_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, out_fd, 1))
    if err_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, err_fd, 2))
    return actions


def _posix_spawn(
    path: str, argv: list[str], env: dict[str, str], out_fd: int | None, err_fd: int | None
) -> int:
    """A child in its own process group, with a fresh interpreter's signals (trap 5)."""
    return os.posix_spawn(
        path,
        argv,
        env,
        file_actions=_dup_actions(out_fd, err_fd),
        setpgroup=0,
        setsigdef=CATCHABLE,
        setsigmask=(),
    )


def _fork_exec(
    path: str,
    argv: list[str],
    env: dict[str, str],
    out_fd: int | None,
    err_fd: int | None,
    pid_env: str | None,
    setup: ChildSetup | None = None,
    confine: Confinement | None = None,
) -> int:
    """As _posix_spawn, but with the child's own pid in `pid_env` (known only after the
    fork), what `setup` asks (sockets from fd 3, another user) and what `confine` does
    (limits, no_new_privs). The exec's failure comes back on a close-on-exec pipe, as
    an OSError."""
    err_r, err_w = os.pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, CATCHABLE)
    try:
        pid = os.fork()
    except OSError:
        _bootstrap.unblock_all_signals()
        os.close(err_r)
        os.close(err_w)
        raise
    if pid == 0:
        try:
            signal.set_wakeup_fd(-1)
            for sig in CATCHABLE:
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(sig, signal.SIG_DFL)
            os.setpgid(0, 0)
            if out_fd is not None:
                os.dup2(out_fd, 1)
            if err_fd is not None:
                os.dup2(err_fd, 2)
            own = {pid_env: str(os.getpid())} if pid_env is not None else {}
            if confine is not None:  # limits first: raising a hard one needs root
                refused = confine.limit()
                if refused is not None:
                    os.write(err_w, b"L%d:%d" % refused)
                    os._exit(127)
            if setup is not None:
                try:
                    (err_w,) = setup.apply([err_w])
                except OSError as exc:
                    os.write(err_w, b"S%d" % (exc.errno or 0))  # not the exec: the setup
                    os._exit(127)
                own.update(setup.env(os.getpid()))
            if confine is not None:
                confine.seal()
            _bootstrap.unblock_all_signals()
            os.execve(path, argv, {**env, **own})
        except OSError as exc:
            os.write(err_w, str(exc.errno or 0).encode())
        finally:
            os._exit(127)
    _bootstrap.unblock_all_signals()
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # as the child does: a killpg may come before it runs
    os.close(err_w)
    try:
        said = os.read(err_r, 32)  # EOF at the exec: the pipe is close-on-exec
    finally:
        os.close(err_r)
    if said:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        if said.startswith(b"L") and confine is not None:
            which, _, why = said[1:].partition(b":")
            raise SpawnError(int(why), confine.refused(int(which), int(why)))
        if said.startswith(b"S") and setup is not None:
            code = int(said[1:]) if said[1:].isdigit() else errno.EIO
            raise SpawnError(
                code,
                f"cannot take on uid {setup.uid}, gid {setup.gid} and groups {setup.groups}"
                f" or place its sockets: {os.strerror(code)} (a container may forbid "
                "setgroups; run nannytree as real root, or drop user/group)",
            )
        code = int(said) if said.isdigit() else errno.EIO
        raise OSError(code, os.strerror(code))
    return pid


def _another_user(t: Template) -> bool:
    """Whether the child takes on other credentials: then a target is exec'd afresh,
    never forked from us, who hold every child's template (env, secrets)."""
    return t.uid >= 0 or t.gid >= 0


def _confinement(t: Template) -> Confinement | None:
    if not t.limits and not t.no_new_privs:
        return None
    return Confinement(t.limits, t.no_new_privs)


def _above(fd: int, setup: ChildSetup) -> int:
    """`fd` moved past the fds a child's sockets take from 3 (closed-on-exec still)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _listeners.FIRST_FD + len(setup.fds))
    os.close(fd)
    return moved


def _child_settings(t: Template) -> dict[str, Any]:
    """What a Python child needs of its template, as plain data."""
    return {"payload": t.payload, "env": t.env, "sys_path": t.sys_path, "argv": t.argv}


class Starter:
    """Makes the launcher's children from the host's templates, and its warm standbys
    (forked ahead, target unpickled, waiting for "go")."""

    def __init__(self, me: int, tee: Tee) -> None:
        self.me = me
        self.tee = tee
        self.templates: dict[int, Template] = {}
        self.standbys: dict[int, tuple[Launched, int]] = {}  # id -> (child, write end of "go")
        self.discarded: dict[int, Launched] = {}  # pid -> a standby killed, not yet reaped
        self._failed_chains: dict[int, None] = {}  # insertion-ordered, FAILED_CHAINS at most
        self._cwd = os.getcwd()
        self._paths: dict[tuple[str, str], str] = {}
        self.listeners = _listeners.Listeners()

    # -- runs of starts --------------------------------------------------------------

    def chain_failed(self, chain: int) -> bool:
        return chain in self._failed_chains

    def fail_chain(self, chain: int) -> None:
        """No later spawn of this run of starts may start anything."""
        self._failed_chains[chain] = None
        if len(self._failed_chains) > FAILED_CHAINS:
            del self._failed_chains[next(iter(self._failed_chains))]

    # -- children ----------------------------------------------------------------------

    def start(self, template_id: int, *, tee: bool = True) -> Launched:
        """Start a child from a template (its tee'd streams through the launcher, if
        `tee`: there are fds to spare); raises SpawnError."""
        template = self.templates.get(template_id)
        if template is None:
            raise SpawnError(None, "unknown template: the host forgot it")
        outputs = _Outputs()
        try:
            self._chdir(template.cwd)
            outputs.open(self.tee, template, tee)
            out_fd, err_fd = outputs.out_fd, outputs.err_fd
            control_fd = None
            token = ""
            born = boot_ticks() - 1  # a tick of margin: the clocks round apart
            setup = self._setup(template_id, template)
            confine = _confinement(template)
            if template.command is not None:
                token = child_token()
                pid = self._spawn_command(template, out_fd, err_fd, token, setup, confine)
            elif template.fresh or _another_user(template):
                pid, control_fd = self._spawn_fresh(template, out_fd, err_fd, setup, confine)
            else:
                pid, control_fd = self._fork(template, out_fd, err_fd, None, setup, confine)
        except SpawnError:
            outputs.abandon()
            raise
        except Exception as exc:
            outputs.abandon()
            err = exc.errno if isinstance(exc, OSError) else None
            raise SpawnError(err, f"{type(exc).__name__}: {exc}") from None
        outputs.close_given()
        child = Launched(pid, control_fd, template_id)
        child.captures = outputs.captures
        child.sinks = outputs.sinks
        child.token = token
        child.born = born
        if template.pid_file is not None:
            child.pid_file = os.path.abspath(template.pid_file)  # our cwd is its, now
            child.pid_owner = template.uid
            child.pid_deadline = child.started + template.pid_timeout
        child.follow_grace = template.follow_grace if token else 0.0
        return child

    def _setup(self, template_id: int, t: Template) -> ChildSetup | None:
        """What the child takes on after its fork (None: nothing); binds the template's
        sockets if they are not yet (SpawnError naming the socket when one cannot be)."""
        if not t.sockets and t.uid < 0 and t.gid < 0:
            return None
        fds = self.listeners.fds(template_id, t.sockets, t.uid)
        return ChildSetup(fds, [str(s[0]) for s in t.sockets], t.uid, t.gid, list(t.groups))

    def _chdir(self, cwd: str) -> None:
        if cwd == self._cwd:
            return
        try:
            os.chdir(cwd)
        except FileNotFoundError as exc:
            raise SpawnError(
                exc.errno, f"working directory {cwd!r} does not exist; create it or fix cwd"
            ) from None
        except OSError as exc:
            raise SpawnError(
                exc.errno, f"cannot use working directory {cwd!r}: {exc.strerror}; fix cwd"
            ) from None
        self._cwd = cwd

    def _spawn_command(
        self,
        t: Template,
        out_fd: int | None,
        err_fd: int | None,
        token: str,
        setup: ChildSetup | None = None,
        confine: Confinement | None = None,
    ) -> int:
        assert t.command is not None
        argv = t.command
        search = t.env.get("PATH", os.defpath)
        key = (argv[0], search)
        path = self._paths.get(key)
        if path is None:
            path = _which(argv[0], search)
        env = {**t.env, TOKEN_ENV: token}
        try:
            if t.pid_env is None and setup is None and confine is None:
                pid = _posix_spawn(path, argv, env, out_fd, err_fd)
            else:
                pid = _fork_exec(path, argv, env, out_fd, err_fd, t.pid_env, setup, confine)
        except SpawnError:
            raise
        except OSError as exc:
            self._paths.pop(key, None)
            raise SpawnError(
                exc.errno, f"cannot execute {path!r}: {exc.strerror}; check the command"
            ) from None
        self._paths[key] = path
        return pid

    def _fork(
        self,
        t: Template,
        out_fd: int | None,
        err_fd: int | None,
        go_fd: int | None = None,
        setup: ChildSetup | None = None,
        confine: Confinement | None = None,
    ) -> tuple[int, int]:
        control_r, control_w = os.pipe()
        # A refused limit comes back on it (EOF: all set), for a start error naming it.
        said_r, said_w = os.pipe() if confine is not None else (-1, -1)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()  # or the child would write our buffer again
        # Blocked across fork: the child must not run our handlers before resetting them.
        # (Our mask is empty otherwise; unblocking by hand spares pthread_sigmask's
        # conversion of the whole returned set into enum members on every fork.)
        signal.pthread_sigmask(signal.SIG_BLOCK, CATCHABLE)
        try:
            pid = os.fork()
        except OSError as exc:
            _bootstrap.unblock_all_signals()
            close_all([control_r, control_w, *([said_r, said_w] if confine else [])])
            raise SpawnError(exc.errno, f"fork failed: {exc.strerror}") from None
        if pid == 0:
            _bootstrap.run_forked(
                self.me,
                control_w,
                _child_settings(t),
                out_fd,
                err_fd,
                go_fd,
                setup,
                confine,
                said_w,
            )
        _bootstrap.unblock_all_signals()
        # Also set here, so a killpg from the host can never precede the child's own setpgid.
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        os.close(control_w)
        if confine is not None:
            os.close(said_w)
            try:
                said = os.read(said_r, 32)
            finally:
                os.close(said_r)
            if said:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
                os.close(control_r)
                which, _, why = said[1:].partition(b":")
                raise SpawnError(int(why), confine.refused(int(which), int(why)))
        os.set_blocking(control_r, False)
        return pid, control_r

    def _spawn_fresh(
        self,
        t: Template,
        out_fd: int | None,
        err_fd: int | None,
        setup: ChildSetup | None = None,
        confine: Confinement | None = None,
        go_fd: int | None = None,
    ) -> tuple[int, int]:
        """A target in a new interpreter: by posix_spawn, or fork+exec when it takes on
        sockets, limits or no_new_privs. It holds only its own settings.

        One that takes on another user starts as root, isolated (-I: no env, no cwd on
        its path) so it can read an interpreter that user may not (a venv under /root),
        and becomes the user before it reads its target, as a fork of ours would. With
        `go_fd`, it is a warm standby of such a target: it waits for "go" on it."""
        control_r, control_w = os.pipe()
        # A memfd, not a pipe: writing a large payload must not block the loop.
        settings_fd = os.memfd_create("nannytree-settings", os.MFD_CLOEXEC)
        given_go = -1
        try:
            if setup is not None and setup.fds:
                # Above the fds its sockets take from 3: their numbers are on its argv.
                control_w = _above(control_w, setup)
                settings_fd = _above(settings_fd, setup)
            if go_fd is not None:  # a copy the child inherits: the caller keeps its own
                floor = _listeners.FIRST_FD + (len(setup.fds) if setup is not None else 0)
                given_go = fcntl.fcntl(go_fd, fcntl.F_DUPFD_CLOEXEC, floor)
                os.set_inheritable(given_go, True)
            _wire.write_all(settings_fd, _wire.dumps(_child_settings(t)))
            os.lseek(settings_fd, 0, os.SEEK_SET)
            if _another_user(t):
                # Its env is in its settings, applied once it is the user: none of it
                # (LD_PRELOAD, PYTHONPATH) reaches the interpreter while it is root.
                env = {CONTROL_FD_ENV: str(control_w)}
                argv = [sys.executable, "-I", "-c", _AS_USER, _PACKAGE_PARENT]
                argv += [str(self.me), str(settings_fd), str(t.uid), str(t.gid)]
                argv.append(",".join(map(str, t.groups)))
                # Pickled by value: its unpickler is loaded while the child is root.
                argv.append("cloudpickle" if b"cloudpickle" in (t.payload or b"") else "-")
                argv.append(str(given_go))
                if setup is not None:  # its sockets only: it becomes the user itself
                    setup = ChildSetup(setup.fds, setup.names, -1, -1, [])
            else:
                env = dict(t.env)
                env[CONTROL_FD_ENV] = str(control_w)
                python_path = env.get("PYTHONPATH")
                env["PYTHONPATH"] = _PACKAGE_PARENT + (
                    os.pathsep + python_path if python_path else ""
                )
                argv = [sys.executable, "-P", "-m", "actors._launcher._bootstrap"]
                argv += [str(self.me), str(settings_fd)]
            os.set_inheritable(control_w, True)
            os.set_inheritable(settings_fd, True)
            try:
                if (setup is None or not setup.fds) and confine is None:
                    pid = _posix_spawn(sys.executable, argv, env, out_fd, err_fd)
                else:
                    pid = _fork_exec(
                        sys.executable, argv, env, out_fd, err_fd, None, setup, confine
                    )
            except SpawnError:
                os.close(control_r)
                raise
            except OSError as exc:
                os.close(control_r)
                raise SpawnError(
                    exc.errno, f"cannot start {sys.executable!r}: {exc.strerror}"
                ) from None
        finally:
            close_all([control_w, settings_fd, *([given_go] if given_go >= 0 else [])])
        os.set_blocking(control_r, False)
        return pid, control_r

    # -- warm standbys -------------------------------------------------------------------

    def prepare(self, standby: int, template_id: int, *, tee: bool = True) -> Launched | None:
        """Fork a standby of a target's template (None: it could not be)."""
        template = self.templates.get(template_id)
        outputs = _Outputs()
        go_r, go_w = os.pipe()
        try:
            if template is None or template.payload is None or template.fresh:
                raise SpawnError(None, "no template for a standby")
            self._chdir(template.cwd)
            outputs.open(self.tee, template, tee)
            setup = self._setup(template_id, template)
            out_fd, err_fd, confine = outputs.out_fd, outputs.err_fd, _confinement(template)
            if _another_user(template):  # a fork of us would hold the others' templates
                pid, control_fd = self._spawn_fresh(template, out_fd, err_fd, setup, confine, go_r)
            else:
                pid, control_fd = self._fork(template, out_fd, err_fd, go_r, setup, confine)
        except Exception:
            # No standby then: the next spawn forks as usual and reports what fails.
            outputs.abandon()
            close_all([go_r, go_w])
            return None
        close_all([go_r])
        outputs.close_given()
        child = Launched(pid, control_fd, template_id)
        child.captures = outputs.captures
        child.sinks = outputs.sinks
        self.standbys[standby] = (child, go_w)
        return child

    def go(self, standby: int) -> Launched | None:
        """Tell a standby to run its target: it is a child now (None if it is gone)."""
        entry = self.standbys.pop(standby, None)
        if entry is None:
            return None
        child, go_w = entry
        try:
            os.write(go_w, b"g")
        except OSError:
            return None  # it died meanwhile: the reap will say so
        finally:
            os.close(go_w)
        child.started = time.monotonic()
        return child

    def discard(self, standby: int) -> None:
        entry = self.standbys.pop(standby, None)
        if entry is None:
            return
        child, go_w = entry
        os.close(go_w)  # EOF on its go pipe: it exits; SIGKILL makes sure
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)
        self.discarded[child.pid] = child

    def standby_ended(self, pid: int) -> tuple[Launched, int | None] | None:
        """The standby reaped as `pid`, forgotten: (it, its id while it was still waited
        for, or None if discarded); None if `pid` was no standby."""
        child = self.discarded.pop(pid, None)
        if child is not None:
            return child, None
        for sid, (candidate, go_w) in list(self.standbys.items()):
            if candidate.pid == pid:
                del self.standbys[sid]
                os.close(go_w)
                return candidate, sid
        return None

    def standby_pids(self) -> list[int]:
        return [c.pid for c, _ in self.standbys.values()]
