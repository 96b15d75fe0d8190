"""nannytree's decision layer: what a supervisor should do, as pure Python.

No threads, no processes, no pykka, no clock: time is passed in. `actors`
executes these decisions live; a simulator can execute them in virtual time.
"""

from ._actions import (
    Action,
    Exit,
    Reply,
    Report,
    ScheduleRetry,
    StartChild,
    TerminateChild,
    TerminateChildren,
)
from ._config import ConfigError, TargetResolver, UnresolvedTarget, load_tree
from ._core import Supervisor
from ._errors import (
    AlreadyPresent,
    AlreadyStarted,
    ChildError,
    ChildNotFound,
    ChildNotRunning,
    ChildRestarting,
    ChildRunning,
    NannyError,
    SimpleOneForOneError,
    SpecError,
    StartError,
    SupervisorNotRunning,
    SupervisorStartError,
    TooManyChildren,
)
from ._events import Event, EventKind, event_from_dict, event_to_dict
from ._info import ChildCounts, ChildInfo, ChildState
from ._intensity import add_restart
from ._placement import NodeInfo, Placement, PlacementPolicy, choose_node
from ._reasons import ExitKind, ExitReason, classify_exit, signal_name
from ._spec import (
    BRUTAL_KILL,
    CAPTURE,
    INFINITY,
    AnySpec,
    AutoShutdown,
    Backoff,
    ChildSpec,
    ReadyFile,
    Restart,
    Shutdown,
    Strategy,
    SupervisorSpec,
    check_childspecs,
)

__all__ = [
    "BRUTAL_KILL",
    "CAPTURE",
    "INFINITY",
    "Action",
    "AlreadyPresent",
    "AlreadyStarted",
    "AnySpec",
    "AutoShutdown",
    "Backoff",
    "ChildCounts",
    "ChildError",
    "ChildInfo",
    "ChildNotFound",
    "ChildNotRunning",
    "ChildRestarting",
    "ChildRunning",
    "ChildSpec",
    "ChildState",
    "ConfigError",
    "Event",
    "EventKind",
    "Exit",
    "ExitKind",
    "ExitReason",
    "NannyError",
    "NodeInfo",
    "Placement",
    "PlacementPolicy",
    "ReadyFile",
    "Reply",
    "Report",
    "Restart",
    "ScheduleRetry",
    "Shutdown",
    "SimpleOneForOneError",
    "SpecError",
    "StartChild",
    "StartError",
    "Strategy",
    "Supervisor",
    "SupervisorNotRunning",
    "SupervisorSpec",
    "SupervisorStartError",
    "TargetResolver",
    "TerminateChild",
    "TerminateChildren",
    "TooManyChildren",
    "UnresolvedTarget",
    "add_restart",
    "check_childspecs",
    "choose_node",
    "classify_exit",
    "event_from_dict",
    "event_to_dict",
    "load_tree",
    "signal_name",
]
