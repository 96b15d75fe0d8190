"""The launcher's event loop: the host's requests, each child's pidfd, the reaping
and report of every exit, and the restarts the host armed ahead of it.

Single-threaded (so forking is safe). The pieces it drives: `_spawn` starts
children, `_channels` reads what they write, `_tee` passes tee'd output on to
where it was going, `_reports` sends to the host,
`_daemons` follows a daemon that forks itself, `_orphans` kills what a child
left behind, `_group_wait` holds an exit until the child's group is empty.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import socket
import time
from collections.abc import Callable

from . import _protocol, _wire
from ._channels import Channels
from ._daemons import ForkingDaemons
from ._group_wait import GroupWait, Held
from ._launched import Launched, SpawnError
from ._orphans import OrphanScan, kill_orphans, sweep
from ._procfs import proc_stat
from ._protocol import (
    RESPAWNING,
    Arm,
    CancelChain,
    Define,
    Disarm,
    Discard,
    Exited,
    Failure,
    Follow,
    Forget,
    Forked,
    Grant,
    Prepare,
    Prepared,
    Reopen,
    Respawned,
    Spawn,
    Spawned,
    SpawnFailed,
    StandbyDied,
)
from ._record import Record
from ._reports import Reports
from ._spawn import Starter
from ._tee import Tee, own_stdio

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# How often a daemon's pid file is looked at while it is being written.
PID_FILE_POLL = 0.01
FD_MARGIN = 256  # fds kept free for a spawn's own pipes and files, and our own
# Past this share of our fd room a child's streams are not tee'd (they go straight to
# their destination): a tee costs a pipe per stream, a pidfd saves a walk of all children.
TEE_SHARE = 0.75
STANDBY_FDS = 5  # at most, per warm standby: its "go" pipe, a pipe and a file per stream
FLUSH_AT_EXIT = 0.3  # s for tee'd output still waiting, within the guardian's grace


def _pidfds_work() -> bool:
    """Whether this kernel has pidfd_open (Linux 5.3)."""
    try:
        fd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        return False
    os.close(fd)
    return True


def _fd_limit() -> int:
    """How many fds we may hold: our soft limit, less a margin."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(0, soft - FD_MARGIN)


