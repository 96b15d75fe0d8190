"""Children's output connected to journald by the launcher (docs/logs.md, "The
journal"), on real processes against a fake journal stream socket (a real unix
stream server that parses the header and the lines, tests/support/journal.py):
each child's lines under its own identifier, stdout at priority 6, stderr at 3,
a `<N>` prefix honoured, stdout a socket in the child (no copy on the way).

Every wait has a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors._launcher._journal import SOCKET_ENV, destination, header, sanitised
from actors._process._client import LauncherClient, LaunchError, SpawnRequest
from tests.support import wait_until
from tests.support.journal import FakeJournal, Header

PY = sys.executable

# Says on stdout whether its fd 1 is a socket (the journal's own, given to it), warns
# with a level prefix, and writes one line to stderr.
TALK = """
import os, stat, sys
name = sys.argv[1]
kind = "socket" if stat.S_ISSOCK(os.fstat(1).st_mode) else "not a socket"
os.write(1, f"hello from {name}, stdout is {kind}\\n".encode())
os.write(1, f"<4>{name} warns\\n".encode())
os.write(2, f"{name} complains\\n".encode())
"""


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeJournal]:
    path = tmp_path / "stdout"
    monkeypatch.setenv(SOCKET_ENV, str(path))  # the launcher inherits it
    with FakeJournal(path) as fake:
        yield fake


@pytest.fixture
def launcher(journal: FakeJournal) -> Iterator[LauncherClient]:
    client = LauncherClient.start()
    try:
        yield client
    finally:
        client.close()


def talker(name: str) -> SpawnRequest:
    where = destination(name)
    return SpawnRequest(command=[PY, "-c", TALK, name], stdout=where, stderr=where, name=name)


def test_two_children_each_under_its_identifier_and_priorities(
    launcher: LauncherClient, journal: FakeJournal
) -> None:
    names = ("web", "worker")
    templates = [launcher.define(talker(name)) for name in names]
    children = [launcher.spawn(t, name=n) for t, n in zip(templates, names, strict=True)]
    exits = [child.wait(60) for child in children]
    for template in templates:
        launcher.forget(template)
    assert [e is not None and e.returncode for e in exits] == [0, 0]
    for name in ("web", "worker"):
        wait_until(lambda n=name: len(journal.lines(n)) == 3, what=f"{name}'s three lines")
        assert sorted(journal.lines(name)) == [
            (3, f"{name} complains"),
            (4, f"{name} warns"),
            (6, f"hello from {name}, stdout is socket"),
        ]
    # A stream each: stdout at LOG_INFO, stderr at LOG_ERR, the unit left to journald.
    assert sorted(journal.headers, key=lambda h: (h.identifier, h.priority)) == [
        Header(name, "", prio, True, (0, 0, 0)) for name in ("web", "worker") for prio in (3, 6)
    ]


def test_stderr_is_still_kept_for_the_exit_reason(
    launcher: LauncherClient, journal: FakeJournal
) -> None:
    """stderr is tee'd (as for a file): its tail explains an exit, and the journal
    gets every byte too."""
    template = launcher.define(talker("api"))
    try:
        child = launcher.spawn(template, name="api")
    finally:
        launcher.forget(template)
    exit = child.wait(60)
    assert exit is not None and exit.returncode == 0
    assert b"api complains" in exit.stderr
    wait_until(lambda: (3, "api complains") in journal.lines("api"), what="stderr in the journal")


def test_no_journal_is_a_failed_start_naming_the_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-journal"
    monkeypatch.setenv(SOCKET_ENV, str(missing))
    client = LauncherClient.start()
    try:
        template = client.define(talker("web"))
        with pytest.raises(LaunchError) as info:
            client.spawn(template, name="web")
    finally:
        client.close()
    text = str(info.value)
    assert "cannot connect its stdout" in text and str(missing) in text
    assert "--child-output auto" in text


def test_an_identifier_is_one_bounded_line() -> None:
    assert sanitised("web\nFAKE_FIELD=1") == "web_FAKE_FIELD=1"
    assert sanitised("a" * 500) == "a" * 64
    assert sanitised("\u00e9" * 40).encode() == "\u00e9".encode() * 32
    assert header("x\ny", 6).split(b"\n")[:4] == [b"x_y", b"", b"6", b"1"]
