"""The one judge of readiness: whether a running tree (or some of its children) is
ready, what keeps it from being so, and whether it never will be. `nannytree wait
--ready` asks it through the run host (`wait_ready`); the test harness's waits ask
the same rules (`is_ready`, and `Ending` for "can this wait still succeed").

Ready: every worker "running" (its `ready` passed) with no liveness probe failing,
or a one-shot step done (transient or temporary, ended by itself with a normal
code), or a child an operator stopped (not with `strict`); every supervisor running
(or stopped by an operator), the root's start returned. Never ready: the tree
ended (gave up, shut itself down, failed to start, was stopped), or a supervisor
above an awaited child gave up and is not restarted (transient), or an awaited
child's restart_limit did (it is "failed"). Anything else
may still come (a restart, a backoff, a slow start, an operator's `start`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import pykka

from supervision import ChildSpec, Event, EventKind, ExitKind, ExitReason, ReadyFile, SupervisorSpec

from ._find import named, nanny_at
from ._records import GAVE_UP, Node, at_rest, health_text, stderr_lines

if TYPE_CHECKING:
    from ._snapshot import TreeInspector

TICK = 0.1  # seconds between looks without an event (the root's start returning, a closing run)
START_FAILURE = ExitKind.START_FAILURE
_ENDS = (EventKind.MAX_INTENSITY_REACHED, EventKind.AUTO_SHUTDOWN, EventKind.SUPERVISOR_STOPPED)
# The states of a child that is there or coming back (a supervisor in one is not gone).
ALIVE = (
    *("running", "starting", "restarting", "backoff", "paused", "stopping"),
    *("unreachable", "pending"),
)


def wait_ready(
    inspector: TreeInspector,
    request: dict[str, Any],
    closing: threading.Event,
    gone: Callable[[], bool],
) -> dict[str, Any]:
    """Block until the tree (or the children `request["ids"]` names) is ready, can never
    be, or `request["timeout"]` seconds (None: no limit) have passed; the answer.

    Woken by each new event of the tree, else every TICK; ends early if the client
    hangs up (`gone`) or the run closes its socket (`closing`).
    """
    keys = request.get("ids") or []
    timeout = request.get("timeout")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ValueError("ids must be a list of child ids or paths")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0
    ):
        raise ValueError("timeout must be seconds >= 0, or null for no limit")
    strict = request.get("strict", False)
    if not isinstance(strict, bool):
        raise ValueError("strict must be true or false")
    deadline = None if timeout is None else time.monotonic() + timeout
    log = inspector.log
    ending = Ending(inspector.spec.id)
    _, index = log.since(1 << 62, 0)  # where new events will start
    ending.see(log.snapshot())  # (one seen twice is harmless)
    while True:
        try:
            root = inspector.snapshot(stats=False)
        except pykka.ActorDeadError:  # the root stopped between two looks
            root = Node(inspector.spec.id, inspector.spec.id, "supervisor", "stopped")
        awaited = _awaited(root, keys, log.snapshot)
        waiting = [_entry(n, inspector, ending) for n in _not_ready(awaited, strict)]
        tree = root.id
        ended = ending.why(root, closing.is_set())
        if ended is not None:  # the reason says it all
            return {"tree": tree, "ready": False, "ended": ended, "waiting": []}
        ended = never_ready(awaited, root, ending, strict=strict)
        if ended is not None:
            return {"tree": tree, "ready": False, "ended": ended, "waiting": waiting}
        if not waiting:
            # Children stopped by the root's give-up look stopped on purpose: an event
            # since the snapshot (its end) is seen first, and the tree looked at again.
            events, index = log.since(index, 0)
            if events:
                ending.see(events)
                continue
            count = sum(1 for n in _all(awaited) if n is not root)
            return {"tree": tree, "ready": True, "children": count}
        left = None if deadline is None else deadline - time.monotonic()
        if (left is not None and left <= 0) or gone():  # gone: nobody will read it
            return {"tree": tree, "ready": False, "timed_out": True, "waiting": waiting}
        events, index = log.since(index, TICK if left is None else min(TICK, left))
        ending.see(events)


# -- what is awaited, and what is not ready ---------------------------------------------------


def _awaited(root: Node, keys: list[str], events: Callable[[], list[Event]]) -> list[Node]:
    """The nodes `keys` name (by path, or by id anywhere, as the other commands), or the
    root. A key that names nothing now is a child that ended and was removed (a
    temporary one: done if its last exit was normal, else never ready) or a mistake."""
    if not keys:
        return [root]
    found = []
    nodes = [n for _, n in root.walk() if n is not root]
    for key in keys:
        wanted = key.strip("/")
        matches = named(nodes, root.id, key, path=lambda n: n.path, ident=lambda n: n.id)
        if len(matches) > 1:
            listed = ", ".join(m.path for m in matches)
            raise LookupError(f"{key!r} names several children ({listed}); give its path")
        if matches:
            found.append(matches[0])
            continue
        removed = _removed(root, wanted, events())
        if removed is None:
            raise LookupError(
                f"no child {key!r} in tree {root.id!r}; `nannytree status` lists them"
            )
        found.append(removed)
    return found


def _removed(root: Node, wanted: str, events: list[Event]) -> Node | None:
    """A temporary child that ended and left the tree, from its last exit event."""
    for event in reversed(events):
        if event.offender is None or event.context not in (
            EventKind.CHILD_EXITED,
            EventKind.CHILD_TERMINATED,
        ):
            continue
        path = f"{event.supervisor}/{event.offender}"
        if path in (wanted, f"{root.id}/{wanted}") or (
            "/" not in wanted and event.offender == wanted
        ):
            node = Node(id=event.offender, path=path, type="worker", state="stopped")
            node.restart = "temporary"
            if event.reason is not None:
                node.last_exit = str(event.reason)
                node.last_exit_normal = event.reason.is_normal
                node.last_exit_kind = event.reason.kind.value
            return node
    return None


def _all(nodes: Iterable[Node]) -> Iterator[Node]:
    for node in nodes:
        for _, n in node.walk():
            yield n


def is_ready(state: str, health: str | None) -> bool:
    """A worker in `state`, its liveness probe's status `health` (None: no probe), is
    ready: it runs (its `ready` passed) and is not failing its probe."""
    return state == "running" and health != "failing"


def ready(node: Node, *, strict: bool = False) -> bool:
    """This node alone (not its children) is ready: running (a worker passing its
    probe), or at rest on purpose (a finished one-shot step; unless `strict`, a child
    an operator stopped)."""
    if node.state == "running":
        return node.type == "supervisor" or is_ready(node.state, (node.health or {}).get("status"))
    return at_rest(node, strict=strict)


def _not_ready(awaited: list[Node], strict: bool) -> list[Node]:
    """The nodes that keep the awaited ones from being ready: each worker not ready,
    and each supervisor not ready with nothing below it listed (a supervisor that is
    starting or stopped shows no children)."""
    found: list[Node] = []

    def visit(node: Node) -> bool:
        below = [visit(c) for c in node.children]  # every child: each one listed
        if any(below):
            return True
        if not ready(node, strict=strict):
            found.append(node)
            return True
        return False

    for node in awaited:
        visit(node)
    unique = {id(n): n for n in found}  # an id and its parent both named
    return list(unique.values())


def _entry(node: Node, inspector: TreeInspector, ending: Ending) -> dict[str, Any]:
    """One node that is not ready, and why: what the client prints."""
    entry: dict[str, Any] = {
        "path": node.path,
        "type": node.type,
        "state": node.state,
        "restarts": node.restarts,
        "last_exit": node.last_exit,
        "health": health_text(node.health) if node.state == "running" else "",
        "stderr": ending.stderr(node.path),
    }
    if node.state == "starting" and node.type == "worker":
        entry["waiting_for"] = ready_condition(_spec_at(inspector.spec, node.path))
    return entry


def _spec_at(spec: SupervisorSpec, path: str) -> Any:
    parts = path.split("/")[1:]
    here: Any = spec
    for part in parts:
        children = getattr(here, "children", ())
        here = next((c for c in children if c.id == part), None)
        if here is None:
            return None
    return here


def ready_condition(spec: Any) -> str:
    """What a starting child waits for before it counts as started ("" for a spawn)."""
    if not isinstance(spec, ChildSpec):
        return ""
    ready = spec.ready
    timeout = f" (start_timeout {spec.start_timeout:g}s)"
    if ready == "started":
        return ""
    if isinstance(ready, float | int):
        return f"{ready:g}s of uptime{timeout}"
    if isinstance(ready, ReadyFile):
        return f"the file {ready.path}{timeout}"
    words = {
        "notify": "actors.child.ready()",
        "sd_notify": "READY=1 on its NOTIFY_SOCKET",
        "exited": "its exit with a normal code (a one-shot step)",
    }
    return f"{words.get(str(ready), str(ready))}{timeout}"


# -- what can never be ready -------------------------------------------------------------------


class Held(Protocol):
    """What `Ending.ended` asks of a tree's handle (actors.Tree)."""

    @property
    def alive(self) -> bool: ...

    @property
    def ref(self) -> pykka.ActorRef[Any]: ...

    def finished(self) -> ExitReason | None: ...


