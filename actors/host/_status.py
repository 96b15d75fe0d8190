"""Transitional, until the operations layer (actors/_operate/, issue 36) takes
`actors/cli/_status.py` and the controller's op bodies import it from there: the
run host reads it through this name. Delete with that move."""

from actors.cli._status import (
    EventFeed,
    EventRecord,
    Node,
    Target,
    TreeInspector,
    health_dict,
    stderr_lines,
)

__all__ = [
    "EventFeed",
    "EventRecord",
    "Node",
    "Target",
    "TreeInspector",
    "health_dict",
    "stderr_lines",
]
