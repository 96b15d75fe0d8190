"""What the tests' children run: the targets of their ChildSpecs, imported in each
child. Kept lean on purpose: importing a module here imports nothing of the tests'
helpers (tests/support/ imports pykka, psutil and pytest, which a child would then
load at every start)."""
