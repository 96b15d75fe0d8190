"""The actors that carry out the supervision core's decisions on real processes.

`NannyActor` holds a pure `supervision.Supervisor` and carries out its
actions, answering the supervisor API (`SupervisorAPI`, `_api.py`); each
`WorkerActor` owns one child process (start, readiness, stop, signals, reload,
exit classification); a `RemoteChild` stands for a subtree on another host
(forwarding a part of the API, raising NotForwarded for the rest).
`TreeContext` (`_context.py`) owns what a tree's actors share.

The shell decides nothing the core could decide, asks processes through the
port (actors/_process/_port.py), never its adapter, and runs on the runtime
(actors/_runtime/). It imports neither the tree handle above it nor the CLI.
"""
