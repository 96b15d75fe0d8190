"""No outage from a bad config or a bad replacement (docs/update.md, section 4;
docs/reference/cli.md, `restart`), on real processes: an HTTP server on a socket
nannytree holds, updated to a replacement that crashes once it runs, keeps
answering every request (the replacement starts beside it and never takes its
place); a replacement that fails where two cannot run at once is rolled back to
the spec that ran; a restart whose reload check fails leaves the old pid running."""

from __future__ import annotations

import http.client
import socket
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from actors import Tree
from actors.testing import TreeHarness
from supervision import (
    ChildSpec,
    EventKind,
    ListenSocket,
    Reload,
    Replace,
    RestartRefused,
    SupervisorSpec,
    UpdateFailed,
)
from tests.support import wait_until
from tests.support.held_socket_server import SERVER


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    """Real HTTP requests without pause while in the `with` block: those answered
    (by version), those refused, and those that failed otherwise (reset, no answer
    within 5 s)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.answered: dict[str, int] = {}
        self.refused = self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            try:
                conn.request("GET", "/")
                version = conn.getresponse().read().decode().split()[0]
                self.answered[version] = self.answered.get(version, 0) + 1
            except ConnectionRefusedError:
                self.refused += 1
            except OSError:
                self.failed += 1
            finally:
                conn.close()

    def total(self) -> int:
        return sum(self.answered.values())

    def __enter__(self) -> Client:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def web(tmp_path: Path, port: int, version: str, **fields: object) -> ChildSpec:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    env = {"VERSION": version, **fields.pop("env", {})}  # type: ignore[dict-item]
    return ChildSpec(
        id="web",
        command=[sys.executable, str(script)],
        env=env,
        sockets=[ListenSocket(f"127.0.0.1:{port}", name="http")],
        shutdown=5,
        **fields,  # type: ignore[arg-type]
    )


def shop(*children: ChildSpec) -> SupervisorSpec:
    return SupervisorSpec(
        id="shop", children=[ChildSpec(id="db", command=["sleep", "600"]), *children]
    )


def test_a_replacement_that_crashes_once_it_runs_never_interrupts_the_service(
    tmp_path: Path,
) -> None:
    port = free_port()
    good = web(tmp_path, port, "v1")
    with Tree(shop(good)) as tree:
        old = tree.nanny.which_child("web").get(timeout=10).pid
        with Client(port) as client:
            wait_until(lambda: client.total() >= 20, what="v1 answers")
            crashes = web(tmp_path, port, "v2", env={"CRASH_AFTER": "0.3"})
            with pytest.raises(UpdateFailed) as raised:
                # A settle well beyond the crash, on a loaded machine too.
                tree.update(shop(crashes), settle=3.0)
            seen = client.total()
            wait_until(lambda: client.total() >= seen + 20, what="answers after the update")
        outcome = raised.value.outcome
        assert [(s.child, why) for s, why in outcome.failed] == [
            ("web", "failed to start: exit code 3")
        ]
        assert [(s.child, what) for s, what in outcome.rolled_back] == [
            ("web", f"kept its previous spec, pid {old}: the replacement failed beside it")
        ]
        assert f"rolled back: web kept its previous spec, pid {old}" in outcome.message
        info = tree.nanny.which_child("web").get(timeout=10)
        assert (info.state, info.pid) == ("running", old)  # never stopped
        assert tree.spec == shop(good)  # the next update tries again
        assert [c.id for c in tree.nanny.which_children().get(timeout=10)] == ["web", "db"]
        kinds = [(e.context, e.offender) for e in tree.events()]
        assert (EventKind.UPDATE_ROLLED_BACK, "web") in kinds
        assert (EventKind.UPDATE_CHILD_REPLACED, "web") not in kinds
    # Measured with real requests: every one answered, none refused, none cut.
    assert (client.refused, client.failed) == (0, 0)
    assert client.answered.get("v1", 0) >= 40


def test_a_good_replacement_starts_beside_the_old_one_and_takes_over_without_a_gap(
    tmp_path: Path,
) -> None:
    port = free_port()
    with Tree(shop(web(tmp_path, port, "v1"))) as tree:
        old = tree.nanny.which_child("web").get(timeout=10).pid
        with Client(port) as client:
            wait_until(lambda: client.total() >= 20, what="v1 answers")
            outcome = tree.update(shop(web(tmp_path, port, "v2")), settle=0.5)
            wait_until(lambda: client.answered.get("v2", 0) >= 20, what="v2 answers")
        assert outcome.message == "changed: web"
        assert [s.child for s in outcome.overlapped] == ["web"] and not outcome.rolled_back
        info = tree.nanny.which_child("web").get(timeout=10)
        assert info.pid not in (None, old)
        assert [c.id for c in tree.nanny.which_children().get(timeout=10)] == ["web", "db"]
        replaced = [e for e in tree.events() if e.context is EventKind.UPDATE_CHILD_REPLACED]
        assert replaced[-1].detail == (
            "started beside the old process (as web~update) before it stopped"
        )
    assert (client.refused, client.failed) == (0, 0)


def test_a_failed_replacement_that_could_not_start_beside_the_old_is_rolled_back() -> None:
    """Without a held socket the old process stops first; the replacement fails its
    settle; the child is put back on its previous spec and runs again."""
    good = ChildSpec(id="web", command=["sleep", "601"], shutdown=2)
    with Tree(shop(good)) as tree:
        old = tree.nanny.which_child("web").get(timeout=10).pid
        quits = ChildSpec(id="web", command=["sh", "-c", "echo no config >&2; exit 3"])
        with pytest.raises(UpdateFailed) as raised:
            tree.update(shop(quits), settle=2)
        outcome = raised.value.outcome
        assert not outcome.overlapped
        ((step, what),) = outcome.rolled_back
        assert isinstance(step, Replace) and step.was == good
        info = tree.nanny.which_child("web").get(timeout=10)
        assert info.state == "running" and info.pid not in (None, old)
        assert what == f"runs its previous spec again, pid {info.pid}"
        assert "the child runs its previous spec" in outcome.message
        assert tree.spec == shop(good)
        rolled = [e for e in tree.events() if e.context is EventKind.UPDATE_ROLLED_BACK]
        assert [(e.offender, e.pid) for e in rolled] == [("web", info.pid)]
        assert tree.nanny.which_child("db").get(timeout=10).restarts == 0


def test_a_restart_whose_reload_check_fails_leaves_the_old_process_running(
    tmp_path: Path,
) -> None:
    ok = tmp_path / "config-ok"
    check = ["sh", "-c", f"test -e {ok} || {{ echo 'unknown directive \"frob\"'; exit 1; }}"]
    spec = ChildSpec(id="web", command=["sleep", "600"], shutdown=2, reload=Reload(check=check))
    with TreeHarness(SupervisorSpec(id="shop", children=[spec])) as harness:
        old = harness.pid("web")
        with pytest.raises(RestartRefused) as refused:
            harness.restart("web")
        assert "not restarted, it runs on: its check" in str(refused.value)
        assert 'unknown directive "frob"' in str(refused.value)
        assert harness.pid("web") == old
        ok.touch()
        assert harness.restart("web").pid not in (None, old)


def test_restarts_of_a_subtree_or_of_all_check_every_running_worker_first() -> None:
    check = ["sh", "-c", "echo bad config; exit 1"]
    web = ChildSpec(id="web", command=["sleep", "601"], shutdown=2, reload=Reload(check=check))
    apps = SupervisorSpec(id="apps", children=[web])
    db = ChildSpec(id="db", command=["sleep", "600"], shutdown=2)
    with TreeHarness(SupervisorSpec(id="shop", children=[db, apps])) as harness:
        before = (harness.pid("db"), harness.pid("web"))
        with pytest.raises(RestartRefused, match="bad config") as refused:
            harness.restart("apps")  # `nannytree restart apps`: its workers are checked
        assert "supervisor 'shop/apps', child 'web'" in str(refused.value)
        with pytest.raises(RestartRefused, match="bad config"):
            harness.restart_all()  # `nannytree restart all`: nothing stopped
        assert (harness.pid("db"), harness.pid("web")) == before
        fixed = replace(apps, children=[replace(web, reload=Reload(check=["true"]))])
        harness.update(SupervisorSpec(id="shop", children=[db, fixed]), settle=0)
        assert harness.restart_all() == ["db", "apps"]
        assert harness.pid("db") != before[0]