class Ending:
    """What a tree's events say about its end, its children's last exits and the
    supervisors above an awaited child: whether a wait can still succeed.

    One reading of the events, two questions: `why` (with a snapshot of the tree:
    `nannytree wait --ready`) and `ended` (asking the supervisors above `owner`, the
    path of the awaited child's supervisor: the test harness's waits)."""

    def __init__(self, root: str, owner: str | None = None) -> None:
        self.root = root
        self.end: Event | None = None  # the root gave up, shut itself down or stopped
        self.first_failed: Event | None = None  # the first failed start: the cause
        self.root_failed = False  # a start failed in the root: while it starts, fatal
        self.gave_up: dict[str, Event] = {}  # supervisor path: its last give-up
        self.tails: dict[str, str] = {}  # child path: the stderr tail of its last exit
        self.root_stopped = False  # the root's own last event came
        self.stopped: ExitReason | None = None  # and its reason
        # (parent's path, supervisor's id) of each nested supervisor above the child.
        self.above: set[tuple[str, str]] = set()
        if owner is not None:
            parts = owner.split("/")
            self.above = {("/".join(parts[:i]), parts[i]) for i in range(1, len(parts))}
        self.suspects: list[tuple[str, str]] = []  # of those, each that exited since

    def see(self, events: Iterable[Event]) -> None:
        for event in events:
            if (
                event.context is EventKind.SUPERVISOR_STOPPED
                and event.offender is None
                and event.supervisor == self.root
            ):
                self.root_stopped, self.stopped = True, event.reason
            elif (
                event.offender is not None
                and (event.supervisor, event.offender) in self.above
                and event.context in (EventKind.CHILD_EXITED, EventKind.CHILD_TERMINATED)
            ):
                self.suspects.append((event.supervisor, event.offender))
            if event.reason is not None and event.offender and event.reason.stderr_tail:
                tail = stderr_lines(event.reason.stderr_tail)
                self.tails[f"{event.supervisor}/{event.offender}"] = tail
            if event.context is EventKind.MAX_INTENSITY_REACHED:
                self.gave_up[event.supervisor] = event
            if event.context is EventKind.START_FAILED:
                self.first_failed = self.first_failed or event
                self.root_failed = self.root_failed or event.supervisor == self.root
            if event.supervisor == self.root and event.context in _ENDS and self.end is None:
                self.end = event

    def stderr(self, path: str) -> str:
        return self.tails.get(path, "")

    def why(self, root: Node, closing: bool) -> str | None:
        """Why the tree has ended, or None while it has not. A start that fails while
        the root starts is the end already (the root stops what it started, then
        itself: OTP's init failure), before its children have stopped."""
        tree = f"tree {self.root!r}"
        end = self.end
        failed = self.first_failed
        start_failed = self.root_failed and (
            root.state == "starting"
            or (end is not None and end.reason is not None and end.reason.kind is START_FAILURE)
        )
        if failed is not None and start_failed:
            return (
                f"{tree} could not start: child {failed.supervisor}/{failed.offender} "
                f"failed to start ({failed.reason}){self._tail(failed)}"
            )
        if end is None and root.state != "stopped" and not closing:
            return None
        if end is not None and end.context is EventKind.MAX_INTENSITY_REACHED:
            return f"{tree} gave up: {self._gave_up(end)}"
        if end is not None and end.context is EventKind.AUTO_SHUTDOWN:
            return (
                f"{tree} shut itself down: significant child {end.offender!r} ended "
                f"(auto_shutdown = {end.detail})"
            )
        if end is not None and end.reason is not None:
            return f"{tree} stopped ({end.reason})"
        return f"{tree} stopped"

    def _gave_up(self, event: Event) -> str:
        return (
            f"child {event.offender!r} ended too often (last: {event.reason}); "
            f"{event.detail}{self._tail(event)}"
        )

    def _tail(self, event: Event) -> str:
        tail = self.tails.get(f"{event.supervisor}/{event.offender}", "")
        lines = "".join(f"\n    | {line}" for line in tail.splitlines())
        return f"\nits stderr ended with:{lines}" if lines else ""

    def ended(self, tree: Held | None) -> tuple[str, ExitReason | None] | None:
        """(what ended, its reason), or None while a wait on the awaited child may still
        succeed: the tree runs, and each supervisor above the child that exited since
        is there again (asked of its parent)."""
        if self.root_stopped:
            return f"tree {self.root!r}", self.stopped
        if tree is not None and not tree.alive:
            return f"tree {self.root!r}", tree.finished()
        while self.suspects and tree is not None:
            parent, sid = self.suspects.pop(0)
            try:
                info = nanny_at(tree.ref, parent).proxy().which_child(sid).get(timeout=5)
            except LookupError:
                return f"supervisor {parent}/{sid} (deleted)", None
            except Exception:
                continue  # its parent is stopping too: the tree's end will say
            if info.state not in ALIVE:
                return f"supervisor {parent}/{sid} (not restarted)", info.last_exit
        return None

    def supervisor_gave_up(self, node: Node) -> str:
        event = self.gave_up.get(node.path)
        why = self._gave_up(event) if event is not None else f"{node.last_exit}"
        return (
            f"supervisor {node.path!r} gave up and is not restarted "
            f"(restart = {node.restart}): {why}"
        )


