"""Tier 1: remote subtrees on a one-node Ray (ray.init(num_cpus=2)); one Ray per module.

Every wait is a bounded poll; no timing is asserted. Orphans are checked by pid:
a remote tree's launcher double-forks out of the test's process tree, so the
usual descendant walk cannot see it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pykka
import pytest

from tests.support import import_ray

ray = import_ray()

from actors import Tree  # noqa: E402
from actors.ray import RayEngine  # noqa: E402
from actors.testing import exit_with, ignore_sigterm, wait_gone  # noqa: E402
from supervision import (  # noqa: E402
    ChildNotFound,
    ChildSpec,
    ExitKind,
    Placement,
    Restart,
    SupervisorSpec,
    SupervisorStartError,
)
from tests.support import wait_until  # noqa: E402

pytestmark = pytest.mark.ray
SLEEP = ["sleep", "300"]


@pytest.fixture(scope="module")
def ray_session() -> Iterator[str]:
    tmp = tempfile.mkdtemp(prefix="ntr", dir="/tmp")  # short: AF_UNIX paths <= 107 bytes
    os.environ["RAY_TMPDIR"] = tmp
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, log_to_driver=False)
    ray_pids = {p.pid for p in psutil.Process().children(recursive=True)}
    try:
        yield tmp
    finally:
        ray.shutdown()
        for pid in ray_pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Overrides conftest's: Ray's own processes stay for the module; pids are checked
    per test. Actors must not be left running."""
    yield
    actors = pykka.ActorRegistry.get_all()
    if actors:
        pykka.ActorRegistry.stop_all()
        pytest.fail(f"test left actors running: {actors}")


@pytest.fixture
def engine(ray_session: str) -> RayEngine:
    return RayEngine(lease_timeout=None)


@pytest.fixture
def trees() -> Iterator[list[Tree]]:
    started: list[Tree] = []
    yield started
    for tree in started:
        tree.stop(timeout=30)


def remote(**kw: Any) -> SupervisorSpec:
    return SupervisorSpec(
        id="ingest",
        placement=kw.pop("placement", Placement()),
        children=kw.pop(
            "children",
            [ChildSpec(id="reader", command=SLEEP), ChildSpec(id="parser", command=SLEEP)],
        ),
        **kw,
    )


def root(*children: Any, intensity: int = 5) -> SupervisorSpec:
    return SupervisorSpec(id="root", intensity=intensity, children=children)


def info(tree: Tree, child: str = "ingest") -> Any:
    return tree.nanny.which_child(child).get()


def remote_processes(tree: Tree) -> list[int]:
    """The remote host, its launcher and its children: every pid of the remote subtree."""
    proxy = tree.nanny.child_nanny("ingest").get().proxy()
    children = [c.pid for c in proxy.which_children().get() if c.pid is not None]
    launcher = psutil.Process(children[0]).ppid()
    return [info(tree).pid, launcher, *children]


def test_a_remote_subtree_runs_in_a_ray_actor(engine: RayEngine, trees: list[Tree]) -> None:
    tree = Tree.start(root(ChildSpec(id="web", command=SLEEP), remote()), engine=engine)
    trees.append(tree)
    child = info(tree)
    assert child.state == "running" and child.node == engine.nodes()[0].id
    assert child.pid not in (None, os.getpid())
    proxy = tree.nanny.child_nanny("ingest").get().proxy()
    assert [c.id for c in proxy.which_children().get()] == ["parser", "reader"]
    started = [e.offender for e in proxy.events().get() if e.context.value == "child_started"]
    assert started == ["reader", "parser"]  # the remote tree's own log, in start order
    wait_until(  # and the parent's log has them too, under the subtree's path
        lambda: (
            [
                e.offender
                for e in tree.events()
                if e.supervisor == "root/ingest" and e.context.value == "child_started"
            ]
            == ["reader", "parser"]
        ),
        30,
    )
    with pytest.raises(ChildNotFound):  # errors cross as themselves
        proxy.terminate_child("nope").get()
    proxy.terminate_child("parser").get()
    assert proxy.which_child("parser").get().state == "stopped"
    paths = [n.path for n in tree.nanny.which_tree().get()[1].children]
    assert paths == ["root/ingest/reader", "root/ingest/parser"]


