"""The messages actors exchange. Parents `ask` children; children only `tell` parents."""

from __future__ import annotations

from dataclasses import dataclass

from supervision import ExitReason

from ._launcher import ProcessExit

# -- to a WorkerActor (asked by its nanny) ------------------------------------


@dataclass(frozen=True)
class Start:
    """Start the child's process; answers Started, or raises StartError."""


@dataclass(frozen=True)
class Stop:
    """Stop the process per the spec's shutdown; answers the ExitReason.

    `deadline` (time.monotonic()) caps the wait: a supervisor above has a
    shutdown time of its own, and the whole subtree must be gone by then.
    """

    deadline: float | None = None


@dataclass(frozen=True)
class Restart:
    """Stop, then start a new incarnation; answers Started."""


@dataclass(frozen=True)
class Signal:
    """Send `sig` to the child's process group; raises ChildNotRunning without one."""

    sig: int


@dataclass(frozen=True)
class Pause:
    """SIGSTOP the child's process group."""


@dataclass(frozen=True)
class Resume:
    """SIGCONT the child's process group."""


@dataclass(frozen=True)
class Info:
    """Answers WorkerInfo."""


@dataclass(frozen=True)
class ReadOutput:
    """Answers what a captured stream (1 stdout, 2 stderr) said lately, as text;
    with `previous`, what the run before the current (or last) one said."""

    stream: int = 2
    previous: bool = False


@dataclass(frozen=True)
class Started:
    pid: int
    incarnation: int


@dataclass(frozen=True)
class WorkerInfo:
    id: str
    pid: int | None
    incarnation: int
    paused: bool
    last_exit: ExitReason | None


# -- up the tree (told, never asked) -------------------------------------------


@dataclass(frozen=True)
class ChildExited:
    """A child's process (or nested supervisor) ended by itself."""

    child_id: str
    incarnation: int
    pid: int | None
    reason: ExitReason


# -- internal ------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessExited:
    """From the tree's exit watcher to the worker that owns the process."""

    incarnation: int
    exit: ProcessExit
    reason: ExitReason


@dataclass(frozen=True)
class MemoryExceeded:
    """From the tree's memory watch to the worker whose child is over its limit."""

    incarnation: int
    rss: int


@dataclass(frozen=True)
class RetryRestart:
    """A nanny's own retry of a failed restart, posted to its mailbox (OTP 5.5)."""

    child_id: str


@dataclass(frozen=True)
class InitTree:
    """Asked by NannyActor.start: start the children in order."""


@dataclass(frozen=True)
class ShutdownTree:
    """Asked by a parent: stop the subtree, reverse order; answers the ExitReason.

    Every process of the subtree is gone by `deadline` (time.monotonic()), if given.
    """

    deadline: float | None = None
