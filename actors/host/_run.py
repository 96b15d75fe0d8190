"""The run host's main: host a tree in the foreground, show it, serve its control
socket (RunOptions, and what they resolve to, are `_options.py`'s).

Ctrl-C or SIGTERM (or `nannytree shutdown`, or --duration) stops the tree in
reverse start order and exits 0; a tree that gives up exits 1 with the reason.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

import pykka

from actors._operate._text import printable
from actors.cli._control import ControlError, socket_for
from actors.cli._exit import FAILED, OK, USAGE
from supervision import Event, EventKind, NannyError, SupervisorSpec

from .. import EventLog, Tree
from .._launcher._journal import JournalAbsent
from .._operate._find import TIMEOUTS
from .._operate._records import EventRecord, Node, stderr_lines
from .._operate._snapshot import EventFeed, TreeInspector
from ._controller import Controller
from ._engine import NodeNames
from ._host_notify import HostNotifier, summary
from ._monitors import Monitors
from ._options import RunOptions, child_output, event_log_path, make_engine, reload_source
from ._server import ControlSocket

if TYPE_CHECKING:  # rich, for the live view only: plain output never loads it (5 MB)
    from rich.console import Console

    from actors.cli._view import LiveView

log = logging.getLogger("nannytree")
WAKE = 0.05  # seconds between looks for the end of a wait on the feed (the tree stopped)


class _Interrupted(Exception):
    pass


class _StopRequest:
    """Why the run should stop; set from signal handlers and the control thread."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.why = ""
        self.starting = True
        self.live = False

    def request(self, why: str) -> None:
        if not self.event.is_set():
            self.why = why
            self.event.set()

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.starting:
            self.starting = False  # a second signal goes to the stop path
            raise _Interrupted(name)
        if self.event.is_set():
            # Asked twice: leave now. The launcher sees its lifeline close and
            # kills every child's process group.
            if self.live:
                sys.stdout.write("\x1b[?25h")  # show the cursor rich had hidden
            sys.stderr.write(f"\nnannytree: {name} again: exiting without waiting\n")
            sys.stderr.flush()
            os._exit(FAILED)
        self.request(name)


def reopen_logs(tree: Tree) -> str:
    """Have the tree's launcher open every child's log file anew by its path (an
    external rotation moved them: docs/logs.md)."""
    spawner = tree.context.spawner
    reopen = getattr(spawner, "reopen_logs", None)
    if reopen is None or not getattr(spawner, "alive", False):
        return "no launcher runs: nothing to reopen"
    reopen()
    return "the children's log files are being reopened"


def _on_a_terminal() -> bool:
    return any(os.isatty(fd) for fd in (0, 1, 2))


def _in_background(work: Callable[[], object]) -> None:
    """From a signal handler: the work must not wait on a lock the main thread holds."""
    threading.Thread(target=work, name="nannytree-reopen", daemon=True).start()


def _make_console(out: TextIO) -> Console:
    from rich.console import Console

    if out.isatty():
        return Console(file=out, highlight=False)
    width = int(os.environ.get("COLUMNS", "160"))
    return Console(file=out, highlight=False, width=width, no_color=True)


class _Snapshots(threading.Thread):
    """Keeps the latest snapshot of the tree for the live view, off the main thread."""

    def __init__(self, inspector: TreeInspector, interval: float) -> None:
        super().__init__(name="nannytree-view", daemon=True)
        self.inspector = inspector
        self.interval = interval
        self.latest: Node | None = None
        self.busy = False
        self.failed = False
        self.done = threading.Event()

    def run(self) -> None:
        ref = self.inspector.ref
        while not self.done.is_set() and ref is not None and ref.is_alive():
            self.take()
            self.done.wait(self.interval)

    def take(self, stats: bool = True) -> None:
        """Read the tree now (also called from the main thread, just before the stop,
        so the stopped tree shows a child an `update` added since the last read)."""
        try:
            snapshot = self.inspector.snapshot(stats)
            if snapshot.state != "stopped":  # keep the last full tree for the end
                self.latest, self.busy = snapshot, False
        except pykka.ActorDeadError:
            pass
        except TIMEOUTS:
            self.busy = True
        except Exception:  # the view must outlive any one bad answer
            if not self.failed:  # once: it would repeat four times a second
                log.exception("the live view could not read the tree")
            self.failed = self.busy = True


