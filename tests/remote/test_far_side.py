"""The far side's pieces that need no Ray: shipping a spec (actors._remote._ship),
incarnation marks (actors._remote._marks) and the fence's time (actors._remote._host).

Real processes and real modules: a module in a folder on this process's sys.path
only, loaded in a fresh interpreter started elsewhere; marked processes started
and cleared; a far side's tree stopped by its fence.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Tree
from actors._remote import _marks, _ship
from actors._remote._host import SWEEP, RemoteHost
from actors._remote._ship import unshippable_targets
from actors.testing import wait_gone
from supervision import ChildSpec, Placement, SupervisorSpec, load_tree
from tests.support import wait_until

SHIPPED = """
import os, time
import {helper}

def main(path, word):
    with open(path, "w") as f:
        f.write(f"{{word}} {{{helper}.double(21)}} {{os.getcwd()}}")
    time.sleep(300)

def late():
    import {helper}
    return {helper}

LOCK = __import__("threading").Lock()

def locked():
    with LOCK:
        pass
"""


def beside_the_driver(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A module and the module it imports, in `folder`, on this process's sys.path only."""
    name, helper = f"nt_shipped_{uuid.uuid4().hex[:8]}", f"nt_helper_{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    (folder / f"{name}.py").write_text(SHIPPED.format(helper=helper))
    (folder / f"{helper}.py").write_text("def double(n):\n    return 2 * n\n")
    monkeypatch.syspath_prepend(str(folder))
    yield importlib.import_module(name)
    for gone in (name, helper):
        sys.modules.pop(gone, None)


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from beside_the_driver(tmp_path / "beside", monkeypatch)


def placed(*children: ChildSpec) -> SupervisorSpec:
    return SupervisorSpec(
        id="root",
        children=[SupervisorSpec(id="sub", placement=Placement(), children=list(children))],
    )


# -- no cluster --------------------------------------------------------------------------


def test_unshippable_targets_names_what_the_far_node_may_not_load(shipped: Any) -> None:
    spec = placed(
        ChildSpec(id="ok", target=shipped.main, args=("/dev/null", "x")),
        ChildSpec(id="installed", target=os.getpid),
    )
    late = placed(ChildSpec(id="late", target=shipped.late))
    locked = placed(ChildSpec(id="locked", target=shipped.locked))
    local_only = SupervisorSpec(id="root", children=[ChildSpec(id="late", target=shipped.late)])
    # The whole module is judged: a function that imports at run time warns for each target.
    assert [line.split(":")[0] for line in unshippable_targets(spec)] == ["root/sub/ok"]
    assert "inside a function" in unshippable_targets(late)[0]
    assert "cannot travel by value" in " ".join(unshippable_targets(locked))
    assert unshippable_targets(local_only) == []  # not placed: it never leaves the host


def test_unshippable_targets_reads_unimported_targets_without_running_them(
    shipped: Any, tmp_path: Path
) -> None:
    text = textwrap.dedent(
        f"""
        [supervisor]
        id = "root"
        [[supervisor.children]]
        id = "sub"
        placement = {{ policy = "prefer" }}
        [[supervisor.children.children]]
        id = "late"
        target = "{shipped.__name__}:late"
        [[supervisor.children.children]]
        id = "json"
        target = "json:dumps"
        """
    )
    spec = load_tree(text)  # no resolver: targets stay "module:function"
    problems = unshippable_targets(spec)
    assert len(problems) == 1 and problems[0].startswith("root/sub/late: target ")
    assert "imports nt_helper_" in problems[0]


