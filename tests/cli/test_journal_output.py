"""`nannytree run --child-output journal` (docs/logs.md, "The journal"), against a
fake journal stream socket (tests/support/journal.py): two children's lines each
under its own identifier and priority, one of them run as another user; `logs`
says where to read them; no journal is a clear failure at `check` and `run`,
never a silent fallback.

Every wait has a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors._launcher._journal import SOCKET_ENV
from tests.support import wait_until
from tests.support.journal import FakeJournal
from tests.support.users import User, real_user

CLI = [sys.executable, "-m", "actors.cli"]

SAY = "echo hello from $0 as $(id -u); echo $0 complains >&2; exec sleep 600"
CHILD = """
[[supervisor.children]]
id = "{id}"
command = ["sh", "-c", "{say}", "{id}"]
shutdown = 5
"""


def tree(tmp_path: Path, user: str | None = None) -> Path:
    text = (
        '[supervisor]\nid = "shop"\n'
        + CHILD.format(id="web", say=SAY)
        + CHILD.format(id="worker", say=SAY)
    )
    if user is not None:
        text += f'user = "{user}"\n'  # the worker's
    path = tmp_path / "shop.toml"
    path.write_text(text)
    return path


def environment(tmp_path: Path, journal: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), SOCKET_ENV: str(journal)}
    env["NANNYTREE_LOG_DIR"] = str(tmp_path / "logs")
    return env


class Run:
    """`nannytree run` as a service runs it: no terminal, its lines kept in a file."""

    def __init__(self, tmp_path: Path, file: Path, env: dict[str, str], *flags: str) -> None:
        self.sock = tmp_path / "shop.sock"
        self.env = env
        self.out = (tmp_path / "run.out").open("w+")
        argv = [*CLI, "run", str(file), "--plain", "--socket", str(self.sock), *flags]
        self.p = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=self.out, stderr=subprocess.STDOUT
        )

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [*CLI, *args, "--socket", str(self.sock)]
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)

    def output(self) -> str:
        self.out.seek(0)
        return self.out.read()

    def stop(self) -> int:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        try:
            return self.p.wait(30)
        finally:
            self.out.close()


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[FakeJournal]:
    with FakeJournal(tmp_path / "journal.sock") as fake:
        yield fake


@pytest.fixture
def worker_user() -> Iterator[User]:
    with real_user("ntj") as user:
        yield user


def arrived(journal: FakeJournal, identifier: str, *lines: tuple[int, str]) -> bool:
    got = journal.lines(identifier)
    return all(line in got for line in lines)


def test_two_children_each_named_in_the_journal_one_as_another_user(
    tmp_path: Path, journal: FakeJournal, worker_user: User
) -> None:
    env = environment(tmp_path, journal.path)
    run = Run(tmp_path, tree(tmp_path, worker_user.name), env, "--child-output", "journal")
    try:
        for name, uid in (("web", os.geteuid()), ("worker", worker_user.uid)):
            wait_until(
                lambda n=name, u=uid: arrived(
                    journal, n, (6, f"hello from {n} as {u}"), (3, f"{n} complains")
                ),
                timeout=60,
                what=f"{name}'s lines in the journal; run said:\n{run.output()}",
            )
        assert {e.identifier for e in journal.entries} == {"web", "worker"}
        logs = run.cli("logs", "worker")
        assert logs.returncode == 1 and "journalctl -t worker" in logs.stderr
        assert "children's output: the journal (journalctl -t <child>)" in run.output()
    finally:
        assert run.stop() == 0, run.output()
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").rglob("*.log"))


def test_a_prefix_goes_before_each_id(tmp_path: Path, journal: FakeJournal) -> None:
    env = environment(tmp_path, journal.path)
    run = Run(tmp_path, tree(tmp_path), env, "--child-output", "journal:nannytree/")
    try:
        wait_until(
            lambda: arrived(journal, "nannytree/web", (6, f"hello from web as {os.geteuid()}")),
            timeout=60,
            what=f"web's line under nannytree/web; run said:\n{run.output()}",
        )
    finally:
        assert run.stop() == 0, run.output()


def test_no_journal_fails_check_and_run_with_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "no-journal"
    env = environment(tmp_path, missing)
    file = tree(tmp_path)
    check = subprocess.run(
        [*CLI, "check", "--child-output", "journal", str(file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 1
    assert f"journald's stream socket {missing} cannot be reached" in check.stderr
    assert "--child-output auto" in check.stderr
    run = Run(tmp_path, file, env, "--child-output", "journal")
    assert run.p.wait(60) == 1
    said = run.output()
    run.stop()
    assert f"--child-output journal: journald's stream socket {missing}" in said
    assert "child_started" not in said  # refused before anything started


def test_check_passes_where_the_journal_answers(tmp_path: Path, journal: FakeJournal) -> None:
    check = subprocess.run(
        [*CLI, "check", "--child-output", "journal", str(tree(tmp_path))],
        env=environment(tmp_path, journal.path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr
    assert journal.entries == []  # asking writes nothing to the journal


def test_check_names_a_missing_folder_of_a_child_output_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    check = subprocess.run(
        [*CLI, "check", "--child-output", str(missing / "all.log"), str(tree(tmp_path))],
        env=environment(tmp_path, tmp_path / "unused"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 1
    assert f"folder {str(missing)!r} does not exist" in check.stderr
