"""The control socket end to end: a live tree, `nannytree run`'s server and Controller,
and a client sending fuzzed request lines. Every connection must get an answer (JSON
lines), no handler may raise, and the tree must keep running and leave no process."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from actors import EventLog, Tree, testing
from actors._operate._snapshot import TreeInspector
from actors.host._controller import Controller
from actors.host._server import ControlSocket
from supervision import SupervisorSpec, load_tree
from tests.support import living_descendants

from . import _values as v
from ._engine import Broken, Target
from ._targets import OPS, request

TREE = """
[supervisor]
id = "t"
intensity = 1000000
period = 1.0

[[supervisor.children]]
id = "a"
command = ["sleep", "3600"]
shutdown = 1
reload = "HUP"

[[supervisor.children]]
id = "b"
command = ["sh", "-c", "echo out; echo err >&2; exec sleep 3600"]
stdout = "capture"
stderr = "capture"
shutdown = 1

[[supervisor.children]]
id = "c"
command = ["sleep", "3600"]
stdout = "c.log"
shutdown = 1

[[supervisor.children]]
id = "p"
target = "actors.testing:run_forever"
shutdown = 1

[[supervisor.children]]
id = "sub"
strategy = "one_for_all"
intensity = 1000000
period = 1.0

[[supervisor.children.children]]
id = "x"
command = ["sleep", "3600"]
shutdown = 1

[[supervisor.children.children]]
id = "y"
command = ["sleep", "3600"]
shutdown = 1

[[supervisor.children]]
id = "pool"
strategy = "simple_one_for_one"
max_children = 3
intensity = 1000000
period = 1.0

[[supervisor.children.children]]
id = "job"
command = ["sleep", "3600"]
restart = "temporary"
shutdown = 1
"""


LOG_EVENTS = 5000


def _resolve(ref: str) -> Any:
    assert ref == "actors.testing:run_forever"
    return testing.run_forever


class ControlTarget(Target):
    """`nannytree run`'s control socket and what each request does, on a live tree."""

    name = "control"
    max_len = 4096
    deadline = 30.0
    wait_deadline = 120.0
    fresh = 0.85
    tokens = (b'{"op": "', b'"id": "', b'", ', b"}", b"\n", *(f'"{op}"'.encode() for op in OPS))

    def open(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="nt-fuzz-"))
        self.spec: SupervisorSpec = load_tree(
            TREE, str(self.folder / "t.toml"), resolve_target=_resolve
        )
        self.stops = 0  # `shutdown` requests: counted, the tree keeps running
        self.escaped: list[BaseException] = []
        self._hook = threading.excepthook
        threading.excepthook = self._thread_failed
        self.control = ControlSocket.bind(self.folder / "t.sock")
        self.tree: Tree | None = None
        self.controller: Controller | None = None
        self.inspector: TreeInspector | None = None
        self._start_tree()
        self.control.serve(self._handle)

    def _start_tree(self) -> None:
        if self.controller is not None and self.inspector is not None:
            self.controller.close()
            self.inspector.close()
        # The log's own bound (100,000 events) would take hours to fill here, and until
        # then it grows by design; a small one shows whether anything else grows.
        self.log = EventLog(max_events=LOG_EVENTS)
        self.tree = Tree.start(self.spec, log=self.log)
        self.inspector = TreeInspector(self.tree.ref, self.spec, self.log)
        info = {"tree": "t", "pid": os.getpid(), "socket": str(self.control.path)}
        self.controller = Controller(
            self.inspector, self.log, info, self._stop_requested, self.control.closing
        )
        self.controller.reload_source = lambda: self.spec

    def _stop_requested(self, why: str) -> None:
        self.stops += 1

    def _handle(self, req: dict[str, Any], send: Any) -> None:
        try:
            assert self.controller is not None
            self.controller.handle(req, send)
        except BaseException as e:
            self.escaped.append(e)
            raise

    def _thread_failed(self, args: Any) -> None:
        if args.exc_value is not None and not any(e is args.exc_value for e in self.escaped):
            self.escaped.append(args.exc_value)

    def close(self) -> None:
        threading.excepthook = self._hook
        self.control.close(linger=5.0)
        if self.controller is not None and self.inspector is not None:
            self.controller.close()
            self.inspector.close()
        if self.tree is not None:
            self.tree.stop(timeout=60)
        deadline = time.monotonic() + 10
        while (left := living_descendants()) and time.monotonic() < deadline:
            psutil.wait_procs(left, timeout=0.1)
        shutil.rmtree(self.folder, ignore_errors=True)
        if left:
            for p in left:
                p.kill()
            raise Broken(f"processes left after the tree stopped: {[p.pid for p in left]}")

    def seeds(self) -> list[bytes]:
        lines: list[dict[str, Any]] = [
            {"op": op, "id": "a"} for op in OPS if op not in ("events", "shutdown")
        ]
        lines += [{"op": "events", "last": 3}, {"op": "add", "id": "pool", "args": []}]
        return [json.dumps(r).encode() + b"\n" for r in lines]

    def generate(self, rng: random.Random) -> bytes:
        req = request(rng)
        if req.get("op") == "events" and rng.random() < 0.1:
            req["follow"] = True
        if rng.random() < 0.02:
            return v.deep(rng).encode()
        return json.dumps(req).encode() + b"\n"

    def run(self, data: bytes) -> str:
        answer = self._ask(data)
        if self.escaped:
            raise self.escaped.pop()
        assert self.tree is not None
        if not self.tree.alive:
            self._start_tree()
            raise Broken("the tree ended")
        # A follower that closed its end is gone to the server: its stream just stops.
        follow = b'"follow"' in data
        if not answer:
            if follow:
                return "events 0"
            raise Broken("the connection closed without an answer")
        lines = [json.loads(line) for line in answer.splitlines()]
        if not all(type(line) is dict for line in lines):
            raise Broken(f"an answer line is not an object: {answer[:200]!r}")
        first = lines[0]
        if "event" in first or "end" in first:
            if "end" not in lines[-1] and not follow:
                raise Broken("an event stream without its end line")
            return f"events {min(len(lines), 3)}"
        if first.get("ok") is True:
            return "ok"
        if first.get("ok") is False and isinstance(first.get("error"), str):
            return f"error {first.get('kind')}"
        raise Broken(f"an answer without ok: {first!r}")

    def _ask(self, data: bytes) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as s:
            s.settimeout(self.deadline)
            s.connect(str(self.control.path))
            try:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # refused early (over MAX_LINE): its answer is still there to read
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    def state(self) -> str:
        fds = len(os.listdir("/proc/self/fd"))
        return (
            f"{threading.active_count()} threads, {fds} descriptors, "
            f"{len(living_descendants())} processes, {len(self.log.snapshot())} events kept "
            f"of {len(self.log)}"
        )
