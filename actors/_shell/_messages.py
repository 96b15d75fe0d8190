"""The messages actors exchange. Parents tell (or ask) children; children only tell parents.

A nanny never blocks on a child's start: it tells a worker (or a nested nanny)
`Start`/`InitTree` with a token, goes on answering its mailbox, and the child
tells it `StartDone` or `StartFailed` with the same token. Stops are asked: each
is bounded by the child's shutdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supervision import ExitPlan, ExitReason, Health

if TYPE_CHECKING:
    from .._process._port import ProcessExit

# -- to a WorkerActor -----------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """Start the child's process; answered by StartDone or StartFailed.

    `arm`: what the process's next exit will mean, decided ahead by the core:
    armed with the executor as soon as the process runs.
    """

    token: int
    arm: ArmExit | None = None
    # In a run of starts: the spawn its supervisor sent ahead (a PendingSpawn, done).
    spawned: Any = None
    # An operator's replace or insert: seconds a ready="started" child must stay up.
    settle: float = 0.0


@dataclass(frozen=True)
class PrepareStart:
    """Asked before a run of starts (docs/scale.md, "A run of starts"): a StartTicket
    when this start is only a spawn from the worker's template (the child counts as
    started once its process runs, and there is nothing to adopt), else None. Its
    supervisor then sends the spawns of the run in order and tells each worker
    `Start` with its own, once answered."""


@dataclass(frozen=True)
class StartTicket:
    launcher: Any  # the Spawner the run goes to
    template: int
    name: str
    notify: Any  # the worker's callback for its process's notes


@dataclass(frozen=True)
class Unstart:
    """The core did not ask for the start `token` of a run after all: kill what it
    started, quietly (the core never knew it), or drop the Start when it comes."""

    token: int


@dataclass(frozen=True)
class Stop:
    """Stop the process per the spec's shutdown (asked); answered with its ExitReason.

    `deadline` (time.monotonic()) caps the wait: a supervisor above has a
    shutdown time of its own, and the whole subtree must be gone by then.
    """

    token: int
    deadline: float | None = None


@dataclass(frozen=True)
class PrepareStop:
    """The first half of a stop its supervisor carries out itself (asked): the worker
    lets go of the process (no restart ahead, no memory watch) and answers a
    StopOrder, or the ExitReason when there is no process left to stop. Until its
    FinishStop, it holds its other messages."""


@dataclass(frozen=True)
class FinishStop:
    """The second half (asked): the process is gone, as `outcome` says; answered with
    the stop's ExitReason."""

    outcome: Any  # _stopping.StopOutcome


@dataclass(frozen=True)
class Signal:
    """Send `sig` to the child's process group (asked); ChildNotRunning without one."""

    sig: int


@dataclass(frozen=True)
class ReloadChild:
    """Run the spec's reload check, then send its reload signal (asked); the signal sent."""


@dataclass(frozen=True)
class StopTimeout:
    """From the tree's timer: the stop with this token ran out of time."""

    token: int


@dataclass(frozen=True)
class WatchdogTick:
    """From the tree's timer: is the child with this incarnation still beating?"""

    incarnation: int


@dataclass(frozen=True)
class HealthChanged:
    """From the tree's prober: what the liveness probe of this incarnation says now."""

    incarnation: int
    verdict: str  # supervision.spec._probes.Verdict
    health: Health


@dataclass(frozen=True)
class Pause:
    """SIGSTOP the child's process group (asked)."""


@dataclass(frozen=True)
class Resume:
    """SIGCONT the child's process group (asked)."""


@dataclass(frozen=True)
class ReadOutput:
    """Asked: what a captured stream (1 stdout, 2 stderr) said lately, as text.

    The current process's, or with `previous` the one before it (`logs --previous`).
    """

    stream: int = 2
    previous: bool = False


# -- to a nested NannyActor --------------------------------------------------------------


@dataclass(frozen=True)
class InitTree:
    """Start the children in order; answered by StartDone or StartFailed to the parent.

    `settle`: as Start's, for each child (a subtree an update replaced or added).
    """

    token: int
    settle: float = 0.0