def _as_stopped(root: Node) -> Node:
    """The last snapshot, as the stopped tree looks: every node stopped, no process."""
    for _, node in root.walk():
        if node.state != "stopped":
            node.state, node.last_exit, node.last_exit_normal = "stopped", "shutdown", True
        node.pid = node.uptime = node.cpu = node.rss = None
    return root


def _outcome(log: EventLog, root: str) -> tuple[int, str]:
    """Exit status and message for a tree that stopped by itself."""
    for event in reversed(log.snapshot()):
        if event.supervisor != root:
            continue
        if event.context is EventKind.MAX_INTENSITY_REACHED:
            message = (
                f"tree {root!r} gave up: child {event.offender!r} ended too often "
                f"(last: {event.reason}); {event.detail}"
            )
            tail = _last_stderr(log, event.offender)
            if tail:
                message += "\nits stderr ended with:\n" + "\n".join(
                    f"    | {line}" for line in tail.splitlines()
                )
            return FAILED, message
        if event.context is EventKind.AUTO_SHUTDOWN:
            return OK, (
                f"tree {root!r} shut itself down: significant child {event.offender!r} "
                f"ended (auto_shutdown = {event.detail})"
            )
    return FAILED, f"tree {root!r} stopped by itself"


def _stop_event(root: str, why: str) -> Event:
    """A stop asked of the run itself (a signal, --duration) as an operator event."""
    return Event(
        time=time.monotonic(),
        supervisor=root,
        context=EventKind.OPERATOR_ACTION,
        detail=f"shutdown by {why}: stopping tree {root!r}",
    )


def _last_stderr(log: EventLog, offender: str | None) -> str:
    """The stderr tail of the offender's last exit that had one."""
    for event in reversed(log.snapshot()):
        if event.offender == offender and event.reason is not None and event.reason.stderr_tail:
            return stderr_lines(event.reason.stderr_tail)
    return ""


