"""The README's testing examples, as they are written there (the service's path
is this repository's tests/health_service.py)."""

import sys
import urllib.request
from pathlib import Path

from actors import testing
from actors.testing import free_port
from supervision import ChildSpec, EventKind, ExitKind, HttpProbe, Strategy, SupervisorSpec

SERVICE = str(Path(__file__).with_name("health_service.py"))


def test_the_service_comes_back_answering(nanny_tree):
    port = free_port()
    url = f"http://127.0.0.1:{port}/health"
    web = ChildSpec(id="web", command=[sys.executable, SERVICE, str(port)], ready=HttpProbe(url))
    tree = nanny_tree(SupervisorSpec(id="app", children=[web]), strict=True)
    assert urllib.request.urlopen(url).status == 200  # started = answering, on its own port
    tree.kill("web")
    tree.wait_ready("web")  # restarted, and answering again
    assert urllib.request.urlopen(url).status == 200


def test_the_service_from_a_tree_file(nanny_tree, tmp_path):
    (tmp_path / "tree.toml").write_text(
        f"""
[supervisor]
id = "app"

[[supervisor.children]]
id = "web"
command = ["{sys.executable}", "{SERVICE}", "${{PORT}}"]
ready = {{ http = "http://127.0.0.1:${{PORT}}/health" }}
"""
    )
    port = free_port()
    tree = nanny_tree(tmp_path / "tree.toml", vars={"PORT": port}, strict=True)
    assert tree.child("web").state == "running"
    assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health").status == 200


def test_pool_restarts_together(nanny_tree):
    tree = nanny_tree(
        SupervisorSpec(
            id="pool",
            strategy=Strategy.ONE_FOR_ALL,
            children=[
                ChildSpec(id="a", target=testing.ready_after, args=(0.1,), ready="notify"),
                ChildSpec(id="b", target=testing.run_forever),
            ],
        )
    )
    probe = tree.probe()  # records events from now on
    tree.kill("a")  # SIGKILL (or tree.kill("a", signal.SIGTERM))
    tree.wait_for(EventKind.CHILD_STARTED, "b", where=lambda e: e.incarnation == 2)
    assert probe.contexts("b")[:2] == [EventKind.CHILD_TERMINATED, EventKind.CHILD_STARTED]


def test_crash_with_an_exception(nanny_tree):
    tree = nanny_tree(
        SupervisorSpec(
            id="root", children=[ChildSpec(id="w", target=testing.run_forever, restart="temporary")]
        )
    )
    tree.crash("w", ValueError("injected"))  # raised inside the running target
    reason = tree.wait_for(EventKind.CHILD_EXITED, "w").reason
    assert reason.kind is ExitKind.EXCEPTION and reason.exc_type == "ValueError"
