"""The tree's events on disk: dated JSON Lines, size-bounded, rotated with backups.

Each line is one JSON object: `ts` (the event's wall-clock time, UTC, ISO 8601)
followed by what `nannytree events --json` shows of it. A writer thread of its own
reads the tree's EventLog from where it left off (EventLog.since); the tree never
waits for it. The EventLog is the bounded queue: a writer that falls so far behind
that the log dropped events it had not written yet writes a line saying how many
(`"what": "events_dropped"`) and goes on. Rotation renames whole files between two
lines (PATH -> PATH.1 -> ... -> PATH.<backups>), so every line written is in exactly
one file until the oldest backup is removed. The file is opened and renamed as a
child's log is (actors/_launcher/_safe_open.py): no symlink someone else could have
put on the way is followed, and a folder others can write is refused.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors._launcher._safe_open import open_folder, open_output
from supervision import Event

from .._operate._records import EventRecord

if TYPE_CHECKING:
    from .. import EventLog

log = logging.getLogger("nannytree")

MAX_BYTES = 10 << 20  # per file: with BACKUPS, at most 60 MB on disk
BACKUPS = 5
POLL = 0.25  # seconds the writer waits for new events before checking for close

Record = Callable[[Event], EventRecord]


def iso_utc(wall: float) -> str:
    """`wall` (seconds since the epoch) as "2026-11-25T02:30:00.123456+00:00"."""
    return datetime.datetime.fromtimestamp(wall, datetime.UTC).isoformat(timespec="microseconds")


class EventJournal:
    """Appends a tree's events to `path` as dated JSON Lines, on a thread of its own.

    `max_bytes` bounds each file (a file holds at least one line, however long);
    `backups` is how many rotated files are kept (0: the file is emptied instead).
    Opens the file at once, so a path that cannot be written is an OSError here;
    `follow(log)` starts writing, `close()` writes what is left and stops.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        max_bytes: int = MAX_BYTES,
        backups: int = BACKUPS,
        *,
        record: Record = EventRecord.from_event,
    ) -> None:
        if max_bytes <= 0:
            raise ValueError(f"the event log's max_bytes must be > 0, not {max_bytes}")
        if backups < 0:
            raise ValueError(f"the event log's backups must be >= 0, not {backups}")
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self._record = record
        self.dropped = 0  # events the log dropped before they were written
        self.written = 0  # lines written
        self._file = os.fdopen(open_output(str(self.path), None), "ab")  # the writer's
        self._size = self._file.tell()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._events: EventLog | None = None

    def follow(self, events: EventLog, start: int = 0) -> None:
        """Write `events`' events from index `start` on, as they come."""
        self._events = events
        self._thread = threading.Thread(
            target=self._run, args=(events, start), name="nannytree-journal", daemon=True
        )
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Write what the log holds that is not written yet, then close the file."""
        self._closing.set()
        if self._thread is not None:
            assert self._events is not None
            self._events.wake()  # the writer's wait for more ends now: a prompt exit
            self._thread.join(timeout)
        else:
            self._file.close()

    # -- the writer thread -------------------------------------------------------------

    def _run(self, events: EventLog, index: int) -> None:
        try:
            while True:
                closing = self._closing.is_set()  # read first: then one more pass
                batch, end = events.since(index, 0 if closing else POLL)
                skipped = end - len(batch) - index
                if skipped > 0:
                    self._note_dropped(skipped)
                for event in batch:
                    self._write_event(event)
                index = end
                self._file.flush()
                if closing and not batch:
                    return
        except Exception:  # a full disk, a removed folder: say so once, stop writing
            log.exception("the event log %s failed; no more events are written to it", self.path)
        finally:
            self._file.close()

    def _note_dropped(self, count: int) -> None:
        if not self.dropped:
            log.warning("the event log %s fell behind: events were dropped", self.path)
        self.dropped += count
        wall = time.time()
        self._write_line(
            {"ts": iso_utc(wall), "time": wall, "what": "events_dropped", "dropped": count}
        )

    def _write_event(self, event: Event) -> None:
        wall = time.time() - (time.monotonic() - event.time)
        record = self._record(event).to_dict()
        record["time"] = wall
        self._write_line({"ts": iso_utc(wall), **record})

    def _write_line(self, data: dict[str, Any]) -> None:
        # ensure_ascii: a child's bytes, control characters included, become escapes.
        line = (json.dumps(data, ensure_ascii=True) + "\n").encode("ascii")
        if self._size and self._size + len(line) > self.max_bytes:
            self._rotate()
        self._file.write(line)
        self._size += len(line)
        self.written += 1

    def _rotate(self) -> None:
        """Within the folder's fd, walked anew (see actors/_launcher/_safe_open.py):
        nothing another user put on the way is followed."""
        self._file.flush()
        self._file.close()
        name = self.path.name
        folder = open_folder(str(self.path.absolute().parent), None)
        try:
            if self.backups:
                for n in range(self.backups - 1, 0, -1):
                    with contextlib.suppress(FileNotFoundError):
                        folder.rename(f"{name}.{n}", f"{name}.{n + 1}")
                with contextlib.suppress(FileNotFoundError):
                    folder.rename(name, f"{name}.1")
            fd = folder.open(name)
        finally:
            folder.close()
        if not self.backups:
            os.ftruncate(fd, 0)  # emptied instead
        self._file = os.fdopen(fd, "ab")
        self._size = 0
