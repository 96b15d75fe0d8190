"""The launcher process: ``python -P -m actors._launcher._main SOCK_FD LIFELINE_FD [MODULE...]``.

One per root tree. It starts as the *guardian*: a tiny single-threaded child
subreaper that forks the launcher proper and then only waits. The launcher,
also single-threaded (so forking is safe) and a subreaper, spawns command
children with ``posix_spawn``, forks Python children from its pre-imported
state, reaps every exit and reports it to the host over ``SOCK_FD`` (the
records of ``actors._launcher._protocol``; plain data, never pickle).

Who kills what (docs/launcher.md has the whole table):
- the host dies: EOF on ``LIFELINE_FD``; the launcher and the guardian both see
  it, and kill every child's group and every descendant re-parented to them;
- the launcher dies: Python children die with it (PR_SET_PDEATHSIG); commands
  and every escaped descendant are re-parented to the guardian, which kills
  them and exits, so the host learns that the launcher is gone only once
  nothing of it is left;
- the host and the launcher die together: the guardian does the same;
- the guardian dies: the launcher dies with it (PR_SET_PDEATHSIG), and the host
  kills the process groups it was told about.

It never prints: all it says goes on the socket.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import os
import selectors
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import _bootstrap, _protocol, _wire
from . import _daemons as _daemon
from ._protocol import (
    RESPAWNING,
    Arm,
    CancelChain,
    ChannelClosed,
    ChildFailed,
    ChildHeartbeat,
    ChildReady,
    Define,
    Disarm,
    Discard,
    Exited,
    Failure,
    Follow,
    Forget,
    Forked,
    Grant,
    Heartbeat,
    Hello,
    Output,
    Prepare,
    Prepared,
    Ready,
    Record,
    Respawned,
    Spawn,
    Spawned,
    SpawnFailed,
    StandbyDied,
    Template,
)

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_CATCHABLE = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
_OUTPUT_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
# The directory holding the `actors` package, for fresh interpreters.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Reports waiting for a host that does not read: past this, captured output is dropped
# (exits, spawns and errors never are: they are bounded by the number of children).
OUTBOX_LIMIT = 8 << 20
# Runs of starts cancelled or failed, remembered so their later spawns start nothing;
# a supervisor names a new chain per run, so only the recent ones matter.
FAILED_CHAINS = 1024
# Escaped descendants of exited children are looked for at most this often: the scan
# reads our whole child list, so it stays off the exit path and is coalesced.
ORPHAN_SCAN_INTERVAL = 0.05
SCAN_SHARE = 0.05  # of the launcher's time, at most, spent scanning for orphans
SCAN_CHUNK = 4096  # bytes of the child list read per turn of the loop (~680 pids)
# How often a daemon's pid file is looked at while it is being written.
PID_FILE_POLL = 0.01


class _SpawnFailed(Exception):
    def __init__(self, err: int | None, message: str) -> None:
        super().__init__(message)
        self.errno = err
        self.message = message


class _Child:
    __slots__ = (
        "arm",
        "beat",
        "born",
        "captures",
        "control_fd",
        "decoder",
        "error",
        "follow",
        "follow_grace",
        "pgid",
        "pid",
        "pid_deadline",
        "pid_file",
        "pidfd",
        "started",
        "template",
        "token",
    )

    def __init__(self, pid: int, control_fd: int | None, template: int) -> None:
        self.pid = pid
        self.control_fd = control_fd
        self.template = template
        self.decoder = _wire.Decoder(_protocol.CHILD_FRAME)
        self.error: Failure | None = None
        self.captures: dict[int, int] = {}  # stream (1 or 2) -> read end of its pipe
        self.started = time.monotonic()
        self.arm: Arm | None = None
        self.pidfd = -1
        self.beat = 0.0  # when its last heartbeat was reported
        self.pgid = pid  # its first process leads its group
        # A command's token (NANNYTREE_CHILD_TOKEN in its environment): what marks the
        # processes of its tree that left its group and were re-parented to us.
        self.token = ""
        self.pid_file: str | None = None  # a forking daemon's pid file
        self.pid_deadline = 0.0
        self.follow = 0  # MAINPID=: the main process once this one exits
        self.follow_grace = 0.0  # how long to wait for a MAINPID= after its first exit
        # Just before its spawn, on the clock of /proc's start times: a process that
        # started later may be one it forked, even once its environment (and token)
        # is overwritten, as nginx and redis do to show their process titles.
        self.born = 0


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
        raise _SpawnFailed(
            errno.EACCES,
            f"command {command!r} is on PATH but not executable; fix its permissions (chmod +x)",
        )
    raise _SpawnFailed(
        errno.ENOENT,
        f"command {command!r} not found on PATH {path!r}; install it, give its full path, "
        "or set PATH in the child's env",
    )


def _open_output(path: str | None, which: str, captures: dict[int, int]) -> int | None:
    if path is None:
        return None
    if path == "capture":
        read_end, write_end = os.pipe()  # both close-on-exec; dup2 onto 1/2 clears it
        os.set_blocking(read_end, False)
        captures[1 if which == "stdout" else 2] = read_end
        return write_end
    try:
        return os.open(path, _OUTPUT_FLAGS, 0o644)
    except OSError as exc:
        raise _SpawnFailed(
            exc.errno,
            f"cannot open its {which} file {path!r}: {exc.strerror}; "
            "check that the directory exists and is writable",
        ) from None


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
        setsigdef=_CATCHABLE,
        setsigmask=(),
    )


def _fork_exec(
    path: str,
    argv: list[str],
    env: dict[str, str],
    out_fd: int | None,
    err_fd: int | None,
    pid_env: str,
) -> int:
    """As _posix_spawn, but with the child's own pid in `pid_env` (known only after the
    fork). The exec's failure comes back on a close-on-exec pipe, as an OSError."""
    err_r, err_w = os.pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, _CATCHABLE)
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
            for sig in _CATCHABLE:
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(sig, signal.SIG_DFL)
            os.setpgid(0, 0)
            if out_fd is not None:
                os.dup2(out_fd, 1)
            if err_fd is not None:
                os.dup2(err_fd, 2)
            _bootstrap.unblock_all_signals()
            os.execve(path, argv, {**env, pid_env: str(os.getpid())})
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
        code = int(said) if said.isdigit() else errno.EIO
        raise OSError(code, os.strerror(code))
    return pid


