"""Process hygiene on real processes: no orphans, no leaks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from actors.testing import wait_gone
from supervision import ChildSpec, EventKind, SupervisorSpec
from tests.support import children_by_id, event_log, wait_event, wait_until
from tests.targets import children

ROOT = Path(__file__).resolve().parents[2]


def _grandchildren(path: Path) -> list[int]:
    wait_until(lambda: path.exists() and path.read_text(), what="grandchild pids written")
    return [int(p) for p in path.read_text().split()]


def test_grandchildren_die_with_a_crashed_child_even_outside_its_group(tree, tmp_path):
    pids = tmp_path / "pids"
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="parent",
                    target=children.spawn_grandchildren,
                    args=(str(pids),),
                    ready="notify",
                    restart="temporary",
                )
            ],
        )
    )
    grandchildren = _grandchildren(pids)
    os.kill(children_by_id(ref)["parent"].pid, signal.SIGKILL)
    wait_event(ref, EventKind.CHILD_EXITED, "parent")
    assert wait_gone(grandchildren, timeout=2.0) == []


def test_grandchildren_die_when_their_parent_is_stopped(tree, tmp_path):
    pids = tmp_path / "pids"
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="parent",
                    target=children.spawn_grandchildren,
                    args=(str(pids),),
                    ready="notify",
                )
            ],
        )
    )
    grandchildren = _grandchildren(pids)
    ref.proxy().terminate_child("parent").get()
    assert wait_gone(grandchildren, timeout=2.0) == []


HOST = textwrap.dedent(
    """
    import sys
    from actors import NannyActor
    from supervision import ChildSpec, SupervisorSpec
    from tests.targets import children

    ref = NannyActor.start(SupervisorSpec(id="root", children=[
        ChildSpec(id="cmd", command=["sleep", "300"]),
        ChildSpec(id="shell", command=["sh", "-c", "sleep 301 & sleep 302"]),
        ChildSpec(id="py", target=children.sleep_forever),
        ChildSpec(id="family", target=children.spawn_grandchildren, args=(sys.argv[1],),
                  ready="notify"),
    ]))
    print(" ".join(str(c.pid) for c in ref.proxy().which_children().get()), flush=True)
    children.sleep_forever()
    """
)


def test_sigkill_of_the_host_leaves_no_process_within_a_second(tmp_path):
    pids_file = tmp_path / "pids"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(pids_file)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = host.stdout.readline()
        assert line, "the host printed no pids"
        victims = [int(p) for p in line.split()] + _grandchildren(pids_file)
        launcher = [p.pid for p in psutil.Process(host.pid).children()]
        descendants = [p.pid for p in psutil.Process(host.pid).children(recursive=True)]
        assert set(victims) <= set(descendants)
        host.kill()
        host.wait(10)
        assert wait_gone(sorted(set(victims + launcher + descendants)), timeout=1.0) == []
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)
        host.stdout.close()


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _zombies() -> int:
    return sum(1 for p in psutil.Process().children(recursive=True) if p.status() == "zombie")


@pytest.mark.soak
def test_two_thousand_restarts_leak_no_fd_thread_or_zombie(tree, monkeypatch):
    import threading

    from actors._runtime import _pooled as _dispatch

    monkeypatch.setattr(_dispatch, "IDLE_RETIRE", 0.2)

    def own_threads() -> int:
        # The workers' shared pool grows and shrinks by design; the tree's one timer
        # thread starts on first use (here the final stop's timeout).
        shared = ("nannytree-worker", "nannytree-timer")
        return sum(1 for t in threading.enumerate() if not t.name.startswith(shared))

    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=1_000_000,
            period=1.0,
            children=[ChildSpec(id="crashy", command=["sh", "-c", "exit 1"])],
        )
    )
    log = event_log(ref)

    def started(n: int) -> None:
        log.wait_for(
            lambda e: e.context is EventKind.CHILD_STARTED and (e.incarnation or 0) >= n, 60
        )

    started(100)  # warm up: caches, lazily created threads
    fds, threads = _fds(), own_threads()
    started(2100)
    ref.proxy().terminate_child("crashy").get()
    assert _fds() <= fds + 2
    assert own_threads() <= threads
    assert sum(1 for t in threading.enumerate() if t.name == "nannytree-timer") <= 1
    wait_until(
        lambda: _dispatch.pool_threads() <= _dispatch.KEEP, 10, "the pool's extra threads retired"
    )
    # A child's exit is reaped at once; a stray (an orphan, a standby) within the
    # launcher's next coalesced scan: none is left for longer.
    wait_until(lambda: _zombies() == 0, 2.0, "no zombie left")


FORGETFUL = textwrap.dedent(
    """
    import sys
    from actors import NannyActor
    from supervision import ChildSpec, SupervisorSpec
    from tests.targets import children

    ref = NannyActor.start(SupervisorSpec(id="root", children=[
        ChildSpec(id="cmd", command=["sleep", "300"]),
        ChildSpec(id="py", target=children.record_stop, args=(sys.argv[1], "py"),
                  ready="notify"),
    ]))
    print(" ".join(str(c.pid) for c in ref.proxy().which_children().get()), flush=True)
    # ... and the script ends without ref.stop()
    """
)


def test_a_script_that_forgets_to_stop_its_tree_exits_and_stops_it_politely(tmp_path):
    stops = tmp_path / "stops"
    host = subprocess.run(
        [sys.executable, "-c", FORGETFUL, str(stops)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert host.returncode == 0, host.stderr
    pids = [int(p) for p in host.stdout.split()]
    assert wait_gone(pids, timeout=2.0) == []
    assert stops.read_text() == "py\n"  # stopped with SIGTERM at exit: its finally ran
