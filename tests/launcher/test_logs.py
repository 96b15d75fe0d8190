"""Children's log files kept by the launcher, on real processes (docs/logs.md):
rotated at a line's end within a bound on disk, no line lost or written twice
(across rotations, restarts and an external move), stamped lines, and the CLI's
log folder, SIGHUP, `logs --reopen` and `logs` on a file that is gone.

Every wait has a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import calendar
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors._launcher._logsink import LogFile, LogPolicy
from actors._process._client import LauncherClient, SpawnRequest
from supervision import ChildSpec, SpecError, SupervisorSpec, load_tree
from tests.support import children_by_id, wait_until

PY = sys.executable
CLI = [PY, "-m", "actors.cli"]
STAMP = rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "

# Numbered lines "<tag><n>\n", written in writes of `chunk` bytes that cut lines
# anywhere (as a block-buffered child's do); with `forever`, slowly and unbounded.
NUMBERED = """
import os, sys, time
tag, count, chunk = sys.argv[1].encode(), int(sys.argv[2]), int(sys.argv[3])
forever = count < 0
n = 0
buf = bytearray()
while forever or n < count:
    buf += b"%s%d\\n" % (tag, n)
    n += 1
    if len(buf) >= chunk:
        os.write(1, bytes(buf[:chunk]))
        del buf[:chunk]
        if forever:
            time.sleep(0.001)