class LauncherLoop:
    """The launcher proper, from its start until it kills everything on its way out."""

    def __init__(self, sock_fd: int, lifeline_fd: int) -> None:
        self.pid = os.getpid()
        stdio = own_stdio(reserved=(sock_fd, lifeline_fd))  # before we open any fd
        # Passed fds arrive inheritable: they must not leak into commands (trap 2).
        self.sock = socket.socket(fileno=sock_fd)
        self.sock.set_inheritable(False)
        self.sock.setblocking(False)
        os.set_inheritable(lifeline_fd, False)
        self.lifeline = lifeline_fd
        self.children: dict[int, Launched] = {}
        self.sel = selectors.DefaultSelector()
        self.tee = Tee(self.sel, stdio)
        self.starter = Starter(self.pid, self.tee)
        self.daemons = ForkingDaemons(
            self.pid,
            self.children,
            adopted=self._adopted,
            ended=lambda child: self._ended(child, 0),
            failed=self._pid_file_failed,
        )
        self.scan = OrphanScan(self.pid, self._kill_orphans)
        self.groups = GroupWait(self._release, self._reap_group)
        self.reports = Reports(self.sock)
        self.requests = _wire.Decoder(_protocol.HOST_FRAME)
        self._recv_buf = bytearray(1 << 18)
        self._recv_view = memoryview(self._recv_buf)
        self.pidfds = _pidfds_work()
        self.fd_limit = _fd_limit()
        self.granted: dict[int, int] = {}  # group -> autonomous restarts allowed in all
        self.used: dict[int, int] = {}  # group -> autonomous restarts done
        self.stopping = False
        self.host_gone = False
        self.unwatched: set[int] = set()  # children without a pidfd: reaped on SIGCHLD

        self.channels = Channels(self.sel, self.report, self.children.__contains__)
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        # A Python-level handler is what makes the C handler write the wakeup fd.
        signal.signal(signal.SIGCHLD, self._on_sigchld)
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_stop_signal)
        self.sel.register(self.sock, selectors.EVENT_READ, self._on_socket)
        self.sel.register(lifeline_fd, selectors.EVENT_READ, self._on_lifeline)
        self.sel.register(self._wake_r, selectors.EVENT_READ, self._on_wakeup)

    # -- signals ---------------------------------------------------------------

    def _on_sigchld(self, signum: int, frame: object) -> None:
        pass  # the wakeup fd carries it to the loop

    def _on_stop_signal(self, signum: int, frame: object) -> None:
        self.stopping = True

    # -- reports ---------------------------------------------------------------

    def report(self, record: Record) -> None:
        self.reports.add(record)

    def flush(self) -> None:
        """Send what the socket takes now; the rest waits for it to drain."""
        if self.host_gone:
            self.reports.clear()
            return
        if not self.reports.send():
            self.host_gone = self.stopping = True
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.reports.pending else 0)
        self.sel.modify(self.sock, events, self._on_socket)

    # -- the loop --------------------------------------------------------------

    def run(self) -> None:
        while not self.stopping:
            timeout = self.scan.timeout()
            if self.daemons.waiting:
                timeout = min(timeout, PID_FILE_POLL) if timeout is not None else PID_FILE_POLL
            for due in (self.groups.timeout(), self.starter.listeners.timeout()):
                if due is not None:
                    timeout = min(timeout, due) if timeout is not None else due
            for key, mask in self.sel.select(timeout):
                callback: Callable[[int], None] = key.data
                callback(mask)
                if self.stopping:
                    break
            if self.daemons.waiting:
                self.daemons.look()
            self.groups.look()
            self.starter.listeners.expire()
            if self.scan.under_way:
                self.flush()  # the exits' reports first: the scan must never delay them
                self.scan.step()
            elif self.scan.due is not None and time.monotonic() >= self.scan.due:
                self.flush()
                self._read_requests()  # a Disarm sent before an exit is seen before it
                self._reap()
                self.scan.start()
            self.flush()
        self.kill_everything()

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
            # the kernel's list of all our children, which is O(N) per call. While an
            # exit waits for its group to empty, at once: it may be of that group.
            if self.groups.held:
                self._reap()
            self.scan.schedule()
        else:
            self._reap()  # some child has no pidfd (past our fd limit): it may be this one

    def _on_socket(self, mask: int) -> None:
        if mask & selectors.EVENT_READ:
            self._read_requests()
        if mask & selectors.EVENT_WRITE:
            self.flush()

    # -- the host's requests ----------------------------------------------------

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
                self._on_request(record)

    def _on_request(self, record: Record) -> None:
        if isinstance(record, Spawn):
            self._spawn(record)
        elif isinstance(record, CancelChain):
            self.starter.fail_chain(record.chain)
        elif isinstance(record, Define):
            self.starter.templates[record.template] = record.settings
            self.starter.listeners.share(record.template, record.settings.sockets)
        elif isinstance(record, Forget):
            self.starter.templates.pop(record.template, None)
            self.starter.listeners.release(record.template)
        elif isinstance(record, Prepare):
            self._prepare(record)
        elif isinstance(record, Discard):
            self.starter.discard(record.standby)
        elif isinstance(record, Arm):
            child = self.children.get(record.pid) or self.groups.child(record.pid)
            if child is not None:
                child.arm = record
        elif isinstance(record, Disarm):
            # Its exit may be held for its group: a stop that comes meanwhile still counts.
            child = self.children.get(record.pid) or self.groups.child(record.pid)
            if child is not None:
                child.arm = None
        elif isinstance(record, Grant):
            self.granted[record.budget] = record.granted
        elif isinstance(record, Follow):
            self.daemons.follow(record.pid, record.main_pid)
        elif isinstance(record, Reopen):
            self.tee.reopen()

    def _spawn(self, request: Spawn) -> None:
        if request.chain and self.starter.chain_failed(request.chain):
            message = "not started: a start before it in its run failed or was cancelled"
            self.report(SpawnFailed(request.req, errno.ECANCELED, message))
            return
        if request.standby is not None:
            standby = self.starter.go(request.standby)
            if standby is not None:
                self._add(standby)
                self.report(Spawned(request.req, standby.pid))
                return
        try:
            child = self._start(request.template)
        except SpawnError as exc:
            if request.chain:
                self.starter.fail_chain(request.chain)
            self.report(SpawnFailed(request.req, exc.errno, exc.message))
            return
        self.report(Spawned(request.req, child.pid))

    def _start(self, template_id: int) -> Launched:
        """Start a child from a template and watch it; raises SpawnError."""
        child = self.starter.start(template_id, tee=self._tee_room())
        self.daemons.started(child)
        self._add(child, control=True)
        return child

    def _prepare(self, request: Prepare) -> None:
        standby = self.starter.prepare(request.standby, request.template, tee=self._tee_room())
        if standby is None:
            self.report(Prepared(request.standby, 0))
            return
        self.channels.listen_control(standby)
        self.report(Prepared(request.standby, standby.pid))

    def _add(self, child: Launched, *, control: bool = False) -> None:
        """A child started (or a standby told to go): its exit watched, its output read."""
        self.children[child.pid] = child
        self._watch(child)
        if control:
            self.channels.listen_control(child)
        self.channels.listen_output(child)

    # -- fds -------------------------------------------------------------------------

    def _held(self) -> int:
        """The fds we hold, counted, not guessed per child: those registered with the
        selector (a child's pidfd, control pipe, captured and tee'd pipes), the tee'd
        pipes not read while their destination is full, the files of tee'd streams,
        and what warm standbys hold (at most STANDBY_FDS each)."""
        registered = len(self.sel.get_map()) - self.tee.watched + self.channels.paused
        return registered + self.tee.owned + STANDBY_FDS * len(self.starter.standbys)

    def _tee_room(self) -> bool:
        """Whether a child started now may have its streams tee'd: not past TEE_SHARE
        of our fd room, which is kept for pidfds (docs/launcher.md, "Tee'd output")."""
        return self._held() < self.fd_limit * TEE_SHARE

    # -- exits ---------------------------------------------------------------------

    def _watch(self, child: Launched) -> None:
        """Learn of the child's exit through a pidfd, while we have fds to spare."""
        if not self.pidfds or self._held() >= self.fd_limit:
            self.unwatched.add(child.pid)
            return
        try:
            child.pidfd = os.pidfd_open(child.pid)
        except OSError:
            self.unwatched.add(child.pid)
            return
        self.sel.register(child.pidfd, selectors.EVENT_READ, lambda mask: self._on_pidfd(child))

    def _on_pidfd(self, child: Launched) -> None:
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

    def _unwatch(self, child: Launched) -> None:
        if child.pidfd >= 0:
            self.sel.unregister(child.pidfd)
            os.close(child.pidfd)
            child.pidfd = -1

    def _reap(self) -> None:
        """Reap every child that ended: ours (reported), standbys and orphans (trap 16)."""
        if self.groups.held:
            self._reap_each(os.P_ALL, 0)  # each one's group is wanted
            return
        # SIGCHLD coalesces: one wakeup may stand for many exits.
        reaped = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            reaped |= self._reaped(pid, status)
        if reaped:
            self.scan.schedule()

    def _reap_each(self, idtype: int, ident: int) -> None:
        """Reap what ended (all, or of one group with P_PGID), each one's group read
        from its zombie first: the exits held on that group are looked at again."""
        while True:
            try:
                info = os.waitid(idtype, ident, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            pid = info.si_pid
            st = proc_stat(pid)
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                got = 0
            if not got:
                return  # waitable a moment ago: nothing sane to loop on
            if self._reaped(pid, status):
                self.scan.schedule()
            self.groups.reaped(pid, st.pgid if st is not None else 0)

    def _reap_group(self, pgid: int) -> None:
        self._reap_each(os.P_PGID, pgid)

    def _reaped(self, pid: int, status: int) -> bool:
        """`pid` was reaped: True when it was one of our children (reported)."""
        child = self.children.pop(pid, None)
        if child is None:
            self._standby_gone(pid)
            return False  # a standby, or an orphan re-parented to us: reaped, not reported
        self._exited(child, status)
        return True

    def _standby_gone(self, pid: int) -> None:
        ended = self.starter.standby_ended(pid)
        if ended is None:
            return
        standby, sid = ended
        if sid is not None:
            self.report(StandbyDied(sid))
        self.channels.close_control(standby)
        self.channels.drain_output(standby)  # why it died, perhaps: to a tee'd destination

    def _exited(self, child: Launched, status: int) -> None:
        """One of our children was reaped: kill what it left, report it (and maybe restart it)."""
        self.unwatched.discard(child.pid)
        if child.pidfd >= 0:
            self._unwatch(child)
            self._watch_one_more()
        code = os.waitstatus_to_exitcode(status)
        if child.token and self.daemons.first_exited(child, code):
            return
        self._ended(child, code)

    def _ended(self, child: Launched, code: int) -> None:
        self.daemons.settled(child)
        detached: list[int] = []
        if code == 0 and child.token:
            detached = self.daemons.left_behind(child)  # a daemon that forked itself, unasked
        uptime = time.monotonic() - child.started
        # Grandchildren never outlive their parent: its group now, and those that
        # left it (re-parented to us, the subreaper) at the next orphan scan.
        with contextlib.suppress(OSError):
            os.killpg(child.pgid, signal.SIGKILL)
        groups, pids = self._kill_detached(child, detached)
        self.channels.read_control(child)  # the error, if any, was written before the exit
        self.channels.close_control(child)
        self.channels.drain_output(child)
        # Reported (and restarted) once what it leaves is gone: `_release`.
        self.groups.hold(Held(child, code, uptime, detached, True, groups, pids))
        self.scan.schedule()

    @staticmethod
    def _kill_detached(child: Launched, detached: list[int]) -> tuple[set[int], set[int]]:
        """Kill what a command that daemonized itself left (the group of one that leads
        its own); the groups and processes to wait for, the child's group included."""
        groups, pids = {child.pgid}, set()
        for other in detached:
            try:
                pgid = os.getpgid(other)
            except OSError:
                continue  # gone already
            with contextlib.suppress(OSError):
                if pgid == other:
                    os.killpg(other, signal.SIGKILL)
                    groups.add(other)
                else:
                    os.kill(other, signal.SIGKILL)
                    pids.add(other)
        return groups, pids

    def _release(self, held: Held, waited: float, left: int) -> None:
        """A held exit, its processes gone (or `left` of them still there at the bound):
        reported, and an armed child restarted (docs/launcher.md)."""
        child = held.child
        respawning = (
            held.respawn
            and not held.detached
            and not self.stopping
            and self._covered(child, held.code, held.uptime)
        )
        self.report(
            Exited(
                child.pid,
                held.code,
                held.uptime,
                child.error,
                RESPAWNING if respawning else 0,
                held.detached,
                waited,
                left,
            )
        )
        if respawning:
            self.flush()  # the host hears of the exit now, not after the spawn
            self.report(Respawned(child.pid, self._respawn(child)))

    def _covered(self, child: Launched, code: int, uptime: float) -> bool:
        """Whether an armed child is restarted at once: its exit is covered and its
        supervisor's budget allows (then one restart of the budget is used)."""
        arm = child.arm
        if arm is None or uptime < arm.min_uptime:
            return False
        if not arm.any_exit and code >= 0 and code in arm.normal_codes:
            return False
        used = self.used.get(arm.budget, 0)
        if used >= self.granted.get(arm.budget, 0):
            return False
        self.used[arm.budget] = used + 1  # as the host counts it: on the announced exit
        return True

    def _respawn(self, child: Launched) -> int:
        """Start a covered child again from its template (its worker's own standby, if it
        has one: another child's of the same template is that child's); the new pid, or 0."""
        standby = child.arm.standby if child.arm is not None else 0
        successor = self.starter.go(standby) if standby else None
        if successor is not None:
            self._add(successor)
            return successor.pid
        try:
            return self._start(child.template).pid
        except SpawnError:
            return 0  # the host restarts it the ordinary way, and hears why it fails

    # -- daemons that fork themselves (`_daemons` decides) ------------------------

    def _adopted(self, child: Launched, first: int) -> None:
        """The child's main process is now `child.pid`, no longer its first process's."""
        self.scan.schedule()  # what was spared while its pid file was awaited
        self.children[child.pid] = child
        self._watch(child)
        self.report(Forked(first, child.pid, child.pgid))

    def _pid_file_failed(self, child: Launched, why: str) -> None:
        """No main process within pid_timeout: the start failed; its tree is killed."""
        self.daemons.settled(child)
        with contextlib.suppress(OSError):
            os.killpg(child.pgid, signal.SIGKILL)
        self.channels.drain_output(child)
        uptime = time.monotonic() - child.started
        child.error = Failure("PidFileError", why, "")
        self.groups.hold(Held(child, 0, uptime, [], False, {child.pgid}))
        # What it forked, spared while its pid file was awaited and re-parented to us,
        # goes with the scan.
        self.scan.schedule()

    # -- orphans (`_orphans` finds and kills them) ---------------------------------

    def _kill_orphans(self, pids: list[int]) -> None:
        known = set(self.children)
        known.update(self.starter.standby_pids())
        known.update(self.starter.discarded)
        if kill_orphans(self.pid, pids, known, self.daemons.spares()):
            self.scan.schedule()

    # -- shutdown --------------------------------------------------------------

    def kill_everything(self) -> None:
        """Kill every child's group, then every process re-parented to us, until none."""
        for pid in [*self.children, *self.starter.standby_pids()]:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        sweep(self.pid)
        self.groups.release_all()  # reported, not restarted: we are stopping
        for child in self.children.values():
            self.channels.drain_output(child)  # their last words, for tee'd destinations
        self.tee.flush(FLUSH_AT_EXIT)
        self.children.clear()
        self.starter.listeners.close_all()
        if not self.host_gone:
            self.reports.send_all(timeout=1.0)  # a host that stopped reading must not keep us
