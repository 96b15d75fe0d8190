"""The virtual-time engine: `simulate()` runs one spec against its fault models.

The run (`_Simulation`: the clock's heap, faults, nodes, scripted calls and
accounts) drives the simulated supervisors (`_Node`, _node.py), which call back
into it on every step through the `_World` it is to them. The model it implements
is described in the package's docstring (supervision/simulate/__init__.py). This
module re-exports nothing: the public names are the package's.
"""

from __future__ import annotations

import gc
import heapq
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._errors import NannyError, SpecError, SupervisorNotRunning
from .._events import Event, EventKind
from .._fencing import Fencing
from .._reasons import ExitKind, ExitReason
from ..spec._fields import (
    Restart,
    Strategy,
)
from ..spec._placement import Placement, choose_node
from ..spec._spec import (
    AnySpec,
    SupervisorSpec,
)
from ._defaults import DEFAULT_ROOT_RESTART_DELAY, DEFAULT_SEED
from ._faults import Combination, FaultEntry, Hang
from ._keys import added_workers, check_faults
from ._messages import (
    _AUTOMATIC,
    _Call,
    _ChildExited,
    _Init,
)
from ._metrics import MetricLike, check_metrics, measure
from ._node import _Node
from ._nodes import (
    Cluster,
    NodeDown,
    NodeFault,
    NodeTable,
    NodeUp,
)
from ._ops import FIRST_PID, Call, CallResult
from ._process import (
    _HEALTHY,
    _Faults,
    _Process,
)
from ._report import (
    Accounts,
    ChildType,
    SimulationResult,
)

# Read per event, bound once: an enum class's member costs several times a global on 3.11.
_STALE, _STARTED, _EXITED = (
    EventKind.STALE_EXIT_IGNORED,
    EventKind.CHILD_STARTED,
    EventKind.CHILD_EXITED,
)
_TRANSIENT, _TEMPORARY = Restart.TRANSIENT, Restart.TEMPORARY
_push = heapq.heappush  # once per scheduled step: no module attribute to read
_NORMAL = (ExitKind.NORMAL, ExitKind.SHUTDOWN)  # ExitReason.is_normal's kinds, bound once