@pytest.mark.parametrize("how", ["sigkill", "ray.kill"])
def test_a_dead_remote_host_is_a_remote_crash_and_leaves_nothing(
    engine: RayEngine, trees: list[Tree], how: str
) -> None:
    tree = Tree.start(root(remote()), engine=engine)
    trees.append(tree)
    pids = remote_processes(tree)
    if how == "sigkill":
        os.kill(pids[0], signal.SIGKILL)
    else:
        ref = tree.nanny.child_nanny("ingest").get()  # the RemoteChild holds the Ray handle
        ray.kill(ref.proxy().handle().get().actor, no_restart=True)
    wait_until(lambda: info(tree).restarts == 1 and info(tree).state == "running", 60)
    assert info(tree).last_exit.kind is ExitKind.REMOTE_CRASH
    assert wait_gone(pids, timeout=30) == []


def test_a_frozen_remote_supervisor_is_found_by_the_liveness_check(
    ray_session: str, trees: list[Tree]
) -> None:
    """SIGSTOP: Ray sees a live process on a live node; only the opt-in liveness check
    finds that the remote supervisor no longer answers. It is killed and restarted."""
    engine = RayEngine(lease_timeout=None, liveness_timeout=1.0)
    tree = Tree.start(root(remote()), engine=engine)
    trees.append(tree)
    pids = remote_processes(tree)
    os.kill(pids[0], signal.SIGSTOP)
    try:
        wait_until(lambda: info(tree).incarnation == 2 and info(tree).state == "running", 60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pids[0], signal.SIGCONT)
    reason = info(tree).last_exit
    assert reason.kind is ExitKind.REMOTE_UNRESPONSIVE and "liveness" in reason.message
    assert info(tree).restarts == 1
    assert wait_gone(pids, timeout=30) == []


def test_stop_leaves_no_remote_process(engine: RayEngine) -> None:
    tree = Tree.start(root(remote()), engine=engine)
    pids = remote_processes(tree)
    tree.stop(timeout=60)
    assert wait_gone(pids, timeout=30) == []


def test_a_remote_shutdown_timeout_kills_and_the_lifeline_sweeps(engine: RayEngine) -> None:
    # The remote child waits forever for a SIGTERM it ignores; the subtree's own
    # shutdown (1 s) bounds it: the parent kills the Ray actor, the launcher sweeps.
    stubborn = remote(
        shutdown=1.0,
        children=[
            ChildSpec(id="first", command=SLEEP),
            ChildSpec(id="stubborn", target=ignore_sigterm, ready="notify", shutdown="infinity"),
        ],
    )
    tree = Tree.start(root(stubborn), engine=engine)
    pids = remote_processes(tree)
    reason = tree.stop(timeout=60)
    assert reason is not None
    assert wait_gone(pids, timeout=30) == []


@pytest.mark.parametrize(("restart", "restarted"), [("permanent", True), ("transient", False)])
def test_a_remote_give_up_is_shutdown(
    engine: RayEngine, trees: list[Tree], restart: str, restarted: bool
) -> None:
    flaky = remote(
        intensity=0,
        restart=Restart(restart),
        children=[ChildSpec(id="crash", target=exit_with, args=(3, 0.5))],
    )
    tree = Tree.start(root(ChildSpec(id="web", command=SLEEP), flaky), engine=engine)
    trees.append(tree)
    wait_until(lambda: info(tree).last_exit is not None, 60, "the remote give-up")
    assert info(tree).last_exit.kind is ExitKind.SHUTDOWN
    if restarted:
        wait_until(lambda: info(tree).incarnation >= 2, 60, "a restart")
    else:
        wait_until(lambda: info(tree).state == "stopped", 60, "left stopped")


def test_a_remote_start_failure_fails_the_start(engine: RayEngine) -> None:
    bad = remote(children=[ChildSpec(id="nope", command=["/nonexistent/binary"])])
    with pytest.raises(SupervisorStartError) as error:
        Tree.start(root(bad), engine=engine)
    # OTP's failed_to_start_child, with the remote reason kept across the boundary
    assert error.value.child == "ingest"
    assert error.value.reason.kind is ExitKind.START_FAILURE
    assert "/nonexistent/binary" in str(error.value.reason)


DRIVER = textwrap.dedent(
    """
    import sys, time, ray
    from actors import Tree
    from actors.ray import RayEngine
    from supervision import ChildSpec, Placement, SupervisorSpec
    detach = sys.argv[2] == "detach"
    engine = RayEngine(address=sys.argv[1], lease_timeout=None, detach=detach)
    spec = SupervisorSpec(id="root", children=[SupervisorSpec(id="ingest",
        placement=Placement(), children=[ChildSpec(id="r", command=["sleep", "300"])])])
    tree = Tree.start(spec, engine=engine)
    kids = tree.nanny.child_nanny("ingest").get().proxy().which_children().get()
    print(tree.nanny.which_child("ingest").get().pid, kids[0].pid, flush=True)
    time.sleep(300)
    """
)


