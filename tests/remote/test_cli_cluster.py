"""Tier 2: `nannytree run` on a Ray mini-cluster (a head and a worker node named
"node-b", on this machine), its engine from the tree file's [engine] table, driven
from this process over its control socket while the remote subtree is killed and
restarted. One cluster, one test: Ray is heavy on a small machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psutil
import pytest

from tests.support import import_ray

ray = import_ray()
from ray.cluster_utils import Cluster  # noqa: E402

from actors.cli._control import call  # noqa: E402
from actors.testing import wait_gone  # noqa: E402
from tests.support import wait_until  # noqa: E402

pytestmark = pytest.mark.ray
NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}

DETECTED = 0.5  # s: a remote host's death is told well within this (remote_crash)

TREE = """
[engine]
address = "{address}"
lease_timeout = 6

[supervisor]
id = "ct"
intensity = 10

[[supervisor.children]]
id = "web"
command = ["sleep", "300"]

[[supervisor.children]]
id = "ingest"
placement = {{ node = "node-b", policy = "pinned" }}

[[supervisor.children.children]]
id = "reader"
command = ["sh", "-c", "echo reading; exec sleep 300"]
ready = 1  # a restart of the subtree lasts a second: the poller sees it under way
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, str]]:
    tmp = tempfile.mkdtemp(prefix="ntc", dir="/tmp")  # short: AF_UNIX paths <= 107 bytes
    os.makedirs(os.path.join(tmp, "ray"), exist_ok=True)
    old = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = tmp
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"include_dashboard": False, **NODE},
    )
    pids: set[int] = set()
    try:
        node = cluster.add_node(node_name="node-b", **NODE)
        cluster.wait_for_nodes()
        yield cluster, tmp
        for each in (cluster.head_node, node):
            pids.update(p.process.pid for ps in each.all_processes.values() for p in ps)
    finally:
        cluster.shutdown()
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
        if old is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = old


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Overrides conftest's: the cluster's processes stay for the module; the run's
    remote pids are checked by the test."""
    yield


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("children", []):
        yield from _walk(child)


def test_status_answers_through_remote_restarts_with_names_logs_and_ray_kept_apart(
    cluster: tuple[Any, str], tmp_path: Path
) -> None:
    head, tmp = cluster
    (tmp_path / "tree.toml").write_text(TREE.format(address=head.address))
    sock = tmp_path / "ct.sock"
    argv = [sys.executable, "-m", "actors.cli", "run", str(tmp_path / "tree.toml")]
    argv += ["--plain", "--socket", str(sock)]
    run = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAY_TMPDIR": tmp},
    )
    answers: list[dict[str, Any]] = []
    failures: list[str] = []
    done = threading.Event()

    def ask(op: str, **kw: Any) -> dict[str, Any]:
        return call(sock, {"op": op, **kw}, timeout=60)

    def ingest() -> dict[str, Any]:
        tree = ask("status")["tree"]
        return next(n for n in _walk(tree) if n["path"] == "ct/ingest")

    shown: set[int] = set()  # every pid an answer showed running
    node_ids: set[str] = set()

    died: dict[int, float] = {}  # a pid shown running, when it was first seen dead

    def poll() -> None:
        """Status and detail, again and again; a pid dead for DETECTED s when the
        question was sent must not come back as running (sooner, its exit may not have
        reached the tree yet: remote_crash is told in tens of ms, a subtree's restart
        lasts a second), and no node shows as its hex id."""
        while not done.is_set():
            for op, kw in (("status", {}), ("detail", {"id": "reader"})):
                now = time.monotonic()
                for pid in list(shown):
                    if pid not in died and not _alive(pid):
                        died[pid] = now
                gone = {pid for pid, at in died.items() if now - at >= DETECTED}
                try:
                    answer = ask(op, **kw)
                except Exception as e:
                    failures.append(f"{op}: {type(e).__name__}: {e}")
                    continue
                if not answer.get("ok"):
                    failures.append(f"{op}: {answer}")
                answers.append(answer)
                rows = list(_walk(answer["tree"])) if "tree" in answer else [answer["detail"]]
                for row in rows:
                    if row.get("state") == "running" and row.get("pid"):
                        if row["pid"] in gone:
                            failures.append(f"{op}: dead pid {row['pid']} shown running: {row}")
                        shown.add(row["pid"])
                    if row.get("node"):
                        node_ids.add(row["node"])
                    for key in ("node_name", "last_exit"):
                        text = str(row.get(key) or "")
                        if any(node in text for node in node_ids):
                            failures.append(f"{op}: {key} shows a node's id: {text!r}")

    remote: list[int] = []
    try:
        wait_until(lambda: sock.exists(), 60, "the control socket")
        # Placed, and its node's name looked up (which can come a moment after).
        wait_until(
            lambda: ingest()["node"] is not None and ingest()["node_name"] is not None,
            90,
            "the remote subtree placed",
        )
        first = ingest()
        assert first["node_name"] == "node-b"

        # Running on node-b: on a host loaded far past its cores, the subtree's 6 s lease
        # can run out before a renewal arrives, and the subtree fences itself and starts
        # again (its restarts counted from here on).
        def reader() -> dict[str, Any]:
            return cast(dict[str, Any], ask("detail", id="reader")["detail"])

        wait_until(
            lambda: (reader()["state"], reader()["node_name"]) == ("running", "node-b"),
            60,
            "the remote child running on node-b",
        )
        first = ingest()
        detail = reader()
        remote += [first["pid"], detail["pid"]]
        wait_until(
            lambda: ask("logs", id="reader", stream="stdout").get("message") == "reading",
            30,
            "the remote child's output",
        )
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()

        def states() -> set[str]:
            return {
                n["state"]
                for a in list(answers)
                if "tree" in a
                for n in _walk(a["tree"])
                if n["path"] == "ct/ingest"
            }

        # The remote host process killed: remote_crash, restarted. At least twice, and
        # until the poller has caught one restart under way (a quick one can slip
        # between two polls on a loaded machine), at most six times.
        def running_pid(restarts: int) -> int | None:
            """The remote host's pid, read in the same answer as its state and count:
            `running` can come a moment before the pid (issue 40)."""
            node = ingest()
            if node["restarts"] == restarts and node["state"] == "running":
                return cast(int | None, node["pid"])
            return None

        def host_pid(restarts: int) -> int:
            deadline = time.monotonic() + 60
            while (pid := running_pid(restarts)) is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"restart {restarts}: not running with a pid in 60 s")
                time.sleep(0.05)  # polling the control socket: no event to wait on here
            return pid

        restarts, kills = first["restarts"], 0
        while kills < 2 or ("restarting" not in states() and kills < 6):
            host = host_pid(restarts)
            restarts += 1
            kills += 1
            os.kill(host, signal.SIGKILL)
            remote.append(host)
            remote.append(reader()["pid"])
        host_pid(restarts)  # the last restart done
        done.set()
        poller.join(60)
        assert failures == []
        # Seen restarting (the parent busy starting its new incarnation): answered.
        seen = states()
        assert "restarting" in seen and seen <= {"running", "restarting"}, seen
        assert ask("shutdown")["ok"]
        out, err = run.communicate(timeout=60)
    finally:
        done.set()
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.communicate(timeout=30)
            if run.poll() is None:
                run.kill()
                run.communicate()
    assert run.returncode == 0, err
    assert "ct/ingest child_exited reason=remote_crash" in out
    ray_lines = [line for line in (out + err).splitlines() if " -- " in line or "(raylet)" in line]
    assert ray_lines == []  # Ray's own lines are in its log file
    assert (tmp_path / "ct.ray.log").stat().st_size > 0
    assert wait_gone([p for p in remote if p], timeout=30) == []


MISSPELT = """
[engine]
address = "{address}"
lease_timeout = 6

