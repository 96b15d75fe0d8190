"""The tree under test: `TreeHarness`, which `actors.testing` exports and the
pytest plugin's `nanny_tree` fixture hands out.

It starts a tree, injects faults, and waits on the tree's events (`_waits`: with a
deadline, never a sleep, failing at once when the wait cannot succeed any more);
in strict mode, exits the test did not cause fail it (`_events` reads them). It
finds children, judges readiness and restarts through the operations layer
(actors/_operate/), as the run host does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, cast

import psutil
import pykka

from supervision import (
    UPDATE_SETTLE,
    ChildInfo,
    Event,
    EventKind,
    ExitReason,
    StartError,
    SupervisorSpec,
    UpdateOutcome,
)

from .._launcher._faults import inject_crash
from .._launcher._outputs import OwnStreams
from .._operate._find import find_node, find_target, matching, nanny_at
from .._operate._ready import is_ready
from .._operate._restart import restart
from .._shell._event_log import EventLog
from .._shell._messages import ShutdownTree
from .._shell._nanny import NannyActor, TreeNode
from .._tree import Tree
from ._deadlines import TEARDOWN_SHUTDOWN, timeout_or_left
from ._events import (
    REPORT_EVENTS,
    StrictJudge,
    UnexpectedExit,
    WaitFailed,
    culprit,
    start_failed_message,
    stderr_tail,
    tail_title,
    unexpected_message,
)
from ._events import report_sections as _report_sections
from ._ids import could_be_added, known_ids, no_such_child
from ._lines import LinesLost, after, expectation
from ._lines import Start as LinesStart
from ._lines import check as check_lines
from ._lines import count as count_lines
from ._streams import merged_ids, resolve
from ._waits import OUTPUT_EVERY, EventProbe, event_if, wait_on, wanted, what_of


class TreeHarness:
    """Starts a tree, injects faults into it, waits on its events, and on exit
    stops it and checks that none of its processes is left.

    Every wait ends at once with `WaitFailed` when it cannot succeed any more: the
    tree (or a supervisor above the awaited child) has ended, saying the last exit
    reason and stderr tail. With `strict=True`, an exit or failed start the test did
    not cause through the harness (nor declare with `expect_exit`) fails the next
    harness call, and the harness's exit, with `UnexpectedExit`.
    """

    def __init__(
        self,
        spec: SupervisorSpec,
        *,
        strict: bool = False,
        teardown_shutdown: float | None = TEARDOWN_SHUTDOWN,
        **start_kwargs: Any,
    ) -> None:
        self.spec = spec
        self.strict = strict
        # How long `stop` gives the whole tree before what is left is killed (None:
        # each child's own `shutdown`): a child that ignores SIGTERM costs a test 1 s,
        # not its 5 s.
        self.teardown_shutdown = teardown_shutdown
        self._start_kwargs = start_kwargs
        self.ref: pykka.ActorRef[NannyActor] | None = None
        self.tree: Tree | None = None
        # The tree's log from the harness's making: a start that fails leaves its events.
        log = start_kwargs.pop("log", None)
        self.log: EventLog = EventLog() if log is None else log
        # Where wait_for looks from: the tree's start, then the last fault injected
        # (kill, crash, signal, pause, resume, terminate, restart), so that "wait for
        # the restart" after a kill never returns the first start.
        self._cursor = 0
        self._judge = StrictJudge()
        # child -> (pid, ends) of the process the child's last fault hit: that process
        # is not the ready one once it is gone, or at once when the fault ends it
        # (SIGKILL, crash), however soon after the fault the wait looks.
        self._hit: dict[str, tuple[int, bool]] = {}
        self._stopped_at: int | None = None  # the log's length when stop() began
        self._own = OwnStreams()  # the launcher's stdout and stderr are ours
        self._crashed: dict[str, tuple[int, str]] = {}  # child -> (pid, what crash() raised)

    @classmethod
    def from_toml(
        cls,
        path: str | os.PathLike[str],
        *,
        vars: Mapping[str, object] | None = None,
        strict: bool = False,
        **start_kwargs: Any,
    ) -> TreeHarness:
        """A harness for the tree in a TOML file (as `nannytree run` reads it).

        `${NAME}` in the file takes its value from `vars` (e.g. `{"PORT": free_port()}`),
        then the environment; `${NAME:-default}` has a default, `$${` is a literal `${`.
        """
        from .._treefile import load_tree_file

        return cls(load_tree_file(os.fspath(path), vars=vars), strict=strict, **start_kwargs)

    # -- life cycle --

    def start(self) -> TreeHarness:
        __tracebackhide__ = True  # pytest: the test's line, not the harness's
        try:
            self.tree = Tree.start(self.spec, log=self.log, **self._start_kwargs)
        except StartError as e:
            events = self.log.snapshot()
            named = culprit(events) or e.child
            tail = stderr_tail(events, named)
            if tail and tail.strip().splitlines()[-1] not in str(e):  # not said already
                e.add_note(f"{tail_title(named, self.merged())}:\n{textwrap.indent(tail, '    ')}")
            self._judge_log()
            self._judge.news()  # strict mode: this error says it already
            # Raised from here: the frames it came through (the tree, the nanny, pykka's
            # future) say nothing about the test, whose line pytest then names.
            raise e.with_traceback(None)  # noqa: B904 (the same error, shorter)
        self.ref = self.tree.ref
        self._cursor = 0
        return self

    def stop(self) -> list[int]:
        """Stop the tree, in order, within `teardown_shutdown` s (what is still running
        then is killed); return the pids of any of its processes alive 5 s later."""
        if self._stopped_at is None:
            self._stopped_at = len(self.log)
        if self.ref is not None and self.ref.is_alive():
            if self.teardown_shutdown is not None:
                deadline = time.monotonic() + self.teardown_shutdown
                with contextlib.suppress(pykka.ActorDeadError):
                    self.ref.ask(ShutdownTree(0, deadline))  # answered once all is gone
            with contextlib.suppress(pykka.ActorDeadError):
                self.ref.stop()
        pids = [e.pid for e in self.log.snapshot() if e.pid is not None]
        return wait_gone(pids, 5.0)

    def __enter__(self) -> TreeHarness:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        left = self.stop()
        if exc_type is not None:
            return
        if left:
            raise AssertionError(f"the tree left processes behind: {left}")
        self.check_strict()

    def wait(self, timeout: float | None = None) -> ExitReason | None:
        """Wait until the tree ends by itself (gives up, auto_shutdown); its exit reason,
        whose message names the child behind a give-up and its last exit."""
        if self.tree is None:
            raise RuntimeError("the tree is not started; call start() or use `with`")
        reason = self.tree.wait(timeout)
        if reason is None:
            return None
        gave_up = [e for e in self.log.snapshot() if e.context is EventKind.MAX_INTENSITY_REACHED]
        if not gave_up or not gave_up[0].offender:
            return reason
        first = gave_up[0]  # the give-up that began the end (those above follow it)
        because = f"{first.supervisor}/{first.offender}"
        if first.reason is not None:
            because += f" (its last exit: {first.reason})"
        return dataclasses.replace(reason, message=f"{reason.message}, because of {because}")

    # -- looking --

    @property
    def nanny(self) -> Any:
        """The root nanny's pykka proxy."""
        if self.ref is None:
            raise RuntimeError("the tree is not started; call start() or use `with`")
        return self.ref.proxy()

    def child(self, child_id: str) -> ChildInfo:
        """A child anywhere in the tree, by id (the first found, depth first)."""
        __tracebackhide__ = True
        self.check_strict()
        return self._info(child_id)

    def _info(self, child_id: str) -> ChildInfo:
        return self._node(child_id).info

    def _node(self, child_id: str) -> TreeNode:
        """The child `child_id` names (an id: the first found, depth first; or a path)."""
        nodes = self.nanny.which_tree().get()
        if not matching(nodes, self.spec.id, child_id):
            known = known_ids(self.spec, nodes, self.log.snapshot())
            raise LookupError(no_such_child(self.spec.id, child_id, known, running=True))
        return find_node(nodes, self.spec.id, child_id, first=True)

    def check_id(self, child_id: str | None) -> None:
        """A misspelt id fails at once (LookupError), not after a wait's whole timeout:
        it must name a child in the tree, one it had, or a dynamic child that a
        simple_one_for_one supervisor could still add."""
        __tracebackhide__ = True
        if child_id is None or self.ref is None or not self.ref.is_alive():
            return  # not started, or ended: the wait itself says so
        try:
            nodes = self.nanny.which_tree().get()
        except pykka.ActorDeadError:
            return
        if matching(nodes, self.spec.id, child_id):
            return
        known = known_ids(self.spec, nodes, self.log.snapshot())
        if child_id in known or could_be_added(self.spec, child_id):
            return
        raise LookupError(no_such_child(self.spec.id, child_id, known))

    def pid(self, child_id: str) -> int:
        """The pid of the child's running process; LookupError if it has none, or only
        the one a fault of the harness ended (right after `kill`: wait_restarted first)."""
        __tracebackhide__ = True
        info = self.child(child_id)
        if info.pid is None:
            raise LookupError(f"child {child_id!r} has no running process")
        if self._stale(child_id, info):
            raise LookupError(
                f"child {child_id!r} has no running process yet: pid {info.pid} was ended "
                f"by this harness; wait_restarted({child_id!r}) or wait_ready first"
            )
        return info.pid

    def output(self, child_id: str, stream: str | None = None) -> str:
        """What the child wrote lately to `stream`: the last 64 KiB of its current
        process (of its last one once it exited).

        "stderr" is kept for every child (tee'd on to where it goes, unless that is a
        terminal); "stdout" when its spec says stdout="capture" (or a `ready=LogLine`
        reads it). A child whose stdout and stderr go to one file has one pipe for both:
        read it as "both" (the default then; else "stderr"). Asking for a stream that
        is not kept is a ValueError that says how to keep it."""
        __tracebackhide__ = True
        self.check_id(child_id)
        self.check_strict()
        return self._output(child_id, self._stream(child_id, stream))

    def _stream(self, child_id: str, stream: str | None) -> str:
        spec = self._owner(child_id).get_childspec(child_id).get()
        return resolve(child_id, spec, stream, self._own)

    def _output(self, child_id: str, stream: str) -> str:
        return cast(str, self._owner(child_id).read_output(child_id, stream).get())

    def merged(self) -> frozenset[str]:
        """The ids of the children whose stdout and stderr are kept as one stream."""
        return merged_ids(self.spec, self._own)

    def probe(self) -> EventProbe:
        """Record events from now on."""
        return EventProbe(self.log, self)

    def mark(self) -> int:
        """The log's position now: pass it as `since=` to look only at what follows."""
        return len(self.log)

    # -- waiting --

    def wait_for(
        self,
        context: EventKind | str | None = None,
        child: str | None = None,
        *,
        timeout: float | None = None,
        where: Callable[[Event], bool] | None = None,
        since: int | None = None,
        **fields: Any,
    ) -> Event:
        """The first matching event since the last fault this harness injected (the
        tree's start if none), or since `since` (a `mark()`, or 0 for the start).

        Waits up to `timeout` s (by default what is left of an enclosing `within`,
        else 10 s); raises TimeoutError naming the last events, or
        WaitFailed at once when the tree (or the child's supervisor) has ended.
        `fields` compare Event attributes (`pid=...`); a misspelt one is a TypeError.
        """
        __tracebackhide__ = True
        match = wanted(context, child, where, **fields)
        self.check_id(child)
        self.check_strict()
        timeout = timeout_or_left(timeout)
        start = self._cursor if since is None else since
        return wait_on(
            self,
            f"waiting for {what_of(context, child)}",
            event_if(match),
            timeout=timeout,
            start=start,
            child=child,
        )

    def expect_no_event(
        self,
        context: EventKind | str | None = None,
        child: str | None = None,
        *,
        within: float = 0.5,
        where: Callable[[Event], bool] | None = None,
        since: int | None = None,
        **fields: Any,
    ) -> None:
        """Assert that no matching event happens within `within` s (ExUnit's
        refute_receive, Akka's expectNoMessage); counted as wait_for counts."""
        __tracebackhide__ = True
        match = wanted(context, child, where, **fields)
        self.check_id(child)
        self.check_strict()
        start = self._cursor if since is None else since
        try:
            event = wait_on(
                self,
                f"expecting no {what_of(context, child)}",
                event_if(match),
                timeout=within,
                start=start,
                child=child,
            )
        except TimeoutError:
            return
        raise AssertionError(f"expected no such event within {within}s, got: {event}")

    def wait_restarted(self, child_id: str, timeout: float | None = None) -> ChildInfo:
        """Wait for `child_id` to start again after the last fault; its info then."""
        __tracebackhide__ = True
        self.check_id(child_id)
        self.wait_for(EventKind.CHILD_STARTED, child_id, timeout=timeout_or_left(timeout))
        return self._info(child_id)

    def wait_ready(self, child_id: str, timeout: float | None = None) -> ChildInfo:
        """Wait until the child is started and ready (state "running", and with a
        liveness probe, not failing it); its info then.

        Raises WaitFailed at once when its start failed (since the last fault the
        harness injected) or the tree (or its supervisor) ended, with the last exit
        reason and stderr tail; TimeoutError after `timeout` s.
        """
        __tracebackhide__ = True
        self.check_id(child_id)
        self.check_strict()
        timeout = timeout_or_left(timeout)
        now = self._ready(child_id)
        if now is not None:
            return now
        what = f"waiting for {child_id!r} to be ready"

        def failed(e: Event) -> None:
            if e.offender == child_id and e.context is EventKind.START_FAILED:
                raise WaitFailed(
                    start_failed_message(what, e, self.log.snapshot(), self.merged()), e.reason
                )

        return wait_on(
            self,
            what,
            failed,
            timeout=timeout,
            start=self._cursor,
            child=child_id,
            again=lambda: self._ready(child_id),
            again_on=lambda e: e.offender == child_id,
        )

    def _ready(self, child_id: str) -> ChildInfo | None:
        try:
            info = self._info(child_id)
        except (LookupError, pykka.ActorDeadError, RuntimeError):
            return None
        health = info.health
        ready = is_ready(info.state, None if health is None else health.status)
        return info if ready and not self._stale(child_id, info) else None

    def _stale(self, child_id: str, info: ChildInfo) -> bool:
        """Whether `info` still shows the process a fault of the harness ended."""
        hit = self._hit.get(child_id)
        if hit is None:
            return False
        pid, ends = hit
        if info.pid is None:
            return True  # between the hit process and its successor
        if info.pid != pid:
            del self._hit[child_id]  # its successor runs: nothing to tell apart any more
            return False
        return ends or _gone(pid)

    def wait_output(
        self,
        child_id: str,
        pattern: str | re.Pattern[str],
        *,
        stream: str | None = None,
        timeout: float | None = None,
    ) -> re.Match[str]:
        """Wait until the child's `stream` matches `pattern` (re.search over what
        `output` returns, with the same streams and default); the match.

        A stream that is not kept is a ValueError at once, saying how to keep it.
        Fails as the other waits do when the tree (or the child's supervisor) has
        ended, and with TimeoutError after `timeout` s.
        """
        __tracebackhide__ = True
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        self.check_id(child_id)
        self.check_strict()
        timeout = timeout_or_left(timeout)
        read = self._stream(child_id, stream)
        shown = (
            "stdout and stderr" if stream in (None, "both") and child_id in self.merged() else read
        )

        def search() -> re.Match[str] | None:
            try:
                if self._stale(child_id, self._info(child_id)):
                    return None  # what it says is the ended process's
                return regex.search(self._output(child_id, read))
            except (LookupError, pykka.ActorDeadError):
                return None

        return wait_on(
            self,
            f"waiting for {regex.pattern!r} on the {shown} of {child_id!r}",
            lambda e: None,
            timeout=timeout,
            start=self.mark(),
            child=child_id,
            again=search,
            every=OUTPUT_EVERY,
        )

    @contextlib.contextmanager
    def expect_lines(
        self,
        child_id: str,
        pattern: str | re.Pattern[str],
        *,
        stream: str | None = None,
        count: int | None = None,
        at_least: int | None = None,
        at_most: int | None = None,
        timeout: float | None = None,
    ) -> Iterator[None]:
        """Around a block: the child writes lines matching `pattern` (re.search, line
        by line) on `stream` (as `output` reads it) `count` times exactly, or at least
        / at most so many (at least once if nothing is given; `count=0`: never). Akka
        TestKit's EventFilter with occurrences.

        After the block it waits (up to `timeout`, by default what is left of an
        enclosing `within`, else 10 s) for the lines still missing, then fails with
        AssertionError if the count is wrong. Counted across at most one restart of
        the child during the block (the output kept: this run and the one before)."""
        __tracebackhide__ = True
        exactly, at_least, at_most = expectation(count, at_least, at_most)
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        self.check_id(child_id)
        read = self._stream(child_id, stream)
        shown = "stdout and stderr" if child_id in self.merged() else read
        begun = LinesStart(self._info(child_id).pid, self._output(child_id, read))
        mark = self.mark()
        yield
        limit = timeout_or_left(timeout)

        def found() -> int:
            return count_lines(regex, self._written_since(child_id, read, begun, mark))

        need = exactly if exactly is not None else at_least
        if need:
            with contextlib.suppress(TimeoutError):
                wait_on(
                    self,
                    f"waiting for {need} line(s) matching {regex.pattern!r} of {child_id!r}",
                    lambda e: None,
                    timeout=limit,
                    start=self.mark(),
                    child=child_id,
                    again=lambda: True if found() >= need else None,
                    every=OUTPUT_EVERY,
                )
        got = found()
        why = check_lines(got, exactly, at_least, at_most)
        if why is not None:
            raise AssertionError(
                f"expected {why} line(s) matching {regex.pattern!r} on the {shown} of "
                f"{child_id!r} during the block; found {got}"
            )

    def _written_since(self, child_id: str, stream: str, begun: LinesStart, mark: int) -> str:
        """What the child wrote on `stream` since a block began (`begun`, at `mark`)."""
        events, _ = self.log.since(mark, 0.0)
        runs = sum(
            1 for e in events if e.context is EventKind.CHILD_STARTED and e.offender == child_id
        )
        current = self._output(child_id, stream)
        if runs == 0:
            text = after(begun.text, current)
        elif runs == 1 and begun.pid is None:
            text = current
        elif runs == 1:
            owner = self._owner(child_id)
            before = cast(str, owner.read_output(child_id, stream, True).get())
            earlier = after(begun.text, before)
            text = None if earlier is None else earlier + current
        else:
            raise LinesLost(
                f"{child_id!r} was started {runs} times during the block: the output of "
                "the runs between is no longer kept; count over a shorter block"
            )
        if text is None:
            raise LinesLost(
                f"{child_id!r} wrote more during the block than is kept (64 KiB a run): "
                "count over a shorter block"
            )
        return text

    # -- strict mode --

    def expect_exit(self, child_id: str, times: int | None = 1) -> None:
        """Strict mode: the next `times` exits (or failed starts) of `child_id` that
        the harness did not cause are expected (None: any number, for the rest of
        the test). Declare it before the next harness call sees them."""
        if times is not None and times < 1:
            raise ValueError(f"times must be >= 1 or None, not {times!r}")
        self._judge.expect(child_id, times)

    def unexpected(self) -> list[Event]:
        """Strict mode: every exit, failed start and restart judged unexpected so far
        (up to the tree's stop)."""
        self._judge_log()
        return list(self._judge.found)

    def check_strict(self) -> None:
        """Strict mode: raise UnexpectedExit for the unexpected events no error has
        shown yet (the harness calls it before each call and at its exit)."""
        __tracebackhide__ = True
        if not self.strict:
            return
        self._judge_log()
        new = self._judge.news()
        if new:
            events = self.log.snapshot()
            raise UnexpectedExit(unexpected_message(self.spec.id, new, events, self.merged()), new)

    def _judge_log(self) -> None:
        end = len(self.log) if self._stopped_at is None else self._stopped_at
        judge = self._judge
        if judge.judged < end:
            events, _ = self.log.since(judge.judged, 0.0)
            judge.judge(events[: end - judge.judged])
            judge.judged = max(judge.judged, end)

    def report_sections(self, last: int = REPORT_EVENTS, shown: str = "") -> list[tuple[str, str]]:
        """What a failed test's report shows for this tree: its last events and the
        stderr tails of the children that crashed (the pytest plugin adds them), but
        a tail the failure (`shown`) already quotes."""
        return _report_sections(
            self.spec.id, self.log.snapshot(), len(self.log), last, self.merged(), shown
        )

    # -- faults --

    def _fault(
        self, child_id: str | None = None, pid: int | None = None, ends: bool = False
    ) -> None:
        self._cursor = len(self.log)
        if child_id is not None and pid is not None:
            self._judge.cause(pid)
            self._hit[child_id] = (pid, ends)

    def kill(self, child_id: str, sig: int = signal.SIGKILL) -> int:
        """Signal the child's process alone (not its group); returns its pid.

        After a SIGKILL, wait_ready and wait_output wait for the process that
        replaces it (after another signal, once the process is gone)."""
        __tracebackhide__ = True
        pid = self.pid(child_id)
        self._fault(child_id, pid, ends=sig == signal.SIGKILL)
        os.kill(pid, sig)
        return pid

    def signal(self, child_id: str, sig: int) -> None:
        """Signal the child's process group, through its supervisor."""
        owner = self._owner(child_id)
        self._fault(child_id, self.pid(child_id))
        owner.signal_child(child_id, sig).get()

    def pause(self, child_id: str) -> None:
        """SIGSTOP the child's group (its stop by a liveness probe is caused by this)."""
        owner = self._owner(child_id)
        self._fault(child_id, self.pid(child_id))
        owner.pause_child(child_id).get()

    def resume(self, child_id: str) -> None:
        owner = self._owner(child_id)
        self.check_strict()
        self._fault()
        owner.resume_child(child_id).get()

    def terminate(self, child_id: str) -> None:
        """Stop the child through its supervisor (terminate_child; its spec is kept)."""
        owner = self._owner(child_id)
        self.check_strict()
        self._fault()
        owner.terminate_child(child_id).get()

    def restart(self, child_id: str) -> ChildInfo:
        """Stop the child if it runs, and start it again (terminate_child, then
        restart_child); its new info."""
        target = find_target(
            self._root_ref, self.nanny.which_tree().get(), self.spec.id, child_id, first=True
        )
        self.check_strict()
        self._fault()
        restart(target)
        return self._info(child_id)

    def restart_all(self) -> list[str]:
        """Restart every child of the root in order (`Tree.restart_all`); their ids."""
        tree = self._started()
        self.check_strict()
        self._fault()
        return tree.restart_all()

    def update(
        self,
        spec_or_file: SupervisorSpec | str | os.PathLike[str],
        settle: float = UPDATE_SETTLE,
        *,
        vars: Mapping[str, object] | None = None,
    ) -> UpdateOutcome:
        """Bring the tree to a new spec or file, touching only what it changes
        (`Tree.update`, docs/update.md); what was done. The waits look from here on;
        `spec` is then the tree as it runs."""
        tree = self._started()
        self.check_strict()
        self._fault()
        try:
            return tree.update(spec_or_file, settle, vars=vars)
        finally:
            self.spec = tree.spec

    def _started(self) -> Tree:
        if self.tree is None:
            raise RuntimeError("the tree is not started; call start() or use `with`")
        return self.tree

    def crash(self, child_id: str, exception: BaseException, timeout: float = 10.0) -> int:
        """Make a Python child raise `exception` inside its target; returns its pid.

        A child still starting raises it as soon as its target begins; TimeoutError if it
        has not within `timeout` s (the exception is then withdrawn)."""
        __tracebackhide__ = True
        spec = self._owner(child_id).get_childspec(child_id).get()
        if getattr(spec, "command", None) is not None:
            raise TypeError(
                f"crash() raises inside a Python target; child {child_id!r} runs a command "
                "(it has no Python to raise in): use kill() or signal() instead"
            )
        pid = self.pid(child_id)
        self._fault(child_id, pid, ends=True)
        try:
            inject_crash(pid, exception, timeout)
        except BaseException:
            self._hit.pop(child_id, None)  # refused or withdrawn: the process runs on
            raise
        self._crashed[child_id] = (pid, repr(exception))
        return pid

    def hints(self) -> list[str]:
        """What a wait that timed out should also say: a crash the child swallowed."""
        said = []
        for child_id, (pid, what) in self._crashed.items():
            if not _gone(pid):
                said.append(
                    f"crash() raised {what} in {child_id!r} (pid {pid}), which still runs: "
                    "its own code caught it (an `except Exception` around its work?). Raise "
                    "testing.Crash(...), which `except Exception` does not catch, or kill() it"
                )
        return said

    def _owner(self, child_id: str) -> Any:
        """The proxy of the supervisor that owns `child_id`."""
        path = self._node(child_id).path
        return self.nanny_at(path.rsplit("/", 1)[0])

    def nanny_at(self, path: str) -> Any:
        """The proxy of the running supervisor at `path` ("root/pool")."""
        return nanny_at(self._root_ref, path).proxy()

    @property
    def _root_ref(self) -> pykka.ActorRef[NannyActor]:
        if self.ref is None:
            raise RuntimeError("the tree is not started; call start() or use `with`")
        return self.ref


def _gone(pid: int) -> bool:
    """Whether `pid` has ended (a zombie has)."""
    try:
        status: str = psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return True
    return bool(status == psutil.STATUS_ZOMBIE)


def wait_gone(pids: Iterable[int], timeout: float = 5.0) -> list[int]:
    """Wait until none of `pids` is alive (zombies count as gone); return the survivors."""
    pids = sorted(set(pids))
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        procs = []
        for pid in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                procs.append(psutil.Process(pid))
        psutil.wait_procs(procs, timeout=0.05)