def _driver_run(ray_session: str, mode: str) -> list[int]:
    """Run a driver in a subprocess, SIGKILL it; the remote pids it had."""
    address = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, address, mode],
        stdout=subprocess.PIPE,
        env={**os.environ, "RAY_TMPDIR": ray_session},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        host, child = int(line[0]), int(line[1])
        launcher = psutil.Process(child).ppid()
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    return [host, launcher, child]


def test_a_killed_parent_driver_leaves_no_remote_process(ray_session: str) -> None:
    pids = _driver_run(ray_session, "detach")
    assert wait_gone(pids, timeout=30) == []


def test_the_remote_launcher_is_detached(engine: RayEngine, trees: list[Tree]) -> None:
    tree = Tree.start(root(remote()), engine=engine)
    trees.append(tree)
    host, launcher, _ = remote_processes(tree)[:3]
    worker_tree = {p.pid for p in psutil.Process(host).children(recursive=True)}
    assert launcher not in worker_tree  # not a descendant of the Ray worker: out of its reach
    assert os.getsid(launcher) != os.getsid(host)  # and in a session of its own


TREE_FILE = """
[supervisor]
id = "clitree"
[[supervisor.children]]
id = "ingest"
type = "supervisor"
placement = { policy = "spread" }
[[supervisor.children.children]]
id = "reader"
command = ["sh", "-c", "cut -d' ' -f6 /proc/$$/stat > SIDFILE; exec sleep 300"]
"""


def test_nannytree_run_takes_an_engine_address(ray_session: str, tmp_path: Any) -> None:
    sidfile = tmp_path / "sid"
    (tmp_path / "tree.toml").write_text(TREE_FILE.replace("SIDFILE", str(sidfile)))
    address = ray.get_runtime_context().gcs_address
    cli = os.path.join(os.path.dirname(sys.executable), "nannytree")
    argv = [cli, "run", str(tmp_path / "tree.toml"), "--engine", address, "--plain"]
    argv += ["--duration", "3", "--socket", str(tmp_path / "s.sock"), "--child-output", "inherit"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    started = [line for line in done.stdout.splitlines() if "clitree/ingest" in line]
    assert any("child_started" in line for line in started), done.stdout
    # It ran under a Ray worker's detached launcher: a session that is not ours.
    assert int(sidfile.read_text()) != os.getsid(0)


QUIET_DRIVER = textwrap.dedent(
    """
    import os, signal, sys, time
    from actors import Tree
    from actors.ray import RayEngine
    from supervision import ChildSpec, Placement, SupervisorSpec
    engine = RayEngine(address=sys.argv[1], lease_timeout=None)  # no log_file given
    spec = SupervisorSpec(id="root", children=[SupervisorSpec(id="ingest",
        placement=Placement(), children=[ChildSpec(id="r", command=["sleep", "300"])])])
    with Tree(spec, engine=engine) as tree:
        host = tree.nanny.which_child("ingest").get().pid
        os.kill(host, signal.SIGKILL)  # Ray reports the worker's death to the driver
        deadline = time.monotonic() + 60
        while tree.nanny.which_child("ingest").get().incarnation < 2:
            assert time.monotonic() < deadline, "no restart in 60 s"
            time.sleep(0.05)  # a subprocess of the test: it polls its own tree
        # Ray's error listener writes the death report a moment later: wait for it.
        deadline = time.monotonic() + 30
        while "worker died" not in open(engine.log_file).read().lower():
            assert time.monotonic() < deadline, "no death report in Ray's log in 30 s"
            time.sleep(0.05)
    print(engine.log_file, flush=True)
    """
)


def test_the_python_api_keeps_rays_output_in_a_log_file_by_default(
    ray_session: str,
) -> None:
    """RayEngine without log_file: Ray's lines (a worker's death report, its log lines)
    go to a file of its own, as `nannytree run`'s do, not the user's terminal."""
    address = ray.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, "-c", QUIET_DRIVER, address],
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_TMPDIR": ray_session},
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    terminal = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if "(raylet)" in line or " -- " in line or "worker died" in line.lower()
    ]
    assert terminal == [], terminal
    log_file = done.stdout.strip().splitlines()[-1]
    assert "worker died" in Path(log_file).read_text(errors="replace").lower()
