"""Transitional, until the operations layer (actors/_operate/, issue 36) takes
`actors/cli/_status.py`: it reads `NodeNames` here, where it was. Delete with that move."""

from actors.host._engine import NodeNames as NodeNames
