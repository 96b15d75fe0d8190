"""Integration tests of the launcher with real processes.

Every wait is bounded. Waiting for an OS condition (a process gone, a file
written) uses a short polling loop with a deadline; nothing sleeps to
synchronise. Each test checks that no process it started is left behind.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import actors.child  # noqa: E402
from actors._launcher import _bootstrap, _wire  # noqa: E402
from actors._process._client import (  # noqa: E402
    ChildProcess,
    LaunchError,
    ProcessExit,
    SpawnRequest,
)
from actors._process._client import LauncherClient as Launcher  # noqa: E402

THIS_MODULE = sys.modules[__name__]


def spawn_once(
    launcher: Launcher,
    request: SpawnRequest,
    *,
    on_exit: Callable[[ProcessExit], None] | None = None,
    timeout: float = 5.0,
) -> Any:
    """Define, spawn and forget a template: one child from one request; `on_exit(exit)`
    runs once on the reader thread when the child exited."""

    def notify(process: Any, note: str) -> None:
        if note == "exited" and on_exit is not None and process.exit is not None:
            on_exit(process.exit)

    template = launcher.define(request)
    try:
        return launcher.spawn(template, name=request.name, notify=notify, timeout=timeout)
    finally:
        launcher.forget(template)


# -- helpers -------------------------------------------------------------------


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll an OS condition until it holds, or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def gone(pid: int, reap: bool = False) -> bool:
    """The process no longer runs (a zombie counts as gone). `reap`: reap it if it is ours."""
    if reap:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def all_gone(pids: set[int], timeout: float, reap: bool = False) -> None:
    wait_until(
        lambda: all(gone(p, reap) for p in pids),
        timeout,
        f"processes to exit: {sorted(p for p in pids if not gone(p))}",
    )


def descendants(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def read_when_written(path: Path, timeout: float = 10.0) -> str:
    wait_until(lambda: path.exists() and path.read_text().strip() != "", timeout, str(path))
    return path.read_text()


@contextlib.contextmanager
def by_value() -> Iterator[None]:
    """Pickle this module's functions by value: the child need not import the test module."""
    cloudpickle.register_pickle_by_value(THIS_MODULE)
    try:
        yield
    finally:
        cloudpickle.unregister_pickle_by_value(THIS_MODULE)


def payload(fn: Callable[..., object], *args: object, reference: bool = False) -> bytes:
    if reference:
        return bytes(cloudpickle.dumps((fn, args, {})))
    with by_value():
        return bytes(cloudpickle.dumps((fn, args, {})))


def py_request(fn: Callable[..., object], *args: object, **fields: Any) -> SpawnRequest:
    fields.setdefault("name", fn.__name__)
    fields.setdefault("sys_path", list(sys.path))
    return SpawnRequest(payload=payload(fn, *args), **fields)


class Recorder:
    """on_exit / on_ready callbacks that count their calls."""

    def __init__(self) -> None:
        self.exits: list[ProcessExit] = []
        self.readies = 0
        self.exited = threading.Event()
        self.became_ready = threading.Event()

    def on_exit(self, exit: ProcessExit) -> None:
        self.exits.append(exit)
        self.exited.set()


class Harness:
    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher
        self.pids: set[int] = set()

    def spawn(self, request: SpawnRequest, **callbacks: Any) -> ChildProcess:
        child = spawn_once(self.launcher, request, **callbacks)
        self.pids.add(child.pid)
        return child


def launcher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("nannytree-launcher")]


@pytest.fixture
def harness() -> Iterator[Harness]:
    launcher = Launcher.start()
    h = Harness(launcher)
    try:
        yield h
    finally:
        pids = h.pids | descendants(launcher.pid) | {launcher.pid}
        launcher.close()
        assert not launcher.alive
        all_gone(pids, 5.0)
        assert launcher_threads() == []


