"""What the fault proxy's two sides share: directions, and the bounds of its
buffers and of its control lines."""

from __future__ import annotations

CHUNK = 16 * 1024  # bytes read from a socket at once
QUEUE = 16  # chunks in flight per direction and connection: 256 KiB at most
MAX_CONNECTIONS = 256  # past this a new connection is closed at once
LINE = 64 * 1024  # bytes of one control line, either way
DIRECTIONS = ("upstream", "downstream")
WHICH = ("both", *DIRECTIONS)
