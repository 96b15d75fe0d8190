"""Testing with nannytree: scripted children, fault injection, event probes, and
FakeEngine, an in-process engine for remote subtrees.

The pytest plugin (`nanny_tree` fixture) is built from these; they work
without pytest too:

    with TreeHarness(spec) as tree:
        tree.kill("worker")
        tree.wait_for(EventKind.CHILD_STARTED, "worker", incarnation=2)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

import psutil
import pykka

from supervision import (
    ChildInfo,
    Event,
    EventKind,
    ExitReason,
    SupervisorSpec,
)
from supervision.simulate import event_sequence

from ._fake_engine import FakeEngine as FakeEngine  # the fake behind the engine port
from ._fake_engine import FakeHandle as FakeHandle
from ._launcher._faults import inject_crash
from ._process._fake import FakeChild as FakeChild  # the fake behind the process port
from ._process._fake import FakeSpawner as FakeSpawner
from ._shell._event_log import EventLog
from ._shell._nanny import NannyActor, TreeNode
from ._tree import Tree

# -- scripted children (OTP's supervisor_1, for processes) ---------------------


def run_forever() -> None:
    """Run until stopped."""
    while True:
        time.sleep(3600)


def exit_with(code: int, after: float = 0.0) -> None:
    """Exit with `code`, after `after` seconds."""
    time.sleep(after)
    sys.exit(code)


def crash_after(seconds: float, code: int = 1) -> None:
    """Run `seconds`, then exit abnormally with `code`."""
    exit_with(code, seconds)


def raise_after(seconds: float, exception: BaseException) -> None:
    """Run `seconds`, then raise `exception`."""
    time.sleep(seconds)
    raise exception


def ignore_sigterm() -> None:
    """Ignore SIGTERM: only SIGKILL (after the spec's shutdown) stops it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from . import child

    child.ready()
    run_forever()


def hang_on_start() -> None:
    """Never become ready (use with ready="notify"): its start times out."""
    run_forever()


def ready_after(seconds: float) -> None:
    """Become ready after `seconds` (use with ready="notify"), then run."""
    from . import child

    time.sleep(seconds)
    child.ready()
    run_forever()


# -- a tree under test ----------------------------------------------------------


_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(Event))


def _wanted(
    context: EventKind | None,
    child: str | None,
    where: Callable[[Event], bool] | None,
    **fields: Any,
) -> Callable[[Event], bool]:
    unknown = sorted(set(fields) - set(_EVENT_FIELDS))
    if unknown:
        # Caught here, not as an AttributeError inside the wait's predicate.
        raise TypeError(
            f"unknown event field {unknown[0]!r}; an Event has: {', '.join(_EVENT_FIELDS)}"
        )

    def match(e: Event) -> bool:
        return (
            (context is None or e.context is context)
            and (child is None or e.offender == child)
            and all(getattr(e, k) == v for k, v in fields.items())
            and (where is None or where(e))
        )

    return match


class EventProbe:
    """Records a tree's events from the moment it is made, for assertions in order."""

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self._start = len(log)

    @property
    def events(self) -> list[Event]:
        return self._log.snapshot()[max(self._start - self._log.dropped, 0) :]

    def contexts(self, child: str | None = None) -> list[EventKind]:
        return [e.context for e in self.events if child is None or e.offender == child]

    def sequence(self) -> list[tuple[str, str, str | None]]:
        """(supervisor, context, offender) of each event: what an order assertion compares."""
        return event_sequence(self.events)

    def wait_for(
        self,
        context: EventKind | None = None,
        child: str | None = None,
        *,
        timeout: float = 10.0,
        where: Callable[[Event], bool] | None = None,
        **fields: Any,
    ) -> Event:
        """The first event since the probe began that matches; waits up to `timeout` s."""
        return self._log.wait_for(
            _wanted(context, child, where, **fields), timeout, start=self._start
        )


