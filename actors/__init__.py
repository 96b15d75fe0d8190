"""nannytree's live layer: pykka actors that run supervision trees of OS processes.

`NannyActor` supervises (it answers `SupervisorAPI`); each of its workers owns
one OS process. Inside a Python child, use `actors.child` (ready(),
stop_requested()).

Names are imported on first use: the launcher and the children it forks import
`actors` too, and must not pay for (or inherit) pykka and the nanny.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing is not imported: the launcher and its children import us

if TYPE_CHECKING:
    from . import child
    from ._launcher._runtime_dir import UnsafeDirectory, private_dir, runtime_dir
    from ._launcher._safe_open import UnsafeFile, open_read
    from ._shell._api import SupervisorAPI, TreeNode
    from ._shell._event_log import EventLog, load_events
    from ._shell._nanny import NannyActor, NannyPlugin
    from ._tree import Tree
    from ._treefile import load_tree_file, load_tree_text, read_tree_file

_HOMES = {
    "EventLog": "._shell._event_log",
    "NannyActor": "._tree",  # its home composes how a tree starts
    "NannyPlugin": "._shell._nanny",
    "Tree": "._tree",
    "SupervisorAPI": "._shell._api",
    "TreeNode": "._shell._api",
    "UnsafeDirectory": "._launcher._runtime_dir",
    "UnsafeFile": "._launcher._safe_open",
    "open_read": "._launcher._safe_open",
    "child": ".child",
    "load_events": "._shell._event_log",
    "load_tree_file": "._treefile",
    "load_tree_text": "._treefile",
    "private_dir": "._launcher._runtime_dir",
    "read_tree_file": "._treefile",
    "runtime_dir": "._launcher._runtime_dir",
}

__all__ = [
    "EventLog",
    "NannyActor",
    "NannyPlugin",
    "SupervisorAPI",
    "Tree",
    "TreeNode",
    "UnsafeDirectory",
    "UnsafeFile",
    "child",
    "load_events",
    "load_tree_file",
    "load_tree_text",
    "open_read",
    "private_dir",
    "read_tree_file",
    "runtime_dir",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'actors' has no attribute {name!r}")
    module = importlib.import_module(home, __name__)
    value = module if name == "child" else getattr(module, name)
    if getattr(value, "__module__", "").startswith("actors._"):
        value.__module__ = "actors"  # its public home, in reprs and tracebacks
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
