"""nannytree's decision layer: what a supervisor should do, as pure Python.

No threads, no processes, no pykka, no clock: time is passed in. `actors`
executes these decisions live; a simulator can execute them in virtual time.
"""

from ._actions import (
    Action,
    Exit,
    PauseChild,
    RemoveChild,
    Reply,
    Report,
    ResumeChild,
    ScheduleRetry,
    StartChild,
    TerminateChild,
    TerminateChildren,
)
from ._core import Supervisor
from ._errors import (
    AlreadyPresent,
    AlreadyStarted,
    ChildError,
    ChildNotFound,
    ChildNotPaused,
    ChildNotRunning,
    ChildRestarting,
    ChildRunning,
    NannyError,
    NotForwarded,
    ReloadRefused,
    RestartRefused,
    SimpleOneForOneError,
    SpecError,
    StartError,
    SupervisorNotRunning,
    SupervisorStartError,
    TooManyChildren,
    UpdateFailed,
    UpdateRefused,
)
from ._events import Event, EventKind, event_from_dict, event_to_dict
from ._fencing import Fencing
from ._info import ChildCounts, ChildInfo, ChildState, ExitPlan, Health
from ._intensity import Relaunches, RestartWindow, add_restart
from ._reasons import ExitKind, ExitReason, classify_exit, signal_name
from ._update import (
    IN_PLACE,
    UPDATE_SETTLE,
    UPDATE_SETTLE_MAX,
    Change,
    ChangeSettings,
    DeleteOld,
    Insert,
    Move,
    Replace,
    StartAgain,
    StartNew,
    StopOld,
    StoreSpec,
    UpdateOutcome,
    UpdatePlan,
    UpdateStep,
    check_settle,
    may_overlap,
    plan_restart_all,
    plan_update,
    preflight,
    rollback_of,
    standby_of,
    starting_workers,
    stops_the_update,
    taken_after_a_stop,
)
from .config._engine import (
    EngineConfig,
    load_engine,
)
from .config._errors import (
    MISSING,
    ConfigError,
    TooLarge,
)
from .config._load import (
    load_tree,
)
from .config._read import (
    TargetResolver,
    UnresolvedTarget,
)
from .spec._daemonize import asks_to_daemonize
from .spec._fields import (
    BRUTAL_KILL,
    CAPTURE,
    INFINITY,
    AutoShutdown,
    Backoff,
    ReadyFile,
    Reload,
    Restart,
    Shutdown,
    Strategy,
    parse_signal,
)
from .spec._placement import NodeInfo, Placement, PlacementPolicy, choose_node, unknown_nodes
from .spec._probes import ExecProbe, HttpProbe, Liveness, LogLine, TcpProbe
from .spec._restart_limit import NoRestartLimit, RestartLimit
from .spec._sockets import ListenSocket
from .spec._spec import (
    AnySpec,
    ChildSpec,
    SupervisorSpec,
    check_childspecs,
)

__all__ = [
    "BRUTAL_KILL",
    "CAPTURE",
    "INFINITY",
    "IN_PLACE",
    "MISSING",
    "UPDATE_SETTLE",
    "UPDATE_SETTLE_MAX",
    "Action",
    "AlreadyPresent",
    "AlreadyStarted",
    "AnySpec",
    "AutoShutdown",
    "Backoff",
    "Change",
    "ChangeSettings",
    "ChildCounts",
    "ChildError",
    "ChildInfo",
    "ChildNotFound",
    "ChildNotPaused",
    "ChildNotRunning",
    "ChildRestarting",
    "ChildRunning",
    "ChildSpec",
    "ChildState",
    "ConfigError",
    "DeleteOld",
    "EngineConfig",
    "Event",
    "EventKind",
    "ExecProbe",
    "Exit",
    "ExitKind",
    "ExitPlan",
    "ExitReason",
    "Fencing",
    "Health",
    "HttpProbe",
    "Insert",
    "ListenSocket",
    "Liveness",
    "LogLine",
    "Move",
    "NannyError",
    "NoRestartLimit",
    "NodeInfo",
    "NotForwarded",
    "PauseChild",
    "Placement",
    "PlacementPolicy",
    "ReadyFile",
    "Relaunches",
    "Reload",
    "ReloadRefused",
    "RemoveChild",
    "Replace",
    "Reply",
    "Report",
    "Restart",
    "RestartLimit",
    "RestartRefused",
    "RestartWindow",
    "ResumeChild",
    "ScheduleRetry",
    "Shutdown",
    "SimpleOneForOneError",
    "SpecError",
    "StartAgain",
    "StartChild",
    "StartError",
    "StartNew",
    "StopOld",
    "StoreSpec",
    "Strategy",
    "Supervisor",
    "SupervisorNotRunning",
    "SupervisorSpec",
    "SupervisorStartError",
    "TargetResolver",
    "TcpProbe",
    "TerminateChild",
    "TerminateChildren",
    "TooLarge",
    "TooManyChildren",
    "UnresolvedTarget",
    "UpdateFailed",
    "UpdateOutcome",
    "UpdatePlan",
    "UpdateRefused",
    "UpdateStep",
    "add_restart",
    "asks_to_daemonize",
    "check_childspecs",
    "check_settle",
    "choose_node",
    "classify_exit",
    "event_from_dict",
    "event_to_dict",
    "load_engine",
    "load_tree",
    "may_overlap",
    "parse_signal",
    "plan_restart_all",
    "plan_update",
    "preflight",
    "rollback_of",
    "signal_name",
    "standby_of",
    "starting_workers",
    "stops_the_update",
    "taken_after_a_stop",
    "unknown_nodes",
]


def _show_public_home() -> None:
    """Public names say where to import them from: supervision.ChildSpec, not _spec."""
    for name in __all__:
        obj = globals()[name]
        if any(part.startswith("_") for part in getattr(obj, "__module__", "").split(".")):
            obj.__module__ = "supervision"


_show_public_home()
