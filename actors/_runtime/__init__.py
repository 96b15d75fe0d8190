"""How the tree's actors run: a small runtime on top of pykka.

pykka's message loop body is here once (`_actor_loop.py`): how a message is handled,
how a failure is answered, how a message to a stopped actor is; a BaseException,
where pykka stops every actor of the process, ends the failing actor's own tree
at most, never another. A shared pool of threads serves the workers' mailboxes
(`_pooled.py`: an actor never runs on two threads at once), with light futures
and flags for the answers (`_future.py`, `_flag.py`), and one timer thread per
tree (`_timer.py`).

The pool is the one piece of process-wide state, shared by every tree in the
process on purpose (threads are costly), and started afresh in a forked child.
Beside it are only locks held for a few instructions (`_flag.py`, `_future.py`)
and a thread-local saying which actor a thread serves (`_actor_loop.py`); everything
else belongs to an actor or to a tree.

It imports pykka and the standard library only: nothing of the shell above it.
"""
