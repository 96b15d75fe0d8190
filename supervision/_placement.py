"""Where a remote subtree runs: a Placement on its SupervisorSpec, and the pure
choice of a node from a snapshot of the live ones.

Only whole subtrees cross hosts (a ChildSpec has no placement). The engine
(actors.ray.RayEngine, or a fake) lists the nodes; `choose_node` decides; the
engine enforces. The simulator can call the same function in virtual time.

Policies:
- "prefer" (default): the previous node while it lives (a crashed subtree comes
  back where it was), else `node`, else the `fallback` nodes in order, else any
  eligible node.
- "pinned": only `node`; when it is gone the start fails, and the supervisor's
  retry loop charges each attempt until it gives up (OTP's "cannot start").
- "spread": the next eligible node after the previous one (round robin by node
  id), so successive restarts move around the cluster.

A node is eligible when it has every label of `labels` (same value) and at
least the `resources` asked for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._errors import SpecError

PlacementPolicy: TypeAlias = Literal["prefer", "pinned", "spread"]
POLICIES: tuple[str, ...] = ("prefer", "pinned", "spread")


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
    """

    node: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, float] = field(default_factory=dict)
    policy: PlacementPolicy = "prefer"
    fallback: Sequence[str] = ()

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
