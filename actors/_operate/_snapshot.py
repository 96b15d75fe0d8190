"""What a running tree looks like right now: one snapshot, shared by the live view,
the control socket's `status` and `wait --ready`, plus the tree's events as
printable records."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

import psutil
import pykka

from supervision import (
    AnySpec,
    ChildInfo,
    Event,
    EventKind,
    Health,
    NannyError,
    SupervisorSpec,
)

from .._shell._api import TreeNode
from .._shell._event_log import EventLog
from ._find import TIMEOUTS, Target, find_target
from ._records import EventRecord, Node


class NodeNames(Protocol):
    """The names of an engine's nodes, for display (the run host's, from its engine)."""

    def name(self, node: str | None) -> str | None: ...

    def rename(self, text: str) -> str: ...


# -- the snapshot ------------------------------------------------------------------


def _sum(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


class ProcStats:
    """CPU percent and RSS of a process and its descendants, sampled on demand.

    CPU is the share used since the previous sample of the same pid (since the
    process started, on the first one). Thread-safe: the view and the control
    socket share one.
    """

    MIN_INTERVAL = 0.2

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: dict[int, psutil.Process] = {}
        self._last: dict[int, tuple[float, float, float]] = {}  # pid: (when, cpu s, percent)

    def sample(self, pid: int) -> tuple[float | None, int | None]:
        with self._lock:
            try:
                proc = self._procs.get(pid)
                if proc is None or not proc.is_running():
                    proc = self._procs[pid] = psutil.Process(pid)
                    self._last.pop(pid, None)
                family = [proc, *proc.children(recursive=True)]
                cpu_s, rss = 0.0, 0
                for p in family:
                    try:
                        with p.oneshot():
                            t = p.cpu_times()
                            cpu_s += t.user + t.system
                            rss += p.memory_info().rss
                    except psutil.Error:
                        continue
                now = time.time()
                last = self._last.get(pid)
                if last is None:
                    age = max(now - proc.create_time(), 1e-3)
                    percent = 100.0 * cpu_s / age
                elif now - last[0] < self.MIN_INTERVAL:
                    return last[2], rss
                else:
                    percent = max(0.0, 100.0 * (cpu_s - last[1]) / (now - last[0]))
                self._last[pid] = (now, cpu_s, percent)
                return percent, rss
            except psutil.Error:
                self._procs.pop(pid, None)
                self._last.pop(pid, None)
                return None, None

    def prune(self, alive: set[int]) -> None:
        with self._lock:
            for pid in set(self._procs) - alive:
                del self._procs[pid]
                self._last.pop(pid, None)


class StartTimes:
    """When each child's current incarnation started, from the tree's events."""

    def __init__(self, log: EventLog) -> None:
        self._lock = threading.Lock()
        self._times: dict[str, float] = {}
        self._unsubscribe = log.subscribe(self._see)
        for event in log.snapshot():
            self._see(event)

    def _see(self, event: Event) -> None:
        if event.context is EventKind.CHILD_STARTED and event.offender:
            key = f"{event.supervisor}/{event.offender}"
        elif event.context is EventKind.SUPERVISOR_STARTED:
            key = event.supervisor
        else:
            return
        with self._lock:
            self._times[key] = max(self._times.get(key, event.time), event.time)

    def uptime(self, path: str, now: float) -> float | None:
        with self._lock:
            started = self._times.get(path)
        return None if started is None else max(0.0, now - started)

    def close(self) -> None:
        self._unsubscribe()


def _supervisor_specs(spec: SupervisorSpec, path: str) -> Iterator[tuple[str, SupervisorSpec]]:
    yield path, spec
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            yield from _supervisor_specs(child, f"{path}/{child.id}")


class TreeInspector:
    """Reads a running tree: snapshots for status and the view, lookups for control."""

    QUICK = 0.25  # status waits this long for a busy supervisor, then answers from events

    def __init__(
        self,
        ref: pykka.ActorRef[Any] | None,
        spec: SupervisorSpec,
        log: EventLog,
        timeout: float = 5.0,
        nodes: NodeNames | None = None,
    ) -> None:
        self._up = threading.Event()
        self.ref = ref  # None while the tree is starting
        self.spec = spec
        self.log = log
        self.timeout = timeout
        self.nodes = nodes  # the engine's node names, for a tree with one
        self.stats = ProcStats()
        self.starts = StartTimes(log)
        self._specs = dict(_supervisor_specs(spec, spec.id))
        self._asking = threading.Lock()
        self._which: tuple[pykka.ActorRef[Any], pykka.Future[Any]] | None = None
        # Each remote subtree's node as last seen, by path: shown while its supervisor
        # is too busy to say (a restart under way).
        self._last_node: dict[str, str] = {}

    @property
    def ref(self) -> pykka.ActorRef[Any] | None:
        return self._ref

    @ref.setter
    def ref(self, ref: pykka.ActorRef[Any] | None) -> None:
        self._ref = ref
        if ref is not None:
            self._up.set()

    def close(self) -> None:
        self.starts.close()

    def replace_spec(self, spec: SupervisorSpec) -> None:
        """After `reload`: the tree as the edited file describes it."""
        self.spec = spec
        self._specs = dict(_supervisor_specs(spec, spec.id))

    def record(self, event: Event) -> EventRecord:
        """An event as the CLI prints it: node ids named, where the engine names them."""
        record = EventRecord.from_event(event)
        if self.nodes is None:
            return record
        reason = self.nodes.rename(record.reason) if record.reason is not None else None
        detail = self.nodes.rename(record.detail)
        if (reason, detail) == (record.reason, record.detail):
            return record
        return EventRecord(**{**record.to_dict(), "reason": reason, "detail": detail})

    def _tree(self, timeout: float | None = None) -> list[TreeNode]:
        if self.ref is None:
            raise TimeoutError("the tree is starting")
        wait = self.timeout if timeout is None else timeout
        return self._listing(self.ref, self.spec.id, wait)

    def _which_tree(self, nanny: pykka.ActorRef[Any]) -> pykka.Future[Any]:
        """The root's which_tree, one call at a time: every reader (each `status`, the
        live view, `wait`) shares the call under way rather than queue another
        behind a supervisor that waits on a slow remote subtree."""
        if nanny is not self.ref:
            nested: pykka.Future[Any] = nanny.proxy().which_tree()
            return nested
        with self._asking:
            asked = self._which
            if asked is not None and asked[0] is nanny:
                try:
                    asked[1].get(timeout=0)
                except TIMEOUTS:
                    return asked[1]  # still under way: wait for that one
                except Exception:
                    pass  # it failed: ask again
            future: pykka.Future[Any] = nanny.proxy().which_tree()
            self._which = (nanny, future)
            return future

    def _listing(self, nanny: pykka.ActorRef[Any], path: str, timeout: float) -> list[TreeNode]:
        """`nanny`'s which_tree. Where a remote subtree below it cannot answer (it is
        unreachable, or ending), this level from which_children instead, each nested
        supervisor on its own: a subtree that cannot be reached comes without its
        children, and the rest of the tree as it is. A timeout (the supervisor is
        busy) is raised: it answers nothing."""
        proxy = nanny.proxy()
        try:
            return list(self._which_tree(nanny).get(timeout=timeout))
        except NannyError:
            pass
        nodes = []
        for info in reversed(proxy.which_children().get(timeout=timeout)):  # OTP: newest first
            child_path = f"{path}/{info.id}"
            below: tuple[TreeNode, ...] = ()
            if info.type == "supervisor" and info.state == "running":
                try:
                    nested = proxy.child_nanny(info.id).get(timeout=timeout)
                    below = tuple(self._listing(nested, child_path, timeout))
                except (NannyError, pykka.ActorDeadError):
                    pass  # it ended meanwhile, or cannot be reached: no children shown
                except TIMEOUTS:
                    pass
            nodes.append(TreeNode(info, child_path, below))
        return nodes

    # -- snapshots -------------------------------------------------------------------

    def snapshot(self, stats: bool = True) -> Node:
        """The whole tree now, at once: from the nannies, or, while one is busy
        starting children (a slow `ready`), from the spec and the tree's events,
        with `starting` rows for what has not started yet (as systemctl's
        `activating`). Without `stats`, no process is sampled (CPU, RSS)."""
        now = time.monotonic()
        root = self._supervisor_node(self.spec.id, self.spec.id, "running", now)
        if self.ref is None or self.ref.is_alive():
            try:
                root.children = [self._node(t, now, stats) for t in self._tree(self.QUICK)]
            except TIMEOUTS:  # busy: a start under way (a remote one included)
                root.children = self._from_events(self.spec, self.spec.id, now)
                if self.ref is None:
                    root.state = "starting"
        else:
            root.state = "stopped"
        if stats:
            self._sum_up(root)
            self.stats.prune({n.pid for _, n in root.walk() if n.pid is not None})
        return root

    def _from_events(
        self, spec: SupervisorSpec, path: str, now: float, since: float | None = None
    ) -> list[Node]:
        """The children of `spec` as its events tell (the nanny being busy).

        `since`: when the supervisor `spec` last ended (None: never, or the root): an
        event of a child from before then is of the children it had, which its exit
        ended. A supervisor that is not running shows its children as it is, no pids.
        """
        last: dict[str, Event] = {}
        ended: dict[str, float] = {}
        for event in self.log.snapshot():
            if event.offender and event.context in _STATE_OF:
                last[f"{event.supervisor}/{event.offender}"] = event
                if event.context is not EventKind.CHILD_STARTED:
                    ended[f"{event.supervisor}/{event.offender}"] = event.time
        nodes = []
        for child in spec.children:
            child_path = f"{path}/{child.id}"
            seen = last.get(child_path)
            if seen is not None and since is not None and seen.time < since:
                seen = None  # of an earlier run of its supervisor
            state = _state_of(seen) if seen is not None else "starting"
            if isinstance(child, SupervisorSpec):
                node = self._supervisor_node(child.id, child_path, state, now)
                if state == "running":
                    node.children = self._from_events(child, child_path, now, ended.get(child_path))
                else:
                    node.children = self._below(child, child_path, state)
                if child.placement is not None:
                    node.node = self._last_node.get(child_path)
                    if node.node is not None and self.nodes is not None:
                        node.node_name = self.nodes.name(node.node)
            else:
                node = Node(id=child.id, path=child_path, type="worker", state=state)
                if state == "running" and seen is not None:
                    node.pid = seen.pid
            node.restart = child.restart.value
            node.uptime = self.starts.uptime(child_path, now) if state == "running" else None
            nodes.append(node)
        return nodes

    def _below(self, spec: SupervisorSpec, path: str, state: str) -> list[Node]:
        """The children of a supervisor in `state` (not running): each in that state, no
        pid (its exit ended them; they start again with it)."""
        nodes = []
        for child in spec.children:
            child_path = f"{path}/{child.id}"
            if isinstance(child, SupervisorSpec):
                node = Node(id=child.id, path=child_path, type="supervisor", state=state)
                node.children = self._below(child, child_path, state)
            else:
                node = Node(id=child.id, path=child_path, type="worker", state=state)
            node.restart = child.restart.value
            nodes.append(node)
        return nodes

    def _unknown(self, path: str, now: float) -> list[Node]:
        """The children of a remote subtree that cannot be reached: its spec's, each
        in state "unknown" (their last events may be stale: the subtree may have
        fenced itself, or its node be gone)."""
        spec = self._specs.get(path)
        if spec is None:
            return []
        nodes = self._from_events(spec, path, now)
        for _, node in (n for child in nodes for n in child.walk()):
            node.state, node.pid, node.uptime = "unknown", None, None
        return nodes

    def _supervisor_node(self, child_id: str, path: str, state: str, now: float) -> Node:
        spec = self._specs.get(path)
        return Node(
            id=child_id,
            path=path,
            type="supervisor",
            state=state,
            uptime=self.starts.uptime(path, now),
            strategy=spec.strategy.value if spec else None,
            intensity=spec.intensity if spec else None,
            period=spec.period if spec else None,
        )

    def _node(self, tree: TreeNode, now: float, stats: bool = True) -> Node:
        info = tree.info
        if info.type == "supervisor":
            node = self._supervisor_node(info.id, tree.path, info.state, now)
            node.children = [self._node(t, now, stats) for t in tree.children]
            if info.node is not None:  # a remote subtree: its host process on its node
                node.pid = info.pid
                if info.state in ("unreachable", "running") and not tree.children:
                    # Cut off, or too slow to list them now: not running for all we know.
                    node.children = self._unknown(tree.path, now)
        else:
            node = Node(id=info.id, path=tree.path, type="worker", state=info.state)
            if info.pid is not None:
                node.pid = info.pid
                if info.node is None and stats:  # a remote child's pid means nothing here
                    node.cpu, node.rss = self.stats.sample(info.pid)
        node.node = info.node
        if info.node is not None:
            self._last_node[tree.path] = info.node
            if self.nodes is not None:
                node.node_name = self.nodes.name(info.node)
        node.state_for = _state_for(info, now)
        node.status = tree.status
        running = info.state in ("running", "paused")
        node.uptime = self.starts.uptime(tree.path, now) if running else None
        node.restarts = info.restarts
        node.incarnation = info.incarnation
        node.restart = info.restart.value
        if info.last_exit is not None:
            # A node_down's reason names its node by id: shown by name, as the node is.
            node.last_exit = str(info.last_exit)
            if self.nodes is not None:
                node.last_exit = self.nodes.rename(node.last_exit)
            node.last_exit_normal = info.last_exit.is_normal
            node.last_exit_kind = info.last_exit.kind.value
        node.health = health_dict(info.health)
        return node

    def _sum_up(self, node: Node) -> None:
        if node.type != "supervisor":
            return
        for child in node.children:
            self._sum_up(child)
        node.cpu = _sum([c.cpu for c in node.children])
        node.rss = _sum([c.rss for c in node.children])

    # -- lookups ------------------------------------------------------------------------

    def find(self, key: str) -> Target:
        """A child by path ("pool/w1", "root/pool/w1") or by id anywhere in the tree.

        Raises ChildNotFound, or LookupError when a bare id names several children.
        """
        # A lookup right after the last child started (its event printed) may come
        # before the tree's start returned: wait for it, as long as for an answer.
        self._up.wait(self.timeout)
        nodes = self._tree()
        assert self.ref is not None  # _tree() answered
        return find_target(self.ref, nodes, self.spec.id, key, timeout=self.timeout)

    def spec_at(self, path: str) -> AnySpec | None:
        """The spec the tree was started with (or reloaded) for the child at `path`."""
        spec: AnySpec = self.spec
        for part in path.split("/")[1:]:
            children = getattr(spec, "children", ())
            spec = next((c for c in children if c.id == part), None)  # type: ignore[assignment]
            if spec is None:
                return None
        return spec


def _state_for(info: ChildInfo, now: float) -> float | None:
    """How long a remote subtree has been unreachable or pending, where its ChildInfo
    says since when (on the tree's clock)."""
    if info.state not in ("unreachable", "pending"):
        return None
    since = getattr(info, "since", None)
    return None if since is None else max(0.0, now - float(since))


def health_dict(health: Health | None) -> dict[str, Any] | None:
    """A Health as the control socket sends it (None: the child has no probe)."""
    if health is None:
        return None
    return {
        "status": health.status,
        "failures": health.failures,
        "threshold": health.threshold,
        "error": health.error,
    }


_STATE_OF = {
    EventKind.CHILD_STARTED: "running",
    EventKind.CHILD_EXITED: "restarting",
    EventKind.RESTART_SCHEDULED: "restarting",
    EventKind.CHILD_TERMINATED: "stopped",
    EventKind.CHILD_FAILED: "failed",
}


def _state_of(event: Event) -> str:
    """A child's state as its last event tells: a put-off restart says whether it
    waits for a node ("pending") or a backoff (its detail's first word)."""
    if event.context is EventKind.RESTART_SCHEDULED:
        first = event.detail.split(" ", 1)[0]
        return first if first in ("pending", "backoff") else "restarting"
    return _STATE_OF[event.context]


class EventFeed:
    """A tree's events from now on, through a queue, after a backlog of past ones.

    Subscribes first, then snapshots, so no event falls between the two; an event
    in both is given once.
    """

    def __init__(self, log: EventLog, backlog: int | None = None, maxsize: int = 10_000) -> None:
        self._queue: queue.Queue[Event] = queue.Queue(maxsize)
        self.dropped = 0
        self._unsubscribe = log.subscribe(self._put)
        snapshot = log.snapshot()
        self._tail = snapshot[-1000:]  # kept alive, so their ids stay unique
        self._seen = {id(e) for e in self._tail}
        if backlog is None:
            self.backlog = snapshot
        else:
            self.backlog = snapshot[-backlog:] if backlog > 0 else []

    def _put(self, event: Event) -> None:
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1

    def get(self, timeout: float) -> Event | None:
        """The next new event, or None after `timeout` seconds without one."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if id(event) not in self._seen:
                return event

    def close(self) -> None:
        self._unsubscribe()
