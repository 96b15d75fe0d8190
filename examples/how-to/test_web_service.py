"""A service under test, started by nannytree's pytest plugin: what a pytest-xprocess
ProcessStarter or a mirakuru HTTPExecutor fixture did (docs/how-to/from-xprocess-mirakuru.md).

    pytest examples/how-to/test_web_service.py
"""

from __future__ import annotations

import sys
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from actors.testing import TreeHarness, eventually, fault_proxy, free_port, within
from supervision import ChildSpec, HttpProbe, LogLine, SupervisorSpec, TcpProbe


@pytest.fixture
def web(nanny_tree: Callable[..., TreeHarness]) -> Iterator[tuple[TreeHarness, str]]:
    """An HTTP server, ready once it answers (mirakuru's HTTPExecutor)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = ChildSpec(
        id="web",
        command=[sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        ready=HttpProbe(url),  # a GET answers 200-399, on a port the child holds
        start_timeout=10,  # HTTPExecutor(timeout=10)
        stderr="capture",  # what it logs, for tree.output() and tree.wait_output()
    )
    tree = nanny_tree(SupervisorSpec(id="app", children=[server]), strict=True)
    yield tree, url
    # Nothing to stop: the fixture stops the tree at teardown, and fails the test
    # if any of its processes is left.


def test_it_answers(web: tuple[TreeHarness, str]) -> None:
    tree, url = web
    assert urllib.request.urlopen(url).status == 200
    tree.wait_output("web", r'"GET / HTTP/1.1" 200')  # the probe's and ours


def test_it_comes_back_after_a_crash(web: tuple[TreeHarness, str]) -> None:
    tree, url = web
    old = tree.kill("web")  # SIGKILL; strict mode knows the test caused it
    info = tree.wait_ready("web")  # restarted, and answering again
    assert info.pid != old
    assert urllib.request.urlopen(url).status == 200


def test_a_banner_and_a_port(nanny_tree: Callable[..., TreeHarness]) -> None:
    """pytest-xprocess's `pattern` (mirakuru's OutputExecutor), and a TCPExecutor."""
    port, other = free_port(), free_port()
    banner = ChildSpec(
        id="banner",
        command=[sys.executable, "-u", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        ready=LogLine(r"Serving HTTP on \S+ port \d+"),  # xprocess: pattern = "Serving HTTP on"
    )
    tcp = ChildSpec(
        id="tcp",
        command=[sys.executable, "-m", "http.server", str(other), "--bind", "127.0.0.1"],
        ready=TcpProbe(other),  # TCPExecutor(host="127.0.0.1", port=other)
    )
    tree = nanny_tree(SupervisorSpec(id="two", children=[banner, tcp]), strict=True)
    assert tree.child("banner").state == "running" and tree.child("tcp").state == "running"


def test_what_comes_after_kill(nanny_tree: Callable[..., TreeHarness]) -> None:
    """What neither xprocess nor mirakuru has: a misspelt id fails at once, a fault
    proxy between the client and the server, and lines counted over a block."""
    port = free_port()
    server = ChildSpec(
        id="web",
        command=[sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        ready=HttpProbe(f"http://127.0.0.1:{port}/"),
        stderr="capture",
    )
    proxy = fault_proxy("web_proxy", upstream=("127.0.0.1", port))
    tree = nanny_tree(SupervisorSpec(id="app", children=[server, proxy.spec]), strict=True)
    with pytest.raises(LookupError, match="did you mean 'web'"):
        tree.wait_ready("wbe")  # at once, not after a 10 s timeout
    url = f"http://127.0.0.1:{proxy.port}/"
    with within(10), tree.expect_lines("web", r'"GET / HTTP/1.1" 200', count=1):
        assert urllib.request.urlopen(url, timeout=5).status == 200  # through the proxy
    proxy.partition()  # nothing passes: the client's read times out
    with pytest.raises(OSError), tree.expect_lines("web", r"GET", count=0):
        urllib.request.urlopen(url, timeout=0.5)
    proxy.heal()
    eventually(lambda: urllib.request.urlopen(url, timeout=5).status == 200)