def _child_pids(me: int) -> list[int]:
    """Pids of our live children: the kernel's list when it has one, else a /proc scan."""
    try:
        with open(f"/proc/self/task/{me}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return [pid for pid, _ in _children_of(me)]


def _children_of(me: int) -> list[tuple[int, int]]:
    """(pid, pgid) of every live process whose parent is `me`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        if int(fields[1]) == me:
            found.append((int(name), int(fields[2])))
    return found


def _kids(pid: int) -> list[int]:
    """The children of any process (the kernel's list)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


def _group_members(pgid: int) -> list[int]:
    """Live processes of a process group (a /proc scan: only on a rare path)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _daemon.proc_stat(int(name))
            if st is not None and st.pgid == pgid and st.state not in ("Z", "X"):
                found.append(st.pid)
    return found


def sweep(me: int) -> None:
    """Kill every process re-parented to us, and its group, until none is left."""
    while True:
        for pid, pgid in _children_of(me):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            if pgid == pid:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
        try:
            # Each reaped process has already handed its orphans to us: rescan after.
            pid, _ = os.waitpid(-1, 0)
            while pid:
                pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return


def _pidfds_work() -> bool:
    """Whether this kernel has pidfd_open (Linux 5.3)."""
    try:
        fd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        return False
    os.close(fd)
    return True


FD_MARGIN = 256  # fds kept free for a spawn's own pipes and files, and our own


def _fd_limit() -> int:
    """How many fds we may hold: our soft limit, less a margin."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(0, soft - FD_MARGIN)


def _child_settings(t: Template) -> dict[str, Any]:
    """What a Python child needs of its template, as plain data."""
    return {"payload": t.payload, "env": t.env, "sys_path": t.sys_path, "argv": t.argv}


class LauncherLoop:
    def __init__(self, sock_fd: int, lifeline_fd: int) -> None:
        self.pid = os.getpid()
        # Passed fds arrive inheritable: they must not leak into commands.
        self.sock = socket.socket(fileno=sock_fd)
        self.sock.set_inheritable(False)
        self.sock.setblocking(False)
        os.set_inheritable(lifeline_fd, False)
        self.lifeline = lifeline_fd
        self.children: dict[int, _Child] = {}
        self.templates: dict[int, Template] = {}
        self.standbys: dict[int, tuple[_Child, int]] = {}  # id -> (child, write end of "go")
        self.discarded: dict[int, _Child] = {}
        self.outbox: list[bytes] = []
        self.outbox_bytes = 0
        self.dropped_output = 0
        self.requests = _wire.Decoder(_protocol.HOST_FRAME)
        self._recv_buf = bytearray(1 << 18)
        self._recv_view = memoryview(self._recv_buf)
        self._cwd = os.getcwd()
        self._paths: dict[tuple[str, str], str] = {}
        self.pidfds = _pidfds_work()
        self.fd_limit = _fd_limit()
        self.failed_chains: dict[int, None] = {}  # insertion-ordered, FAILED_CHAINS at most
        self.granted: dict[int, int] = {}  # group -> autonomous restarts allowed in all
        self.used: dict[int, int] = {}  # group -> autonomous restarts done
        self.stopping = False
        self.host_gone = False
        self.scan_due: float | None = None
        self.last_scan = 0.0
        self.scan_cost = 0.0  # seconds the last orphan scan took
        self.unwatched: set[int] = set()  # children without a pidfd: reaped on SIGCHLD
        self.scan_fd: int | None = None  # the child list being read, a piece at a time
        self.scan_data = bytearray()
        self.scan_busy = 0.0
        # Forking daemons whose first process exited 0: first pid -> child, until
        # their pid file names their main process (or their pid_timeout passes).
        self.daemonizing: dict[int, _Child] = {}
        # Children that may fork themselves (a pid file, or sd_notify's MAINPID=), by
        # token: what they fork is left alone by the orphan scan until it is settled.
        self.may_fork: dict[str, _Child] = {}

        self.sel = selectors.DefaultSelector()
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        # A Python-level handler is what makes the C handler write the wakeup fd.
        signal.signal(signal.SIGCHLD, self._on_sigchld)
        for sig in _STOP_SIGNALS:
            signal.signal(sig, self._on_stop_signal)
        self.sel.register(self.sock, selectors.EVENT_READ, self._on_socket)
        self.sel.register(lifeline_fd, selectors.EVENT_READ, self._on_lifeline)
        self.sel.register(self._wake_r, selectors.EVENT_READ, self._on_wakeup)

    # -- signals ---------------------------------------------------------------

    def _on_sigchld(self, signum: int, frame: object) -> None:
        pass  # the wakeup fd carries it to the loop

    def _on_stop_signal(self, signum: int, frame: object) -> None:
        self.stopping = True

    # -- the loop --------------------------------------------------------------

    def preload(self, modules: list[str]) -> str | None:
        for name in ("cloudpickle", *modules):
            try:
                importlib.import_module(name)
            except BaseException as exc:
                return f"preload module {name!r} failed to import: {type(exc).__name__}: {exc}"
        if threading.active_count() > 1:
            names = ", ".join(t.name for t in threading.enumerate())
            return (
                f"a preloaded module started threads ({names}); the launcher must stay "
                "single-threaded to fork safely: do not preload it"
            )
        return None

    def report(self, record: Record) -> None:
        frame = _wire.encode(record.pack())
        if isinstance(record, Output):
            if self.outbox_bytes + len(frame) > OUTBOX_LIMIT:
                self.dropped_output += len(record.data)
                return
            if self.dropped_output:
                note = (
                    f"\n[nannytree: {self.dropped_output} bytes of output dropped: "
                    "the supervisor did not keep up]\n"
                ).encode()
                self.dropped_output = 0
                self._queue(_wire.encode(Output(record.pid, record.stream, note).pack()))
        self._queue(frame)

    def _queue(self, frame: bytes) -> None:
        self.outbox.append(frame)
        self.outbox_bytes += len(frame)

    def flush(self) -> None:
        """Send what the socket takes now; the rest waits for it to drain."""
        if self.host_gone:
            self.outbox.clear()
            self.outbox_bytes = 0
            return
        while self.outbox:
            data = b"".join(self.outbox) if len(self.outbox) > 1 else self.outbox[0]
            try:
                sent = self.sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self.host_gone = self.stopping = True
                self.outbox.clear()
                self.outbox_bytes = 0
                return
            rest = data[sent:]
            self.outbox = [rest] if rest else []
            self.outbox_bytes = len(rest)
            if rest:
                break
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.outbox else 0)
        self.sel.modify(self.sock, events, self._on_socket)

    def run(self) -> None:
        while not self.stopping:
            timeout = None
            if self.scan_fd is not None:
                timeout = 0.0  # a scan under way: its next piece after what is ready
            elif self.scan_due is not None:
                timeout = max(0.0, self.scan_due - time.monotonic())
            if self.daemonizing:
                timeout = min(timeout, PID_FILE_POLL) if timeout is not None else PID_FILE_POLL
            for key, mask in self.sel.select(timeout):
                callback: Callable[[int], None] = key.data
                callback(mask)
                if self.stopping:
                    break
            if self.daemonizing:
                self._look_for_daemons()
            if self.scan_fd is not None:
                self.flush()  # the exits' reports first: the scan must never delay them
                self._scan_step()
            elif self.scan_due is not None and time.monotonic() >= self.scan_due:
                self.flush()
                self._read_requests()  # a Disarm sent before an exit is seen before it
                self._reap()
                self._start_scan()
            self.flush()
        self.kill_everything()

    # -- event handlers --------------------------------------------------------

    def _on_lifeline(self, mask: int) -> None:
        try:
            data = os.read(self.lifeline, 64)
        except OSError:
            data = b""
        if not data:
            self.host_gone = self.stopping = True

    def _on_wakeup(self, mask: int) -> None:
        with contextlib.suppress(OSError):
            while os.read(self._wake_r, 4096):
                pass
        # A stop or a discard the host sent before this exit must be seen first.
        self._read_requests()
        if self.pidfds and not self.unwatched:
            # Our children report through their pidfds; a SIGCHLD is then an orphan's
            # or a standby's, reaped with the next (coalesced) scan: waitpid(-1) walks
            # the kernel's list of all our children, which is O(N) per call.
            self._schedule_scan()
        else:
            self._reap()  # some child has no pidfd (past our fd limit): it may be this one

    def _on_socket(self, mask: int) -> None:
        if mask & selectors.EVENT_READ:
            self._read_requests()
        if mask & selectors.EVENT_WRITE:
            self.flush()

    def _read_requests(self) -> None:
        while not self.stopping:
            try:
                n = self.sock.recv_into(self._recv_buf)
            except BlockingIOError:
                return
            except OSError:
                n = 0
            if not n:
                self.host_gone = self.stopping = True
                return
            try:
                records = [
                    _protocol.decode(v, _protocol.HOST_RECORDS)
                    for v in self.requests.feed(self._recv_view[:n])
                ]
            except _wire.WireError:
                self.stopping = True  # a corrupt stream from the host: nothing sane can follow
                return
            for record in records:
                self._dispatch(record)

    def _dispatch(self, record: Record) -> None:
        if isinstance(record, Spawn):
            self._spawn(record)
        elif isinstance(record, CancelChain):
            self._fail_chain(record.chain)
        elif isinstance(record, Define):
            self.templates[record.template] = record.settings
        elif isinstance(record, Forget):
            self.templates.pop(record.template, None)
        elif isinstance(record, Prepare):
            self._prepare(record)
        elif isinstance(record, Discard):
            self._discard(record.standby)
        elif isinstance(record, Arm):
            child = self.children.get(record.pid)
            if child is not None:
                child.arm = record
        elif isinstance(record, Disarm):
            child = self.children.get(record.pid)
            if child is not None:
                child.arm = None
        elif isinstance(record, Grant):
            self.granted[record.group] = record.granted
        elif isinstance(record, Follow):
            child = self.children.get(record.pid)
            if child is not None and child.token:
                child.follow = record.main_pid
            waiting = self.daemonizing.get(record.pid)
            if (
                waiting is not None
                and waiting.pid_file is None
                and self._adopt(waiting, record.main_pid)
            ):
                del self.daemonizing[record.pid]

    def _chdir(self, cwd: str) -> None:
        if cwd == self._cwd:
            return
        try:
            os.chdir(cwd)
        except FileNotFoundError as exc:
            raise _SpawnFailed(
                exc.errno, f"working directory {cwd!r} does not exist; create it or fix cwd"
            ) from None
        except OSError as exc:
            raise _SpawnFailed(
                exc.errno, f"cannot use working directory {cwd!r}: {exc.strerror}; fix cwd"
            ) from None
        self._cwd = cwd

    def _spawn(self, request: Spawn) -> None:
        if request.chain and request.chain in self.failed_chains:
            message = "not started: a start before it in its run failed or was cancelled"
            self.report(SpawnFailed(request.req, errno.ECANCELED, message))
            return
        if request.standby is not None and self._go(request.req, request.standby):
            return
        try:
            child = self._start(request.template)
        except _SpawnFailed as exc:
            if request.chain:
                self._fail_chain(request.chain)
            self.report(SpawnFailed(request.req, exc.errno, exc.message))
            return
        self.report(Spawned(request.req, child.pid))

    def _fail_chain(self, chain: int) -> None:
        """No later spawn of this run of starts may start anything."""
        self.failed_chains[chain] = None
        if len(self.failed_chains) > FAILED_CHAINS:
            del self.failed_chains[next(iter(self.failed_chains))]

    def _start(self, template_id: int) -> _Child:
        """Start a child from a template; raises _SpawnFailed."""
        template = self.templates.get(template_id)
        if template is None:
            raise _SpawnFailed(None, "unknown template: the host forgot it")
        out_fd = err_fd = None
        captures: dict[int, int] = {}
        try:
            self._chdir(template.cwd)
            out_fd = _open_output(template.stdout, "stdout", captures)
            err_fd = _open_output(template.stderr, "stderr", captures)
            control_fd = None
            token = ""
            born = _daemon.boot_ticks() - 1  # a tick of margin: the clocks round apart
            if template.command is not None:
                token = _daemon.child_token()
                pid = self._spawn_command(template, out_fd, err_fd, token)
            elif template.fresh:
                pid, control_fd = self._spawn_fresh(template, out_fd, err_fd)
            else:
                pid, control_fd = self._fork(template, out_fd, err_fd)
        except _SpawnFailed:
            self._close_all(captures.values())
            raise
        except Exception as exc:
            self._close_all(captures.values())
            err = exc.errno if isinstance(exc, OSError) else None
            raise _SpawnFailed(err, f"{type(exc).__name__}: {exc}") from None
        finally:
            for fd in (out_fd, err_fd):
                if fd is not None:
                    os.close(fd)
        child = _Child(pid, control_fd, template_id)
        child.token = token
        child.born = born
        if template.pid_file is not None:
            child.pid_file = template.pid_file
            child.pid_deadline = child.started + template.pid_timeout
        child.follow_grace = template.follow_grace if token else 0.0
        if child.pid_file is not None or child.follow_grace:
            self.may_fork[token] = child
        self.children[pid] = child
        self._watch(child)
        if control_fd is not None:
            self.sel.register(control_fd, selectors.EVENT_READ, self._control_reader(child))
        self._listen_output(child, captures)
        return child

    def _listen_output(self, child: _Child, captures: dict[int, int]) -> None:
        for stream, fd in captures.items():
            child.captures[stream] = fd
            self.sel.register(
                fd, selectors.EVENT_READ, lambda mask, s=stream: self._read_output(child, s)
            )

    def _control_reader(self, child: _Child) -> Callable[[int], None]:
        return lambda mask: self._read_control(child)

    @staticmethod
    def _close_all(fds: Iterable[int]) -> None:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read_output(self, child: _Child, stream: int, *, drain: bool = False) -> None:
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
                self.report(Output(child.pid, stream, data))
                if drain:
                    continue
                return
            if data is None and not drain:
                return
            # EOF, or (when draining at the exit) nothing more for now: stop listening.
            self.sel.unregister(fd)
            os.close(fd)
            del child.captures[stream]
            return

    def _spawn_command(
        self, t: Template, out_fd: int | None, err_fd: int | None, token: str
    ) -> int:
        assert t.command is not None
        argv = t.command
        search = t.env.get("PATH", os.defpath)
        key = (argv[0], search)
        path = self._paths.get(key)
        if path is None:
            path = _which(argv[0], search)
        env = {**t.env, _daemon.TOKEN_ENV: token}
        try:
            if t.pid_env is None:
                pid = _posix_spawn(path, argv, env, out_fd, err_fd)
            else:
                pid = _fork_exec(path, argv, env, out_fd, err_fd, t.pid_env)
        except OSError as exc:
            self._paths.pop(key, None)
            raise _SpawnFailed(
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
    ) -> tuple[int, int]:
        control_r, control_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()  # or the child would write our buffer again
        # Blocked across fork: the child must not run our handlers before resetting them.
        # (Our mask is empty otherwise; unblocking by hand spares pthread_sigmask's
        # conversion of the whole returned set into enum members on every fork.)
        signal.pthread_sigmask(signal.SIG_BLOCK, _CATCHABLE)
        try:
            pid = os.fork()
        except OSError as exc:
            _bootstrap.unblock_all_signals()
            os.close(control_r)
            os.close(control_w)
            raise _SpawnFailed(exc.errno, f"fork failed: {exc.strerror}") from None
        if pid == 0:
            _bootstrap.run_forked(self.pid, control_w, _child_settings(t), out_fd, err_fd, go_fd)
        _bootstrap.unblock_all_signals()
        # Also set here, so a killpg from the host can never precede the child's own setpgid.
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        os.close(control_w)
        os.set_blocking(control_r, False)
        return pid, control_r

    def _spawn_fresh(self, t: Template, out_fd: int | None, err_fd: int | None) -> tuple[int, int]:
        control_r, control_w = os.pipe()
        # A memfd, not a pipe: writing a large payload must not block the loop.
        settings_fd = os.memfd_create("nannytree-settings", os.MFD_CLOEXEC)
        try:
            _wire.write_all(settings_fd, _wire.dumps(_child_settings(t)))
            os.lseek(settings_fd, 0, os.SEEK_SET)
            env = dict(t.env)
            env[_bootstrap.CONTROL_FD_ENV] = str(control_w)
            python_path = env.get("PYTHONPATH")
            env["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + python_path if python_path else "")
            argv = [sys.executable, "-P", "-m", "actors._launcher._bootstrap"]
            argv += [str(self.pid), str(settings_fd)]
            os.set_inheritable(control_w, True)
            os.set_inheritable(settings_fd, True)
            try:
                pid = _posix_spawn(sys.executable, argv, env, out_fd, err_fd)
            except OSError as exc:
                os.close(control_r)
                raise _SpawnFailed(
                    exc.errno, f"cannot start {sys.executable!r}: {exc.strerror}"
                ) from None
        finally:
            os.close(control_w)
            os.close(settings_fd)
        os.set_blocking(control_r, False)
        return pid, control_r

    # -- warm standbys: forked ahead, target unpickled, waiting for "go" ----------

    def _prepare(self, request: Prepare) -> None:
        template = self.templates.get(request.template)
        out_fd = err_fd = None
        captures: dict[int, int] = {}
        go_r, go_w = os.pipe()
        try:
            if template is None or template.payload is None or template.fresh:
                raise _SpawnFailed(None, "no template for a standby")
            self._chdir(template.cwd)
            out_fd = _open_output(template.stdout, "stdout", captures)
            err_fd = _open_output(template.stderr, "stderr", captures)
            pid, control_fd = self._fork(template, out_fd, err_fd, go_r)
        except Exception:
            # No standby then: the next spawn forks as usual and reports what fails.
            self._close_all([*captures.values(), go_w])
            self.report(Prepared(request.standby, 0))
            return
        finally:
            self._close_all([go_r] + [fd for fd in (out_fd, err_fd) if fd is not None])
        child = _Child(pid, control_fd, request.template)
        child.captures = captures
        self.standbys[request.standby] = (child, go_w)
        self.sel.register(control_fd, selectors.EVENT_READ, self._control_reader(child))
        self.report(Prepared(request.standby, pid))

    def _go(self, req: int, sid: int) -> bool:
        child = self._go_child(sid)
        if child is None:
            return False
        self.report(Spawned(req, child.pid))
        return True

    def _go_child(self, sid: int) -> _Child | None:
        """Tell a standby to run its target: it is a child now (None if it is gone)."""
        entry = self.standbys.pop(sid, None)
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
        self.children[child.pid] = child
        self._watch(child)
        captures, child.captures = child.captures, {}
        self._listen_output(child, captures)
        return child

    def _discard(self, sid: int) -> None:
        entry = self.standbys.pop(sid, None)
        if entry is None:
            return
        child, go_w = entry
        os.close(go_w)  # EOF on its go pipe: it exits; SIGKILL makes sure
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)
        self.discarded[child.pid] = child

    def _standby_gone(self, pid: int) -> bool:
        """A standby (or a discarded one) was reaped: clean up; True if it was one."""
        child = self.discarded.pop(pid, None)
        if child is None:
            for sid, (candidate, go_w) in list(self.standbys.items()):
                if candidate.pid == pid:
                    del self.standbys[sid]
                    os.close(go_w)
                    child = candidate
                    self.report(StandbyDied(sid))
                    break
        if child is None:
            return False
        self._close_control(child)
        self._close_all(child.captures.values())
        child.captures.clear()
        return True

    # -- what a child says on its control pipe (untrusted) --------------------------

    def _read_control(self, child: _Child) -> None:
        fd = child.control_fd
        if fd is None:
            return
        try:
            values, eof = _wire.read_available(fd, child.decoder)
            for value in values:
                record = _protocol.decode(value, _protocol.CHILD_RECORDS)
                if isinstance(record, ChildReady):
                    if child.pid in self.children:  # a standby's target runs after "go"
                        self.report(Ready(child.pid))
                elif isinstance(record, ChildFailed):
                    child.error = _protocol.child_failure(record)
                elif isinstance(record, ChildHeartbeat):
                    now = time.monotonic()
                    if child.pid in self.children and now - child.beat >= _protocol.HEARTBEAT_EVERY:
                        child.beat = now
                        self.report(Heartbeat(child.pid))
        except _wire.WireError as e:
            self._close_control(child)
            self.report(ChannelClosed(child.pid, f"its control pipe carried {e}"))
            return
        if eof:
            self._close_control(child)

    def _close_control(self, child: _Child) -> None:
        if child.control_fd is not None:
            self.sel.unregister(child.control_fd)
            os.close(child.control_fd)
            child.control_fd = None

    # -- exits ---------------------------------------------------------------------

    def _watch(self, child: _Child) -> None:
        """Learn of the child's exit through a pidfd, while we have fds to spare.

        Every fd we hold for a child (its pidfd, control pipe, captured outputs) is
        registered with the selector (a standby holds up to three more): that count,
        not a guess per child, says whether one more fits under our fd limit."""
        held = len(self.sel.get_map()) + 3 * len(self.standbys)  # its go, its outputs
        if not self.pidfds or held >= self.fd_limit:
            self.unwatched.add(child.pid)
            return
        try:
            child.pidfd = os.pidfd_open(child.pid)
        except OSError:
            self.unwatched.add(child.pid)
            return
        self.sel.register(child.pidfd, selectors.EVENT_READ, lambda mask: self._on_pidfd(child))

    def _on_pidfd(self, child: _Child) -> None:
        self._read_requests()  # a stop the host sent before this exit must be seen first
        try:
            pid, status = os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = 0, 0
        if pid:
            self.children.pop(pid, None)
            self._exited(child, status)
        elif child.pid not in self.children:
            self._unwatch(child)

    def _watch_one_more(self) -> None:
        """A pidfd was freed: give it to a child that has none, so that no SIGCHLD
        has to walk the kernel's list of all our children for long."""
        while self.unwatched:
            child = self.children.get(self.unwatched.pop())
            if child is not None:
                self._watch(child)  # back in `unwatched` if it still does not fit
                return

    def _unwatch(self, child: _Child) -> None:
        if child.pidfd >= 0:
            self.sel.unregister(child.pidfd)
            os.close(child.pidfd)
            child.pidfd = -1

    def _schedule_scan(self) -> None:
        if self.scan_due is None:
            # The scan's own cost sets its pace: at most SCAN_SHARE of the loop's time
            # (the kernel's list of 10,000 children takes ~9 ms to read).
            interval = max(ORPHAN_SCAN_INTERVAL, self.scan_cost / SCAN_SHARE)
            self.scan_due = max(time.monotonic(), self.last_scan + interval)

    def _reap(self) -> None:
        """Reap every child that ended: ours (reported), standbys and orphans."""
        # SIGCHLD coalesces: one wakeup may stand for many exits.
        reaped = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            child = self.children.pop(pid, None)
            if child is None:
                self._standby_gone(pid)
                continue  # a standby, or an orphan re-parented to us: reaped, not reported
            self._exited(child, status)
            reaped = True
        if reaped:
            self._schedule_scan()

    def _exited(self, child: _Child, status: int) -> None:
        """One of our children was reaped: kill what it left, report it (and maybe restart it)."""
        self.unwatched.discard(child.pid)
        if child.pidfd >= 0:
            self._unwatch(child)
            self._watch_one_more()
        code = os.waitstatus_to_exitcode(status)
        if child.token and self._forked(child, code):
            return
        self._ended(child, code)

    def _ended(self, child: _Child, code: int) -> None:
        pid = child.pid
        self.may_fork.pop(child.token, None)
        detached: list[int] = []
        if code == 0 and child.token:
            detached = self._detached(child)  # a daemon that forked itself, unasked
        uptime = time.monotonic() - child.started
        # Grandchildren never outlive their parent: its group now, and those that
        # left it (re-parented to us, the subreaper) at the next orphan scan.
        with contextlib.suppress(OSError):
            os.killpg(child.pgid, signal.SIGKILL)
        for other in detached:
            with contextlib.suppress(OSError):
                os.kill(other, signal.SIGKILL)
        self._read_control(child)  # the error, if any, was written before the exit
        self._close_control(child)
        for stream in list(child.captures):
            self._read_output(child, stream, drain=True)
        respawning = not detached and self._covered(child, code, uptime)
        self.report(
            Exited(pid, code, uptime, child.error, RESPAWNING if respawning else 0, detached)
        )
        if respawning:
            self.flush()  # the host hears of the exit now, not after the spawn
            self.report(Respawned(pid, self._respawn(child)))
        self._schedule_scan()

    # -- daemons that fork themselves ----------------------------------------------

    def _forked(self, child: _Child, code: int) -> bool:
        """Whether the exit of a command's first process hands over to its main process
        (MAINPID=, or a pid file still to be read) instead of ending the child."""
        if child.follow and self._adopt(child, child.follow):
            return True
        if code != 0 or child.pgid != child.pid:
            return False
        if child.pid_file is not None:
            self.daemonizing[child.pid] = child  # its pid file is looked for from now on
            return True
        if child.follow_grace and self._detached(child):
            # It speaks sd_notify and left a process behind: its MAINPID= may be on
            # its way through the host. Wait a little for it before calling it gone.
            child.pid_deadline = time.monotonic() + child.follow_grace
            self.daemonizing[child.pid] = child
            return True
        return False

    def _adopt(self, child: _Child, main: int) -> bool:
        """Make `main` the child's main process, if it is a live process of its tree
        that we can reap (re-parented to us, the subreaper)."""
        st = _daemon.proc_stat(main)
        if st is None or st.state in ("Z", "X") or st.ppid != self.pid or main in self.children:
            return False
        if not (
            st.pgid == child.pgid or st.start >= child.born or _daemon.has_token(main, child.token)
        ):
            return False
        old = child.pid
        child.pid, child.pgid, child.follow = main, st.pgid, 0
        child.pid_file = None  # found: its main process's exit is the child's exit
        self.may_fork.pop(child.token, None)
        self._schedule_scan()  # what was spared while its pid file was awaited
        self.children[main] = child
        self._watch(child)
        self.report(Forked(old, main, st.pgid))
        return True

    def _look_for_daemons(self) -> None:
        """Read the pid files of forking daemons whose first process exited 0."""
        now = time.monotonic()
        for first, child in list(self.daemonizing.items()):
            if child.pid_file is None:  # waiting for a MAINPID=
                if now >= child.pid_deadline:
                    del self.daemonizing[first]
                    self._ended(child, 0)
                continue
            try:
                main = _daemon.read_pid_file(child.pid_file)
            except _daemon.PidFileError as e:
                problem = e.problem
            else:
                if self._adopt(child, main):
                    del self.daemonizing[first]
                    continue
                if _daemon.is_alive(main):
                    problem = f"names pid {main}, which is not a process this child started"
                else:
                    problem = f"names pid {main}, which is not running"
            if now >= child.pid_deadline:
                del self.daemonizing[first]
                self._pid_file_failed(child, f"pid file {child.pid_file!r} {problem}")

    def _pid_file_failed(self, child: _Child, why: str) -> None:
        """No main process within pid_timeout: the start failed; its tree is killed."""
        with contextlib.suppress(OSError):
            os.killpg(child.pgid, signal.SIGKILL)
        for stream in list(child.captures):
            self._read_output(child, stream, drain=True)
        uptime = time.monotonic() - child.started
        self.may_fork.pop(child.token, None)
        self.report(Exited(child.pid, 0, uptime, Failure("PidFileError", why, ""), 0, []))
        self._schedule_scan()  # what it forked was spared while its pid file was awaited
        self._schedule_scan()  # what it forked, re-parented to us, goes with the scan

    def _detached(self, child: _Child) -> list[int]:
        """Live processes a command left behind when its first process exited 0: in its
        group, or re-parented to us with its token. Only paid on exit code 0."""
        found = []
        try:
            os.killpg(child.pgid, 0)
            grouped = True
        except OSError:
            grouped = False
        known = self.children
        groups = {c.pgid for c in known.values()}
        for _ in range(3):  # again while an orphan is mid-exit: its children move to us
            unsettled = False
            for pid in _child_pids(self.pid):
                if pid in known:
                    continue
                st = _daemon.proc_stat(pid)
                if st is None:
                    continue
                if st.state in ("Z", "X"):
                    unsettled = True
                elif (grouped and st.pgid == child.pgid) or _daemon.has_token(pid, child.token):
                    found.append(pid)
                elif st.start >= child.born and st.pgid not in groups:
                    found.append(pid)  # its token overwritten (setproctitle), not another's
                elif _daemon.exiting(pid):
                    # An intermediate of a double fork, exiting: its environment is gone,
                    # but the daemon it forked is still its child for a moment.
                    unsettled = True
                    found.extend(p for p in _kids(pid) if _daemon.has_token(p, child.token))
            if found or not unsettled:
                break
        if grouped and not found:
            # Still in its group but not ours: its parent is another of its processes.
            found = [p for p in _group_members(child.pgid) if p != child.pid]
        return found[:16]

    def _covered(self, child: _Child, code: int, uptime: float) -> bool:
        """Whether an armed child is restarted at once: its exit is covered and its
        group's budget allows (then one restart of the budget is used)."""
        arm = child.arm
        if arm is None or uptime < arm.min_uptime:
            return False
        if not arm.any_exit and code >= 0 and code in arm.normal_codes:
            return False
        used = self.used.get(arm.group, 0)
        if used >= self.granted.get(arm.group, 0):
            return False
        self.used[arm.group] = used + 1  # as the host counts it: on the announced exit
        return True

    def _respawn(self, child: _Child) -> int:
        """Start a covered child again from its template; the new pid, or 0."""
        standby = next(
            (sid for sid, (c, _) in self.standbys.items() if c.template == child.template), None
        )
        successor = self._go_child(standby) if standby is not None else None
        if successor is None:
            try:
                successor = self._start(child.template)
            except _SpawnFailed:
                return 0  # the host restarts it the ordinary way, and hears why it fails
        return successor.pid

    def _start_scan(self) -> None:
        """Read the kernel's list of our children a piece per turn of the loop: at
        10,000 children the whole list takes ~9 ms, which no exit may wait behind."""
        self.scan_due = None
        self.last_scan = time.monotonic()
        self.scan_busy = 0.0
        try:
            self.scan_fd = os.open(f"/proc/self/task/{self.pid}/children", os.O_RDONLY)
        except OSError:  # no such list (an old kernel): the slow way, at once
            self._kill_orphans(_child_pids(self.pid))
            self.scan_cost = time.monotonic() - self.last_scan
            return
        self.scan_data = bytearray()
        self._scan_step()

    def _scan_step(self) -> None:
        fd = self.scan_fd
        assert fd is not None
        began = time.monotonic()
        try:
            chunk = os.read(fd, SCAN_CHUNK)
        except OSError:
            chunk = b""
        self.scan_data += chunk
        if chunk:
            self.scan_busy += time.monotonic() - began
            return
        os.close(fd)
        self.scan_fd = None
        pids = [int(p) for p in self.scan_data.split()]
        self.scan_data = bytearray()
        self._kill_orphans(pids)
        self.scan_cost = self.scan_busy + time.monotonic() - began

    def _kill_orphans(self, children: list[int]) -> None:
        known = set(self.children)
        known.update(c.pid for c, _ in self.standbys.values())
        known.update(self.discarded)
        # A pid file still to come: what started since that child did may be its daemon
        # (its token may be gone with its environment); spared until it is settled.
        pending = [c.born for c in self.may_fork.values() if c.pid_file is not None]
        spare_after = min(pending) if pending else None
        for pid in children:
            if pid not in known:
                st = _daemon.proc_stat(pid)
                if st is not None and st.ppid != self.pid:
                    continue  # gone since the list was read, its pid now another's
                if st is None or st.state in ("Z", "X") or _daemon.exiting(pid):
                    # Ended or ending (reaped next): what it left was re-parented to us
                    # and is seen on its own; its group may hold a daemon still starting.
                    self._schedule_scan()
                    continue
                if self.may_fork and _daemon.token_of(pid) in self.may_fork:
                    continue  # a daemon whose pid file or MAINPID= is still to come
                if spare_after is not None and st.start >= spare_after:
                    continue  # maybe a daemon whose pid file is still to be written
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)  # an escapee that leads its own group

    # -- shutdown --------------------------------------------------------------

    def kill_everything(self) -> None:
        """Kill every child's group, then every process re-parented to us, until none."""
        standbys = [c.pid for c, _ in self.standbys.values()]
        for pid in [*self.children, *standbys]:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        sweep(self.pid)
        self.children.clear()
        if not self.host_gone:
            self.sock.settimeout(1.0)  # a host that stopped reading must not keep us
            with contextlib.suppress(OSError):
                self.sock.sendall(b"".join(self.outbox))


