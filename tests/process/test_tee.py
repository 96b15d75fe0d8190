"""A tee'd stream, on real processes: it still reaches its destination (the
launcher's own stdout/stderr, or a file) byte for byte and in order, and the host
gets it too (`output()`, `ProcessExit.stderr`, `output_since`, `wait_output`),
without "capture" (docs/launcher.md, "Tee'd output").

The launcher's stdout/stderr are the host's at its start: each test points the
host's fd 1/2 at a file or a pipe of its own while it starts a launcher, so it can
read what a terminal would have got. Every wait has a deadline; no test sleeps to
synchronise; each checks that nothing it started is left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import resource
import select
import signal
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import psutil
import pytest

from actors._process._client import LauncherClient as Launcher
from actors._process._client import ProcessExit, SpawnRequest
from actors._process._port import OUTPUT_LIMIT
from actors.testing import FakeSpawner

THIS_MODULE = sys.modules[__name__]
PY = sys.executable


# -- helpers -------------------------------------------------------------------


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll an OS condition until it holds, or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def descendants(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


@contextlib.contextmanager
def launcher_writing_to(
    stdout: int | None = None, stderr: int | None = None, nofile: int | None = None
) -> Iterator[Launcher]:
    """A launcher whose own stdout/stderr are these fds (else the host's), started
    under a soft RLIMIT_NOFILE of `nofile` if given; closed at the end, and every
    process it started gone."""
    saved: dict[int, int] = {}
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    for target, fd in ((1, stdout), (2, stderr)):
        if fd is not None:
            saved[target] = os.dup(target)
            os.dup2(fd, target)
    try:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, limits[1]))
        launcher = Launcher.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        for target, old in saved.items():
            os.dup2(old, target)
            os.close(old)
    try:
        yield launcher
    finally:
        pids = descendants(launcher.guardian_pid) | {launcher.pid, launcher.guardian_pid}
        launcher.close()
        wait_until(lambda: all(gone(p) for p in pids), 10, "the launcher's processes to end")


def spawn(launcher: Launcher, request: SpawnRequest) -> Any:
    template = launcher.define(request)
    try:
        return launcher.spawn(template, name=request.name)
    finally:
        launcher.forget(template)


def ended(child: Any, timeout: float = 20.0) -> ProcessExit:
    exit = child.wait(timeout)
    assert exit is not None, f"pid {child.pid} did not exit within {timeout} s"
    return exit  # type: ignore[no-any-return]


class PipeReader:
    """Reads a pipe (or a terminal) on a thread until EOF; started late, if need be."""

    def __init__(self, terminal: bool = False) -> None:
        if terminal:
            self.read_end, self.write_end = pty.openpty()
            tty.setraw(self.write_end)  # no "\n" -> "\r\n"
        else:
            self.read_end, self.write_end = os.pipe()
        self._data = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PipeReader:
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            try:
                chunk = os.read(self.read_end, 1 << 16)
            except OSError:  # EIO: a terminal's last writer is gone
                chunk = b""
            if not chunk:
                return
            with self._lock:
                self._data += chunk

    @property
    def data(self) -> bytes:
        with self._lock:
            return bytes(self._data)

    def wait_for(self, size: int, timeout: float = 30.0) -> bytes:
        wait_until(lambda: len(self.data) >= size, timeout, f"{size} bytes on the pipe")
        return self.data

    def close(self) -> None:
        """Once the launcher is gone (the last writer): EOF ends the thread."""
        with contextlib.suppress(OSError):
            os.close(self.write_end)
        if self._thread.is_alive():
            self._thread.join(10)
        assert not self._thread.is_alive()
        os.close(self.read_end)


def writes(stream: int, *chunks: bytes) -> list[str]:
    """A command that writes each chunk with one write(2), then exits 0."""
    code = f"import os, sys\nfor c in sys.argv[1:]: os.write({stream}, bytes.fromhex(c))"
    return [PY, "-c", code, *(c.hex() for c in chunks)]


def numbered(name: str, count: int, width: int = 100) -> bytes:
    """`count` lines of `width` bytes: "<name> <n> xxx...\\n"."""
    out = bytearray()
    for n in range(count):
        head = f"{name} {n} ".encode()
        out += head + b"x" * (width - len(head) - 1) + b"\n"
    return bytes(out)


WRITE_LINES = """
import os, sys
name, count, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for n in range(count):
    head = f"{name} {n} ".encode()
    os.write(2, head + b"x" * (width - len(head) - 1) + b"\\n")
"""


def write_lines(name: str, count: int, width: int = 100) -> list[str]:
    """A command writing `numbered(name, count, width)` to stderr, a write a line."""
    return [PY, "-c", WRITE_LINES, name, str(count), str(width)]


# -- Python targets (pickled by value) -----------------------------------------


def say_on_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
    os.write(2, b"and by os.write\n")


def python_request(fn: Callable[..., object], *args: object, **fields: Any) -> SpawnRequest:
    cloudpickle.register_pickle_by_value(THIS_MODULE)
    try:
        payload = bytes(cloudpickle.dumps((fn, args, {})))
    finally:
        cloudpickle.unregister_pickle_by_value(THIS_MODULE)
    return SpawnRequest(payload=payload, sys_path=list(sys.path), name=fn.__name__, **fields)


# -- the destination gets it, and the host -------------------------------------


@pytest.mark.parametrize("kind", ["file", "pipe", "terminal", "devnull"])
def test_an_inherited_stderr_reaches_the_launchers_and_the_host(tmp_path: Path, kind: str) -> None:
    reader = PipeReader(kind == "terminal").start() if kind in ("pipe", "terminal") else None
    path = tmp_path / "stderr"
    if reader:
        fd = reader.write_end
    else:
        fd = os.open(os.devnull if kind == "devnull" else path, os.O_WRONLY | os.O_CREAT, 0o644)
    out = os.open(tmp_path / "stdout", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with launcher_writing_to(stdout=out, stderr=fd) as launcher:
            command = ["sh", "-c", "echo first >&2; echo on-stdout; echo second >&2; exit 3"]
            child = spawn(launcher, SpawnRequest(command=command, name="speaker"))
            exit = ended(child)
            assert exit.returncode == 3
            # A terminal is left as it is (a program sees a terminal there): no tee.
            kept = b"" if kind == "terminal" else b"first\nsecond\n"
            assert exit.stderr == kept  # without "capture"
            assert child.output(2) == kept
            assert child.output(1) == b""  # stdout is not tee'd unless asked
            if kind != "devnull":
                said = reader.wait_for(13) if reader else path.read_bytes()
                assert said == b"first\nsecond\n"
            assert (tmp_path / "stdout").read_bytes() == b"on-stdout\n"
    finally:
        os.close(out)
        if reader:
            reader.close()
        else:
            os.close(fd)


def test_a_file_destination_gets_every_byte_in_order(tmp_path: Path) -> None:
    path = tmp_path / "child.log"
    path.write_bytes(b"before\n")  # opened for append, as without a tee
    expected = numbered("f", 3000)  # 300 KiB: more than the host keeps
    with launcher_writing_to() as launcher:
        request = SpawnRequest(command=write_lines("f", 3000), stderr=str(path), name="f")
        child = spawn(launcher, request)
        exit = ended(child)
        assert exit.returncode == 0
        assert path.read_bytes() == b"before\n" + expected
        assert exit.stderr == expected[-OUTPUT_LIMIT:] == child.output(2)


@pytest.mark.parametrize("fresh", [False, True], ids=["fork", "fresh"])
def test_a_python_target_is_teed(tmp_path: Path, fresh: bool) -> None:
    path = tmp_path / "stderr"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with launcher_writing_to(stderr=fd) as launcher:
            request = python_request(say_on_stderr, "by sys.stderr\n", fresh_interpreter=fresh)
            child = spawn(launcher, request)
            exit = ended(child)
            assert exit.returncode == 0
            said = b"by sys.stderr\nand by os.write\n"
            assert exit.stderr == said
            assert path.read_bytes() == said
    finally:
        os.close(fd)


def test_stdout_is_teed_when_asked(tmp_path: Path) -> None:
    out = os.open(tmp_path / "stdout", os.O_WRONLY | os.O_CREAT, 0o644)
    err = os.open(tmp_path / "stderr", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with launcher_writing_to(stdout=out, stderr=err) as launcher:
            command = ["sh", "-c", "echo out; echo err >&2"]
            child = spawn(launcher, SpawnRequest(command=command, tee=(1, 2), name="both"))
            exit = ended(child)
            assert (child.output(1), exit.stderr) == (b"out\n", b"err\n")
            assert (tmp_path / "stdout").read_bytes() == b"out\n"
            assert (tmp_path / "stderr").read_bytes() == b"err\n"
            # Neither: the streams go straight to the launcher's, as before tees.
            child = spawn(launcher, SpawnRequest(command=command, tee=(), name="none"))
            exit = ended(child)
            assert (child.output(1), exit.stderr) == (b"", b"")
            assert (tmp_path / "stdout").read_bytes() == b"out\nout\n"
            # A captured stream is not tee'd: it goes nowhere but to the host.
            request = SpawnRequest(command=command, stderr="capture", tee=(2,), name="captured")
            exit = ended(spawn(launcher, request))
            assert exit.stderr == b"err\n"
            assert (tmp_path / "stderr").read_bytes() == b"err\nerr\n"
    finally:
        os.close(out)
        os.close(err)


# -- never blocking the launcher, never losing a byte ---------------------------


def _pipe_full(write_end: int) -> bool:
    return not select.select([], [write_end], [], 0)[1]


def _unread(read_end: int) -> int:
    return int.from_bytes(fcntl.ioctl(read_end, termios.FIONREAD, b"\0\0\0\0"), "little")


def test_a_slow_reader_stalls_no_other_child_and_loses_nothing(tmp_path: Path) -> None:
    reader = PipeReader()  # nobody reads it for now
    try:
        with launcher_writing_to(stderr=reader.write_end) as launcher:
            flood = numbered("a", 20_000)  # 2 MiB: far more than the pipes and the launcher hold
            writer = spawn(launcher, SpawnRequest(command=write_lines("a", 20_000), name="a"))
            wait_until(lambda: _pipe_full(reader.write_end), 20, "the destination pipe to fill")
            # The launcher keeps answering: children start, are killed and restarted.
            for _ in range(5):
                sleeper = spawn(launcher, SpawnRequest(command=["sleep", "30"], name="b"))
                assert sleeper.send_signal(signal.SIGKILL)
                assert ended(sleeper, 5).returncode == -signal.SIGKILL
            # One that writes to the same stuck destination and exits is reported at
            # once, with its last words.
            hello = spawn(launcher, SpawnRequest(command=writes(2, b"hello\n"), name="c"))
            assert ended(hello, 10).stderr == b"hello\n"
            # Another with a destination of its own is not held up either.
            own = tmp_path / "own"
            request = SpawnRequest(command=write_lines("d", 1000), stderr=str(own), name="d")
            assert ended(spawn(launcher, request), 10).returncode == 0
            assert own.read_bytes() == numbered("d", 1000)
            assert writer.exit is None  # still blocked on its write
            assert _unread(reader.read_end) <= 1 << 16
            reader.start()
            said = reader.wait_for(len(flood) + len(b"hello\n"))
            assert ended(writer).returncode == 0
        assert said.replace(b"hello\n", b"", 1) == flood  # every byte, in order
        assert said.count(b"hello\n") == 1
    finally:
        reader.close()


def test_ten_mebibytes_through_a_tee() -> None:
    reader = PipeReader().start()
    size = 10 << 20
    block = bytes(range(256)) * 256  # 64 KiB, no line ends: cut at PIPE_BUF
    code = "import os\nb = bytes(range(256)) * 256\n"
    code += f"for _ in range({size // len(block)}): os.write(2, b)"
    try:
        with launcher_writing_to(stderr=reader.write_end) as launcher:
            started = time.monotonic()
            child = spawn(launcher, SpawnRequest(command=[PY, "-c", code], name="big"))
            exit = ended(child, 60)
            said = reader.wait_for(size, 60)
            took = time.monotonic() - started
            assert exit.returncode == 0
            assert said == block * (size // len(block))
            assert exit.stderr == said[-OUTPUT_LIMIT:]
            assert took < 30, f"10 MiB took {took:.1f} s"
    finally:
        reader.close()


def test_many_children_share_the_launchers_stderr_line_by_line() -> None:
    """Each line a child writes whole (at most PIPE_BUF) arrives whole: the launcher is
    the one writer of its stderr, in the order it read the children's pipes."""
    reader = PipeReader().start()
    children, lines, width = 16, 400, 150
    try:
        with launcher_writing_to(stderr=reader.write_end) as launcher:
            started = [
                spawn(launcher, SpawnRequest(command=write_lines(f"c{i}", lines, width), name="c"))
                for i in range(children)
            ]
            for child in started:
                assert ended(child).returncode == 0
            said = reader.wait_for(children * lines * width)
        assert len(said) == children * lines * width
        seen: dict[str, list[int]] = {}
        for line in said.splitlines(keepends=True):
            match = re.fullmatch(rb"(c\d+) (\d+) x+\n", line)
            assert match and len(line) == width, f"a broken line: {line[:80]!r}"
            seen.setdefault(match[1].decode(), []).append(int(match[2]))
        assert seen == {f"c{i}": list(range(lines)) for i in range(children)}
    finally:
        reader.close()


def _holds(path: Path, data: bytes) -> Callable[[], bool]:
    return lambda: path.read_bytes() == data


# -- the fd budget ---------------------------------------------------------------


def test_past_three_quarters_of_the_fd_room_children_start_without_a_tee(
    tmp_path: Path,
) -> None:
    """40 fds of room (the soft limit less the launcher's margin of 256): a child
    tee'd to its own file holds a pidfd, a pipe and the file; past 30 fds held, the
    next are started without a tee (and past 40, without a pidfd), and all start."""
    count = 25
    with launcher_writing_to(nofile=256 + 40) as launcher:
        started = []
        for i in range(count):
            path = tmp_path / f"c{i}.log"
            command = ["sh", "-c", f"echo line-{i} >&2; exec sleep 30"]
            request = SpawnRequest(command=command, stderr=str(path), name=f"c{i}")
            started.append((spawn(launcher, request), path))
        for i, (_, path) in enumerate(started):
            wait_until(_holds(path, f"line-{i}\n".encode()), 10, str(path))
        for child, _ in started:
            assert child.send_signal(signal.SIGKILL)
        tails = [ended(child).stderr for child, _ in started]  # every Output came before
    teed = [i for i, tail in enumerate(tails) if tail]
    assert teed == list(range(len(teed))), "the first ones are tee'd, then none"
    assert 5 <= len(teed) <= 10  # 3 fds each, from 3 held to 30
    assert all(tails[i] == f"line-{i}\n".encode() for i in teed)


# -- the host's side: output_since, wait_output ------------------------------------


def test_wait_output_wakes_on_new_output_and_on_the_exit(tmp_path: Path) -> None:
    path = tmp_path / "stderr"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    with launcher_writing_to(stderr=fd) as launcher:
        os.close(fd)
        child = spawn(launcher, SpawnRequest(command=["sh", "-c", "echo starting >&2; sleep 30"]))
        assert child.wait_output(2, 0, 10)
        data, total = child.output_since(2, 0)
        assert (data, total) == (b"starting\n", 9)
        started = time.monotonic()
        assert not child.wait_output(2, total, 0.05)  # nothing new
        assert child.send_signal(signal.SIGKILL)
        assert not child.wait_output(2, total, 30)  # its exit ends the wait
        assert time.monotonic() - started < 10
        assert child.output_since(2, total) == (b"", 9)
    assert path.read_bytes() == b"starting\n"


def test_output_since_gives_what_is_kept_to_one_that_fell_behind() -> None:
    fake = FakeSpawner()
    child = fake.spawn(fake.define(SpawnRequest(command=["true"])))
    assert child.output_since(2, 0) == (b"", 0)
    woke = threading.Event()

    def waiter() -> None:
        if child.wait_output(2, 0, 30):
            woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    child.write(2, b"a" * OUTPUT_LIMIT)
    thread.join(10)
    assert woke.is_set()
    child.write(2, b"b" * 10)
    data, total = child.output_since(2, 5)  # fell behind: gets what is kept
    assert total == OUTPUT_LIMIT + 10
    assert data == b"a" * (OUTPUT_LIMIT - 10) + b"b" * 10
    assert child.output_since(2, OUTPUT_LIMIT + 4) == (b"b" * 6, total)
    assert child.output(1) == b"" and child.output_since(1, 0) == (b"", 0)
    child.finish(1)
    assert child.exit is not None and child.exit.stderr.endswith(b"b" * 10)
    assert not child.wait_output(2, total, 30)  # ended: no wait


def test_stdout_and_stderr_to_one_file_keep_their_order(tmp_path: Path) -> None:
    """`2>&1` (one file for both): one pipe for the two, so the file has the lines in
    the order written, and the tail has both."""
    log = tmp_path / "log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with launcher_writing_to(stdout=fd, stderr=fd) as launcher:
            lines = "; ".join(f"echo {i}" + (" >&2" if i % 2 else "") for i in range(200))
            child = spawn(launcher, SpawnRequest(command=["sh", "-c", lines], name="mixed"))
            assert ended(child).returncode == 0
    finally:
        os.close(fd)
    expected = "".join(f"{i}\n" for i in range(200)).encode()
    assert log.read_bytes() == expected
    assert child.output(2) == expected


def test_one_file_path_for_both_streams_keeps_their_order(tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    lines = "; ".join(f"echo {i}" + (" >&2" if i % 2 else "") for i in range(200))
    with launcher_writing_to() as launcher:
        child = spawn(
            launcher,
            SpawnRequest(command=["sh", "-c", lines], name="mixed", stdout=log, stderr=log),
        )
        assert ended(child).returncode == 0
    assert Path(log).read_text() == "".join(f"{i}\n" for i in range(200))
