"""The engine port for subtrees on other hosts, and the far side of one.

`_port.py` is the `Engine` protocol a `RemoteChild` (actors/_shell/) calls and
its types; `actors.ray.RayEngine` is the real adapter and
`actors.testing.FakeEngine` the fake. `_host.py` is the far side, `RemoteHost`:
it runs a whole local tree, started by a function its engine hands it, so
nothing here imports the tree (docs/multihost.md sections 1 and 6), but the fake
engine, `_fake.py`, which starts real local trees through the public `actors.Tree`
as a test's own trees are. `_ship.py`
pickles a spec for another node (targets of modules that are not installed go
by value); `_marks.py` marks an incarnation's processes and clears an older
incarnation's from a node. Nothing here imports Ray.
"""