def guard(launcher: int, lifeline_fd: int) -> int:
    """The guardian: wait for the launcher or the host to die, then leave nothing behind.

    Every process of the tree whose parent dies is re-parented to the nearest
    subreaper: the launcher while it lives, then us.
    """
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: None)  # the lifeline decides, not signals
    sel = selectors.DefaultSelector()
    sel.register(wake_r, selectors.EVENT_READ)
    sel.register(lifeline_fd, selectors.EVENT_READ)
    status = 0
    while True:
        ready = {key.fd for key, _ in sel.select()}
        if lifeline_fd in ready:
            try:
                data = os.read(lifeline_fd, 64)
            except OSError:
                data = b""
            if not data:  # the host is gone: so is the tree
                with contextlib.suppress(OSError):
                    os.kill(launcher, signal.SIGKILL)
        if wake_r in ready:
            with contextlib.suppress(OSError):
                while os.read(wake_r, 4096):
                    pass
        done = False
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                done = True
                break
            if pid == 0:
                break
            if pid == launcher:
                status, done = os.waitstatus_to_exitcode(raw), True
        if done:
            sweep(os.getpid())
            return status if status >= 0 else 128 - status


def main(argv: list[str]) -> int:
    sock_fd, lifeline_fd = int(argv[0]), int(argv[1])
    # Escaped descendants re-parent to the nearest subreaper: the launcher, then us.
    _bootstrap.prctl(_bootstrap.PR_SET_CHILD_SUBREAPER, 1)
    guardian = os.getpid()
    launcher = os.fork()
    if launcher:
        os.close(sock_fd)  # only the launcher talks to the host
        return guard(launcher, lifeline_fd)
    _bootstrap.prctl(_bootstrap.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != guardian:
        os._exit(1)
    _bootstrap.prctl(_bootstrap.PR_SET_CHILD_SUBREAPER, 1)  # not inherited across fork
    loop = LauncherLoop(sock_fd, lifeline_fd)
    error = loop.preload(argv[2:])
    loop.sock.settimeout(10.0)
    with contextlib.suppress(OSError):
        loop.sock.sendall(_wire.encode(Hello(loop.pid, error).pack()))
    loop.sock.setblocking(False)
    if error is not None:
        return 1
    gc.freeze()  # fewer copy-on-write faults in forked children
    loop.run()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # the launcher was forked: never run the interpreter's exit twice
