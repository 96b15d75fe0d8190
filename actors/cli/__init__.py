"""The `nannytree` command and its tooling: the control socket, the run loop, the
live view, status and tree files. Nothing here is on the restart path (that is
`actors/`); a client command imports only what it needs, so it answers fast.
"""

from ._command import main

__all__ = ["main"]