[supervisor]
id = "mt"

[[supervisor.children]]
id = "ingest"
placement = {{ node = "node-bb" }}

[[supervisor.children.children]]
id = "reader"
command = ["sleep", "300"]
"""


def test_a_node_name_no_node_has_is_a_check_warning_and_a_run_event(
    cluster: tuple[Any, str], tmp_path: Path
) -> None:
    """`node = "node-bb"` on a cluster whose worker is "node-b": `check` asks the cluster
    and warns, naming the nodes there are and the likeliest one; `run` places the
    subtree on another node ("prefer") and says so in a child_note event."""
    head, tmp = cluster
    tree = tmp_path / "tree.toml"
    tree.write_text(MISSPELT.format(address=head.address))
    env = {**os.environ, "RAY_TMPDIR": tmp}
    checked = subprocess.run(
        [sys.executable, "-m", "actors.cli", "check", str(tree)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr
    warning = [line for line in checked.stderr.splitlines() if "node-bb" in line]
    assert len(warning) == 1, checked.stderr
    assert "placement.node 'node-bb' is no node's id or name" in warning[0]
    assert "node-b" in warning[0].split("nodes:")[1] and "did you mean 'node-b'?" in warning[0]
    assert "InvalidAuthToken" not in checked.stderr and "INFO" not in checked.stderr

    sock = tmp_path / "mt.sock"
    argv = [sys.executable, "-m", "actors.cli", "run", str(tree), "--plain", "--socket", str(sock)]
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(sock.exists, 120, what="the run's control socket")

        def ingest() -> dict[str, Any]:
            tree = call(sock, {"op": "status"}, timeout=60)["tree"]
            return next(n for n in _walk(tree) if n["path"] == "mt/ingest")

        wait_until(lambda: ingest()["state"] == "running", 120, what="the subtree running")
    finally:
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=120)
    notes = [line for line in out.splitlines() if "child_note" in line]
    assert len(notes) == 1, out + err
    assert "'node-bb' is no node's id or name" in notes[0], notes
    assert "did you mean 'node-b'?" in notes[0] and "placed on" in notes[0], notes
