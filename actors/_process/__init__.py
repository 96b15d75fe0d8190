"""The port to OS processes, and its host-side adapter.

`_port.py` is what the shell may ask of processes (`Spawner`, `ChildHandle`)
and the types it speaks in; `_client.py` is `LauncherClient`, the adapter that
starts the launcher process (actors/_launcher/) and talks to it over a socket;
`actors.testing.FakeSpawner` is the fake behind the same port.

The shell imports the port, never the client: only the composition root
(actors/_tree.py) picks the adapter (tests/layers/test_rules.py).
"""