class Runner:
    """One foreground run of one tree."""

    def __init__(self, spec: SupervisorSpec, opts: RunOptions, out: TextIO, err: TextIO) -> None:
        self.spec = spec
        self.opts = opts
        self.out = out
        self.err = err
        self.live = out.isatty() if opts.live is None else opts.live
        self.stop = _StopRequest()
        self.stop.live = self.live
        self.printing = True
        self.host: HostNotifier | None = None  # the service manager that started us, if any
        # An event as printed: with node names once the run has an engine.
        self.record: Callable[[Event], EventRecord] = EventRecord.from_event

    def notice(self, text: str) -> None:
        print(f"nannytree: {printable(text, lines=True)}", file=self.err, flush=True)

    def emit(self, record: EventRecord, view: LiveView | None) -> None:
        if view is not None:
            view.add(record)
        elif self.printing:
            try:
                print(str(record), file=self.out, flush=True)  # escaped by EventRecord
            except BrokenPipeError:  # `nannytree run ... | head`: keep running quietly
                self.printing = False
                # As Python's docs advise, so that the exit's flush does not fail again.
                os.dup2(os.open(os.devnull, os.O_WRONLY), self.out.fileno())

    def run(self) -> int:
        try:
            control = ControlSocket.bind(self.opts.socket or socket_for(self.spec.id))
        except ControlError as e:
            self.notice(str(e))
            return FAILED
        try:
            return self._run(control)
        finally:
            control.close()

    @staticmethod
    def _reopen_on_hangup(
        tree: Tree, controller: Controller, previous: dict[signal.Signals, Any]
    ) -> None:
        """`logs --reopen`, and SIGHUP where no terminal's hangup means it (a service),
        reopen the children's log files (docs/logs.md)."""
        controller.reopen_logs = lambda: reopen_logs(tree)
        if not _on_a_terminal():
            previous[signal.SIGHUP] = signal.signal(
                signal.SIGHUP, lambda signum, frame: _in_background(lambda: reopen_logs(tree))
            )

    def _run(self, control: ControlSocket) -> int:
        if control.replaced_stale:
            self.notice(f"replaced a stale socket left by a run that was killed: {control.path}")
        try:
            output, spec = child_output(self.opts, self.spec, control.path)
        except JournalAbsent as e:
            self.notice(f"--child-output {self.opts.child_output}: {e}")
            return FAILED
        except (OSError, ControlError) as e:
            self.notice(
                f"cannot make the children's log folder: {e}; pass --log-dir DIR or --child-output"
            )
            return FAILED
        try:
            engine = make_engine(self.opts, spec, control.path, self.notice)
        except ValueError as e:
            self.notice(f"{e}")
            return USAGE
        log = EventLog()
        # Served before the start, so `status` answers at once during a slow one.
        names = NodeNames(engine) if engine is not None else None
        inspector = TreeInspector(None, spec, log, nodes=names)
        self.record = inspector.record
        info = {"tree": spec.id, "pid": os.getpid(), "socket": str(control.path), "output": output}
        try:
            monitors = Monitors.open(
                inspector,
                log,
                metrics=self.opts.metrics,
                event_log=event_log_path(self.opts, control.path),
                max_bytes=self.opts.event_log_max_bytes,
                backups=self.opts.event_log_backups,
            )
        except (OSError, ValueError, ControlError) as e:
            inspector.close()
            self.notice(str(e))
            return FAILED
        info.update(monitors.info())
        previous = {
            sig: signal.signal(sig, self.stop.on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        controller = Controller(inspector, log, info, self.stop.request, control.closing)
        controller.reload_source = reload_source(self.opts, control.path)
        control.serve(controller.handle)
        # Plain lines as they happen, a slow start included (the live view starts after).
        feed = None if self.live else EventFeed(log)
        early = None
        if feed is not None:
            self._announce(spec, control, output)
            early = _EarlyPrinter(self, feed)
        for line in monitors.announce():
            self.notice(line)
        self.host = HostNotifier.from_environ()
        unsubscribe: Callable[[], None] | None = None
        try:
            try:
                tree = Tree(spec, log=log, engine=engine)
                monitors.watch(tree)  # before the start: metrics read it while it starts
                self._reopen_on_hangup(tree, controller, previous)  # a slow start included
                tree.start()
            except _Interrupted as e:
                self.notice(f"{e} while starting: the started children were stopped")
                return OK
            except NannyError as e:
                self.notice(f"tree {spec.id!r} could not start: {e}")
                if self.host is not None:
                    self.host.send([f"STATUS=could not start: {str(e).splitlines()[0]}"])
                return FAILED
            finally:
                self.stop.starting = False
                if early is not None:
                    early.finish()
            inspector.ref = tree.ref
            if self.host is not None:
                self.host.ready(lambda: summary(inspector.snapshot(stats=False)))
                unsubscribe = log.subscribe(self.host.changed)
            return self._serve(tree.ref, spec, control, output, inspector, feed)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if unsubscribe is not None:
                unsubscribe()
            if self.host is not None:
                self.host.close()
            inspector.close()
            controller.close()
            monitors.close()  # after the tree stopped: its last events are written

    def _serve(
        self,
        ref: pykka.ActorRef[Any],
        spec: SupervisorSpec,
        control: ControlSocket,
        output: str | None,
        inspector: TreeInspector,
        feed: EventFeed | None = None,
    ) -> int:
        log = inspector.log
        feed = EventFeed(log) if feed is None else feed
        view: LiveView | None = None
        snapshots: _Snapshots | None = None
        try:
            if self.live:
                from actors.cli._view import Header, LiveView

                header = Header(
                    spec.id,
                    os.getpid(),
                    str(control.path),
                    output,
                    default_socket=self.opts.socket is None,
                )
                view = LiveView(_make_console(self.out), header)
                snapshots = _Snapshots(inspector, self.opts.refresh)
                snapshots.start()
                view.__enter__()
            for event in feed.backlog:
                self.emit(self.record(event), view)
            self._watch(ref, feed, view, snapshots)
            stopped_by_us = self.stop.event.is_set()
            if stopped_by_us and not self.stop.why.startswith("`nannytree shutdown`"):
                log.append(_stop_event(spec.id, self.stop.why))  # that one was recorded
            self._stop_tree(ref, feed, view, snapshots)
        finally:
            if snapshots is not None:
                snapshots.done.set()
                snapshots.join()
            if view is not None:
                view.__exit__(None, None, None)
            feed.close()
        if stopped_by_us:
            self.notice(f"tree {spec.id!r} stopped ({self.stop.why})")
            return OK
        status, message = _outcome(log, spec.id)
        self.notice(message)
        return status

    def _announce(self, spec: SupervisorSpec, control: ControlSocket, output: str | None) -> None:
        """Plain mode's first lines: where the tree answers and where output goes."""
        self.notice(
            f"tree {spec.id!r} running, pid {os.getpid()}, control socket "
            f"{control.path}; Ctrl-C stops it"
        )
        if output:
            self.notice(f"children's output: {output}")

    def _pump(
        self,
        feed: EventFeed,
        view: LiveView | None,
        snapshots: _Snapshots | None,
        timeout: float,
        over: Callable[[], bool] = lambda: False,
    ) -> None:
        """Show the events of the next `timeout` seconds (and refresh the view), or
        until `over` says what it waits for came (looked at every WAKE seconds)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            event = feed.get(min(left, WAKE))
            if event is not None:
                self.emit(self.record(event), view)
            elif over():
                break
        if view is not None and snapshots is not None:
            view.update(snapshots.latest, busy=snapshots.busy)
            view.refresh()

    def _watch(
        self,
        ref: pykka.ActorRef[Any],
        feed: EventFeed,
        view: LiveView | None,
        snapshots: _Snapshots | None,
    ) -> None:
        deadline = None
        if self.opts.duration is not None:
            deadline = time.monotonic() + self.opts.duration

        def over() -> bool:
            return self.stop.event.is_set() or not ref.is_alive()

        while not over():
            if deadline is not None and time.monotonic() >= deadline:
                self.stop.request(f"--duration {self.opts.duration:g}s")
                break
            left = self.opts.refresh if deadline is None else deadline - time.monotonic()
            self._pump(feed, view, snapshots, max(0.0, min(self.opts.refresh, left)), over)

    def _stop_tree(
        self,
        ref: pykka.ActorRef[Any],
        feed: EventFeed,
        view: LiveView | None,
        snapshots: _Snapshots | None,
    ) -> None:
        """Stop in reverse start order, showing the events as they happen."""
        if view is not None:
            view.header.note = f"stopping ({self.stop.why or 'the tree ended'})..."
        if snapshots is not None:
            snapshots.take(stats=False)
        if self.host is not None:
            self.host.stopping(self.stop.why or "the tree ended")
        stopper = threading.Thread(target=ref.stop, name="nannytree-stop", daemon=True)
        stopper.start()
        while stopper.is_alive():
            self._pump(feed, view, snapshots, self.opts.refresh, lambda: not stopper.is_alive())
        self._pump(feed, view, snapshots, 0.01, lambda: True)  # what the last stops said
        if snapshots is not None:
            snapshots.done.set()
            snapshots.join()
            if view is not None and snapshots.latest is not None:
                view.header.note = ""
                view.update(_as_stopped(snapshots.latest))


class _EarlyPrinter(threading.Thread):
    """Prints a tree's plain event lines while its start is under way (the main thread
    is blocked in it); `finish` hands the feed back, the rest of it unread."""

    def __init__(self, runner: Any, feed: EventFeed) -> None:
        super().__init__(name="nannytree-start-printer", daemon=True)
        self.runner, self.feed = runner, feed
        self.done = threading.Event()
        self.start()

    def run(self) -> None:
        # Until `finish`, not until a lull: a child crash-looping from the start makes
        # events without a pause, and the feed's next reader takes the rest in order.
        while not self.done.is_set():
            event = self.feed.get(0.05)
            if event is not None:
                self.runner.emit(self.runner.record(event), None)

    def finish(self) -> None:
        self.done.set()
        self.join()


def run_tree(
    spec: SupervisorSpec,
    opts: RunOptions,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run `spec` in the foreground until stopped; the process exit status."""
    return Runner(spec, opts, out or sys.stdout, err or sys.stderr).run()
