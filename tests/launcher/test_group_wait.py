"""A restart waits until its predecessor's process group is empty (docs/launcher.md,
"A restart waits for the old group").

The race: a child is SIGKILLed, the launcher SIGKILLs its group, and its successor
starts at once, while a grandchild of the old one is still exiting and still holds
the port the successor binds (EADDRINUSE; nginx then waits 500 ms before it tries
again). The grandchild here holds much touched memory, which a SIGKILLed process
frees before it closes its files: its exit takes milliseconds. Every round of every
loop must bind on its first try: for a restart the host decides, for one the
launcher makes ahead (from a template and from a warm standby), after a stop, and
for a real nginx.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from actors import Tree
from actors._launcher._group_wait import GROUP_WAIT
from supervision import ChildSpec, EventKind, Strategy, SupervisorSpec
from tests.support import wait_event, wait_until
from tests.support.nginx import nginx_command, nginx_conf
from tests.targets.port_holders import bind_counting, grandchild_holds_port, linger_in_group_of

ROUNDS = 30
MEGABYTES = 512  # the grandchild's memory: ~14 ms to free here, past a restart


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _free_ports(n: int) -> list[int]:
    """n distinct free ports: each held until all are chosen (a port closed at once
    may be handed out again by the next bind to port 0)."""
    held = []
    try:
        for _ in range(n):
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def _lines(log: Path) -> list[tuple[int, int, int]]:
    """Each incarnation's "PID GRANDCHILD TRIES", once its grandchild holds the port."""
    if not log.exists():
        return []
    return [
        (int(a), int(b), int(c))
        for a, b, c in (line.split() for line in log.read_text().splitlines())
    ]


def _holder(port: int, log: Path, **fields: Any) -> ChildSpec:
    return ChildSpec(
        id="w", target=grandchild_holds_port, args=(port, MEGABYTES, str(log)), **fields
    )


def _handle(tree: Tree, pid: int) -> Any:
    launcher = tree.context.spawner
    assert launcher is not None
    return next(c for c in launcher.children() if c.pid == pid)  # type: ignore[attr-defined]


def _waits(exits: list[Any]) -> str:
    ms = sorted(e.group_wait * 1000 for e in exits)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    return f"group wait: median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms"


def _kill_rounds(tree: Tree, log: Path, *, ahead: bool) -> list[Any]:
    """SIGKILL the child (not its group: as `kill -9` of a server's master) ROUNDS
    times; each successor must bind on its first try. The exits, as reported."""
    exits = []
    for n in range(1, ROUNDS + 1):
        wait_until(lambda n=n: len(_lines(log)) >= n, what=f"incarnation {n} holding the port")
        pid = _lines(log)[-1][0]
        handle = _handle(tree, pid)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda h=handle: h.exit is not None, what=f"the exit of pid {pid}")
        # Which path restarted it: the launcher's own (a successor announced with the
        # exit), or the host's decision after it.
        assert (handle.successor is not None) is ahead
        exits.append(handle.exit)
    wait_until(lambda: len(_lines(log)) > ROUNDS, what="the last incarnation")
    return exits


def _assert_first_try(log: Path, exits: list[Any]) -> None:
    tries = [t for _, _, t in _lines(log)]
    retried = sum(t > 1 for t in tries)
    assert retried == 0, (
        f"{retried} of {len(tries)} incarnations found the port still held "
        f"(tries per incarnation: {tries})"
    )
    assert all(getattr(e, "lingering", 0) == 0 for e in exits)
    print(_waits(exits))


@pytest.mark.parametrize("warm", [False, True], ids=["template", "standby"])
def test_an_armed_restart_binds_the_port_its_predecessors_grandchild_held(
    tmp_path: Path, warm: bool
) -> None:
    port, log = _free_port(), tmp_path / "binds"
    spec = SupervisorSpec(
        id="root", intensity=ROUNDS + 5, children=[_holder(port, log, warm_start=warm)]
    )
    with Tree.start(spec) as tree:
        tree.nanny.read_output("w").get()  # the arm is on the launcher's socket by now
        exits = _kill_rounds(tree, log, ahead=True)
    _assert_first_try(log, exits)


def test_a_restart_the_host_decides_binds_the_port_its_predecessors_grandchild_held(
    tmp_path: Path,
) -> None:
    port, log = _free_port(), tmp_path / "binds"
    # one_for_all: no restart is decided ahead (siblings would be stopped first).
    spec = SupervisorSpec(
        id="root",
        strategy=Strategy.ONE_FOR_ALL,
        intensity=ROUNDS + 5,
        children=[_holder(port, log)],
    )
    with Tree.start(spec) as tree:
        exits = _kill_rounds(tree, log, ahead=False)
    _assert_first_try(log, exits)


