"""The CLI with remote subtrees, through FakeEngine (no Ray): every control-socket call
answers while a remote subtree restarts, hangs or cannot be reached; `status ID` and
`logs ID` of a remote child; node names; `run` with an engine from the tree file and
the flags; warnings for targets a node may not import.

A "slow" far side is made by hand: FakeEngine's starts can be held (a Ray actor takes
most of a second to start) and a node frozen (a call then waits out its timeout and
fails as unreachable, as a Ray call to a stopped node does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors import EventLog, Tree
from actors._operate._snapshot import TreeInspector
from actors._remote._port import RemoteUnreachable
from actors.cli._cmd_run import _run_options
from actors.cli._control import NoAnswer, call
from actors.cli._parser import _parser, main
from actors.host._controller import Controller
from actors.host._engine import NodeNames, merged
from actors.host._run import Runner, _Snapshots
from actors.host._server import ControlSocket
from actors.testing import FakeEngine
from supervision import ChildNotRunning, ChildSpec, NodeInfo, Placement, SupervisorSpec
from tests.support import import_ray, wait_until

SLEEP = ["sleep", "60"]
LONG_ID = "b" * 20 + "-node-id"  # long enough to be renamed in event texts, as Ray's are


class SlowEngine(FakeEngine):
    """FakeEngine whose nodes have names, whose starts can be held, and whose nodes
    can be frozen."""

    def __init__(self, nodes: list[str], **kw: Any) -> None:
        super().__init__(nodes, **kw)
        self._frozen: set[str] = set()
        self._thaw = threading.Condition()
        self.go = threading.Event()  # clear: the next starts wait for it
        self.go.set()
        self.held = threading.Event()  # a start waits now

    def nodes(self) -> list[NodeInfo]:
        return [dataclasses.replace(n, name=f"host-{n.id[:1]}") for n in super().nodes()]

    def spawn(self, *args: Any, **kw: Any) -> Any:
        if not self.go.is_set():
            self.held.set()
            assert self.go.wait(30), "a held start was never let go"
            self.held.clear()
        return super().spawn(*args, **kw)

    def freeze(self, node: str) -> None:
        with self._thaw:
            self._frozen.add(node)

    def thaw(self, node: str) -> None:
        with self._thaw:
            self._frozen.discard(node)
            self._thaw.notify_all()

    def call(self, handle: Any, method: str, *args: Any, timeout: float | None) -> Any:
        with self._thaw:
            if not self._thaw.wait_for(lambda: handle.node not in self._frozen, timeout):
                raise RemoteUnreachable(f"node {handle.node!r}: no answer within {timeout}s")
        return super().call(handle, method, *args, timeout=timeout)


@dataclasses.dataclass
class Served:
    tree: Tree
    socket: Path
    engine: SlowEngine
    inspector: TreeInspector

    def ask(self, op: str, **kw: Any) -> dict[str, Any]:
        return call(self.socket, {"op": op, **kw}, timeout=30)

    def states(self) -> dict[str, str]:
        answer = self.ask("status")
        assert answer["ok"], answer
        return {n["path"]: n["state"] for n in _walk(answer["tree"])}


def _walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("children", []):
        yield from _walk(child)


@contextlib.contextmanager
def served(spec: SupervisorSpec, engine: SlowEngine, tmp_path: Path) -> Iterator[Served]:
    """The tree with its control socket answering, as `nannytree run` serves it."""
    log = EventLog()
    tree = Tree.start(spec, engine=engine, log=log)
    inspector = TreeInspector(tree.ref, spec, log, timeout=1.0, nodes=NodeNames(engine))
    sock = ControlSocket.bind(tmp_path / "t.sock")
    controller = Controller(inspector, log, {"tree": spec.id}, lambda why: None, sock.closing)
    sock.serve(controller.handle)
    try:
        yield Served(tree, sock.path, engine, inspector)
    finally:
        engine.go.set()
        for node in ("a", "b", LONG_ID):
            engine.thaw(node)
        sock.close()
        controller.close()
        inspector.close()
        tree.stop(timeout=30)


def tree_spec(node: str = "b", **kw: Any) -> SupervisorSpec:
    ingest = SupervisorSpec(
        id="ingest",
        placement=Placement(node=node),
        children=[
            ChildSpec(
                id="reader",
                command=["sh", "-c", "echo reading; echo 'bad line' >&2; exec sleep 60"],
                stdout="capture",
                stderr="capture",
            ),
            ChildSpec(id="parser", command=SLEEP),
        ],
    )
    return SupervisorSpec(
        id="root", intensity=20, children=[ChildSpec(id="web", command=SLEEP), ingest], **kw
    )


class Poller(threading.Thread):
    """`status` and `status reader` in a loop, every answer kept, until stopped."""

    def __init__(self, served: Served) -> None:
        super().__init__(daemon=True)
        self.served = served
        self.answers: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for op, kw in (("status", {}), ("detail", {"id": "reader"})):
                try:
                    answer = self.served.ask(op, **kw)
                except Exception as e:  # no answer at all: the bug this guards against
                    self.failures.append(f"{op}: {type(e).__name__}: {e}")
                    continue
                if not answer.get("ok"):
                    self.failures.append(f"{op}: {answer}")
                self.answers.append(answer)

    def ingest_states(self) -> list[str]:
        return [
            n["state"]
            for a in self.answers
            if "tree" in a
            for n in _walk(a["tree"])
            if n["path"] == "root/ingest"
        ]

    def saw(self, state: str) -> bool:
        return state in self.ingest_states()

    def stop(self) -> None:
        self.done.set()
        self.join(60)


def test_every_status_answers_while_the_remote_subtree_restarts_hangs_or_is_cut_off(
    tmp_path: Path,
) -> None:
    engine = SlowEngine(["a", "b"])
    with served(tree_spec(), engine, tmp_path) as s:
        poller = Poller(s)
        poller.start()
        try:
            # A restart whose start is held: the root waits on the engine meanwhile.
            engine.go.clear()
            engine.crash(engine.handles()[0])
            assert engine.held.wait(20)
            wait_until(lambda: poller.saw("restarting"), what="status during the start")
            engine.go.set()
            wait_until(lambda: s.states()["root/ingest"] == "running", what="restarted")
            # A frozen far side: calls to it wait out their timeout.
            engine.freeze("b")
            seen = len(poller.answers)
            wait_until(lambda: len(poller.answers) > seen + 4, what="answers while frozen")
            engine.thaw("b")
            # Cut off: the subtree is unreachable, its children unknown.
            engine.unreachable("b")
            wait_until(lambda: poller.saw("unreachable"), what="shown unreachable")
            engine.heal("b")
            wait_until(lambda: s.states()["root/ingest"] == "running", what="healed")
        finally:
            poller.stop()
        assert poller.failures == []
        assert set(poller.ingest_states()) <= {"running", "restarting", "unreachable"}


def test_an_unreachable_subtree_shows_its_children_as_unknown_and_the_rest_as_it_is(
    tmp_path: Path,
) -> None:
    engine = SlowEngine(["a", "b"])
    with served(tree_spec(), engine, tmp_path) as s:
        engine.unreachable("b")
        wait_until(lambda: s.states()["root/ingest"] == "unreachable", what="unreachable")
        states = s.states()
        assert states["root/web"] == "running"
        assert states["root/ingest/reader"] == states["root/ingest/parser"] == "unknown"
        detail = s.ask("detail", id="reader")  # from the events, with why
        assert detail["ok"] and "cannot be reached" in detail["detail"]["note"]
        assert s.ask("status")["tree"]["children"][1]["node_name"] == "host-b"


def test_status_of_a_remote_child_shows_what_a_local_one_does_and_its_node(
    tmp_path: Path,
) -> None:
    engine = SlowEngine(["a", "b"])
    with served(tree_spec(), engine, tmp_path) as s:
        first = s.ask("detail", id="reader")["detail"]
        restarted = s.ask("restart", id="reader")  # through the remote subtree
        assert restarted["ok"] and f"pid {first['pid']} -> " in restarted["message"]
        detail = s.ask("detail", id="reader")["detail"]
        assert detail["pid"] not in (None, first["pid"])
        assert detail["state"] == "running" and detail["node"] == "b"
        assert detail["node_name"] == "host-b"
        assert detail["runs"].startswith("sh -c")
        assert detail["restart"] == "permanent" and detail["output"] == "capture"
        assert [e["reason"] for e in detail["exits"]] == ["shutdown"]  # its last exit
        logs = s.ask("logs", id="reader", stream="stdout")
        assert logs["ok"] and logs["message"] == "reading"
        assert s.ask("logs", id="reader")["message"] == "bad line"


def test_logs_of_a_remote_child_writing_to_a_file_name_its_node(tmp_path: Path) -> None:
    engine = SlowEngine(["a", "b"])
    out = tmp_path / "reader.out"
    spec = tree_spec()
    ingest = spec.children[1]
    assert isinstance(ingest, SupervisorSpec)
    child = dataclasses.replace(ingest.children[0], stdout=str(out), stderr=None)
    spec = dataclasses.replace(
        spec, children=[spec.children[0], dataclasses.replace(ingest, children=[child])]
    )
    with served(spec, engine, tmp_path) as s:
        refused = s.ask("logs", id="reader", stream="stdout")
        assert not refused["ok"]
        assert str(out) in refused["error"] and "host-b" in refused["error"]
        assert 'stdout = "capture"' in refused["error"]


def test_a_child_below_a_remote_subtrees_top_level_says_what_reaches_it(
    tmp_path: Path,
) -> None:
    engine = SlowEngine(["a", "b"])
    deep = SupervisorSpec(
        id="ingest",
        placement=Placement(node="b"),
        children=[SupervisorSpec(id="pool", children=[ChildSpec(id="job", command=SLEEP)])],
    )
    with served(SupervisorSpec(id="root", children=[deep]), engine, tmp_path) as s:
        assert s.states()["root/ingest/pool/job"] == "running"
        refused = s.ask("signal", id="job", signal=1)
        assert not refused["ok"] and "act on root/ingest" in refused["error"]
        assert s.ask("detail", id="job")["detail"]["state"] == "running"


def test_node_ids_in_event_lines_are_named(tmp_path: Path) -> None:
    engine = SlowEngine(["a", LONG_ID])
    spec = tree_spec(node=LONG_ID)
    with served(spec, engine, tmp_path) as s:
        assert s.inspector.nodes is not None
        s.inspector.nodes.refresh(wait=5)
        engine.node_down(LONG_ID)
        wait_until(
            lambda: any(
                "node_down" in str(e["event"].get("reason"))
                for e in _events(s.socket)
                if "event" in e
            ),
            what="the node_down event",
        )
        reasons = [str(e["event"].get("reason")) for e in _events(s.socket) if "event" in e]
        down = [r for r in reasons if "node_down" in r]
        assert all("host-b" in r and LONG_ID not in r for r in down), down


def _events(sock: Path) -> list[dict[str, Any]]:
    from actors.cli._control import stream

    return list(stream(sock, {"op": "events", "last": 100}, timeout=10))


def test_the_live_view_outlives_timeouts_and_errors() -> None:
    class Flaky:
        def __init__(self) -> None:
            self.answers: list[Any] = [
                pykka.Timeout("busy"),
                ChildNotRunning("root", "ingest", "unreachable"),
                RuntimeError("a bug"),
            ]
            self.ref = self
            self.calls = 0

        def is_alive(self) -> bool:
            return True

        def snapshot(self, stats: bool = True) -> Any:
            self.calls += 1
            if self.answers:
                raise self.answers.pop(0)
            return _Node()

    class _Node:
        state = "running"

    flaky = Flaky()
    view = _Snapshots(flaky, 0.01)  # type: ignore[arg-type]
    view.start()
    try:
        wait_until(lambda: view.latest is not None, what="a snapshot after the failures")
        assert view.is_alive() and flaky.calls >= 4 and not view.busy
    finally:
        view.done.set()
        view.join(5)


def test_a_client_that_gets_no_answer_says_so(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "mute.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        with pytest.raises(NoAnswer, match=r"did not answer within 0\.3s"):
            call(path, {"op": "status"}, timeout=0.3)


# -- `run` with an engine ------------------------------------------------------------

TREE = """
[engine]
address = "local"
lease_timeout = 9
liveness_timeout = 4

