"""Starting children: a command exec'd, a Python target forked or run in a fresh
interpreter, a warm standby forked ahead; and runs of starts (chains).

`Starter` only makes processes and says what it made (a `Launched`); the loop
(`_loop`) watches them, reads them and reports them. How each kind is made is in
`_exec` (commands), `_targets` (forked and fresh Python targets) and `_outputs`
(the child's stdout and stderr).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from . import _listeners
from ._confine import Confinement
from ._daemons import TOKEN_ENV, child_token
from ._exec import close_all, fork_exec, posix_spawn, which
from ._launched import Launched, SpawnError
from ._listeners import ChildSetup
from ._outputs import Outputs, OwnStreams
from ._procfs import boot_ticks
from ._protocol import Template
from ._targets import another_user, fork_target, spawn_fresh
from ._tee import Tee

# Runs of starts cancelled or failed, remembered so their later spawns start nothing;
# a supervisor names a new chain per run, so only the recent ones matter.
FAILED_CHAINS = 1024


def _confinement(t: Template) -> Confinement | None:
    if not t.limits and not t.no_new_privs:
        return None
    return Confinement(t.limits, t.no_new_privs)


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
        self.own_streams = OwnStreams()

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
        outputs = Outputs(self.own_streams)
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
            elif template.fresh or another_user(template):
                pid, control_fd = spawn_fresh(self.me, template, out_fd, err_fd, setup, confine)
            else:
                pid, control_fd = fork_target(
                    self.me, template, out_fd, err_fd, None, setup, confine
                )
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
            path = which(argv[0], search)
        env = {**t.env, TOKEN_ENV: token}
        try:
            if t.pid_env is None and setup is None and confine is None:
                pid = posix_spawn(path, argv, env, out_fd, err_fd)
            else:
                pid = fork_exec(path, argv, env, out_fd, err_fd, t.pid_env, setup, confine)
        except SpawnError:
            raise
        except OSError as exc:
            self._paths.pop(key, None)
            raise SpawnError(
                exc.errno, f"cannot execute {path!r}: {exc.strerror}; check the command"
            ) from None
        self._paths[key] = path
        return pid

    # -- warm standbys -------------------------------------------------------------------

    def prepare(self, standby: int, template_id: int, *, tee: bool = True) -> Launched | None:
        """Fork a standby of a target's template (None: it could not be)."""
        template = self.templates.get(template_id)
        outputs = Outputs(self.own_streams)
        go_r, go_w = os.pipe()
        try:
            if template is None or template.payload is None or template.fresh:
                raise SpawnError(None, "no template for a standby")
            self._chdir(template.cwd)
            outputs.open(self.tee, template, tee)
            setup = self._setup(template_id, template)
            out_fd, err_fd, confine = outputs.out_fd, outputs.err_fd, _confinement(template)
            if another_user(template):  # a fork of us would hold the others' templates
                pid, control_fd = spawn_fresh(
                    self.me, template, out_fd, err_fd, setup, confine, go_r
                )
            else:
                pid, control_fd = fork_target(
                    self.me, template, out_fd, err_fd, go_r, setup, confine
                )
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