@dataclass(frozen=True)
class ShutdownTree:
    """Stop the subtree, reverse order (asked); answered with its ExitReason.

    Every process of the subtree is gone by `deadline` (time.monotonic()), if given.
    """

    token: int
    deadline: float | None = None


# -- up the tree (told, never asked) -------------------------------------------------------


@dataclass(frozen=True)
class StartDone:
    """A start done. `ended`: the exit that ended the process before its start counted
    (a one-shot step, ready="exited": its start waits for it), told with the answer so
    that its supervisor records it before it starts the next child."""

    child_id: str
    token: int
    pid: int | None
    incarnation: int
    ended: ChildExited | None = None


@dataclass(frozen=True)
class StartFailed:
    child_id: str
    token: int
    reason: ExitReason


@dataclass(frozen=True)
class ChildExited:
    """A child's process (or nested supervisor) ended by itself.

    `uptime`: seconds it ran, as measured where it was watched (None: unknown).
    `respawned_by`: the executor that already started a successor, as the exit
    plan allowed (None: nothing was started ahead of the decision). `ahead`: when
    its worker would only adopt that successor, the token of its start, sent ahead:
    answered (StartDone) once its pid is known; the core's next start of the child
    takes it, else it is withdrawn (Unstart). 0: none.
    """

    child_id: str
    incarnation: int
    pid: int | None
    reason: ExitReason
    uptime: float | None = None
    respawned_by: object | None = None
    ahead: int = 0


@dataclass(frozen=True)
class ArmExit:
    """To a worker: let its executor restart the child at once on an exit `plan` covers."""

    plan: ExitPlan
    budget: int  # its supervisor's restart budget with the spawner (Grant)


@dataclass(frozen=True)
class ChildNote:
    """Something about a child worth an event that is not a decision (a closed channel,
    a new main process)."""

    child_id: str
    incarnation: int
    pid: int | None
    detail: str
    main_pid: int = 0  # the child's main process is now this pid (a forking daemon)
    # A process the executor started ahead of a decision, killed because a stop came
    # first: the executor that spent a restart of its grant on it (see ChildExited).
    respawned_by: object | None = None


@dataclass(frozen=True)
class ChildHealth:
    """A child's liveness changed (an event for "healthy" and "unhealthy"; every
    change shows in which_children)."""

    child_id: str
    incarnation: int
    pid: int | None
    health: Health
    verdict: str


@dataclass(frozen=True)
class ChildStatus:
    """A command's sd_notify STATUS= text changed (for `status ID`; not an event)."""

    child_id: str
    status: str


# -- internal ------------------------------------------------------------------------


@dataclass(frozen=True)
class NotifyReadable:
    """The child's NOTIFY_SOCKET has datagrams to read (from the tree's watcher)."""


@dataclass(frozen=True)
class ProcessNote:
    """From the tree's exit watcher to the worker that owns the process."""

    pid: int
    note: str  # "exited" or "channel_closed"


@dataclass(frozen=True)
class MemoryExceeded:
    """From the tree's memory watch to the worker whose child is over its limit."""

    incarnation: int
    rss: int


@dataclass(frozen=True)
class RetryRestart:
    """A nanny's own retry of a failed restart, posted to its mailbox (OTP section 5.5)."""

    child_id: str


@dataclass(frozen=True)
class LauncherLost:
    """From the tree's context to the root nanny: no launcher can be had any more."""

    reason: ExitReason


def lingering_note(child: str, incarnation: int, exit: ProcessExit) -> ChildNote:
    """An exit reported before its process group was empty (docs/launcher.md, "A
    restart waits for the old group")."""
    return ChildNote(
        child,
        incarnation,
        exit.pid,
        f"pid {exit.pid} exited, and {exit.group_wait:.1f} s later its process group "
        f"still held processes (SIGKILLed, not yet gone: {exit.lingering} group(s) or "
        "process(es)); its successor may find what they hold (a port) still held",
    )
