"""Transitional, until the operations layer (actors/_operate/, issue 36) takes
`actors/cli/_update.py`: it reads `_child_problems` here, where it was. Delete with that move."""

from actors.host._check import _child_problems as _child_problems
