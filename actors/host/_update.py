"""Transitional, until the operations layer (actors/_operate/, issue 36) takes
`actors/cli/_update.py` and the controller's op bodies import it from there: the
run host reads it through this name. Delete with that move."""

from actors.cli._update import Updater, read_live, settle_of

__all__ = ["Updater", "read_live", "settle_of"]
