"""What reaches the far node, and what stays out of the terminal (actors.ray, actors._remote._ship).

- Python targets of a module that is importable on the driver only (a folder on
  its sys.path) run on a node that cannot import it: they travel by value
  (without Ray: tests/remote/test_far_side.py).
- `RayEngine(log_file=...)` keeps Ray's lines out of the driver's output, and its
  health-check settings reach a Ray it starts itself.
- `RayEngine.node_name` names nodes for people.

The first tests start no cluster (one starts a Ray of its own, in a subprocess);
the module's mini-cluster (a head and one worker node started from another
directory) starts with the first test that asks for it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pykka
import pytest

from tests.support import import_ray

ray = import_ray()
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from actors import Tree  # noqa: E402
from actors.ray import RayEngine  # noqa: E402
from actors.testing import wait_gone  # noqa: E402
from supervision import ChildSpec, Placement, SupervisorSpec  # noqa: E402
from tests.remote.test_far_side import beside_the_driver  # noqa: E402
from tests.support import wait_until  # noqa: E402

NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
HERE = Path(__file__).resolve().parents[2]

# -- a Ray of its own, no cluster --------------------------------------------------------


DRIVER = """
import json, sys, time
import ray
from actors import Tree
from actors.ray import RayEngine
from supervision import ChildSpec, Placement, SupervisorSpec
engine = RayEngine(
    log_file=sys.argv[1],
    health_check_period=0.5,
    health_check_timeout=1.5,
    health_check_failure_threshold=2,
    init_kwargs={"num_cpus": 1, "include_dashboard": False, "_temp_dir": sys.argv[2]},
)
spec = SupervisorSpec(id="root", children=[SupervisorSpec(
    id="sub", placement=Placement(), children=[ChildSpec(id="w", command=["sleep", "300"])])])
tree = Tree.start(spec, engine=engine)
config = ray._private.worker._global_node._config
print(json.dumps({k: v for k, v in config.items() if k.startswith("health_check")}))

@ray.remote(num_cpus=0)
def speak():
    print("a line a worker printed")
ray.get(speak.remote())
print(engine.node_name(tree.nanny.which_child("sub").get().node) == ray.nodes()[0]["NodeName"])
sys.stdout.flush()
deadline = time.monotonic() + 30
while "a line a worker printed" not in open(sys.argv[1]).read() and time.monotonic() < deadline:
    time.sleep(0.1)
tree.stop(timeout=60)
ray.shutdown()
"""


@pytest.mark.ray
def test_ray_output_goes_to_the_log_file_and_the_health_check_to_ray(tmp_path: Path) -> None:
    log = tmp_path / "ray.log"
    temp = tempfile.mkdtemp(prefix="nts", dir="/tmp")  # short: AF_UNIX paths <= 107 bytes
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(log), temp],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=HERE,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert json.loads(lines[0]) == {
        "health_check_period_ms": 500,
        "health_check_timeout_ms": 1500,
        "health_check_failure_threshold": 2,
    }
    assert lines[1:] == ["True"]  # nothing else on stdout: no worker output, no Ray line
    assert "ray" not in proc.stderr.lower(), proc.stderr[-2000:]
    written = log.read_text()
    assert "Started a local Ray instance" in written
    assert "a line a worker printed" in written


def test_health_check_settings_are_for_a_ray_the_engine_starts() -> None:
    with pytest.raises(ValueError, match="ray start --head --system-config"):
        RayEngine("auto", health_check_period=1.0)
    with pytest.raises(ValueError, match="lease_timeout must be > 0"):
        RayEngine(lease_timeout=0)
    engine = RayEngine(health_check_timeout=2.0, health_check_failure_threshold=3)
    assert engine.health_check == {
        "health_check_timeout": 2.0,
        "health_check_failure_threshold": 3,
    }


# -- on a mini-cluster -------------------------------------------------------------------


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from beside_the_driver(tmp_path / "beside", monkeypatch)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, Any]]:
    tmp = tempfile.mkdtemp(prefix="nts", dir="/tmp")  # short: AF_UNIX paths <= 107 bytes
    os.environ["RAY_TMPDIR"] = tmp
    os.makedirs(os.path.join(tmp, "ray"), exist_ok=True)
    cluster = Cluster(initialize_head=True, head_node_args={"include_dashboard": False, **NODE})
    elsewhere = tempfile.mkdtemp(prefix="ntw", dir="/tmp")
    pids: set[int] = set()
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        here = os.getcwd()
        os.chdir(elsewhere)  # the worker node starts from another directory
        try:
            node = cluster.add_node(resources={"far": 1}, **NODE)
        finally:
            os.chdir(here)
        cluster.wait_for_nodes()
        yield cluster, node
        for each in [cluster.head_node, *cluster.worker_nodes]:
            pids.update(p.process.pid for ps in each.all_processes.values() for p in ps)
    finally:
        ray.shutdown()
        cluster.shutdown()
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Overrides conftest's: the cluster's processes stay for the module."""
    yield
    actors = pykka.ActorRegistry.get_all()
    if actors:
        pykka.ActorRegistry.stop_all()
        pytest.fail(f"test left actors running: {actors}")


@pytest.mark.ray
def test_a_target_beside_the_driver_runs_on_a_node_that_cannot_import_it(
    cluster: tuple[Any, Any], shipped: Any, tmp_path: Path
) -> None:
    _, far = cluster

    @ray.remote(num_cpus=0)
    def importable(name: str) -> str:
        try:
            importlib.import_module(name)
        except ImportError as e:
            return str(e)
        return "importable"

    there = NodeAffinitySchedulingStrategy(far.node_id, soft=False)
    answer = ray.get(importable.options(scheduling_strategy=there).remote(shipped.__name__))
    assert answer == f"No module named {shipped.__name__!r}"  # the node cannot import it
    out = tmp_path / "ran"
    spec = SupervisorSpec(
        id="root",
        children=[
            SupervisorSpec(
                id="sub",
                placement=Placement(node=far.node_id, policy="pinned"),
                children=[ChildSpec(id="job", target=shipped.main, args=(str(out), "shipped"))],
            )
        ],
    )
    tree = Tree.start(spec, engine=RayEngine(lease_timeout=None))
    try:
        wait_until(lambda: out.exists() and out.read_text().count(" ") >= 2, 60, "the target ran")
        word, doubled, _ = out.read_text().split(" ", 2)
        assert (word, doubled) == ("shipped", "42")
        pid = tree.nanny.which_child("sub").get().pid
    finally:
        tree.stop(timeout=60)
    assert wait_gone([pid], timeout=30) == []


@pytest.mark.ray
def test_node_name_is_rays_node_name(cluster: tuple[Any, Any]) -> None:
    _, far = cluster
    engine = RayEngine(lease_timeout=None)
    listed = {n["NodeID"]: n["NodeName"] for n in ray.nodes()}
    # Every node of a mini-cluster has the same name (its IP): the id tells them apart.
    assert engine.node_name(far.node_id) == f"{listed[far.node_id]}#{far.node_id[:8]}"
    assert engine.node_name("f" * 56) == "f" * 56  # never listed: its id