os.write(1, bytes(buf))
"""


def numbered(tag: str, count: int, chunk: int = 65536) -> list[str]:
    return [PY, "-c", NUMBERED, tag, str(count), str(chunk)]


def files_oldest_first(path: Path) -> list[Path]:
    """path.N ... path.1, path: the order their lines were written in."""
    found = [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".")]
    backups = sorted(found, key=lambda p: -int(p.name.rsplit(".", 1)[1]))
    return [*backups, *([path] if path.exists() else [])]


def began(path: Path, mark: bytes) -> bool:
    """`mark` in one of the newest files (one may be rotated away as it is read)."""
    for f in files_oldest_first(path)[-3:]:
        with contextlib.suppress(FileNotFoundError):
            if mark in f.read_bytes():
                return True
    return False


def numbers(data: bytes, tag: bytes = b"") -> list[int]:
    """The numbers of the whole lines (a child killed mid-line leaves a part)."""
    return [int(line[len(tag) :]) for line in data.split(b"\n")[:-1]]


@pytest.fixture
def launcher() -> Iterator[LauncherClient]:
    client = LauncherClient.start()
    try:
        yield client
    finally:
        client.close()


def run_child(launcher: LauncherClient, request: SpawnRequest, timeout: float = 120) -> Any:
    template = launcher.define(request)
    try:
        child = launcher.spawn(template, name=request.name)
    finally:
        launcher.forget(template)
    exit = child.wait(timeout)
    assert exit is not None, f"{request.name} did not exit within {timeout} s"
    assert exit.returncode == 0
    return child


def request(path: Path, command: list[str], **log: Any) -> SpawnRequest:
    return SpawnRequest(command=command, stdout=str(path), stderr=str(path), name="c", **log)


# -- rotation ------------------------------------------------------------------------


def test_fifty_megabytes_leave_at_most_the_bound_on_disk(tmp_path: Path, launcher) -> None:
    path = tmp_path / "c.log"
    limit, backups = 4 << 20, 3
    count = 5_000_000  # lines "<n>\n": 43.9 MB of digits and line ends ...
    command = numbered("", count, 65521)  # ... in writes that cut lines anywhere
    run_child(launcher, request(path, command, log_max_bytes=limit, log_backups=backups))
    files = files_oldest_first(path)
    sizes = [f.stat().st_size for f in files]
    assert len(files) == backups + 1
    assert all(size <= limit for size in sizes), sizes
    assert sum(sizes) <= (backups + 1) * limit
    kept: list[int] = []
    for f in files:
        data = f.read_bytes()
        assert data.endswith(b"\n")  # cut at a line's end
        kept += numbers(data)
    # The newest lines, each once and in order across the files: none lost at a cut.
    assert kept == list(range(count - len(kept), count))
    assert sum(sizes) > backups * limit  # the older files were full


def test_every_line_is_in_exactly_one_file_in_order(tmp_path: Path, launcher) -> None:
    path = tmp_path / "c.log"
    path.write_bytes(b"before\n")  # appended to, and counted against the first file
    count = 600_000
    command = numbered("line ", count, 4093)
    run_child(launcher, request(path, command, log_max_bytes=64 << 10, log_backups=200))
    files = files_oldest_first(path)
    assert len(files) > 50
    data = b"".join(f.read_bytes() for f in files)
    assert data.startswith(b"before\n")
    assert numbers(data[len(b"before\n") :], b"line ") == list(range(count))
    assert all(f.stat().st_size <= 64 << 10 for f in files)


def test_no_backups_keeps_one_file_below_the_limit(tmp_path: Path, launcher) -> None:
    path = tmp_path / "c.log"
    run_child(launcher, request(path, numbered("", 200_000), log_max_bytes=10_000, log_backups=0))
    assert files_oldest_first(path) == [path]
    data = path.read_bytes()
    assert 0 < len(data) <= 10_000
    kept = numbers(data)
    assert kept == list(range(200_000 - len(kept), 200_000))


def test_a_restart_mid_stream_loses_nothing_and_keeps_the_order(tmp_path: Path, tree) -> None:
    path = tmp_path / "c.log"
    counter = tmp_path / "incarnation"
    counter.write_text("0")
    # Each incarnation tags its lines with its number, and writes until killed.
    code = (
        "import os, pathlib, sys\n"
        f"p = pathlib.Path({str(counter)!r}); i = int(p.read_text())\n"
        "p.with_name('next').write_text(str(i + 1)); os.replace(p.with_name('next'), p)\n"
        "n = 0\n"
        "while True:\n"
        "    os.write(1, b''.join(b'%d:%d\\n' % (i, n + k) for k in range(50))); n += 50\n"
    )
    spec = ChildSpec(
        "c",
        command=[PY, "-c", code],
        stdout=str(path),
        stderr=str(path),
        log_max_bytes=256 << 10,
        log_backups=1000,
    )
    ref = tree(SupervisorSpec("root", children=[spec], intensity=10))
    for i in range(3):
        wait_until(lambda i=i: int(counter.read_text()) > i, what="the incarnation")  # type: ignore[misc]
        wait_until(lambda i=i: len(files_oldest_first(path)) > 2 * i + 2, what="lines")  # type: ignore[misc]
        os.kill(children_by_id(ref)["c"].pid or 0, signal.SIGKILL)
    wait_until(lambda: int(counter.read_text()) == 4, what="the last restart")
    # Its first line written (a loaded machine may stop it between the two).
    wait_until(lambda: began(path, b"\n3:"), what="the last incarnation's first line")
    ref.proxy().terminate_child("c").get(timeout=30)
    lines = b"".join(f.read_bytes() for f in files_oldest_first(path)).split(b"\n")
    assert lines[-1] == b""
    seen: dict[int, list[int]] = {}
    order: list[int] = []
    for line in lines[:-1]:
        i, n = (int(x) for x in line.split(b":"))
        if not order or order[-1] != i:
            order.append(i)
        seen.setdefault(i, []).append(n)
    assert order == [0, 1, 2, 3]  # an incarnation's last lines before the next one's
    for i, ns in seen.items():
        assert ns == list(range(len(ns))), f"incarnation {i} lost or doubled a line"


# -- timestamps, unfinished lines ------------------------------------------------------


def test_timestamps_start_every_line(tmp_path: Path, launcher) -> None:
    path = tmp_path / "c.log"
    code = "import os\nos.write(1, b'one\\ntw'); os.write(2, b'o\\nthree')"
    run_child(launcher, request(path, [PY, "-c", code], log_timestamps=True))
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # an unfinished last line is ended when its pipe closes
    assert [re.sub(STAMP, b"", x) for x in lines[:-1]] == [b"one", b"two", b"three"]
    assert all(re.match(STAMP + rb"\S", x) for x in lines[:-1])
    stamp = lines[0][:19].decode()
    took = time.time() - calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
    assert -5 < took < 120, stamp  # UTC, now


def test_a_line_longer_than_the_limit_is_split_at_it(tmp_path: Path) -> None:
    path = tmp_path / "c.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    log = LogFile(str(path), fd, LogPolicy(max_bytes=1024, backups=5))
    log.put(b"short\n")
    log.put(b"x" * 3000 + b"\nafter\n")
    log.end_line()
    os.close(log.fd)
    files = files_oldest_first(path)
    assert [f.read_bytes() for f in files] == [
        b"short\n",  # the long line starts a file of its own ...
        b"x" * 1024,  # ... and is cut at the limit
        b"x" * 1024,
        b"x" * 952 + b"\nafter\n",
    ]


def test_an_unfinished_line_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "c.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    log = LogFile(str(path), fd, LogPolicy(max_bytes=1 << 20, backups=1))
    log.put(b"a\nhalf")
    assert path.read_bytes() == b"a\n"
    log.put(b" done\n")
    assert path.read_bytes() == b"a\nhalf done\n"
    os.close(log.fd)


# -- reopen after an external move -------------------------------------------------------


@pytest.mark.parametrize("attempt", range(5))  # the move lands mid-line or not: a race
def test_reopen_after_a_move_puts_the_new_lines_in_a_new_file(
    tmp_path: Path, launcher: LauncherClient, attempt: int
) -> None:
    path = tmp_path / "c.log"
    moved = tmp_path / "c.log.moved"
    template = launcher.define(request(path, numbered("", -1, 64)))
    child = launcher.spawn(template, name="c")
    try:
        wait_until(lambda: path.exists() and path.stat().st_size > 1000, what="lines")
        os.rename(path, moved)  # logrotate's default: move, then signal
        launcher.reopen_logs()
        wait_until(lambda: path.exists() and path.stat().st_size > 1000, what="the new file")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(20) is not None
        launcher.forget(template)
    before, after = numbers(moved.read_bytes()), numbers(path.read_bytes())
    assert before and after
    assert before + after == list(range(len(before) + len(after)))


# -- the tree file ---------------------------------------------------------------------------


def test_a_supervisor_table_sets_the_default_for_the_children_below() -> None:
    spec = load_tree(
        '[supervisor]\nid = "r"\nlog_max_bytes = "2M"\nlog_backups = 3\n'
        '[[supervisor.children]]\nid = "a"\ncommand = ["true"]\n'
        '[[supervisor.children]]\nid = "b"\ncommand = ["true"]\nlog_backups = 9\n'
        "log_timestamps = true\n"
        '[[supervisor.children]]\nid = "s"\nlog_max_bytes = 0\n'
        '[[supervisor.children.children]]\nid = "c"\ncommand = ["true"]\n'
    )
    a, b, s = spec.children
    assert isinstance(a, ChildSpec) and isinstance(b, ChildSpec) and isinstance(s, SupervisorSpec)
    assert (a.log_max_bytes, a.log_backups, a.log_timestamps) == (2 << 20, 3, None)
    assert (b.log_max_bytes, b.log_backups, b.log_timestamps) == (2 << 20, 9, True)
    c = s.children[0]
    assert isinstance(c, ChildSpec) and (c.log_max_bytes, c.log_backups) == (0, 3)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("log_max_bytes", '"12"', "1K"),
        ("log_max_bytes", '"lots"', "size"),
        ("log_backups", "-1", "integer >= 0"),
        ("log_timestamps", '"yes"', "true or false"),
    ],
)
def test_a_bad_log_key_is_named(key: str, value: str, expected: str) -> None:
    from supervision import ConfigError

    text = '[supervisor]\nid = "r"\n[[supervisor.children]]\nid = "a"\ncommand = ["true"]\n'
    with pytest.raises(ConfigError) as info:
        load_tree(text + f"{key} = {value}\n")
    assert f"supervisor.children[0].{key}" in str(info.value)
    assert expected in str(info.value)


def test_a_bad_log_field_is_named() -> None:
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], log_backups=5000)
    assert info.value.field == "log_backups" and "0 to 1000" in str(info.value)


# -- the CLI: its folder, SIGHUP, `logs --reopen`, a file that is gone ---------------------


TREE = """
[supervisor]
id = "t"
[[supervisor.children]]
id = "talker"
command = ["{py}", "-c", "{code}"]
"""
TALK = (
    "import os, time\\nn = 0\\nwhile True:\\n"
    "    os.write(1, b'%d\\\\n' % n); n += 1; time.sleep(0.002)"
)


class Run:
    """`nannytree run` in a subprocess, its logs under `logs`."""

    def __init__(self, tmp_path: Path, *flags: str, more: str = "") -> None:
        self.tmp = tmp_path
        self.sock = tmp_path / "t.sock"
        self.logs = tmp_path / "logs"
        self.file = self.logs / "t" / "t" / "talker.log"
        tree = tmp_path / "t.toml"
        tree.write_text(TREE.format(py=PY, code=TALK) + more)
        self.env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
        self.env.pop("NANNYTREE_LOG_DIR", None)
        argv = [*CLI, "run", str(tree), "--plain", "--socket", str(self.sock)]
        argv += ["--log-dir", str(self.logs), *flags]
        # No terminal: a service's run, where SIGHUP reopens the logs.
        self.p = subprocess.Popen(
            argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [*CLI, *args, "--socket", str(self.sock)]
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        assert self.p.wait(30) == 0


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Any]:
    runs: list[Run] = []

    def start(*flags: str, more: str = "") -> Run:
        runs.append(Run(tmp_path, *flags, more=more))
        return runs[-1]

    yield start
    for r in runs:
        if r.p.poll() is None:
            r.p.kill()
            r.p.wait(10)


def grows(path: Path, past: int = 100) -> bool:
    return path.exists() and path.stat().st_size > past


@pytest.mark.parametrize("how", ["sighup", "logs --reopen"])
def test_the_run_reopens_its_logs_after_logrotate_moved_them(run: Any, how: str) -> None:
    r = run()
    wait_until(lambda: grows(r.file), what="the child's log under --log-dir")
    moved = r.file.with_name("talker.log.1")
    os.rename(r.file, moved)
    if how == "sighup":
        r.p.send_signal(signal.SIGHUP)
    else:
        answer = r.cli("logs", "--reopen")
        assert answer.returncode == 0, answer.stderr
        assert "reopened" in answer.stdout
    wait_until(lambda: grows(r.file), what="a new file at the old path")
    r.stop()
    before, after = numbers(moved.read_bytes()), numbers(r.file.read_bytes())
    assert before and after
    assert before + after == list(range(len(before) + len(after)))


SLOW_SIBLING = """
[[supervisor.children]]
id = "slow"
command = ["sleep", "600"]
ready = 3
"""


def test_a_sighup_while_the_tree_starts_reopens_and_does_not_end_the_run(run: Any) -> None:
    """SIGHUP's default action would end the run: its handler is set before the start,
    so a logrotate that signals during a slow start reopens the files instead."""
    r = run(more=SLOW_SIBLING)
    wait_until(lambda: grows(r.file), what="the first child's log, its sibling still starting")
    moved = r.file.with_name("talker.log.1")
    os.rename(r.file, moved)
    r.p.send_signal(signal.SIGHUP)
    wait_until(lambda: grows(r.file), what="a new file at the old path")
    wait_until(
        lambda: "slow" in r.cli("status").stdout and r.cli("status").returncode == 0,
        what="the tree started, every child running",
    )
    assert r.p.poll() is None
    r.stop()


def test_logs_says_when_the_file_is_gone(run: Any) -> None:
    r = run("--log-max-bytes", "1M", "--log-timestamps")
    wait_until(lambda: grows(r.file), what="the child's log")
    assert re.match(STAMP.decode() + r"0$", r.cli("logs", "talker").stdout.split("\n")[0])
    os.unlink(r.file)
    answer = r.cli("logs", "talker")
    assert answer.returncode == 1
    assert f"{r.file} is gone (moved away or deleted)" in answer.stderr
    assert "logs --reopen" in answer.stderr
    r.stop()


def test_a_bad_log_flag_is_refused(tmp_path: Path) -> None:
    argv = [*CLI, "run", str(tmp_path / "t.toml"), "--log-max-bytes", "12"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "at least 1K" in done.stderr


def test_the_default_log_dir_is_not_the_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.host._logdir import default_log_dir

    monkeypatch.delenv("NANNYTREE_LOG_DIR")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_STATE_HOME", "/home/u/.state")
    assert default_log_dir() == Path("/home/u/.state/nannytree")
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", "/home/u")
    assert default_log_dir() == Path("/home/u/.local/state/nannytree")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert default_log_dir() == Path("/var/log/nannytree")
    monkeypatch.setenv("NANNYTREE_LOG_DIR", "/srv/logs")
    assert default_log_dir() == Path("/srv/logs")
