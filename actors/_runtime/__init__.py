"""How the tree's actors run: a small runtime on top of pykka.

A shared pool of threads serves the workers' mailboxes (`_pooled.py`: an actor
never runs on two threads at once), with light futures and flags for the
answers, and one timer thread per tree (`_timer.py`). The pool is the one piece
of process-wide state, shared by every tree in the process on purpose (threads
are costly); everything else belongs to a tree.

It imports pykka and the standard library only: nothing of the shell above it.
"""
