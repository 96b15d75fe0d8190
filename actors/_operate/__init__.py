"""What an operator can do to a live tree, from Python: the one layer below every
front end (the run host's controller, `Tree`, `AsyncNanny`, the test harness).

    _find.py       path or id -> a supervisor's nanny, a child's `Target`
    _update.py     the Updater: read live, plan, preflight, carry out (one executor
                   of plan steps, restart-all's too)
    _preflight.py  what the host checks of a worker before it starts it (check, update)
    _restart.py    restart one child; restart all
    _ready.py      the one judge: ready / not yet / never
    _snapshot.py   the TreeInspector: the tree now, for status, the view, waits
    _records.py    the snapshot and the events as plain data (what the CLI prints)
    _text.py       untrusted text made safe for a terminal

It drives a tree through its nannies' API, so it may import actors/_shell/ and
below, never `_tree` or a front end. Kept light: importing the package imports
nothing (a CLI client reads `_records` and `_text` without pykka).
"""
