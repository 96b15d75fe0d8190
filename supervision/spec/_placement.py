"""Where a remote subtree runs: a Placement on its SupervisorSpec, and the pure
choice of a node from a snapshot of the live ones.

Only whole subtrees cross hosts (a ChildSpec has no placement). The engine
(actors.ray.RayEngine, or a fake) lists the nodes; `choose_node` decides; the
engine enforces. The simulator can call the same function in virtual time.

Policies:
- "prefer" (default): the previous node while it lives (a crashed subtree comes
  back where it was), else `node`, else the `fallback` nodes in order, else any
  eligible node.
- "pinned": only `node`; while it is gone a restart is pending (below).
- "spread": the next eligible node after the previous one (round robin by node
  id), so successive restarts move around the cluster.

A node is eligible when it has every label of `labels` (same value) and at
least the `resources` asked for.

A restart that no live node can take (`choose_node` gives None, or the chosen
node left before the start) is not a failed start of the subtree: it is
`pending`, charged nothing, and tried again on a backoff (`pending_delay`), for
at most `wait` seconds (None: for as long as it takes); then it is a failed
start like any other (OTP's retry loop, charged). docs/multihost.md section 2.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .._errors import SpecError
from .._reasons import ExitKind, ExitReason

PlacementPolicy: TypeAlias = Literal["prefer", "pinned", "spread"]
POLICIES: tuple[str, ...] = ("prefer", "pinned", "spread")
# A pending subtree's next placement attempt: kube-scheduler's backoff for a pod it
# cannot schedule (podInitialBackoffSeconds, podMaxBackoffSeconds), doubling between.
PENDING_FIRST = 1.0
PENDING_MAX = 10.0
UNPLACEABLE = "Unplaceable"  # the exc_type that marks a start failure "no node fits"


def pending_delay(attempt: int) -> float:
    """Seconds before placement attempt `attempt` + 1 of a pending subtree (1, 2, ...)."""
    return min(PENDING_MAX, PENDING_FIRST * 2.0 ** min(max(attempt, 1) - 1, 16))


@dataclass(frozen=True)
class NodeInfo:
    """One live node as an engine reports it: its id, a readable name, labels, resources."""

    id: str
    name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, float] = field(default_factory=dict)

    def matches(self, key: str) -> bool:
        """Whether `key` names this node (its id, or its name)."""
        return key == self.id or (bool(self.name) and key == self.name)


def _str_map(value: Any, owner: str | None, name: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise SpecError(owner, name, value, "expected a mapping of str to str")
    return dict(value)


def _resource_map(value: Any, owner: str | None) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise SpecError(owner, "placement.resources", value, "expected a mapping of str to number")
    out = {}
    for key, amount in value.items():
        if (
            not isinstance(key, str)
            or isinstance(amount, bool)
            or not isinstance(amount, int | float)
            or not math.isfinite(amount)
            or amount < 0
        ):
            raise SpecError(
                owner,
                "placement.resources",
                value,
                "expected a mapping of resource name to a finite number >= 0",
            )
        out[key] = float(amount)
    return out


@dataclass(frozen=True)
class Placement:
    """Where a remote SupervisorSpec runs.

    - `node`: a node id or name; required by policy "pinned", the first choice of "prefer".
    - `labels`: node labels the node must carry (e.g. {"zone": "b"}).
    - `resources`: custom resources the node must offer (e.g. {"node_b": 0.01}).
    - `policy`: "prefer" (default), "pinned" or "spread".
    - `fallback`: node ids or names to try, in order, when "prefer" cannot use `node`.
    - `wait`: seconds a restart that no live node can take stays "pending" (nothing
      charged, tried again on a backoff) before it counts as a failed start, charged
      as OTP's retry loop does; None (default): pending until a node fits; 0: OTP's
      retry loop at once.
    """

    node: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, float] = field(default_factory=dict)
    policy: PlacementPolicy = "prefer"
    fallback: Sequence[str] = ()
    wait: float | None = None

    def __post_init__(self) -> None:
        self._check(None)

    def _check(self, owner: str | None) -> None:
        put = object.__setattr__
        if self.node is not None and (not isinstance(self.node, str) or not self.node):
            raise SpecError(owner, "placement.node", self.node, "expected a node id or name")
        put(self, "labels", _str_map(self.labels, owner, "placement.labels"))
        put(self, "resources", _resource_map(self.resources, owner))
        if self.policy not in POLICIES:
            raise SpecError(owner, "placement.policy", self.policy, f"expected one of {POLICIES}")
        if isinstance(self.fallback, str) or not isinstance(self.fallback, Iterable):
            raise SpecError(owner, "placement.fallback", self.fallback, "expected a list of nodes")
        fallback = tuple(self.fallback)
        if not all(isinstance(n, str) and n for n in fallback):
            raise SpecError(owner, "placement.fallback", fallback, "expected node ids or names")
        put(self, "fallback", fallback)
        wait = self.wait
        if wait is not None:
            if (
                isinstance(wait, bool)
                or not isinstance(wait, int | float)
                or not math.isfinite(wait)
                or wait < 0
            ):
                raise SpecError(
                    owner, "placement.wait", wait, "expected None (no limit) or seconds >= 0"
                )
            put(self, "wait", float(wait))
        if self.policy == "pinned" and self.node is None:
            raise SpecError(
                owner, "placement.node", None, 'policy "pinned" needs a node; name one, or "prefer"'
            )
        if self.policy == "pinned" and fallback:
            raise SpecError(
                owner,
                "placement.fallback",
                fallback,
                'policy "pinned" never falls back; use "prefer"',
            )

    @staticmethod
    def unplaceable(message: str) -> ExitReason:
        """The start failure of a remote subtree that no live node can take now: not a
        failure of the subtree itself, so a restart waits (`wait`) instead of charging."""
        return ExitReason(ExitKind.START_FAILURE, exc_type=UNPLACEABLE, message=message)

    @staticmethod
    def is_unplaceable(reason: ExitReason) -> bool:
        return reason.kind is ExitKind.START_FAILURE and reason.exc_type == UNPLACEABLE

    def eligible(self, node: NodeInfo) -> bool:
        """Whether `node` has the labels and resources this placement asks for."""
        if any(node.labels.get(k) != v for k, v in self.labels.items()):
            return False
        return all(node.resources.get(k, 0.0) >= v for k, v in self.resources.items())


def _find(key: str | None, nodes: Sequence[NodeInfo]) -> NodeInfo | None:
    if key is None:
        return None
    return next((n for n in nodes if n.matches(key)), None)


def choose_node(
    placement: Placement, live_nodes: Sequence[NodeInfo], previous_node: str | None = None
) -> str | None:
    """The id of the node to start a remote subtree on, or None if no node will do.

    `live_nodes` is the engine's snapshot of the nodes alive now; `previous_node`
    is the id of the node the last incarnation ran on (None for a first start).
    """
    eligible = [n for n in live_nodes if placement.eligible(n)]
    previous = _find(previous_node, eligible)
    wanted = _find(placement.node, eligible)
    if placement.policy == "pinned":
        return wanted.id if wanted is not None else None
    if placement.policy == "spread":
        ordered = sorted(eligible, key=lambda n: n.id)
        if not ordered:
            return None
        if previous_node is None:
            return (wanted or ordered[0]).id
        # The next one after the previous node, whether that one still lives or not.
        after = previous.id if previous is not None else previous_node
        later = [n for n in ordered if n.id > after]
        return (later or ordered)[0].id
    for candidate in (previous, wanted, *(_find(f, eligible) for f in placement.fallback)):
        if candidate is not None:
            return candidate.id
    ordered = sorted(eligible, key=lambda n: n.id)
    return ordered[0].id if ordered else None


def unknown_nodes(placement: Placement, nodes: Sequence[NodeInfo]) -> list[str]:
    """One sentence for each node that `placement` names (`node`, `fallback`) and no
    node of `nodes` has as its id or name: the names there are, and the likeliest
    one meant (a misspelt name is not an error: "prefer" falls back without it, so
    it is said instead). [] when every name is found, or `nodes` is empty."""
    if not nodes:
        return []
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.name] = counts.get(n.name, 0) + 1
    names = sorted(
        n.name if n.name and counts[n.name] == 1 else f"{n.name}#{n.id[:8]}" if n.name else n.id
        for n in nodes
    )
    keys = [n.id for n in nodes] + [n.name for n in nodes if n.name]
    notes = []
    for field_name, key in [("node", placement.node)] + [
        ("fallback", f) for f in placement.fallback
    ]:
        if key is None or _find(key, nodes) is not None:
            continue
        close = difflib.get_close_matches(key, keys, n=1, cutoff=0.5)
        if not close:  # a short name ("zz") is far from any by ratio: its first letter
            close = [k for k in keys if k[:1].lower() == key[:1].lower()][:1]
        meant = f"; did you mean {close[0]!r}?" if close else ""
        notes.append(
            f"placement.{field_name} {key!r} is no node's id or name "
            f"(nodes: {', '.join(names)}){meant}"
        )
    return notes
