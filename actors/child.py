"""Helpers for code running *inside* a Python child of a nannytree supervisor.

Both work, and do nothing harmful, when the code runs outside nannytree (in a
test, or started by hand), so a target can call them unconditionally::

    import actors.child

    def serve() -> None:
        sock = open_listening_socket()
        actors.child.ready()          # a ``ready="notify"`` child counts as started now
        while not actors.child.stop_requested():
            handle(sock.accept())

A supervisor stops a Python child with SIGTERM, which the child sees as
``SystemExit`` raised wherever it is running, so ``finally`` blocks and context
managers run. ``stop_requested()`` tells code that caught ``SystemExit`` (or
that runs in ``finally``) whether the stop came from the supervisor.
"""

from __future__ import annotations

from ._launcher._in_child import heartbeat, ready, stop_requested

__all__ = ["heartbeat", "ready", "stop_requested"]