def never_ready(
    awaited: list[Node], root: Node, ending: Ending, *, strict: bool = False
) -> str | None:
    """A supervisor at or above an awaited node that gave up and stays stopped, an
    awaited worker whose restart_limit gave up (failed: the same, for one child), or
    an awaited temporary child that ended and was removed, unless it was done or
    (not `strict`) stopped on purpose."""
    paths = {n.path for n in _all(awaited)}
    for _, node in root.walk():
        above = any(p == node.path or p.startswith(node.path + "/") for p in paths)
        if (
            above
            and node.type == "supervisor"
            and node.state == "stopped"
            and node.restart != "permanent"
            and GAVE_UP in (node.last_exit or "")
        ):
            return ending.supervisor_gave_up(node)
    for node in _all(awaited):
        if node.type == "worker" and node.state == "failed":
            why = node.last_exit or "failed"
            cause = (  # never started: an optional child (docs/otp-semantics.md section 16)
                "its first start failed (required = false)"
                if node.incarnation == 0
                else "its restart_limit was exceeded"
            )
            return (
                f"child {node.path!r} failed: {cause} (last: {why}); "
                "`nannytree start` starts it again"
            )
    for node in awaited:
        if (
            node.restart == "temporary"
            and node.state == "stopped"
            and not at_rest(node, strict=strict)
        ):
            why = node.last_exit or "stopped"
            return f"child {node.path!r} ended ({why}) and is not restarted"
    return None
