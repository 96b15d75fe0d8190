"""The `nannytree` command, a client: its parser (`_parser.py`), one module per
command group (`_cmd_*.py`), the control socket's client and protocol
(`_control.py`, `_records.py`) and what it prints (`_plain.py`, `_view.py`).
`run`, `demo` and `check` hand over to the run host (actors/host/); no other
command loads it, pykka or any actor, so a client command answers fast.
"""

from ._parser import main

__all__ = ["main"]
