"""The launcher process and the children it starts.

Everything here runs in the launcher (one small, single-threaded process per
tree, `python -P -m actors._launcher._main`), in the guardian above it, or in
a child it forked or started fresh: the loop that spawns and reaps, daemon and
orphan checks read from /proc, the bootstrap of a Python child, and the wire
format and records of the three streams. docs/launcher.md, "Where the code
is", says which module holds what.

It imports nothing from the rest of `actors` and neither pykka nor the
supervision core: a forked child must inherit no thread and no lock, and a
fresh one must start lean (tests/layers/test_rules.py holds both).
"""
