"""Nodes for the simulator: a cluster, node faults, and where remote subtrees run.

A `SupervisorSpec` with a `placement` is a remote subtree (as with an engine,
live): when a `Cluster` is given to `simulate`, it is placed on a node by the
same pure `choose_node` the live tree uses, and node faults reach it as the
live tree sees them (actors/_shell/_remote_child.py), declared down by the same
rule (`Fencing`, docs/multihost.md section 8):

- `NodeDown(at, node)`: the node is killed at `at` (its raylet dies, its OS still
  answers); everything on it stops at once (down for availability). Its parent
  learns it as the abnormal exit `node_down` (Erlang's noconnection) by the
  first of: the far side's fence acknowledgement, `fence_ack` seconds later (the
  remote host outlives its raylet, stops its children and says so: with a lease
  only, which gives it the time for an orderly stop, and unless it had fenced
  already or its node is cut off, when its word cannot get out), and the engine's verdict
  `detection` seconds later, told once the lease has run out since the last
  renewal if that is later (`Fencing.tell_after`). A node that died never
  comes back under its old identity (Ray's node ids are not reused); `NodeUp`
  adds a node (a repaired host that joins again). A host that dies whole (power
  cut) is silent to the rest: `Unreachable` for longer than the run.
- `Unreachable(at, node, duration)`: a partition, or a silent node. Nothing is
  charged while it lasts. With a lease, renewals fail while it lasts, and a
  subtree there fences itself (its children stop) `FENCE_AT` of the lease after
  the last renewal that came through; if it heals before it is declared dead,
  the parent then hears `remote_crash` (the fenced process exited). It is
  declared dead `Fencing.declared_after` after the cut (the engine's verdict
  after `health_check`, or the cluster's `unreachable_timeout`, when set and
  shorter): `node_down` for its subtrees, told as for `NodeDown` (after the
  lease, with one); their old incarnation stops then at the latest. A short
  partition with no lease, or ending before the fence, changes nothing.
- `NodeFailures(mtbf, repair)`: every node fails at random (exponential, mean
  `mtbf` seconds) and a fresh node of the same name joins `repair` seconds
  later; drawn from the run's seed, so a seed replays the same failures.

Renewals are due every third of the lease from the subtree's start (as the
live remote child makes them); one due while the node is cut off fails, and a
heal that the parent noticed (a renewal failed) renews at once.

The settings are `RayEngine`'s, with its defaults: `lease_timeout` 30 s,
`unreachable_timeout` None, and Ray's health check (`health_check_period` 3 s,
`health_check_timeout` 10 s, `health_check_failure_threshold` 5). From them, as
measured with Ray 2.60 (tests/benchmarks/bench_node_loss.py, docs/how-to/ray.md):
Ray declares a silent node dead after threshold x (period + timeout) (65 s; 4.5 s
with the tests' tuned check), a killed one, whose raylet refuses the checks at
once, after threshold x period (15 s; 1.5 s); `health_check` and `detection`
override them. `fence_ack`, 1.45 s: from a killed node to the parent reading
its far side's fence acknowledgement (the host notices its raylet gone within
0.2 s, stops its children, writes the word to Ray's KV store; the parent reads
it while it probes the unreachable subtree).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from random import Random
from typing import Any

from .._errors import SpecError
from .._fencing import Fencing
from ..spec._placement import NodeInfo

DEFAULT_LEASE = 30.0  # actors.ray.RayEngine's lease_timeout (tests/sim/test_lease.py)
# Ray's own health check defaults, as RayEngine leaves them (tests/sim/test_nodes.py).
DEFAULT_HEALTH_CHECK_PERIOD = 3.0
DEFAULT_HEALTH_CHECK_TIMEOUT = 10.0
DEFAULT_HEALTH_CHECK_FAILURE_THRESHOLD = 5
DEFAULT_FENCE_ACK = 1.45  # measured: a killed node -> its fence acknowledgement read


def _time(owner: str, name: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(None, f"{owner}.{name}", value, "expected seconds (a finite number)")
    if value < 0 or (positive and value == 0):
        raise SpecError(
            None, f"{owner}.{name}", value, "expected seconds > 0" if positive else ">= 0"
        )
    return float(value)


def _node(owner: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise SpecError(None, f"{owner}.node", value, "expected a node name")
    return value


@dataclass(frozen=True)
class NodeDown:
    """The node dies at `at` virtual seconds."""

    at: float
    node: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", _time("NodeDown", "at", self.at))
        _node("NodeDown", self.node)


@dataclass(frozen=True)
class Unreachable:
    """The node is cut off from `at` for `duration` seconds, then heals."""

    at: float
    node: str
    duration: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", _time("Unreachable", "at", self.at))
        object.__setattr__(
            self, "duration", _time("Unreachable", "duration", self.duration, positive=True)
        )
        _node("Unreachable", self.node)


@dataclass(frozen=True)
class NodeUp:
    """A node joins at `at` (new, or a repaired host joining again under its name)."""

    at: float
    node: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", _time("NodeUp", "at", self.at))
        _node("NodeUp", self.node)


@dataclass(frozen=True)
class NodeFailures:
    """Every node fails at random, mean `mtbf` s; a fresh one joins `repair` s later."""

    mtbf: float
    repair: float = 60.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mtbf", _time("NodeFailures", "mtbf", self.mtbf, positive=True))
        object.__setattr__(self, "repair", _time("NodeFailures", "repair", self.repair))


NodeFault = NodeDown | Unreachable | NodeUp


@dataclass(frozen=True)
class Cluster:
    """The nodes a simulated tree's remote subtrees may run on, and their faults.

    `nodes`: names (or NodeInfo, for labels and resources), up at time 0;
    `faults`: scripted NodeDown / Unreachable / NodeUp; `failures`: random ones;
    `detection`: seconds from a killed node to the engine's verdict (None: from
    the health check, threshold x period); `health_check`: seconds after which a
    silent (unreachable) node is declared dead (None: threshold x (period +
    timeout)); `unreachable_timeout`: declare it dead sooner, after this long
    (opt-in, as `RayEngine(unreachable_timeout=...)`); `lease_timeout`: the remote
    subtrees' lease (as `RayEngine(lease_timeout=...)`, 30 s by default; None: no
    lease); `health_check_period`, `health_check_timeout`,
    `health_check_failure_threshold`: Ray's node health check, as RayEngine's
    parameters of those names (Ray's defaults: 3 s, 10 s, 5); `fence_ack`: seconds
    from a killed node to its parent reading the far side's fence acknowledgement
    (with a lease; None: the far side never says, the lease decides).
    After construction `detection` and `health_check` hold the values in force.
    """

    nodes: Sequence[str | NodeInfo]
    faults: Sequence[NodeFault] = ()
    failures: NodeFailures | None = None
    detection: float | None = None
    health_check: float | None = None
    unreachable_timeout: float | None = None
    lease_timeout: float | None = DEFAULT_LEASE
    health_check_period: float = DEFAULT_HEALTH_CHECK_PERIOD
    health_check_timeout: float = DEFAULT_HEALTH_CHECK_TIMEOUT
    health_check_failure_threshold: int = DEFAULT_HEALTH_CHECK_FAILURE_THRESHOLD
    fence_ack: float | None = DEFAULT_FENCE_ACK
    infos: tuple[NodeInfo, ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        infos = []
        if isinstance(self.nodes, str) or not self.nodes:
            raise SpecError(None, "Cluster.nodes", self.nodes, "expected a list of node names")
        for n in self.nodes:
            if isinstance(n, str) and n:
                infos.append(NodeInfo(n, n))
            elif isinstance(n, NodeInfo):
                infos.append(n)
            else:
                raise SpecError(None, "Cluster.nodes", n, "expected a node name or a NodeInfo")
        if len({i.id for i in infos}) != len(infos):
            raise SpecError(None, "Cluster.nodes", self.nodes, "node names must be unique")
        object.__setattr__(self, "infos", tuple(infos))
        object.__setattr__(self, "faults", tuple(self.faults))
        for fault in self.faults:
            if not isinstance(fault, NodeDown | Unreachable | NodeUp):
                raise SpecError(
                    None, "Cluster.faults", fault, "expected NodeDown, Unreachable or NodeUp"
                )
        if self.failures is not None and not isinstance(self.failures, NodeFailures):
            raise SpecError(None, "Cluster.failures", self.failures, "expected NodeFailures")
        period = _time("Cluster", "health_check_period", self.health_check_period, positive=True)
        timeout = _time("Cluster", "health_check_timeout", self.health_check_timeout, positive=True)
        misses = self.health_check_failure_threshold
        if isinstance(misses, bool) or not isinstance(misses, int) or misses < 1:
            raise SpecError(
                None, "Cluster.health_check_failure_threshold", misses, "expected an integer >= 1"
            )
        object.__setattr__(self, "health_check_period", period)
        object.__setattr__(self, "health_check_timeout", timeout)
        # A killed node's raylet refuses each check at once; a silent one lets it time out.
        detection = misses * period if self.detection is None else self.detection
        silent = misses * (period + timeout) if self.health_check is None else self.health_check
        object.__setattr__(self, "detection", _time("Cluster", "detection", detection))
        object.__setattr__(self, "health_check", _time("Cluster", "health_check", silent))
        if self.fence_ack is not None:
            object.__setattr__(self, "fence_ack", _time("Cluster", "fence_ack", self.fence_ack))
        if self.unreachable_timeout is not None:
            object.__setattr__(
                self,
                "unreachable_timeout",
                _time("Cluster", "unreachable_timeout", self.unreachable_timeout, positive=True),
            )
        if self.lease_timeout is not None:
            object.__setattr__(
                self,
                "lease_timeout",
                _time("Cluster", "lease_timeout", self.lease_timeout, positive=True),
            )

    @property
    def fencing(self) -> Fencing:
        """The live rule with this cluster's settings."""
        return Fencing(self.lease_timeout, self.unreachable_timeout)

    @property
    def declared_after(self) -> float:
        """How long a node stays unreachable before it is declared dead."""
        assert self.health_check is not None
        return self.fencing.declared_after(self.health_check)

    def told_after(self, last_renewal: float, *, can_say: bool = True) -> float:
        """Seconds from a killed node to its subtree's `node_down` at its parent, when
        the subtree's last renewal came `last_renewal` seconds before the loss.
        `can_say`: its far side can still acknowledge a fence (it had not fenced
        already, and its node was not cut off)."""
        assert self.detection is not None
        lease = self.lease_timeout
        if lease is None:
            return self.detection  # the far side has no time to fence: the verdict
        after = max(self.detection, lease - last_renewal)
        return after if self.fence_ack is None or not can_say else min(after, self.fence_ack)

    def schedule(self, seed: int, duration: float) -> list[NodeFault]:
        """The scripted faults and the seed's random ones, in time order."""
        out: list[NodeFault] = list(self.faults)
        if self.failures is not None:
            for info in self.infos:
                rng = Random(f"{seed}/node/{info.id}")
                t = 0.0
                while True:
                    t += rng.expovariate(1.0 / self.failures.mtbf)
                    if t > duration:
                        break
                    out.append(NodeDown(t, info.id))
                    t += self.failures.repair
                    if t > duration:
                        break
                    out.append(NodeUp(t, info.id))
        return sorted(out, key=lambda f: f.at)


class NodeTable:
    """Which nodes are alive now, for `choose_node` (the simulator's engine)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.infos = {i.id: i for i in cluster.infos}
        self.alive: set[str] = set(self.infos)
        self.cut_off: dict[str, int] = {}  # node -> partitions in force
        self.cuts: dict[str, list[tuple[float, float]]] = {}  # node -> (from, until)

    def live(self) -> list[NodeInfo]:
        return [self.infos[n] for n in sorted(self.alive)]

    def reachable(self, node: str) -> bool:
        return node in self.alive and not self.cut_off.get(node)

    def join(self, node: str) -> None:
        self.infos.setdefault(node, NodeInfo(node, node))
        self.alive.add(node)
        self.cut_off.pop(node, None)

    def declare_dead(self, node: str) -> bool:
        """False when it was already dead."""
        if node not in self.alive:
            return False
        self.alive.discard(node)
        self.cut_off.pop(node, None)
        return True

    def last_renewal(self, fencing: Fencing, node: str, since: float, at: float) -> float:
        """The last renewal, at or before `at`, of a lease granted at `since` to a
        subtree on `node` that came through (its node was not cut off then)."""
        every = fencing.renew_every
        if every is None:
            return since
        cuts = [(a, b) for a, b in self.cuts.get(node, ()) if b > since and a <= at]
        k = math.floor((at - since) / every) if at > since else 0
        while k > 0 and any(a <= since + k * every < b for a, b in cuts):
            k -= 1
        last = since + k * every
        for a, b in cuts:
            # A heal the parent noticed (a renewal failed during the cut) renews at once.
            first = since + max(1, math.ceil((a - since) / every)) * every
            if b <= at and first < b:
                last = max(last, b)
        return last