[supervisor]
id = "rt"

[[supervisor.children]]
id = "web"
command = ["sleep", "60"]

[[supervisor.children]]
id = "ingest"
placement = { node = "b" }

[[supervisor.children.children]]
id = "reader"
command = ["sh", "-c", "echo from-the-far-side; exec sleep 60"]
"""


def run_in_process(
    tmp_path: Path,
    argv: list[str],
    make: Callable[[Any, Path], Any],
    while_running: Callable[[Path], None],
) -> tuple[int, str, str]:
    """`nannytree run ...` in this process (its signal handlers need the main thread),
    `while_running(socket)` on another thread, then `shutdown`."""
    args = _parser().parse_args(argv)
    opts = _run_options(args)
    from actors import load_tree_file
    from supervision import load_engine

    path = Path(args.file)
    spec = load_tree_file(path)
    opts.source = path
    opts.engine_file = load_engine(path.read_bytes(), str(path))
    opts.make_engine = make
    opts.live = False
    out, err = io.StringIO(), io.StringIO()
    errors: list[BaseException] = []

    def client() -> None:
        try:
            wait_until(lambda: opts.socket is not None and opts.socket.exists(), what="socket")
            assert opts.socket is not None
            wait_until(lambda: _answers(opts.socket), what="the tree up")
            while_running(opts.socket)
        except BaseException as e:
            errors.append(e)
        finally:
            with contextlib.suppress(Exception):
                call(opts.socket, {"op": "shutdown"}, timeout=10)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    rc = Runner(spec, opts, out, err).run()
    thread.join(30)
    if errors:
        raise errors[0]
    return rc, out.getvalue(), err.getvalue()


def _answers(sock: Path) -> bool:
    try:
        answer = call(sock, {"op": "status"}, timeout=5)
    except Exception:
        return False
    return answer.get("ok") is True and answer["tree"]["state"] == "running"


def test_run_takes_the_engine_from_the_file_with_the_flags_over_it(tmp_path: Path) -> None:
    (tmp_path / "tree.toml").write_text(TREE)
    made: list[Any] = []

    def make(config: Any, log_file: Path) -> SlowEngine:
        made.append((config, log_file))
        return SlowEngine(["a", "b"], **{k: v for k, v in config.options.items()})

    seen: dict[str, Any] = {}

    def look(sock: Path) -> None:
        wait_until(
            lambda: (
                call(sock, {"op": "logs", "id": "reader", "stream": "stdout"})["message"]
                == "from-the-far-side"
            ),
            what="the remote child's output, captured on its node",
        )
        seen["status"] = call(sock, {"op": "status"})

    sock = tmp_path / "rt.sock"
    argv = ["run", str(tmp_path / "tree.toml"), "--socket", str(sock), "--lease-timeout", "off"]
    rc, out, err = run_in_process(tmp_path, argv, make, look)
    assert rc == 0, err
    config, log_file = made[0]
    assert config.address == "local"
    assert dict(config.options) == {"lease_timeout": None, "liveness_timeout": 4.0}
    assert log_file == tmp_path / "rt.ray.log"
    ingest = seen["status"]["tree"]["children"][1]
    assert ingest["node_name"] == "host-b" and ingest["state"] == "running"
    assert "rt/ingest/reader child_started" in out
    logs = Path(os.environ["NANNYTREE_LOG_DIR"])
    assert not (logs / "rt" / "rt" / "ingest").exists()  # no local path for it


def test_engine_flags_without_an_engine_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pass --engine ADDRESS or add an \\[engine\\]"):
        merged(None, None, {"liveness_timeout": 5.0})
    assert merged(None, None, {}) is None
    (tmp_path / "plain.toml").write_text('[supervisor]\nid = "p"\n')
    rc = main(["run", str(tmp_path / "plain.toml"), "--liveness-timeout", "5", "--plain"])
    assert rc == 2


# -- targets a node may not import -----------------------------------------------------

PLACED_TARGETS = """
[supervisor]
id = "t"

