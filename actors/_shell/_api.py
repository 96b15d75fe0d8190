"""The supervisor API, defined once: `SupervisorAPI`, the calls every supervisor answers.

OTP's supervisor calls (which_children, start_child, terminate_child, ...), the
calls beyond OTP for an update in place (docs/update.md), and the views of a
child's status. `NannyActor` answers each of them through its proxy;
`RemoteChild` forwards a part of them to a subtree on another node and raises
`NotForwarded` for the rest; `AsyncNanny` (actors/aio.py) mirrors each one as a
coroutine. The calls marked `@read_only` only read the supervisor's state: a
nanny answers them at once, even while it waits for a child's start
(`READ_ONLY`, derived from the marks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import pykka

from supervision import (
    AnySpec,
    ChildCounts,
    ChildInfo,
    Event,
    SpecError,
    SupervisorSpec,
    parse_signal,
)

from ._event_log import EventLog

F = TypeVar("F", bound=Callable[..., Any])


def read_only(call: F) -> F:
    """Mark an API call that only reads the supervisor's state (answered at once)."""
    call.__read_only__ = True  # type: ignore[attr-defined]
    return call


@dataclass(frozen=True)
class TreeNode:
    """One child in which_tree(): its info, its path, and its children if a supervisor."""

    info: ChildInfo
    path: str
    children: tuple[TreeNode, ...] = ()
    status: str = ""  # a command's last sd_notify STATUS= text, for `nannytree status`


