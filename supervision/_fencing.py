"""Leases, fences, and when an unreachable node is declared down: one rule.

The live remote child (actors/_shell/_remote_child.py), the far side of a
remote subtree (actors/_remote/_host.py) and the simulator (`simulate/_nodes.py`)
all decide by `Fencing`. Pure: `now` is passed in. docs/multihost.md section 5
explains the rule; in short:

- the parent renews a remote incarnation's lease every third of it;
- the far side fences itself (stops its children) once no renewal came for
  `FENCE_AT` of the lease, so two renewals may be lost;
- the parent declares an unreachable node down when the engine stops listing
  it, or (opt-in) once it was unreachable for `unreachable_timeout`;
- a `node_down` or `remote_unresponsive` exit, whose incarnation may still run,
  is told to the parent's supervisor only once the whole lease has run out since
  the last renewal: by then the far side has had a quarter of the lease to stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ._reasons import ExitKind, ExitReason


@dataclass(frozen=True)
class Fencing:
    """An engine's fencing settings, and the decisions they give (times in seconds).

    `lease_timeout`: None turns leases off (no fence, no wait); `unreachable_timeout`:
    None waits for the engine's verdict on an unreachable node.
    """

    lease_timeout: float | None = None
    unreachable_timeout: float | None = None

    FENCE_AT: ClassVar[float] = 0.75  # of the lease: the far side is done in time
    RENEWALS: ClassVar[int] = 3  # per lease

    @property
    def renew_every(self) -> float | None:
        """Seconds between two renewals of the lease by the parent."""
        return None if self.lease_timeout is None else self.lease_timeout / self.RENEWALS

    def lease_expired(self, now: float, last_renewal: float) -> bool:
        """The far side's test: fence once no renewal came for FENCE_AT of the lease."""
        lease = self.lease_timeout
        return lease is not None and now - last_renewal >= lease * self.FENCE_AT

    def fence_delay(self, now: float, last_renewal: float | None) -> float:
        """Seconds the parent must still wait before acting on a fenced exit (0: at once).

        The old incarnation stops its children once its lease has run out; acting
        sooner could run the restarted subtree beside the old one.
        """
        if self.lease_timeout is None or last_renewal is None:
            return 0.0
        return max(0.0, last_renewal + self.lease_timeout - now)

    @staticmethod
    def waits_for_fence(reason: ExitReason) -> bool:
        """Whether the incarnation that ended with `reason` may still run somewhere.

        A node declared down may be only cut off, and a killed unresponsive one may
        not have heard the kill; a crashed process, or a tree that ended by itself,
        is gone.
        """
        return reason.kind in (ExitKind.NODE_DOWN, ExitKind.REMOTE_UNRESPONSIVE)

    def tell_after(self, reason: ExitReason, now: float, last_renewal: float | None) -> float:
        """Seconds the parent waits before telling its supervisor of `reason`."""
        return self.fence_delay(now, last_renewal) if self.waits_for_fence(reason) else 0.0

    def verdict(
        self, now: float, node: str, unreachable_since: float, *, listed: bool
    ) -> ExitReason | None:
        """The parent's verdict on a node unreachable since `unreachable_since`.

        `node_down` once it was unreachable for `unreachable_timeout` (the bound
        Erlang's tick timeout gives), or once the engine no longer lists it
        (`listed`: the engine's own verdict); None while it is only unreachable,
        which charges nothing.
        """
        limit = self.unreachable_timeout
        if limit is not None and now - unreachable_since >= limit:
            message = f"node {node!r} unreachable for {limit}s (unreachable_timeout)"
            return ExitReason(ExitKind.NODE_DOWN, message=message)
        if not listed:
            return ExitReason(ExitKind.NODE_DOWN, message=f"node {node!r} was declared dead")
        return None

    def declared_after(self, engine_verdict: float) -> float:
        """Seconds from a node's cut-off to the first `node_down` verdict, when the
        engine stops listing it `engine_verdict` seconds after the cut-off."""
        limit = self.unreachable_timeout
        return engine_verdict if limit is None else min(limit, engine_verdict)