def test_a_spec_pickled_for_a_node_loads_where_its_modules_are_not(shipped: Any) -> None:
    spec = placed(ChildSpec(id="ok", target=shipped.main, args=("/dev/null", "x")))
    probe = (
        "import pickle, sys; spec = pickle.loads(sys.stdin.buffer.read()); "
        "print(spec.children[0].children[0].target.__globals__['{h}'].double(4))"
    )
    helper = next(n for n in shipped.__dict__ if n.startswith("nt_helper_"))
    out = subprocess.run(
        [sys.executable, "-c", probe.format(h=helper)],
        input=_ship.dumps(spec),
        capture_output=True,
        cwd="/",
        check=False,
    )
    assert out.stdout.decode().strip() == "8", out.stderr.decode()[-1000:]
    by_reference = subprocess.run(
        [sys.executable, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
        input=__import__("cloudpickle").dumps(spec),
        capture_output=True,
        cwd="/",
        check=False,
    )
    assert b"No module named" in by_reference.stderr  # what the far node saw before


# -- incarnation marks -----------------------------------------------------------------


def _marked(mark: _marks.Mark, argv: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, _marks.MARK: mark.value()}
    return subprocess.Popen(argv, env=env, start_new_session=True)


def test_a_new_incarnation_clears_what_an_older_one_left_on_its_host() -> None:
    subtree = f"e{uuid.uuid4().hex[:6]}:root/sub"
    # The old host: a stand-in process (not a NannyHost: never killed by pid), and
    # what it left: a child that ignores SIGTERM and one of another subtree.
    old = _marks.Mark(subtree, "old", 1)
    left = _marked(old, ["sh", "-c", "trap '' TERM; sleep 300"])
    other = _marked(_marks.Mark(subtree + "x", "old", 1), ["sleep", "300"])
    mine = _marked(_marks.Mark(subtree, "new", 1), ["sleep", "300"])
    try:
        wait_until(lambda: len(_marks.marked(subtree)) == 3, 10, "sh, its sleep and mine")
        found = _marks.marked(subtree)
        assert found[left.pid] == old and found[mine.pid].token == "new"
        assert other.pid not in found
        olds = [pid for pid, mark in found.items() if mark == old]
        assert _marks.clear_older(_marks.Mark(subtree, "new", 1), timeout=5.0) == []
        assert left.wait(5) == -9  # killed, its SIGTERM trap notwithstanding
        assert wait_gone(olds, timeout=5) == []  # its own child too: marked as well
        assert other.poll() is None and mine.poll() is None  # not of an older incarnation
    finally:
        for proc in (left, other, mine):
            proc.kill()
            proc.wait()


def test_a_mark_reaches_children_that_do_not_inherit_the_environment() -> None:
    mark = _marks.Mark("e:root/sub", "t", 42)
    spec = SupervisorSpec(
        id="sub",
        children=[
            ChildSpec(id="plain", command=["true"]),
            ChildSpec(id="clean", command=["true"], inherit_env=False, env={"A": "1"}),
            SupervisorSpec(
                id="inner", children=[ChildSpec(id="c", command=["true"], inherit_env=False)]
            ),
        ],
    )
    marked = _marks.marked_spec(spec, mark)
    plain, clean, inner = marked.children
    assert plain.env == spec.children[0].env  # it inherits the host's marked environment
    assert clean.env == {"A": "1", _marks.MARK: "e:root/sub|t|42"}
    assert inner.children[0].env == {_marks.MARK: "e:root/sub|t|42"}
    assert _marks.Mark.parse(mark.value()) == mark
    assert _marks.Mark.parse("no-mark") is None


# -- the fence's time --------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_fence_has_until_the_parent_may_restart_less_the_sweep() -> None:
    clock = Clock()
    spec = SupervisorSpec(id="sub", children=[ChildSpec(id="w", command=["sleep", "300"])])
    host = RemoteHost(spec, 1, start_tree=Tree.start, lease_timeout=4.0, clock=clock)
    assert host.fence_budget() == 4.0 - SWEEP  # renewed at creation
    clock.now += 3.0  # the far side fences at three quarters of the lease
    assert host.fence_budget() == pytest.approx(1.0 - SWEEP)
    clock.now += 10.0  # thawed long after: no time left
    assert host.fence_budget() == 0.0
    no_lease = RemoteHost(spec, 1, start_tree=Tree.start, lease_timeout=None, clock=clock)
    assert no_lease.fence_budget() == 0.0  # without a lease the parent may restart at once


def test_a_fence_stops_every_child_then_says_so() -> None:
    spec = SupervisorSpec(id="sub", children=[ChildSpec(id="w", command=["sleep", "300"])])
    fenced = threading.Event()
    host = RemoteHost(
        spec,
        1,
        start_tree=Tree.start,
        lease_timeout=30.0,
        watch_parent=False,
        on_fenced=fenced.set,
        exit_fast=True,
        node_dead=lambda: True,  # the engine says our node was declared dead
    )
    host.start()
    assert host.tree is not None
    pid = host.tree.nanny.which_child("w").get().pid
    assert fenced.wait(10)
    assert host.fenced == "its node was declared dead"
    assert host.fence_complete and host.ended
    assert wait_gone([pid], timeout=10) == []
    host.renew_lease()  # a late renewal changes nothing
    assert host.fence_budget() < 30.0


def test_a_fence_past_its_time_leaves_the_children_to_the_process_exit() -> None:
    """exit_fast: no time left (a host that thaws long after), so no orderly stop: the
    engine's on_fenced ends the process and its launcher kills the rest."""
    clock = Clock()
    spec = SupervisorSpec(id="sub", children=[ChildSpec(id="w", command=["sleep", "300"])])
    fenced = threading.Event()
    host = RemoteHost(
        spec,
        1,
        start_tree=Tree.start,
        lease_timeout=2.0,
        watch_parent=False,
        clock=clock,
        on_fenced=fenced.set,
        exit_fast=True,
    )
    host.start()
    assert host.tree is not None
    tree = host.tree
    clock.now += 60.0  # the watchdog sees the lease long gone
    assert fenced.wait(10)
    assert not host.fence_complete  # not stopped: no acknowledgement
    assert tree.finished() is None
    tree.stop(timeout=30)  # what the process exit would have done


def test_a_late_renewal_is_not_counted_by_the_far_side() -> None:
    import time as _time

    clock = Clock()
    spec = SupervisorSpec(id="sub", children=[ChildSpec(id="w", command=["sleep", "300"])])
    host = RemoteHost(spec, 1, start_tree=Tree.start, lease_timeout=3.0, clock=clock)
    clock.now += 2.0
    host.renew_lease(_time.time() - 5.0)  # sent 5 s ago: the parent gave up after 1 s
    assert host.fence_budget() == pytest.approx(3.0 - SWEEP - 2.0)  # not renewed
    host.renew_lease(_time.time())  # on time
    assert host.fence_budget() == pytest.approx(3.0 - SWEEP)


PARENT_GONE = """
import os, threading
from actors import Tree
from actors._remote._host import RemoteHost
from supervision import ChildSpec, SupervisorSpec

spec = SupervisorSpec(id="sub", children=[ChildSpec(id="w", command=["sleep", "300"])])
fenced = threading.Event()
host = RemoteHost(spec, 1, start_tree=Tree.start, lease_timeout=30.0, on_fenced=fenced.set)
host.start()
print(host.tree.nanny.which_child("w").get().pid, os.getpid(), flush=True)
fenced.wait(60)
print(host.fenced, host.fence_complete, flush=True)
"""


def test_a_host_whose_parent_process_dies_fences_itself(tmp_path: Path) -> None:
    """A Ray worker whose raylet died: its parent process goes, it stays. It stops its
    children (Ray's worker would quit soon after) and says it did."""
    out = tmp_path / "out"
    start = f"[sys.executable, '-c', {PARENT_GONE!r}], stdout=open({str(out)!r}, 'w')"
    middle = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys, time\nsubprocess.Popen({start})\ntime.sleep(300)\n",
        ]
    )
    try:
        wait_until(lambda: out.exists() and out.read_text().strip() != "", 30, "the child")
        pid, host = (int(p) for p in out.read_text().split())
        middle.kill()  # the "raylet"
        middle.wait(10)
        wait_until(lambda: len(out.read_text().splitlines()) == 2, 30, "the fence")
        assert out.read_text().splitlines()[1] == "its parent process (the raylet) is gone True"
        assert wait_gone([pid, host], timeout=30) == []
    finally:
        middle.kill()
        middle.wait(10)
