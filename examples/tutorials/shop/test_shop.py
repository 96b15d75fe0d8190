"""The tests of "Test with real processes" (docs/tutorials/testing.md): the shop
of "Supervise your services", started for real by nannytree's pytest plugin.

    cd ~/shop && pytest test_shop.py
"""

import signal
import urllib.request
from pathlib import Path

import worker  # worker.py, beside this file

from actors.testing import free_port
from supervision import ChildSpec, EventKind, ExitKind, HttpProbe, SupervisorSpec

TREE = Path(__file__).with_name("shop.toml")


def get(url):
    with urllib.request.urlopen(url, timeout=5) as answer:
        return answer.status


def test_the_web_server_comes_back_answering(nanny_tree):
    port = free_port()
    tree = nanny_tree(TREE, vars={"PORT": port}, strict=True)
    url = f"http://127.0.0.1:{port}/"
    assert get(url) == 200  # started means answering: shop.toml's ready = { http = ... }

    old = tree.kill("web")  # SIGKILL; returns the pid it killed
    info = tree.wait_ready("web")  # restarted, and answering again
    assert info.pid != old
    assert get(url) == 200


def test_a_killed_worker_restarts_alone(nanny_tree):
    tree = nanny_tree(TREE, vars={"PORT": free_port()}, strict=True)
    web = tree.pid("web")
    probe = tree.probe()  # records the events from now on

    tree.kill("worker")
    exited = tree.wait_for(EventKind.CHILD_EXITED, "worker")
    assert exited.reason.kind is ExitKind.KILLED and exited.reason.signal == signal.SIGKILL
    assert tree.wait_restarted("worker").restarts == 1

    assert tree.pid("web") == web  # one_for_one: its siblings run on
    assert probe.contexts("web") == []


def test_outbox_takes_sender_with_it(nanny_tree):
    tree = nanny_tree(TREE, vars={"PORT": free_port()}, strict=True)
    probe = tree.probe()

    tree.kill("outbox")
    tree.wait_for(EventKind.CHILD_STARTED, "sender", incarnation=2)

    # rest_for_one: sender, started after outbox, was stopped and started again
    assert probe.contexts("outbox") == [EventKind.CHILD_EXITED, EventKind.CHILD_STARTED]
    assert probe.contexts("sender") == [EventKind.CHILD_TERMINATED, EventKind.CHILD_STARTED]
    assert probe.contexts("worker") == []


def test_a_paused_worker_is_not_restarted(nanny_tree):
    tree = nanny_tree(TREE, vars={"PORT": free_port()}, strict=True)
    tree.pause("worker")  # SIGSTOP to its process group
    tree.expect_no_event(EventKind.CHILD_EXITED, "worker", within=0.5)
    tree.resume("worker")

    tree.signal("worker", signal.SIGTERM)  # through its supervisor, as `nannytree signal` does
    exited = tree.wait_for(EventKind.CHILD_EXITED, "worker")
    assert exited.reason.kind is ExitKind.KILLED and exited.reason.signal == signal.SIGTERM
    tree.wait_restarted("worker")


def test_the_worker_raises(nanny_tree):
    port = free_port()
    web = ChildSpec(
        id="web",
        command=["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        ready=HttpProbe(f"http://127.0.0.1:{port}/"),
    )
    orders = ChildSpec(id="worker", target=worker.main, args=("orders",), stdout="capture")
    tree = nanny_tree(SupervisorSpec(id="shop", children=[web, orders]), strict=True)

    tree.wait_output("worker", r"orders: done job 1\n", stream="stdout")
    tree.crash("worker", RuntimeError("the queue went away"))  # raised inside worker.main

    reason = tree.wait_for(EventKind.CHILD_EXITED, "worker").reason
    assert reason.kind is ExitKind.EXCEPTION and reason.exc_type == "RuntimeError"
    assert tree.wait_restarted("worker").restarts == 1
    tree.wait_output("worker", r"orders: started", stream="stdout")
