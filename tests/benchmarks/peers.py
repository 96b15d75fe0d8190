"""kill -> restart, side by side with supervisord and circus (when installed).

Every supervisor runs the same command, `sh -c 'echo x > FIFO; exec sleep N'`;
the benchmark kills it and times until the replacement has written to the FIFO.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

from actors import NannyActor
from supervision import ChildSpec, SupervisorSpec

Record = Callable[..., dict]


def _command(fifo: Path, tag: int) -> list[str]:
    return ["sh", "-c", f"echo x > {fifo}; exec sleep {tag}"]


def _read(fifo: Path) -> None:
    with open(fifo) as f:  # blocks until the child opens it for writing
        f.read()


def _find(parent: int, tag: int, deadline: float = 10.0) -> int:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for p in psutil.Process(parent).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if p.cmdline() == ["sleep", str(tag)]:
                    return p.pid
        time.sleep(0.001)
    raise TimeoutError(f"no 'sleep {tag}' under pid {parent}")


def _measure(parent: int, fifo: Path, tag: int, n: int) -> list[float]:
    samples = []
    _read(fifo)  # the first start
    for _ in range(n):
        pid = _find(parent, tag)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        _read(fifo)
        samples.append(time.monotonic() - t0)
        psutil.wait_procs([psutil.Process(parent)], timeout=0.05)  # settle
    return samples


@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="nannytree-peers-") as d:
        path = Path(d)
        os.mkfifo(path / "fifo")
        yield path


def nannytree(n: int) -> list[float]:
    with _workdir() as d:
        spec = SupervisorSpec(
            id="bench",
            intensity=10**6,
            period=1.0,
            children=[ChildSpec(id="c", command=_command(d / "fifo", 100001))],
        )
        ref = NannyActor.start(spec)
        try:
            return _measure(os.getpid(), d / "fifo", 100001, n)
        finally:
            ref.stop()


def supervisord(n: int) -> list[float] | None:
    exe = shutil.which("supervisord") or str(Path(sys.executable).with_name("supervisord"))
    if not os.path.exists(exe):
        return None
    with _workdir() as d:
        conf = d / "supervisord.conf"
        conf.write_text(
            f"[supervisord]\nnodaemon=true\nlogfile={d}/supervisord.log\n"
            f"pidfile={d}/supervisord.pid\n"
            f"[unix_http_server]\nfile={d}/supervisor.sock\n"
            "[program:bench]\n"
            f"command=sh -c 'echo x > {d}/fifo; exec sleep 100002'\n"
            "autorestart=true\nstartsecs=0\nstartretries=1000000\n"
        )
        proc = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL)
        try:
            return _measure(proc.pid, d / "fifo", 100002, n)
        finally:
            proc.terminate()
            proc.wait(30)


def circus(n: int) -> list[float] | None:
    exe = shutil.which("circusd") or str(Path(sys.executable).with_name("circusd"))
    if not os.path.exists(exe):
        return None
    with _workdir() as d:
        conf = d / "circus.ini"
        conf.write_text(
            "[circus]\ncheck_delay = 1\n"
            f"endpoint = ipc://{d}/endpoint\npubsub_endpoint = ipc://{d}/pubsub\n"
            f"stats_endpoint = ipc://{d}/stats\nstatsd = False\n"
            "[watcher:bench]\n"
            f'cmd = sh -c "echo x > {d}/fifo; exec sleep 100003"\n'
            "numprocesses = 1\nrespawn = true\n"
        )
        proc = subprocess.Popen(
            [exe, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            return _measure(proc.pid, d / "fifo", 100003, n)
        finally:
            proc.terminate()
            proc.wait(30)


def compare(n: int, record: Record, ratio: Callable[[str, float, str], Any]) -> None:
    ours = record("nannytree (command)", nannytree(n))
    for name, run in (("supervisord", supervisord), ("circus", circus)):
        samples = run(n)
        if samples is None:
            print(f"  {name:<44} not installed: pip install -e '.[bench]'")
            continue
        row = record(name, samples)
        ratio(f"{name} / nannytree (median)", row["median"] / ours["median"], "x")
