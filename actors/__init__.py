"""nannytree's live layer: pykka actors that run supervision trees of OS processes.

`NannyActor` supervises; each `WorkerActor` owns one OS process. Inside a
Python child, use `actors.child` (ready(), stop_requested()).
"""

from . import child
from ._events import EventLog, load_events
from ._messages import (
    ChildExited,
    Info,
    Pause,
    Restart,
    Resume,
    Signal,
    Start,
    Started,
    Stop,
    WorkerInfo,
)
from ._nanny import NannyActor, NannyPlugin, TreeNode
from ._worker import WorkerActor

__all__ = [
    "ChildExited",
    "EventLog",
    "Info",
    "NannyActor",
    "NannyPlugin",
    "Pause",
    "Restart",
    "Resume",
    "Signal",
    "Start",
    "Started",
    "Stop",
    "TreeNode",
    "WorkerActor",
    "WorkerInfo",
    "child",
    "load_events",
]
