"""One error hierarchy for everything nannytree refuses or fails to do.

Every error formats its own message from fields: the supervisor, the child,
what went wrong and how to fix it.
"""

from __future__ import annotations

import re
from typing import Any


class NannyError(Exception):
    """Root of every error nannytree raises on purpose."""


class SpecError(NannyError, ValueError):
    """A child or supervisor spec has a bad field (raised when the spec is built)."""

    def __init__(self, child: str | None, field: str, value: Any, expected: str) -> None:
        self.child = child
        self.field = field
        self.value = value
        self.expected = expected
        who = f"child {child!r}" if child is not None else "spec"
        super().__init__(f"{who}: field {field!r} is {value!r}; {expected}")


class ChildError(NannyError):
    """Base of the errors about one child of one supervisor."""

    def __init__(self, supervisor: str, child: str, message: str) -> None:
        self.supervisor = supervisor
        self.child = child
        super().__init__(f"supervisor {supervisor!r}, child {child!r}: {message}")


class ChildNotFound(ChildError, LookupError):
    """No child with that id (or pid) in this supervisor (OTP's `not_found`)."""

    def __init__(self, supervisor: str, child: str) -> None:
        super().__init__(
            supervisor, child, "no such child; which_children() lists the ids this supervisor has"
        )


class AlreadyPresent(ChildError):
    """start_child with an id that is kept but not running (OTP's `already_present`)."""

    def __init__(self, supervisor: str, child: str) -> None:
        super().__init__(
            supervisor,
            child,
            "a child with this id is already present (not running); "
            "use restart_child() to start it or delete_child() first",
        )


class AlreadyStarted(ChildError):
    """start_child with the id of a running child (OTP's `already_started`)."""

    def __init__(self, supervisor: str, child: str, pid: int | None) -> None:
        self.pid = pid
        super().__init__(
            supervisor, child, f"a child with this id is already running (pid {pid}); pick a new id"
        )


class ChildRunning(ChildError):
    """restart_child / delete_child on a running child (OTP's `running`)."""

    def __init__(self, supervisor: str, child: str, operation: str) -> None:
        super().__init__(
            supervisor, child, f"cannot {operation} a running child; terminate_child() it first"
        )


class ChildRestarting(ChildError):
    """restart_child / delete_child on a child waiting for a restart retry (OTP's `restarting`)."""

    def __init__(self, supervisor: str, child: str, operation: str) -> None:
        super().__init__(
            supervisor,
            child,
            f"cannot {operation} a child that is being restarted; "
            "terminate_child() it first to end its restart loop",
        )


class ChildNotRunning(ChildError):
    """An operation that needs a live process (signal, pause) on a child without one."""

    def __init__(self, supervisor: str, child: str, operation: str) -> None:
        super().__init__(supervisor, child, f"cannot {operation}: the child has no running process")


class ReloadRefused(ChildError):
    """reload_child on a child without `reload` in its spec, or whose check failed."""

    def __init__(self, supervisor: str, child: str, why: str) -> None:
        self.why = why
        super().__init__(supervisor, child, f"not reloaded: {why}")


class RestartRefused(ChildError):
    """An operator's restart of a running child whose reload check failed: the child
    was not stopped, it runs on (docs/reference/cli.md, `restart`)."""

    def __init__(self, supervisor: str, child: str, why: str) -> None:
        self.why = why
        super().__init__(
            supervisor,
            child,
            f"not restarted, it runs on: {why}; fix its configuration, or stop and start "
            "it to restart it anyway",
        )


class ChildNotPaused(ChildError):
    """resume_child on a child whose process runs and was not paused."""

    def __init__(self, supervisor: str, child: str) -> None:
        super().__init__(
            supervisor, child, "cannot resume it: it was not paused (pause_child() pauses it)"
        )


class NotForwarded(ChildError):
    """A call that the stand-in of a subtree on another node (a RemoteChild) does not
    forward to that subtree's supervisor: act on the subtree itself, or call its
    supervisor on its node."""

    def __init__(self, supervisor: str, child: str, call: str) -> None:
        self.call = call
        super().__init__(
            supervisor,
            child,
            f"a remote subtree, whose stand-in does not forward {call}; "
            f"act on {supervisor}/{child} itself instead",
        )


class StartError(ChildError):
    """A child failed to start (OTP's `{error, Reason}` / `failed_to_start_child`).

    `reason` is the ExitReason that describes the failure; `why` the message without
    the supervisor and child: the reason and the last lines the child wrote.
    """

    def __init__(self, supervisor: str, child: str, reason: Any) -> None:
        self.reason = reason
        text = f"failed to start: {reason}"
        said = _said(getattr(reason, "stderr_tail", ""))
        self.why = f"{text}; its output ended with:{said}" if said else text
        super().__init__(supervisor, child, self.why)


# Control characters a child may write (C0 but newline and tab, DEL, C1, bidi):
# shown escaped in an error's message, never raw.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
SAID_LINES = 5  # lines of a failed start's output in its StartError's message


def _said(tail: str) -> str:
    """The last lines a child wrote, one indented line each, escaped."""
    lines = tail.rstrip("\n").splitlines()[-SAID_LINES:] if isinstance(tail, str) else []
    return "".join("\n    | " + _UNSAFE.sub(_escape, line) for line in lines)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class SupervisorStartError(StartError):
    """A supervisor could not start: one of its children failed to start at init.

    The children started before it were stopped again, in reverse order.
    """


class SimpleOneForOneError(NannyError):
    """An operation that a simple_one_for_one supervisor does not support."""

    def __init__(self, supervisor: str, operation: str, fix: str) -> None:
        self.supervisor = supervisor
        super().__init__(
            f"supervisor {supervisor!r} is simple_one_for_one: {operation} is not supported; {fix}"
        )


class TooManyChildren(NannyError):
    """start_child beyond a dynamic supervisor's max_children."""

    def __init__(self, supervisor: str, max_children: int) -> None:
        self.supervisor = supervisor
        self.max_children = max_children
        super().__init__(
            f"supervisor {supervisor!r} already has max_children={max_children} children; "
            "terminate one first or raise max_children"
        )


class SupervisorNotRunning(NannyError):
    """A call reached a supervisor that has stopped (OTP's `noproc`)."""

    def __init__(self, supervisor: str) -> None:
        self.supervisor = supervisor
        super().__init__(f"supervisor {supervisor!r} is not running")


class UpdateRefused(NannyError, ValueError):
    """An update refused before anything stopped: the file is not valid, the plan
    cannot be made, or what it would start has problems (`problems`, one line each,
    naming the child and the field)."""

    def __init__(self, tree: str, message: str, problems: tuple[str, ...] = ()) -> None:
        self.tree = tree
        self.problems = problems
        super().__init__(message)


class UpdateFailed(NannyError, ValueError):
    """An update some steps of which were carried out and one failed: `outcome` (an
    UpdateOutcome) says which were applied, which failed and why, which were not
    taken. The tree is left as the message says; the next update converges from it."""

    def __init__(self, tree: str, message: str, outcome: Any) -> None:
        self.tree = tree
        self.outcome = outcome
        super().__init__(message)
