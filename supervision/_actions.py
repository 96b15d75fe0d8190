"""What the decision core asks its executor to do.

The core returns a list of actions per input. At most one action in a list
needs an answer (StartChild, TerminateChild, TerminateChildren), and it is
always the last: the executor performs it and feeds the outcome back
(`started`/`start_failed`, `terminated`), which yields the next actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._errors import NannyError
from ._events import Event
from ._reasons import ExitReason
from .spec._fields import (
    Shutdown,
)
from .spec._spec import (
    AnySpec,
)


@dataclass(frozen=True)
class StartChild:
    """Start one child; answer with Supervisor.started() or .start_failed().

    `settle` (seconds, an operator's replace_child or insert_child): a worker that
    counts as started once its process runs (`ready="started"`) counts only once it
    has stayed up this long; an exit before fails the start, so a replacement that
    exits at once is left stopped instead of crash-looping into the intensity.
    """

    child_id: str
    spec: AnySpec
    settle: float = 0.0


@dataclass(frozen=True)
class TerminateChild:
    """Stop one child per its shutdown spec and wait; answer with .terminated()."""

    child_id: str
    spec: AnySpec


@dataclass(frozen=True)
class TerminateChildren:
    """Stop these children at once, with one shared timer of `shutdown`.

    Answer with .terminated_all(). Used by simple_one_for_one shutdown (OTP 5.4).
    """

    child_ids: tuple[str, ...]
    shutdown: Shutdown


@dataclass(frozen=True)
class ScheduleRetry:
    """Post a retry of this child's restart to the supervisor's own mailbox.

    After `delay` seconds (0: at once, behind what is already queued), call
    .retry(child_id).
    """

    child_id: str
    delay: float = 0.0


@dataclass(frozen=True)
class PauseChild:
    """Stop this worker's process group (SIGSTOP); no answer."""

    child_id: str


@dataclass(frozen=True)
class ResumeChild:
    """Continue this worker's process group (SIGCONT); no answer."""

    child_id: str


@dataclass(frozen=True)
class RemoveChild:
    """The child was deleted: release what the executor keeps for it (its worker); no answer."""

    child_id: str


@dataclass(frozen=True)
class Report:
    """Record this event."""

    event: Event


@dataclass(frozen=True)
class Reply:
    """The result of the API call being executed: `value`, or raise `error`."""

    value: Any = None
    error: NannyError | None = None


@dataclass(frozen=True)
class Exit:
    """The supervisor is done and all its children are stopped.

    Tell the parent (the exit reason is `reason`); `error` is set when the
    supervisor failed to start, for whoever started it.
    """

    reason: ExitReason
    error: NannyError | None = None


Action = (
    StartChild
    | TerminateChild
    | TerminateChildren
    | ScheduleRetry
    | PauseChild
    | ResumeChild
    | RemoveChild
    | Report
    | Reply
    | Exit
)
TerminationResults = Mapping[str, ExitReason]