def test_many_exits_held_at_once_each_wait_for_their_own_group(tmp_path: Path) -> None:
    """Forty children killed together: forty exits held at once, each released when
    its own group empties (each reap looks only at its group's exits)."""
    n, rounds = 40, 3
    ports = _free_ports(n)
    logs = [tmp_path / f"binds{i}" for i in range(n)]
    spec = SupervisorSpec(
        id="root",
        intensity=n * rounds + 5,
        children=[
            ChildSpec(id=f"w{i}", target=grandchild_holds_port, args=(port, 64, str(log)))
            for i, (port, log) in enumerate(zip(ports, logs, strict=True))
        ],
    )
    exits = []
    with Tree.start(spec) as tree:
        for r in range(1, rounds + 1):
            for log in logs:
                wait_until(lambda log=log, r=r: len(_lines(log)) >= r, what=f"{log.name} #{r}")
            pids = [_lines(log)[-1][0] for log in logs]
            handles = [_handle(tree, pid) for pid in pids]
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            for h in handles:
                wait_until(lambda h=h: h.exit is not None, what=f"the exit of {h.pid}")
            exits += [h.exit for h in handles]
        for log in logs:
            wait_until(lambda log=log: len(_lines(log)) > rounds, what=f"{log.name} last")
    tries = [t for log in logs for _, _, t in _lines(log)]
    assert tries == [1] * len(tries), tries
    assert all(e.lingering == 0 for e in exits)
    print(_waits(exits))


def test_a_stop_returns_once_the_port_is_free(tmp_path: Path) -> None:
    """terminate_child answers with the exit's report, which waits for the group: the
    port is free when it returns (here the test binds it itself)."""
    port, log = _free_port(), tmp_path / "binds"
    spec = SupervisorSpec(id="root", intensity=ROUNDS + 5, children=[_holder(port, log)])
    refused = 0
    with Tree.start(spec) as tree:
        for n in range(1, 11):
            wait_until(lambda n=n: len(_lines(log)) >= n, what=f"incarnation {n}")
            tree.nanny.terminate_child("w").get()
            sock, tries = bind_counting(port)
            sock.close()
            refused += tries > 1
            tree.nanny.restart_child("w").get()
        wait_until(lambda: len(_lines(log)) > 10, what="the last incarnation")
    assert refused == 0, f"the port was still held after {refused} of 10 stops"


def test_an_exit_with_an_empty_group_is_reported_without_waiting(tmp_path: Path) -> None:
    port, log = _free_port(), tmp_path / "binds"
    spec = SupervisorSpec(
        id="root", intensity=5, children=[ChildSpec(id="s", command=["sleep", "1000"])]
    )
    with Tree.start(spec) as tree:
        pid = tree.nanny.which_child("s").get().pid
        handle = _handle(tree, pid)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: handle.exit is not None, what="the exit")
    assert handle.exit.lingering == 0 and handle.exit.group_wait < 0.001
    del port, log


def test_a_group_that_does_not_empty_is_reported_after_the_bound_and_says_so(
    tmp_path: Path,
) -> None:
    """A zombie of another child, in the exited child's group, keeps the group from
    emptying: the exit is reported after GROUP_WAIT anyway, and an event says why."""
    pid_file, ready = tmp_path / "pid", tmp_path / "ready"
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(id="c", command=["sleep", "1000"], restart="temporary"),
            ChildSpec(id="a", target=linger_in_group_of, args=(str(pid_file), str(ready))),
        ],
    )
    with Tree.start(spec) as tree:
        pid = tree.nanny.which_child("c").get().pid
        pid_file.write_text(str(pid))
        wait_until(ready.exists, what="a process of 'a' in the group of 'c'")
        handle = _handle(tree, pid)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: handle.exit is not None, what="the exit")
        note = wait_event(tree.ref, EventKind.CHILD_NOTE, "c")
    assert handle.exit.lingering == 1
    assert GROUP_WAIT <= handle.exit.group_wait < GROUP_WAIT + 0.5
    assert f"pid {pid} exited" in note.detail and "still held processes" in note.detail


# -- nginx ---------------------------------------------------------------------------------


def nginx_spec(folder: Path, port: int) -> ChildSpec:
    """nginx in the foreground on 127.0.0.1:`port`, serving `folder`/www/index.html."""
    (folder / "www").mkdir(exist_ok=True)
    (folder / "www" / "index.html").write_text("up\n")
    nginx_conf(folder, port, workers=2, root=folder / "www")
    return ChildSpec(id="nginx", command=nginx_command(folder))


def serves(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=0.2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def kill_master_and_time(tree: Tree, port: int) -> float:
    """kill -9 nginx's master; seconds until a new one serves."""
    master = tree.nanny.which_child("nginx").get().pid
    t0 = time.monotonic()
    os.kill(master, signal.SIGKILL)
    deadline = t0 + 10
    while True:
        now = tree.nanny.which_child("nginx").get().pid
        if now not in (None, master) and serves(port):
            return time.monotonic() - t0
        if time.monotonic() > deadline:
            raise TimeoutError("nginx did not serve again within 10 s")
        time.sleep(0.001)


@pytest.mark.skipif(
    shutil.which("nginx") is None, reason="nginx is not installed (apt install nginx-light)"
)
def test_nginx_killed_9_twenty_times_serves_again_without_its_bind_retry(tmp_path: Path) -> None:
    port = _free_port()
    spec = SupervisorSpec(id="root", intensity=30, children=[nginx_spec(tmp_path, port)])
    with Tree.start(spec) as tree:
        wait_until(lambda: serves(port), what="nginx serving")
        took = [kill_master_and_time(tree, port) for _ in range(20)]
        exited = [
            e
            for e in tree.events()
            if e.context is EventKind.CHILD_EXITED and e.offender == "nginx"
        ]
    retried = (tmp_path / "error.log").read_text().count("Address already in use")
    assert retried == 0, f"nginx found its port held {retried} times; restarts took {took}"
    assert len(exited) == 20
    assert max(took) < 0.4, took  # nginx's retry alone is 0.5 s
    ms = sorted(t * 1000 for t in took)
    print(f"nginx kill -9 -> serving: median {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms")
