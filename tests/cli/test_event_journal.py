"""The event log on disk (actors/cli/_journal.py): dated JSON Lines, rotated by size
without losing or repeating a line, child text escaped, drops counted, and a tree's
EventLog never waiting for it."""

from __future__ import annotations

import datetime
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from actors import EventLog
from actors.host._journal import EventJournal
from supervision import Event, EventKind, ExitKind, ExitReason

# A writer given all the time it needs to write the last line, however busy the machine
# (close's own 5 s bounds a tree's exit, not a test's).
CLOSE = 50.0


def _event(n: int, detail: str = "") -> Event:
    return Event(
        time=time.monotonic(),
        supervisor="shop",
        context=EventKind.CHILD_EXITED,
        offender=f"w{n}",
        reason=ExitReason(ExitKind.EXIT_CODE, code=1),
        pid=1000 + n,
        detail=detail or f"event {n}",
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    """Every line of the journal, oldest file first."""
    files = sorted(path.parent.glob(path.name + ".*"), key=lambda p: -int(p.suffix[1:]))
    out = []
    for f in [*files, path]:
        for line in f.read_text(encoding="ascii").splitlines():
            out.append(json.loads(line))
    return out


def _written(journal: EventJournal, count: int) -> None:
    deadline = time.monotonic() + 10
    while journal.written < count:
        assert time.monotonic() < deadline, f"{journal.written} of {count} lines written"
        time.sleep(0.01)


def test_every_line_is_dated_and_shows_what_events_shows(tmp_path: Path) -> None:
    log = EventLog()
    journal = EventJournal(tmp_path / "t.events.jsonl")
    journal.follow(log)
    before = time.time()
    log.append(_event(1))
    journal.close(CLOSE)
    (line,) = _lines(tmp_path / "t.events.jsonl")
    stamp = datetime.datetime.fromisoformat(line["ts"])
    assert stamp.utcoffset() == datetime.timedelta(0)
    assert before - 1 <= stamp.timestamp() <= time.time() + 1
    assert line["time"] == pytest.approx(stamp.timestamp(), abs=1e-5)
    assert (line["who"], line["what"], line["pid"]) == ("shop/w1", "child_exited", 1001)
    assert line["reason"] == "exit code 1" and line["abnormal"] is True


def test_rotation_never_loses_or_repeats_a_line(tmp_path: Path) -> None:
    path = tmp_path / "t.events.jsonl"
    log = EventLog()
    journal = EventJournal(path, max_bytes=4096, backups=1000)
    journal.follow(log)
    for n in range(3000):  # the writer rotates while the log fills
        log.append(_event(n))
    journal.close(CLOSE)
    assert journal.written == 3000
    lines = _lines(path)
    assert [line["who"] for line in lines] == [f"shop/w{n}" for n in range(3000)]
    files = [path, *path.parent.glob(path.name + ".*")]
    assert len(files) > 50
    assert all(f.stat().st_size <= 4096 for f in files)


def test_backups_bound_the_files_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.events.jsonl"
    log = EventLog()
    journal = EventJournal(path, max_bytes=2048, backups=3)
    journal.follow(log)
    for n in range(1000):
        log.append(_event(n))
    journal.close(CLOSE)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == [path.name] + [f"{path.name}.{n}" for n in (1, 2, 3)]
    lines = _lines(path)
    # The newest lines, in order, none twice: the oldest files were removed whole.
    numbers = [int(line["who"].removeprefix("shop/w")) for line in lines]
    assert numbers == list(range(numbers[0], 1000)) and numbers[0] > 0


def test_no_backups_empties_the_file_instead(tmp_path: Path) -> None:
    path = tmp_path / "t.events.jsonl"
    log = EventLog()
    journal = EventJournal(path, max_bytes=1024, backups=0)
    journal.follow(log)
    for n in range(100):
        log.append(_event(n))
    journal.close(CLOSE)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    assert path.stat().st_size <= 1024
    assert _lines(path)[-1]["who"] == "shop/w99"


def test_a_childs_text_is_escaped_one_event_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.events.jsonl"
    nasty = 'line one\nline two\r\x1b[2J\x00\u2028"}{\udcff caf\xe9'
    log = EventLog()
    journal = EventJournal(path)
    journal.follow(log)
    log.append(_event(1, detail=nasty))
    log.append(
        Event(
            time=time.monotonic(),
            supervisor="shop",
            context=EventKind.CHILD_EXITED,
            offender="w2",
            reason=ExitReason(ExitKind.EXIT_CODE, code=3, stderr_tail=nasty),
        )
    )
    journal.close(CLOSE)
    raw = path.read_bytes()
    assert raw.count(b"\n") == 2 and b"\x1b" not in raw and b"\x00" not in raw
    first, second = _lines(path)
    assert first["detail"] == nasty
    assert "\x1b[2J" in second["stderr"]


def test_events_the_log_dropped_before_they_were_written_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.events.jsonl"
    log = EventLog(max_events=10)
    for n in range(100):  # the writer is "behind" by 100, the log keeps 10
        log.append(_event(n))
    journal = EventJournal(path)
    journal.follow(log)
    journal.close(CLOSE)
    lines = _lines(path)
    assert lines[0]["what"] == "events_dropped" and lines[0]["dropped"] == 90
    assert [line["who"] for line in lines[1:]] == [f"shop/w{n}" for n in range(90, 100)]
    assert journal.dropped == 90


def test_the_tree_never_waits_for_the_writer(tmp_path: Path) -> None:
    """A writer stuck on its disk: appends go on at memory speed."""
    path = tmp_path / "t.events.jsonl"
    log = EventLog()
    journal = EventJournal(path)
    stuck = threading.Event()
    real = journal._write_line

    def slow(data: dict[str, Any]) -> None:
        stuck.wait(10)
        real(data)

    journal._write_line = slow  # type: ignore[method-assign]
    journal.follow(log)
    started = time.monotonic()
    for n in range(20_000):
        log.append(_event(n))
    assert time.monotonic() - started < 5.0
    assert journal.written == 0
    stuck.set()
    journal.close(timeout=30)
    assert len(_lines(path)) == 20_000


def test_a_path_that_cannot_be_written_fails_at_once(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        EventJournal(tmp_path / "missing" / "t.events.jsonl")
    with pytest.raises(ValueError, match="max_bytes"):
        EventJournal(tmp_path / "t.jsonl", max_bytes=0)