[[supervisor.children]]
id = "here"
target = "trialkids:work"

[[supervisor.children]]
id = "far"
placement = { node = "b" }

[[supervisor.children.children]]
id = "local_module"
target = "trialkids:work"

[[supervisor.children.children]]
id = "installed"
target = "json:dumps"
"""


def test_check_warns_of_a_placed_target_only_this_host_can_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "trialkids.py").write_text("def work():\n    pass\n")
    (tmp_path / "tree.toml").write_text(PLACED_TARGETS)
    monkeypatch.setattr("actors.host._engine.engine_check", lambda: None)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "tree.toml"]) == 0  # a warning, not a problem
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "warning" in line]
    assert len(warned) == 1, err
    assert "'local_module'" in warned[0] and "t/far" in warned[0]
    assert str(tmp_path / "trialkids.py") in warned[0]
    # The engine's own test, where it has one, decides instead.
    monkeypatch.setattr(
        "actors.host._engine.engine_check", lambda: lambda spec: ["t/far/installed: not shipped"]
    )
    assert main(["check", "tree.toml"]) == 0
    err = capsys.readouterr().err
    assert "warning: t/far/installed: not shipped" in err
    assert "local_module" not in err


def test_check_of_a_tree_without_placed_targets_never_loads_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom() -> None:
        raise AssertionError("loaded the engine")

    monkeypatch.setattr("actors.host._engine.engine_check", boom)
    assert main(["check", str(Path(__file__).parents[2] / "examples" / "tree.toml")]) == 0


# -- the engine the run makes ----------------------------------------------------------


def test_each_engine_key_is_a_ray_engine_parameter() -> None:
    import_ray()
    import inspect

    from actors.ray import RayEngine
    from supervision.config._keys import (
        ENGINE_KEYS,
    )

    parameters = set(inspect.signature(RayEngine).parameters)
    assert set(ENGINE_KEYS) - {"kind", "address"} <= parameters


def test_the_run_gives_the_settings_by_name_and_its_log_file() -> None:
    from actors.host._engine import make_ray_engine
    from supervision import EngineConfig

    made: list[tuple[Any, dict[str, Any]]] = []

    def engine(address: Any = None, *, lease_timeout: Any = 30, log_file: Any = None) -> str:
        made.append((address, {"lease_timeout": lease_timeout, "log_file": log_file}))
        return "engine"

    config = EngineConfig("ray", "local", {"lease_timeout": None})
    assert make_ray_engine(engine, config, Path("/run/t.ray.log")) == "engine"
    assert made == [(None, {"lease_timeout": None, "log_file": "/run/t.ray.log"})]
    older = EngineConfig("ray", "auto", {"runtime_env": {}})
    with pytest.raises(ValueError, match="takes no runtime_env"):
        make_ray_engine(engine, older, Path("/run/t.ray.log"))


def test_node_names_repeat_with_their_ids_and_the_engine_may_name_them_itself() -> None:
    class Listed:
        def __init__(self, names: dict[str, str]) -> None:
            self.names = names

        def nodes(self) -> list[NodeInfo]:
            return [NodeInfo(i, n) for i, n in self.names.items()]

    twins = NodeNames(Listed({"a" * 20: "10.0.0.1", "b" * 20: "10.0.0.1", "c" * 20: ""}))
    assert twins.name("a" * 20) == "10.0.0.1#aaaaaaaa"
    assert twins.name("c" * 20) == "c" * 20  # no name: its id
    assert twins.name("gone") == "gone"  # never listed
    assert twins.rename(f"node {'b' * 20!r} is dead") == "node '10.0.0.1#bbbbbbbb' is dead"

    class Named(Listed):
        def node_name(self, node: str) -> str:
            return f"named-{node[:1]}"

    assert NodeNames(Named({"a" * 20: "x"})).name("a" * 20) == "named-a"


def test_status_says_how_long_a_subtree_has_been_cut_off_or_waiting_for_a_node() -> None:
    from actors._operate._records import Node
    from actors._operate._snapshot import _state_for
    from actors.cli._plain import Painter, status_lines
    from supervision import ChildInfo, Restart

    now = time.monotonic()
    info = ChildInfo("ingest", None, "unreachable", 0, "supervisor", 1, None, Restart.PERMANENT)
    assert _state_for(dataclasses.replace(info, since=now - 75), now) == 75
    assert _state_for(dataclasses.replace(info, state="running", since=now - 75), now) is None
    assert _state_for(info, now) is None  # since when: not known
    ingest = Node(
        "ingest",
        "r/ingest",
        "supervisor",
        "unreachable",
        strategy="one_for_one",
        node="n" * 20,
        node_name="node-b",
        state_for=75.0,
    )
    root = Node(
        "r",
        "r",
        "supervisor",
        "running",
        strategy="one_for_one",
        intensity=1,
        period=5,
        children=[ingest],
    )
    painter = Painter(io.StringIO())
    text = "\n".join(status_lines(painter, {"pid": 1, "socket": "s"}, root))
    assert "ingest (one_for_one) @node-b" in text and "unreachable 1m15s" in text


def test_check_shows_the_engine_the_file_sets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t.toml").write_text(
        '[engine]\naddress = "auto"\nlease_timeout = false\n[supervisor]\nid = "t"\n'
    )
    assert main(["check", str(tmp_path / "t.toml")]) == 0
    assert "engine: ray at auto; lease_timeout off" in capsys.readouterr().out
    (tmp_path / "bad.toml").write_text('[engine]\nlease_timeout = 0\n[supervisor]\nid = "t"\n')
    assert main(["check", str(tmp_path / "bad.toml")]) == 1
    assert "engine.lease_timeout is 0; expected a number of seconds > 0" in (
        capsys.readouterr().err
    )