class TreeHarness:
    """Starts a tree, injects faults into it, waits on its events, and on exit
    stops it and checks that none of its processes is left."""

    def __init__(self, spec: SupervisorSpec, **start_kwargs: Any) -> None:
        self.spec = spec
        self._start_kwargs = start_kwargs
        self.ref: pykka.ActorRef[NannyActor] | None = None
        self.tree: Tree | None = None
        self.log = EventLog()
        # Where wait_for looks from: the tree's start, then the last fault injected
        # (kill, crash, signal, pause, resume), so that "wait for the restart" after
        # a kill never returns the first start.
        self._cursor = 0

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str], **start_kwargs: Any) -> TreeHarness:
        """A harness for the tree in a TOML file (as `nannytree run` reads it)."""
        from ._treefile import load_tree_file

        return cls(load_tree_file(os.fspath(path)), **start_kwargs)

    # -- life cycle --

    def start(self) -> TreeHarness:
        self.tree = Tree.start(self.spec, **self._start_kwargs)
        self.ref, self.log = self.tree.ref, self.tree.log
        self._cursor = 0
        return self

    def stop(self) -> list[int]:
        """Stop the tree; return the pids of any of its processes still alive after 5 s."""
        if self.ref is not None and self.ref.is_alive():
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
        if left and exc_type is None:
            raise AssertionError(f"the tree left processes behind: {left}")

    def wait(self, timeout: float | None = None) -> ExitReason | None:
        """Wait until the tree ends by itself (gives up, auto_shutdown); its exit reason."""
        if self.tree is None:
            raise RuntimeError("the tree is not started; call start() or use `with`")
        return self.tree.wait(timeout)

    # -- looking --

    @property
    def nanny(self) -> Any:
        """The root nanny's pykka proxy."""
        if self.ref is None:
            raise RuntimeError("the tree is not started; call start() or use `with`")
        return self.ref.proxy()

    def child(self, child_id: str) -> ChildInfo:
        """A child anywhere in the tree, by id (the first found, depth first)."""
        node = _find(self.nanny.which_tree().get(), child_id)
        if node is None:
            raise LookupError(f"no child {child_id!r} in tree {self.spec.id!r}")
        return node.info

    def pid(self, child_id: str) -> int:
        pid = self.child(child_id).pid
        if pid is None:
            raise LookupError(f"child {child_id!r} has no running process")
        return pid

    def probe(self) -> EventProbe:
        """Record events from now on."""
        return EventProbe(self.log)

    def mark(self) -> int:
        """The log's position now: pass it as `since=` to look only at what follows."""
        return len(self.log)

    def wait_for(
        self,
        context: EventKind | None = None,
        child: str | None = None,
        *,
        timeout: float = 10.0,
        where: Callable[[Event], bool] | None = None,
        since: int | None = None,
        **fields: Any,
    ) -> Event:
        """The first matching event since the last fault this harness injected (the
        tree's start if none), or since `since` (a `mark()`, or 0 for the start).

        Waits up to `timeout` s; raises TimeoutError naming the last events.
        `fields` compare Event attributes (`pid=...`); a misspelt one is a TypeError.
        """
        start = self._cursor if since is None else since
        return self.log.wait_for(_wanted(context, child, where, **fields), timeout, start=start)

    def expect_no_event(
        self,
        context: EventKind | None = None,
        child: str | None = None,
        *,
        within: float = 0.5,
        where: Callable[[Event], bool] | None = None,
        since: int | None = None,
        **fields: Any,
    ) -> None:
        """Assert that no matching event happens within `within` s (ExUnit's
        refute_receive, Akka's expectNoMessage); counted as wait_for counts."""
        start = self._cursor if since is None else since
        try:
            event = self.log.wait_for(_wanted(context, child, where, **fields), within, start=start)
        except TimeoutError:
            return
        raise AssertionError(f"expected no such event within {within}s, got: {event}")

    def wait_restarted(self, child_id: str, timeout: float = 10.0) -> ChildInfo:
        """Wait for `child_id` to start again after the last fault; its info then."""
        self.wait_for(EventKind.CHILD_STARTED, child_id, timeout=timeout)
        return self.child(child_id)

    def _fault(self) -> None:
        self._cursor = len(self.log)

    # -- faults --

    def kill(self, child_id: str, sig: int = signal.SIGKILL) -> int:
        """Signal the child's process alone (not its group); returns its pid."""
        pid = self.pid(child_id)
        self._fault()
        os.kill(pid, sig)
        return pid

    def signal(self, child_id: str, sig: int) -> None:
        """Signal the child's process group, through its supervisor."""
        owner = self._owner(child_id)
        self._fault()
        owner.signal_child(child_id, sig).get()

    def pause(self, child_id: str) -> None:
        owner = self._owner(child_id)
        self._fault()
        owner.pause_child(child_id).get()

    def resume(self, child_id: str) -> None:
        owner = self._owner(child_id)
        self._fault()
        owner.resume_child(child_id).get()

    def crash(self, child_id: str, exception: BaseException) -> int:
        """Make a Python child raise `exception` inside its target; returns its pid."""
        spec = self._owner(child_id).get_childspec(child_id).get()
        if getattr(spec, "command", None) is not None:
            raise TypeError(
                f"crash() raises inside a Python target; child {child_id!r} runs a command "
                "(it has no Python to raise in): use kill() or signal() instead"
            )
        pid = self.pid(child_id)
        self._fault()
        inject_crash(pid, exception)
        return pid

    def _owner(self, child_id: str) -> Any:
        """The proxy of the supervisor that owns `child_id`."""
        path = _path_of(self.nanny.which_tree().get(), child_id)
        if path is None:
            raise LookupError(f"no child {child_id!r} in tree {self.spec.id!r}")
        proxy = self.nanny
        for part in path.split("/")[1:-1]:
            proxy = proxy.child_nanny(part).get().proxy()
        return proxy


def _find(nodes: Iterable[TreeNode], child_id: str) -> TreeNode | None:
    for node in nodes:
        if node.info.id == child_id:
            return node
        found = _find(node.children, child_id)
        if found is not None:
            return found
    return None


def _path_of(nodes: Iterable[TreeNode], child_id: str) -> str | None:
    node = _find(nodes, child_id)
    return node.path if node is not None else None


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