@pytest.fixture
def subreaper() -> Iterator[None]:
    """Orphans of the test come to this process, reaped by pid (init may not reap);
    any left a zombie here (a guardian whose host was killed) is reaped at the end."""
    before = {p.pid for p in psutil.Process().children()}
    _bootstrap.prctl(_bootstrap.PR_SET_CHILD_SUBREAPER, 1)
    try:
        yield
    finally:
        _bootstrap.prctl(_bootstrap.PR_SET_CHILD_SUBREAPER, 0)
        for orphan in psutil.Process().children():
            with contextlib.suppress(psutil.Error, ChildProcessError):
                if orphan.pid not in before and orphan.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(orphan.pid, 0)


def status_field(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split()[1]
    raise AssertionError(field)


def open_fds(pid: int) -> dict[int, str]:
    base = f"/proc/{pid}/fd"
    fds = {}
    for fd in os.listdir(base):
        with contextlib.suppress(FileNotFoundError):  # closed meanwhile
            fds[int(fd)] = os.readlink(f"{base}/{fd}")
    return fds


# -- targets (module level; pickled by value unless a test says otherwise) -----


class CustomError(Exception):
    pass


def write_file(path: str, text: str) -> None:
    Path(path).write_text(text)


def raise_value_error(text: str) -> None:
    raise ValueError(text)


def raise_custom() -> None:
    raise CustomError("custom")


def wait_forever() -> None:
    actors.child.ready()
    while True:
        signal.pause()


def finally_on_sigterm(marker: str) -> None:
    try:
        actors.child.ready()
        while True:
            signal.pause()
    finally:
        Path(marker).write_text(f"stop_requested={actors.child.stop_requested()}")


def report_state(path: str) -> None:
    state = {
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "argv": sys.argv,
        "pgid": os.getpgid(0),
        "pid": os.getpid(),
        "sigpipe": str(signal.getsignal(signal.SIGPIPE)),
        "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
        "sigchld": str(signal.getsignal(signal.SIGCHLD)),
        "mask": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    }
    tmp = path + ".tmp"
    Path(tmp).write_text(json.dumps(state))
    os.rename(tmp, path)
    actors.child.ready()
    while True:
        signal.pause()


def fork_escapee(pidfile: str) -> None:
    """A child whose grandchild leaves its group and session."""
    if os.fork() == 0:
        os.setsid()
        tmp = pidfile + ".tmp"
        Path(tmp).write_text(str(os.getpid()))
        os.rename(tmp, pidfile)
        while True:
            signal.pause()
    actors.child.ready()
    while True:
        signal.pause()


# -- the wire ------------------------------------------------------------------


def test_wire_decodes_frames_split_anyhow() -> None:
    messages = [("spawned", 1, 1234), ("exited", 1234, -9, 0.5, None), ("big", b"x" * 100_000)]
    stream = b"".join(_wire.encode(m) for m in messages)
    for step in (1, 7, 4096, len(stream)):
        decoder = _wire.Decoder(1 << 20)
        out: list[Any] = []
        for i in range(0, len(stream), step):
            out += decoder.feed(memoryview(stream)[i : i + step])
        assert out == messages and decoder.pending == 0


# -- command children ------------------------------------------------------------


def test_command_killed_reports_signal_once(harness: Harness) -> None:
    rec = Recorder()
    request = SpawnRequest(command=["sleep", "30"], name="sleeper")
    child = harness.spawn(request, on_exit=rec.on_exit)
    assert child.pgid == child.pid
    assert os.getpgid(child.pid) == child.pid
    assert child.exit is None
    assert child.send_signal(signal.SIGKILL)
    exit = child.wait(5)
    assert exit is not None
    assert exit.returncode == -signal.SIGKILL
    assert exit.error is None and not exit.launcher_died
    assert rec.exited.wait(5)
    assert rec.exits == [exit]
    assert child.send_signal(signal.SIGTERM) is False  # exit reported: no signal sent
    assert child not in harness.launcher.children()
    harness.launcher.close()
    assert rec.exits == [exit]  # close does not report it again


def test_command_exit_code(harness: Harness) -> None:
    child = harness.spawn(SpawnRequest(command=["sh", "-c", "exit 3"], name="three"))
    exit = child.wait(5)
    assert exit is not None and exit.returncode == 3 and exit.error is None


def test_command_gets_default_signals_and_no_extra_fds(harness: Harness, tmp_path: Path) -> None:
    child = harness.spawn(SpawnRequest(command=["sleep", "30"], name="plain"))
    # `sleep` briefly opens locale files of its own: wait for it to settle.
    wait_until(lambda: sorted(open_fds(child.pid)) == [0, 1, 2], 5, "only fds 0, 1, 2")
    # glibc's posix_spawn leaves its two internal signals (32, 33) ignored; no program can use them.
    glibc_internal = (1 << 31) | (1 << 32)
    assert int(status_field(child.pid, "SigIgn"), 16) & ~glibc_internal == 0
    assert int(status_field(child.pid, "SigBlk"), 16) == 0
    child.send_signal(signal.SIGKILL)
    assert child.wait(5) is not None
    # With SIGPIPE ignored, `yes` would complain about a broken pipe.
    err = tmp_path / "err"
    pipe = harness.spawn(
        SpawnRequest(command=["sh", "-c", "yes | head -n1"], stderr=str(err), name="pipe")
    )
    exit = pipe.wait(5)
    assert exit is not None and exit.returncode == 0
    assert err.read_text() == ""


def test_grandchild_dies_with_child(harness: Harness) -> None:
    child = harness.spawn(SpawnRequest(command=["sh", "-c", "sleep 60 & sleep 60"], name="sh"))
    wait_until(lambda: len(descendants(child.pid)) >= 1, 5, "the background sleep")
    group = descendants(child.pid) | {child.pid}
    assert child.send_signal(signal.SIGKILL, group=False)  # the child alone
    exit = child.wait(5)
    assert exit is not None and exit.returncode == -signal.SIGKILL
    all_gone(group, 2.0)


def test_launch_errors_name_the_child_and_keep_the_launcher(
    harness: Harness, tmp_path: Path
) -> None:
    with pytest.raises(LaunchError) as info:
        harness.spawn(SpawnRequest(command=["nannytree-no-such-command"], name="ghost"))
    assert info.value.name == "ghost" and info.value.errno == errno.ENOENT
    assert "'ghost'" in str(info.value) and "nannytree-no-such-command" in str(info.value)

    missing = str(tmp_path / "missing")
    with pytest.raises(LaunchError) as info:
        harness.spawn(SpawnRequest(command=["true"], cwd=missing, name="lost"))
    assert info.value.name == "lost" and info.value.errno == errno.ENOENT
    assert "'lost'" in str(info.value) and missing in str(info.value)

    with pytest.raises(LaunchError) as info:
        harness.spawn(py_request(write_file, "x", "y", cwd=missing, name="pylost"))
    assert info.value.errno == errno.ENOENT and "'pylost'" in str(info.value)

    script = tmp_path / "noexec.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    with pytest.raises(LaunchError) as info:
        harness.spawn(SpawnRequest(command=[str(script)], name="noexec"))
    assert info.value.errno == errno.EACCES

    with pytest.raises(LaunchError) as info:
        harness.spawn(SpawnRequest(command=["true"], stdout=missing + "/out", name="out"))
    assert info.value.errno == errno.ENOENT and "stdout" in str(info.value)

    with pytest.raises(ValueError):
        SpawnRequest(name="neither")
    with pytest.raises(ValueError):
        SpawnRequest(command="sleep 1", name="string")

    assert harness.launcher.alive
    child = harness.spawn(SpawnRequest(command=["true"], name="fine"))
    exit = child.wait(5)
    assert exit is not None and exit.returncode == 0


def test_env_cwd_and_path_lookup_for_commands(harness: Harness, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nannytree-tool"
    tool.write_text('#!/bin/sh\necho "$NT_VAR $(pwd)" > out\n')
    tool.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "NT_VAR": "hello"}
    child = harness.spawn(SpawnRequest(command=["nannytree-tool"], env=env, cwd=str(work)))
    exit = child.wait(5)
    assert exit is not None and exit.returncode == 0
    assert (work / "out").read_text() == f"hello {work}\n"


# -- Python children -------------------------------------------------------------


def test_python_closure_and_large_payload(harness: Harness, tmp_path: Path) -> None:
    out = tmp_path / "closure"
    big = b"x" * 1_000_000  # a stream, not SOCK_SEQPACKET: large payloads pass
    suffix = "-closed-over"

    def target(data: bytes) -> None:
        out.write_text(f"{len(data)}{suffix}")
        print("to stdout", flush=True)

    log = tmp_path / "stdout.log"
    child = harness.spawn(
        SpawnRequest(payload=cloudpickle.dumps((target, (big,), {})), stdout=str(log))
    )
    exit = child.wait(10)
    assert exit == ProcessExit(child.pid, 0)
    assert out.read_text() == "1000000-closed-over"
    assert log.read_text() == "to stdout\n"

    again = cloudpickle.dumps((lambda: print("again"), (), {}))
    child = harness.spawn(SpawnRequest(payload=again, stdout=str(log)))
    assert child.wait(10) == ProcessExit(child.pid, 0)
    assert log.read_text() == "to stdout\nagain\n"  # appended


def test_target_from_test_module_by_reference(harness: Harness, tmp_path: Path) -> None:
    marker = tmp_path / "ref"
    data = payload(write_file, str(marker), "by reference", reference=True)
    assert THIS_MODULE.__name__.encode() in data  # pickled by reference, imported in the child
    child = harness.spawn(SpawnRequest(payload=data, sys_path=list(sys.path), name="ref"))
    exit = child.wait(20)
    assert exit is not None and exit.returncode == 0, exit
    assert marker.read_text() == "by reference"


def test_python_exception_is_reported(harness: Harness, tmp_path: Path) -> None:
    err = tmp_path / "err"
    child = harness.spawn(py_request(raise_value_error, "bad value 42", stderr=str(err)))
    exit = child.wait(10)
    assert exit is not None and exit.returncode == 1
    assert exit.error is not None
    assert exit.error.type == "ValueError"
    assert exit.error.message == "bad value 42"
    assert exit.error.traceback.startswith("Traceback (most recent call last):")
    assert "raise_value_error" in exit.error.traceback
    assert exit.error.traceback.rstrip().endswith("ValueError: bad value 42")
    assert "ValueError: bad value 42" in err.read_text()  # printed as Python would

    child = harness.spawn(py_request(raise_custom))
    exit = child.wait(10)
    assert exit is not None and exit.error is not None
    assert exit.error.type == f"{THIS_MODULE.__name__}.CustomError"


def test_system_exit_codes(harness: Harness, tmp_path: Path) -> None:
    err = tmp_path / "err"
    cases: list[tuple[object, int]] = [(None, 0), (7, 7), ("bye", 1)]
    for code, expected in cases:
        child = harness.spawn(
            SpawnRequest(payload=cloudpickle.dumps((sys.exit, (code,), {})), stderr=str(err))
        )
        exit = child.wait(10)
        # stderr is tee'd: the exit carries its tail, and the file gets every byte.
        said = b"bye\n" if code == "bye" else b""
        assert exit == ProcessExit(child.pid, expected, stderr=said), code
    assert err.read_text() == "bye\n"


def test_unpicklable_payloads(harness: Harness) -> None:
    lock = threading.Lock()
    with pytest.raises(TypeError):
        cloudpickle.dumps((lambda: lock, (), {}))  # fails early, in the caller

    # Importable here, not in the child: fails while unpickling there.
    module = types.ModuleType("nannytree_vanishing_module")

    def vanishing() -> None:
        pass

    vanishing.__module__ = module.__name__
    vanishing.__qualname__ = "vanishing"
    module.vanishing = vanishing  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        data = cloudpickle.dumps((vanishing, (), {}))
    finally:
        del sys.modules[module.__name__]
    child = harness.spawn(SpawnRequest(payload=data, name="vanishing"))
    exit = child.wait(10)
    assert exit is not None and exit.returncode == 1 and exit.error is not None
    assert exit.error.type == "ModuleNotFoundError"
    assert "nannytree_vanishing_module" in exit.error.message

    child = harness.spawn(SpawnRequest(payload=b"not a pickle", name="garbage"))
    exit = child.wait(10)
    assert exit is not None and exit.returncode == 1 and exit.error is not None


@pytest.mark.parametrize("fresh", [False, True], ids=["fork", "fresh"])
def test_sigterm_runs_finally_and_reads_as_sigterm(
    harness: Harness, tmp_path: Path, fresh: bool
) -> None:
    marker = tmp_path / "finally"
    child = harness.spawn(py_request(finally_on_sigterm, str(marker), fresh_interpreter=fresh))
    assert child.wait_ready(15)
    assert child.send_signal(signal.SIGTERM)
    exit = child.wait(10)
    assert exit is not None and exit.returncode == -signal.SIGTERM and exit.error is None
    assert marker.read_text() == "stop_requested=True"


def test_sigterm_during_startup_is_not_lost(harness: Harness) -> None:
    data = payload(wait_forever)
    for _ in range(10):
        child = harness.spawn(SpawnRequest(payload=data, name="early"))
        child.send_signal(signal.SIGTERM)  # likely before the target runs
        exit = child.wait(10)
        assert exit is not None and exit.returncode == -signal.SIGTERM


def test_ready_notification(harness: Harness) -> None:
    rec = Recorder()
    child = harness.spawn(py_request(wait_forever), on_exit=rec.on_exit)
    assert child.wait_ready(10)
    assert child.ready
    child.send_signal(signal.SIGKILL)
    assert child.wait(5) is not None

    # Exits without ever being ready: wait_ready returns early, False.
    quiet = harness.spawn(SpawnRequest(payload=cloudpickle.dumps((int, (), {}))))
    started = time.monotonic()
    assert quiet.wait_ready(30) is False
    assert time.monotonic() - started < 10
    assert quiet.exit is not None

    # Outside nannytree the helpers are harmless.
    actors.child.ready()  # no control fd here: a silent no-op
    assert actors.child.stop_requested() is False


@pytest.mark.parametrize("fresh", [False, True], ids=["fork", "fresh"])
def test_python_child_env_cwd_and_reset_state(
    harness: Harness, tmp_path: Path, fresh: bool
) -> None:
    state_file = tmp_path / "state.json"
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": "/usr/bin:/bin", "NT_VAR": "value"}
    child = harness.spawn(
        py_request(
            report_state,
            str(state_file),
            env=env,
            cwd=str(work),
            argv=["prog", "--flag"],
            fresh_interpreter=fresh,
        )
    )
    assert child.wait_ready(15)
    state = json.loads(state_file.read_text())
    assert state["env"] == env  # exactly: nothing of the launcher's leaks in
    assert state["cwd"] == str(work)
    assert state["argv"] == ["prog", "--flag"]
    assert state["pgid"] == state["pid"] == child.pid
    assert state["sigpipe"] == str(signal.SIG_IGN)  # as in a fresh interpreter
    assert state["sigint"] is True
    assert state["sigchld"] == str(signal.SIG_DFL)
    assert state["mask"] == []
    fds = open_fds(child.pid)
    assert sorted(fds)[:3] == [0, 1, 2] and len(fds) == 4, fds
    control = max(fds)
    assert fds[control].startswith("pipe:")
    child.send_signal(signal.SIGKILL)
    assert child.wait(5) is not None


def test_concurrent_spawns(harness: Harness) -> None:
    data = payload(wait_forever)
    barrier = threading.Barrier(8)
    results: list[ChildProcess] = []
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            barrier.wait(10)
            for i in range(5):
                if (index + i) % 2:
                    request = SpawnRequest(command=["sleep", "30"], name=f"c{index}.{i}")
                else:
                    request = SpawnRequest(payload=data, name=f"p{index}.{i}")
                results.append(harness.spawn(request))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(results) == 40 and len({c.pid for c in results}) == 40
    assert {c.pid for c in harness.launcher.children()} == {c.pid for c in results}
    for child in results:
        child.send_signal(signal.SIGKILL)
    for child in results:
        exit = child.wait(10)
        assert exit is not None and exit.returncode == -signal.SIGKILL


def test_spawn_kill_cycles_leak_nothing(harness: Harness) -> None:
    launcher = harness.launcher
    data = payload(wait_forever)

    def cycle(i: int) -> None:
        if i % 2:
            request = SpawnRequest(command=["sleep", "30"], name="cmd")
        else:
            request = SpawnRequest(payload=data, name="py")
        child = harness.spawn(request)
        child.send_signal(signal.SIGKILL)
        exit = child.wait(10)
        assert exit is not None and exit.returncode == -signal.SIGKILL

    for i in range(10):
        cycle(i)
    host_fds = len(os.listdir("/proc/self/fd"))
    launcher_fds = len(os.listdir(f"/proc/{launcher.pid}/fd"))
    threads = threading.active_count()
    for i in range(200):
        cycle(i)
    assert len(os.listdir("/proc/self/fd")) == host_fds
    assert len(os.listdir(f"/proc/{launcher.pid}/fd")) == launcher_fds
    assert threading.active_count() == threads
    assert psutil.Process(launcher.pid).children() == []  # every child reaped: no zombie
    assert launcher.children() == []


def test_host_fork_child_drops_the_lifeline(harness: Harness) -> None:
    lifeline = harness.launcher._lifeline_w
    assert lifeline >= 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:
        try:
            os.fstat(lifeline)
            code = 1
        except OSError:
            code = 0
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# -- preload ---------------------------------------------------------------------


def test_preload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nt_broken_module.py").write_text("raise RuntimeError('broken at import')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    launcher = Launcher.start(preload=["json"])
    launcher.close()
    with pytest.raises(LaunchError, match="nt_broken_module"):
        Launcher.start(preload=["nt_broken_module"])
    (tmp_path / "nt_threaded_module.py").write_text(
        "import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\n"
    )
    with pytest.raises(LaunchError, match="threads"):
        Launcher.start(preload=["nt_threaded_module"])
    assert launcher_threads() == []


SLOW_SCAN = """
import os, time
from actors._launcher._orphans import OrphanScan  # preloaded into the launcher
real = OrphanScan.start
marker = os.environ["NT_SCAN_MARKER"]


def start(self):
    # Held like the scan of a very large tree, until the test lets it go.
    open(marker, "a").close()
    while not os.path.exists(marker + ".release"):
        time.sleep(0.01)
    return real(self)


OrphanScan.start = start
"""


def test_an_exit_is_reported_before_the_orphan_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The orphan scan reads the kernel's list of all our children (9 ms at 10,000):
    it runs after the exit that scheduled it has been reported, never before."""
    (tmp_path / "nt_slow_scan.py").write_text(SLOW_SCAN)
    scanning = tmp_path / "scanning"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("NT_SCAN_MARKER", str(scanning))
    launcher = Launcher.start(preload=["nt_slow_scan"])
    try:
        child = spawn_once(launcher, SpawnRequest(command=["sleep", "30"], name="sleeper"))
        assert child.send_signal(signal.SIGKILL)
        exit = child.wait(10)  # reported while the scan it scheduled is held
        assert exit is not None and exit.returncode == -signal.SIGKILL
        wait_until(scanning.exists, 10, "the scan that exit scheduled")
    finally:
        (tmp_path / "scanning.release").touch()
        launcher.close()


def _launcher_with_fd_limit(soft_limit: int, preload: list[str] | None = None) -> Launcher:
    """A launcher started under a lower soft RLIMIT_NOFILE (it inherits ours)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft_limit, hard))
    try:
        return Launcher.start(preload=preload or [])
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_child_past_the_fd_limit_is_reaped_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its fd limit the launcher watches children without a pidfd: their exit
    comes as a SIGCHLD and is reaped then, not at the next (held) orphan scan."""
    (tmp_path / "nt_slow_scan.py").write_text(SLOW_SCAN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("NT_SCAN_MARKER", str(tmp_path / "scanning"))
    launcher = _launcher_with_fd_limit(262, preload=["nt_slow_scan"])  # room for 3 pidfds
    try:
        children = [
            spawn_once(launcher, SpawnRequest(command=["sleep", "30"], name=f"s{i}"))
            for i in range(6)
        ]
        last = children[-1]  # started past the room: no pidfd
        assert last.send_signal(signal.SIGKILL)
        exit = last.wait(10)
        assert exit is not None and exit.returncode == -signal.SIGKILL
    finally:
        (tmp_path / "scanning.release").touch()
        launcher.close()


def _pidfds(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[pidfd]"
    return count


def test_the_fd_room_is_counted_and_a_freed_pidfd_goes_to_a_child_without_one() -> None:
    """Command children hold one fd each: the room is the fd limit, not half of it
    (a child past it costs a walk of all children at every SIGCHLD), and a pidfd
    freed by an exit goes to a child that had to do without."""
    launcher = _launcher_with_fd_limit(256 + 40)  # 40 fds of room
    try:
        children = [
            # No tee (it would hold an fd more per child): the room is the pidfds'.
            spawn_once(launcher, SpawnRequest(command=["sleep", "30"], name=f"s{i}", tee=()))
            for i in range(50)
        ]
        watched = _pidfds(launcher.pid)
        assert 30 <= watched < 40  # (the old rule, half the room: 20)
        for child in children[:10]:
            assert child.send_signal(signal.SIGKILL)
            assert child.wait(10) is not None
        wait_until(lambda: _pidfds(launcher.pid) == watched, 10, "freed pidfds handed on")
        last = children[-1]  # started without a pidfd; has one now, or gets a SIGCHLD
        assert last.send_signal(signal.SIGKILL)
        exit = last.wait(10)
        assert exit is not None and exit.returncode == -signal.SIGKILL
    finally:
        launcher.close()


# -- teardown and deaths -----------------------------------------------------------


def test_close_kills_everything(tmp_path: Path) -> None:
    launcher = Launcher.start()
    rec = Recorder()
    children = [
        spawn_once(launcher, SpawnRequest(command=["sleep", "60"]), on_exit=rec.on_exit),
        spawn_once(
            launcher, SpawnRequest(command=["sh", "-c", "sleep 60 & wait"]), on_exit=rec.on_exit
        ),
        spawn_once(
            launcher, py_request(fork_escapee, str(tmp_path / "escapee")), on_exit=rec.on_exit
        ),
        spawn_once(launcher, py_request(wait_forever, fresh_interpreter=True), on_exit=rec.on_exit),
    ]
    escapee = int(read_when_written(tmp_path / "escapee"))
    assert children[3].wait_ready(15)
    pids = descendants(launcher.pid) | {c.pid for c in children} | {launcher.pid, escapee}
    launcher.close()
    launcher.close()  # idempotent
    assert not launcher.alive
    all_gone(pids, 2.0)
    assert launcher_threads() == []
    assert len(rec.exits) == 4 and all(e.launcher_died for e in rec.exits)
    with pytest.raises(LaunchError, match="closed"):
        spawn_once(launcher, SpawnRequest(command=["true"], name="late"))


def test_close_from_a_callback() -> None:
    launcher = Launcher.start()
    child = spawn_once(
        launcher,
        SpawnRequest(command=["sh", "-c", "exit 0"]),
        on_exit=lambda _exit: launcher.close(),
    )
    assert child.wait(5) is not None
    wait_until(lambda: not launcher.alive, 5, "the launcher to stop")
    wait_until(lambda: launcher_threads() == [], 5, "the launcher threads to end")
    all_gone({launcher.pid}, 2.0)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_launcher_death_reports_every_child(
    subreaper: None, tmp_path: Path, sig: signal.Signals
) -> None:
    launcher = Launcher.start()
    rec = Recorder()
    children = [
        spawn_once(launcher, SpawnRequest(command=["sleep", "60"]), on_exit=rec.on_exit),
        spawn_once(
            launcher, SpawnRequest(command=["sh", "-c", "sleep 60 & wait"]), on_exit=rec.on_exit
        ),
        spawn_once(launcher, py_request(wait_forever), on_exit=rec.on_exit),
    ]
    assert children[2].wait_ready(10)
    wait_until(lambda: len(descendants(children[1].pid)) == 1, 5, "the background sleep")
    pids = descendants(launcher.pid) | {c.pid for c in children}
    os.kill(launcher.pid, sig)
    for child in children:
        exit = child.wait(5)
        assert exit == ProcessExit(child.pid, -signal.SIGKILL, launcher_died=True)
    assert len(rec.exits) == 3
    assert not launcher.alive
    with pytest.raises(LaunchError):
        spawn_once(launcher, SpawnRequest(command=["true"], name="after"))
    all_gone(pids, 2.0, reap=True)
    launcher.close()
    wait_until(lambda: launcher_threads() == [], 5, "the launcher threads to end")


HOST_SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys, threading
    import cloudpickle
    from actors._process._client import LauncherClient as Launcher
    from actors._process._port import SpawnRequest

    def spawn_once(launcher, request):
        template = launcher.define(request)
        try:
            return launcher.spawn(template, name=request.name)
        finally:
            launcher.forget(template)

    def escapee_parent(pidfile):
        if os.fork() == 0:
            os.setsid()
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
            while True:
                signal.pause()
        while True:
            signal.pause()

    tmp = sys.argv[1]
    launcher = Launcher.start()
    sh = f"setsid sleep 60 & echo $! > {tmp}/sh.tmp; mv {tmp}/sh.tmp {tmp}/sh; wait"
    pids = [
        launcher.pid,
        spawn_once(launcher, SpawnRequest(command=["sleep", "60"])).pid,
        spawn_once(launcher, SpawnRequest(command=["sh", "-c", sh])).pid,
        spawn_once(launcher, SpawnRequest(
            payload=cloudpickle.dumps((escapee_parent, (tmp + "/py",), {})))).pid,
        spawn_once(launcher, SpawnRequest(
            payload=cloudpickle.dumps((escapee_parent, (tmp + "/fresh",), {})),
            fresh_interpreter=True)).pid,
    ]
    print(json.dumps(pids), flush=True)
    threading.Event().wait()
    """
)


def test_host_sigkill_takes_the_tree_down(subreaper: None, tmp_path: Path) -> None:
    script = tmp_path / "host.py"
    script.write_text(HOST_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    host = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, env=env
    )
    try:
        assert host.stdout is not None
        ready, _, _ = select.select([host.stdout], [], [], 20)
        assert ready, "the host script did not report its children"
        reported = json.loads(host.stdout.readline())
        escapees = {int(read_when_written(tmp_path / name, 20)) for name in ("sh", "py", "fresh")}
        pids = set(reported) | escapees | descendants(reported[0])
        assert len(pids) >= 8
        host.kill()
        host.wait(5)
        all_gone(pids, 2.0, reap=True)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(5)
        if host.stdout is not None:
            host.stdout.close()