class SupervisorAPI(Protocol):
    """What one supervisor answers, as its actor's methods (call them through the
    actor's proxy: `ref.proxy().which_children().get()`). A call that changes the
    tree is answered once the supervisor has carried it out; each returns what its
    future's `get()` gives."""

    # -- reading the tree (OTP's which_children, count_children, get_childspec) --

    @read_only
    def which_children(self) -> list[ChildInfo]:
        """Children in OTP's order: reverse start order."""
        ...

    @read_only
    def which_child(self, key: str | int) -> ChildInfo:
        """One child's info, by id (or pid)."""
        ...

    @read_only
    def which_tree(self) -> list[TreeNode]:
        """The whole subtree, in start order: each child with its own children, if any."""
        ...

    @read_only
    def count_children(self) -> ChildCounts:
        """How many children, of which kind, and how many run (OTP's count_children)."""
        ...

    @read_only
    def get_childspec(self, key: str | int) -> AnySpec:
        """The spec a child holds now."""
        ...

    @read_only
    def which_childspecs(self) -> list[tuple[ChildInfo, AnySpec]]:
        """Each child's info and the spec it holds now, in start order, in one call
        (what an update diffs the file against: docs/update.md)."""
        ...

    @read_only
    def own_spec(self) -> SupervisorSpec:
        """The spec this supervisor runs with now: its settings as last changed in
        place (`change_settings`); its children as it started (which_childspecs has
        them as they run)."""
        ...

    @read_only
    def child_nanny(self, key: str) -> pykka.ActorRef[Any]:
        """The ActorRef of a running nested supervisor, to call its API directly."""
        ...

    @read_only
    def child_status(self, key: str | int) -> str:
        """A command's last sd_notify STATUS= text ("" if it sent none), as
        `systemctl status` shows it. Answered at once, even during a start."""
        ...

    @read_only
    def events(self) -> list[Event]:
        """The tree's lifecycle events, oldest first."""
        ...

    @read_only
    def event_log(self) -> EventLog:
        """The tree's live EventLog (thread-safe: wait on it from any thread)."""
        ...

    # -- OTP's calls that change the tree --

    def start_child(self, spec_or_args: Any = None) -> ChildInfo:
        """Add a child at the end and start it (simple_one_for_one: extra args)."""
        ...

    def terminate_child(self, key: str | int, with_dependents: bool = False) -> None:
        """Stop a child (its spec is kept); `with_dependents`: in a rest_for_one or
        one_for_all supervisor, the children started after it first (reverse order)."""
        ...

    def restart_child(self, key: str) -> ChildInfo:
        """Start a stopped child again (OTP's restart_child)."""
        ...

    def delete_child(self, key: str) -> None:
        """Forget a stopped child's spec (OTP's delete_child)."""
        ...

    def reset_restarts(self, key: str | None = None) -> int:
        """Empty this supervisor's intensity window (`key` None) or the restart_limit
        window of child `key` (a "failed" one becomes "stopped"); returns how many
        restarts were in it. Raises NoRestartLimit for a child without one."""
        ...

    # -- beyond OTP, for an update in place (docs/update.md) --

    def replace_child(self, key: str, spec: AnySpec, settle: float = 0.0) -> ChildInfo:
        """Stop the child, give it `spec` at the same place, start it (answers as
        restart_child; a failed start leaves it stopped with the new spec).

        `settle` seconds: a worker without readiness counts as started only once it
        has stayed up that long, so one that exits at once fails the start (and stays
        stopped) instead of crash-looping into the intensity. `nannytree update`
        passes its `--settle` (1 s by default).
        """
        ...

    def store_childspec(self, key: str, spec: AnySpec) -> None:
        """Keep `spec` for a nested supervisor (or a stopped worker), touching nothing."""
        ...

    def change_settings(self, spec: SupervisorSpec) -> None:
        """Take `spec`'s intensity, period, auto_shutdown and max_children in place,
        the children running on (OTP's code_change); the strategy stays. A lower
        intensity lowers the launcher's restarts ahead at once."""
        ...

    def insert_child(self, spec: AnySpec, after: str | None, settle: float = 0.0) -> ChildInfo:
        """start_child, placed right after the child `after` (None: first); `settle`
        as for replace_child (a failed start adds nothing)."""
        ...

    def move_child(self, key: str, after: str | None) -> None:
        """Move a child in the start order, right after `after` (None: first)."""
        ...

    # -- a running child's process --

    def pause_child(self, key: str) -> None:
        """SIGSTOP the child's process group; it shows as "paused"."""
        ...

    def resume_child(self, key: str) -> None:
        """SIGCONT a paused child's process group; it runs on."""
        ...

    def signal_child(self, key: str, sig: int | str) -> None:
        """Send `sig` (a number, or a name such as "HUP") to the child's process group."""
        ...

    def reload_child(self, key: str) -> None:
        """Reload a child in place as its spec's `reload` says: the check, then the signal.

        Raises ReloadRefused (no reload in the spec, or the check failed: why),
        ChildNotRunning.
        """
        ...

    def read_output(self, key: str, stream: str = "stderr", previous: bool = False) -> str:
        """The last 64 KiB a child wrote to a stream ("stdout" or "stderr").

        Its current process's, or its last one's once it exited; with `previous`,
        the run before that (as `kubectl logs --previous`). Kept for a stream the
        spec says "capture" for, for stderr (the launcher tees it, unless the
        child writes to a terminal), and for a stream a LogLine readiness reads.
        """
        ...


def _calls() -> tuple[str, ...]:
    return tuple(
        name
        for name, value in vars(SupervisorAPI).items()
        if callable(value) and not name.startswith("_")
    )


# Every call of the API, in the order above; the ones answered at once.
CALLS: tuple[str, ...] = _calls()
READ_ONLY: frozenset[str] = frozenset(
    name for name in CALLS if getattr(getattr(SupervisorAPI, name), "__read_only__", False)
)


def signal_number(sig: int | str, child: str) -> int:
    """A signal given as a number or a name ("HUP", "SIGHUP"); SpecError otherwise."""
    try:
        return parse_signal(sig)
    except ValueError:
        raise SpecError(
            child,
            "signal",
            sig,
            "expected a signal name such as 'HUP' or 'SIGTERM', or its number",
        ) from None
