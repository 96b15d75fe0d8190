"""The run host: the process `nannytree run` becomes. It runs one tree and serves
it: the control socket's listening side (`_server.py`) and the Controller, a
table from each request to the operation it asks for (`_controller.py`); the
children's log folders, the engine, the monitors (Prometheus metrics, the event
journal), sd_notify toward the service manager, and the pre-run checks that
`nannytree check` also runs (`_check.py`).

The command (actors/cli/) hands over to it in `run`, `demo` and `check`, and
imports it nowhere else: a client command loads no actor. The host speaks the
command's protocol (actors/cli/_control.py, `_records.py`) and draws with its
views; it may import every floor below it (tests/layers/test_import_graph.py).

Names are imported on first use, as `actors` does: `check` reads `_check.py`
without loading pykka, rich or the nanny.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False

if TYPE_CHECKING:
    from ._options import RunOptions
    from ._run import run_tree

_HOMES = {"RunOptions": "._options", "run_tree": "._run"}

__all__ = ["RunOptions", "run_tree"]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'actors.host' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