class _Simulation:
    def __init__(
        self,
        spec: SupervisorSpec,
        faults: Mapping[str, FaultEntry],
        duration: float,
        seed: int,
        root_restart_delay: float | None,
        keep_events: bool,
        calls: Iterable[Call] = (),
        cluster: Cluster | None = None,
    ) -> None:
        self.spec = spec
        self.cluster = cluster
        self.nodes = NodeTable(cluster) if cluster is not None else None
        self.previous: dict[str, str] = {}  # subtree path -> node of its last incarnation
        self.placements: list[tuple[float, str, str]] = []
        self.calls = sorted(calls, key=lambda c: c.at)  # stable: same time, given order
        self.results: list[CallResult] = []
        self.stop_requested = False
        self.root_name = spec.id
        self.duration = duration
        self.seed = seed
        self.root_restart_delay = root_restart_delay
        self.events: list[Event] | None = [] if keep_events else None
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable[[Any], None], Any]] = []
        self.seq = 0
        self.ended_at: float | None = None
        paths = _paths(spec)
        self.models: dict[str, Combination] = check_faults(faults, spec, added_workers(self.calls))
        self.specs: dict[str, AnySpec] = {}
        _collect_specs(spec, "", self.specs)
        self.faults: dict[str, _Faults] = {}
        self.accounts = Accounts.for_tree(paths)
        self.root: _Node | None = None
        self.last_pid = FIRST_PID - 1

    def at(self, time: float, fn: Callable[[Any], None], arg: Any) -> None:
        self.seq += 1
        _push(self.heap, (time, self.seq, fn, arg))

    def new_pid(self) -> int:
        self.last_pid += 1
        return self.last_pid

    def faults_of(self, node: _Node, child_id: str) -> _Faults:
        """The faults of worker `child_id` of `node`, drawn from the model of its most
        specific key that `faults` has (`_Node.keys`); healthy if none."""
        path = node.paths[child_id]
        faults = self.faults.get(path)
        if faults is None:
            key = next((k for k in node.keys(child_id) if k in self.models), None)
            combo = _HEALTHY if key is None else self.models[key]
            faults = self.faults[path] = _Faults(combo, self.seed, path, key)
        return faults

    def run(self) -> SimulationResult:
        if self.cluster is not None:
            for fault in self.cluster.schedule(self.seed, self.duration):
                self.at(fault.at, self._node_fault, fault)
        for path, combo in self.models.items():
            for model in combo.models:
                for when, reason in model.absolute_exits():
                    self.at(when, self._kill, (path, reason))
                if isinstance(model, Hang):
                    for when in model.at:
                        self.at(when, self._hang, path)
        self._start_root(None)
        for c in self.calls:
            self.at(c.at, self._call, c)
        heap, duration, pop = self.heap, self.duration, heapq.heappop
        while heap and self.ended_at is None:
            if heap[0][0] > duration:
                break
            when, _, fn, arg = pop(heap)
            self.now = when
            fn(arg)
        children, tree = self.accounts.report(duration)
        return SimulationResult(
            spec=self.spec,
            seed=self.seed,
            duration=duration,
            ended_at=duration if self.ended_at is None else self.ended_at,
            events=self.events if self.events is not None else [],
            children=children,
            tree=tree,
            calls=self.results,
            placements=self.placements,
            states={p: a.changes for p, a in self.accounts.children.items()},
        )

    def answered(self, c: Call, value: Any, error: NannyError | None = None) -> None:
        self.results.append(CallResult(c, self.now, value, error))

    def _call(self, c: Call) -> None:
        node = self.root
        for name in c.supervisor.split("/") if c.supervisor else ():
            node = node.nested.get(name) if node is not None else None
        if node is None or node.dead:
            name = f"{self.root_name}/{c.supervisor}" if c.supervisor else self.root_name
            self.answered(c, None, SupervisorNotRunning(name))
            return
        node.deliver(_Call(c))

    # -- nodes ---------------------------------------------------------------------------

    def place(self, path: str, spec: SupervisorSpec) -> str | ExitReason:
        """The node a remote subtree starts on (choose_node, as live), or why it cannot."""
        assert self.nodes is not None and spec.placement is not None
        node = choose_node(spec.placement, self.nodes.live(), self.previous.get(path))
        if node is None:
            names = ", ".join(n.id for n in self.nodes.live()) or "none"
            return Placement.unplaceable(
                f"no live node fits placement {spec.placement} (live nodes: {names})"
            )
        if not self.nodes.reachable(node):
            return ExitReason.start_failure(f"node {node!r} is unreachable; cannot start there")
        self.previous[path] = node
        self.placements.append((self.now, path, node))
        return node

    def _subtrees_on(self, node: str) -> list[_Node]:
        """The remote subtrees on `node` (each placed there by its parent) whose parent
        has not been told of a fault there: running, or fenced."""
        found: list[_Node] = []
        stack = [self.root] if self.root is not None else []
        while stack:
            current = stack.pop()
            for nested in current.nested.values():
                if (
                    nested.host == node
                    and current.host != node
                    and (not nested.dead or nested.fenced)
                    and not nested.told
                ):
                    found.append(nested)
                else:
                    stack.append(nested)
        return found

    def _last_renewal(self, subtree: _Node, at: float) -> float:
        assert self.nodes is not None and self.cluster is not None and subtree.host is not None
        since = self.now if subtree.lease_from is None else subtree.lease_from
        return self.nodes.last_renewal(self.cluster.fencing, subtree.host, since, at)

    def _node_fault(self, fault: NodeFault) -> None:
        nodes, cluster = self.nodes, self.cluster
        assert nodes is not None and cluster is not None
        if isinstance(fault, NodeUp):
            nodes.join(fault.node)
        elif isinstance(fault, NodeDown):
            self._node_lost(fault.node, killed=True)
        elif fault.node in nodes.alive:
            node, until = fault.node, self.now + fault.duration
            nodes.cut_off[node] = nodes.cut_off.get(node, 0) + 1
            nodes.cuts.setdefault(node, []).append((self.now, until))
            lease = cluster.lease_timeout
            if lease is not None:  # each subtree there fences itself if it lasts
                for subtree in self._subtrees_on(node):
                    fence = self._last_renewal(subtree, self.now) + lease * Fencing.FENCE_AT
                    if fence < until:
                        self.at(max(fence, self.now), self._fence, subtree)
            if fault.duration >= cluster.declared_after:
                self.at(self.now + cluster.declared_after, self._declare, node)
            else:
                self.at(until, self._heal, node)

    def _fence(self, subtree: _Node) -> None:
        """Its lease ran out while cut off: it stopped its children (its parent hears
        of it at the heal, or at its node's declaration)."""
        if not subtree.dead and not subtree.told:
            subtree.lose()
            subtree.fenced = True

    def _heal(self, node: str) -> None:
        assert self.nodes is not None
        left = self.nodes.cut_off.get(node, 0) - 1
        if left > 0:
            self.nodes.cut_off[node] = left
            return
        self.nodes.cut_off.pop(node, None)
        # A fenced subtree's process exited: its death report comes through now.
        reason = ExitReason(ExitKind.REMOTE_CRASH, message="it fenced itself (lease expired)")
        for subtree in self._subtrees_on(node):
            if subtree.fenced:
                self._tell(subtree, reason, self.now)

    def _declare(self, node: str) -> None:
        """A silent node declared dead: its old incarnations stop, if their fence has
        not stopped them yet."""
        self._node_lost(node, killed=False)

    def _node_lost(self, node: str, *, killed: bool) -> None:
        """`node` is dead: killed (its far side may say it fenced: `Cluster.told_after`)
        or declared dead after a silence (nothing from it: told once the lease allows)."""
        cluster = self.cluster
        assert self.nodes is not None and cluster is not None
        cut_off = bool(self.nodes.cut_off.get(node))  # its word could not get out
        if not self.nodes.declare_dead(node):
            return
        reason = ExitReason(ExitKind.NODE_DOWN, message=f"node {node!r} is dead")
        for subtree in self._subtrees_on(node):
            if not subtree.dead:
                subtree.lose()
            last = self._last_renewal(subtree, self.now)
            if killed:
                can_say = not subtree.fenced and not cut_off
                after = cluster.told_after(self.now - last, can_say=can_say)
            else:
                after = cluster.fencing.tell_after(reason, self.now, last) or 0.0
            self._tell(subtree, reason, self.now + after)

    def _tell(self, subtree: _Node, reason: ExitReason, at: float) -> None:
        """Its parent hears `reason` at `at` (once)."""
        subtree.told = True
        parent = subtree.parent
        assert parent is not None
        self.at(at, parent.deliver, _ChildExited(subtree.child_id, subtree.incarnation, reason))

    def _start_root(self, _: object) -> None:
        self.root = _Node(self, self.spec, "")
        self.accounts.set_root_running(True, self.now)
        self.root.deliver(_Init())

    def _processes(self, key: str) -> list[tuple[_Node, str, _Process]]:
        """The processes of the workers whose model is the one at `key` (a template's:
        each child started from it), in start order."""
        *parents, name = key.split("/")
        nodes = [self.root] if self.root is not None else []
        for part in parents:
            nodes = [n.nested[c] for n in nodes for c in n.named(part) if c in n.nested]
        found: list[tuple[_Node, str, _Process]] = []
        for node in nodes:
            for child_id in node.named(name):
                proc = node.procs.get(child_id)
                faults = self.faults.get(node.path(child_id))
                if proc is None or faults is None or faults.key != key:
                    continue  # not running, or its own model is another key's
                found.append((node, child_id, proc))
        return found

    def _kill(self, args: tuple[str, ExitReason]) -> None:
        """A scripted absolute exit of the model at `key`: every process of a worker
        whose model it is and that runs now. They end at once; then each supervisor
        hears of its children's, in start order."""
        key, reason = args
        ended = [(n, c, p) for n, c, p in self._processes(key) if n.die(c, p, reason)]
        for node, child_id, proc in ended:
            node.exited(child_id, proc)

    def _hang(self, key: str) -> None:
        """A Hang's absolute time: every process of a worker whose model it is hangs."""
        for node, child_id, proc in self._processes(key):
            node.hang((child_id, proc))

    def root_exited(self, reason: ExitReason) -> None:
        self.accounts.set_root_running(False, self.now)
        self.accounts.root_exits.append((self.now, reason))
        if not self.stop_requested:  # an operator's stop is no give-up
            self.accounts.give_ups.append(self.now)
        if self.root_restart_delay is None or self.stop_requested:
            self.ended_at = self.now
        else:
            self.at(self.now + self.root_restart_delay, self._start_root, None)

    def record(self, node: _Node, event: Event) -> None:
        if self.events is not None:
            self.events.append(event)
        offender = event.offender
        kind = event.context
        # A crash's two events first, straight to their accounts (on_event's cases).
        if kind is _STARTED and offender is not None:
            # Automatic restarts only: not a fresh supervisor's starts, nor a call's.
            restart = isinstance(node.current, _AUTOMATIC)
            self.accounts.started(node.paths[offender], event.time, restart)
            return
        if kind is _EXITED and offender is not None:
            at = node.paths[offender]
            spec = self.specs[at]
            reason = event.reason
            finishes = spec.restart is _TEMPORARY or (
                spec.restart is _TRANSIENT and reason is not None and reason.kind in _NORMAL
            )
            self.accounts.exited(at, reason, event.time, finishes)
            return
        path: str | None = None
        if offender is not None and kind is not _STALE:
            path = node.paths[offender]
        # Automatic restarts only: not a fresh supervisor's starts, nor a call's (start_child).
        restart = kind is _STARTED and isinstance(node.current, _AUTOMATIC)
        finishes = False
        if path is not None and kind is _EXITED:
            spec = self.specs[path]
            reason = event.reason
            finishes = spec.restart is _TEMPORARY or (
                spec.restart is _TRANSIENT and reason is not None and reason.is_normal
            )
        self.accounts.on_event(path, event, restart, finishes)


