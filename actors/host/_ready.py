"""Transitional, until the operations layer (actors/_operate/, issue 36) takes
`actors/cli/_ready.py` and the controller's op bodies import it from there: the
run host reads it through this name. Delete with that move."""

from actors.cli._ready import wait_ready

__all__ = ["wait_ready"]