# -- the spec tree ---------------------------------------------------------------------


def _paths(spec: SupervisorSpec, prefix: str = "") -> dict[str, ChildType]:
    paths: dict[str, ChildType] = {}
    if spec.strategy is Strategy.SIMPLE_ONE_FOR_ONE:
        return paths
    for child in spec.children:
        path = prefix + child.id
        paths[path] = child.type
        if isinstance(child, SupervisorSpec):
            paths.update(_paths(child, path + "/"))
    return paths


def _collect_specs(spec: SupervisorSpec, prefix: str, out: dict[str, AnySpec]) -> None:
    for child in spec.children:
        out[prefix + child.id] = child
        if isinstance(child, SupervisorSpec):
            _collect_specs(child, prefix + child.id + "/", out)


# -- the API ------------------------------------------------------------------------


def simulate(
    spec: SupervisorSpec,
    faults: Mapping[str, FaultEntry] | None = None,
    *,
    duration: float,
    seed: int = DEFAULT_SEED,
    root_restart_delay: float | None = DEFAULT_ROOT_RESTART_DELAY,
    keep_events: bool = True,
    calls: Iterable[Call] = (),
    cluster: Cluster | None = None,
    metrics: Mapping[str, MetricLike | str] | None = None,
) -> SimulationResult:
    """Run `spec` for `duration` virtual seconds against `faults`; report what happened.

    - `faults`: a fault model per worker path ("web", "pool/w1"); below a
      simple_one_for_one supervisor, by its template ("pool/w": each child) or
      a child's id ("pool/w-2"); workers without one never fail.
    - `seed`: the same seed gives the same run; each worker draws from its
      own random streams, so specs compared on one seed share their faults
      as far as the runs allow.
    - `root_restart_delay`: None (default) ends the run when the root gives
      up; seconds > 0 start it again after that delay.
    - `keep_events`: False drops the event list (the reports are the same),
      for long runs.
    - `calls`: API calls at virtual times (`call(5.0, "pause_child", "web")`;
      a pid as `pid_of("w-2")`); their outcomes, in the order they were
      answered, are `result.calls`. Workers have pids (from 1000, in start order).
    - `cluster`: nodes for the subtrees with a `placement` (placed by
      `choose_node`, as live) and node faults (`NodeDown`, `Unreachable`,
      `NodeUp`, `NodeFailures`); `result.placements` says where each incarnation
      ran. Without one, placements are ignored (as a live tree without an engine).
    - `metrics`: named metrics (`metric("availability(web)")`, a function of the
      run, or the text); `result.metrics` holds each one's figure in this run.

    Python's cyclic garbage collector is paused while the run runs (not while
    the metrics are measured) and given back as it was found, on or off.
    """
    if not isinstance(spec, SupervisorSpec):
        raise SpecError(None, "spec", spec, "simulate() takes a SupervisorSpec")
    if isinstance(duration, bool) or not isinstance(duration, int | float):
        raise SpecError(spec.id, "duration", duration, "expected virtual seconds > 0")
    if not (math.isfinite(duration) and duration > 0):
        raise SpecError(spec.id, "duration", duration, "expected virtual seconds > 0")
    if root_restart_delay is not None and not (
        isinstance(root_restart_delay, int | float)
        and math.isfinite(root_restart_delay)
        and root_restart_delay > 0
    ):
        raise SpecError(
            spec.id,
            "root_restart_delay",
            root_restart_delay,
            "expected None (the run ends at a give-up) or seconds > 0",
        )
    chosen = check_metrics(metrics)
    call_list = list(calls)
    for c in call_list:
        if not isinstance(c, Call):
            raise SpecError(spec.id, "calls", c, 'expected Call records, e.g. call(5.0, "stop")')
    if cluster is not None and not isinstance(cluster, Cluster):
        raise SpecError(spec.id, "cluster", cluster, "expected a Cluster (nodes and node faults)")
    sim = _Simulation(
        spec,
        faults or {},
        float(duration),
        seed,
        root_restart_delay,
        keep_events,
        call_list,
        cluster,
    )
    # The cyclic collector paused for the run (as timeit does), restored after: a run
    # keeps every event it reports, and the collector walked that growing list again
    # and again (a sixth of a 1,000-child run), to find nothing: a run's records hold
    # no cycles (the run as a whole is one, freed after, the collector back on).
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        result = sim.run()
    finally:
        if paused:
            gc.enable()
    result.metrics.update(measure(chosen, result))
    return result
