"""The parsers a stranger writes to, as fuzz targets: bytes in, an outcome out.

Each `run` catches the one error its code documents (a tree file's ConfigError,
a control request's ValueError, answered as "BadRequest", the child stream's
WireError, an events file's ValueError) and lets anything else out: a finding.
An sd_notify datagram is never an error: it is parsed, refused or ignored.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import struct
import tempfile
from collections.abc import Callable
from typing import Any

import psutil

from actors import load_events
from actors._launcher import _protocol, _wire
from actors._launcher._control import CHILD_FRAME, ChildFailed, ChildHeartbeat, ChildReady
from actors._shell._sd_notify import MAX_DATAGRAM, MAX_REFUSED, MAX_STATUS, NotifyEndpoint
from actors.cli._control import MAX_LINE
from actors.host._server import parse_request
from supervision import ConfigError, Event, event_from_dict, event_to_dict, load_tree
from supervision.config._keys import (
    BACKOFF_KEYS,
    SUPERVISOR_KEYS,
    WORKER_KEYS,
)

from . import _toml
from . import _values as v
from ._engine import Broken, Target
from ._toml import toml_document

_NUMBERS = re.compile(r"\d+")


def _shape(message: str, n: int = 40) -> str:
    """A message without its numbers: the kind of outcome, for the corpus."""
    return _NUMBERS.sub("N", message)[:n]


# -- tree files ------------------------------------------------------------------------------


class TomlTarget(Target):
    """`supervision.load_tree`: raises ConfigError, and nothing else."""

    name = "toml"
    tokens = tuple(
        s.encode()
        for s in (
            *("[supervisor]\n", "[[supervisor.children]]\n", "[[supervisor.children.children]]\n"),
            *(f"{k} = " for k in {*WORKER_KEYS, *SUPERVISOR_KEYS, *BACKOFF_KEYS}),
            *('"', "'''", '"""', "[", "]", "{", "}", ",", "=", ".", "\n", "#", "1979-05-27"),
        )
    )

    def seeds(self) -> list[bytes]:
        rng = random.Random(1)
        return [toml_document(rng).encode() for _ in range(64)]

    def generate(self, rng: random.Random) -> bytes:
        if rng.random() < 0.02:
            return ("[supervisor]\nid = 'r'\nx = " + rng.choice(("[", "{a=")) * 5000).encode()
        return toml_document(rng).encode()

    def run(self, data: bytes) -> str:
        filename = "<string>" if len(data) % 3 == 0 else "trees/fuzz.toml"
        resolve = _toml.resolve if len(data) % 2 else None
        try:
            spec = load_tree(data, filename, resolve_target=resolve)
        except ConfigError as e:
            str(e)
            return f"error {min(len(e.errors), 3)} {_shape(e.expected)}"
        return f"ok {spec.strategy.value} {min(len(spec.children), 3)}"


# -- control requests ---------------------------------------------------------------------------

OPS = (
    *("hello", "status", "detail", "restart", "reload", "reload_child", "add", "logs"),
    *("shutdown", "start", "stop", "pause", "resume", "signal", "events", "wait"),
)
IDS = ("a", "b", "c", "p", "pool", "sub", "x", "sub/x", "t/a", "/a/", "all", "t", "nope")


def request(rng: random.Random) -> dict[str, Any]:
    """A control request: a known op and id mostly, each field valid or at an edge."""
    req: dict[str, Any] = {}
    if rng.random() < 0.95:
        req["op"] = rng.choice(OPS) if rng.random() < 0.9 else v.plain(rng)
    if rng.random() < 0.9:
        req["id"] = rng.choice(IDS) if rng.random() < 0.8 else v.plain(rng)
    extras: dict[str, Callable[[], Any]] = {
        "signal": lambda: rng.choice((0, 1, 9, 15, 17, 18, 19, 64, 65, -1, 2**63, "HUP", True)),
        "stream": lambda: rng.choice(("stdout", "stderr", "x", 1)),
        "previous": lambda: rng.choice((True, False, 1)),
        "with_dependents": lambda: rng.choice((True, False, "yes")),
        "args": lambda: rng.choice(([], ["x"], [1], "x", [None], [["a"]])),
        "last": lambda: rng.choice((0, 1, 5, -1, 10**30, "x", None)),
        "_peer": lambda: {"pid": 1, "conn": None},
        # `wait`: a short bound or a bad one (never none: an input must be answered)
        "timeout": lambda: rng.choice((0, 0.01, 0.2, -1, "x", True, float("nan"))),
        "ids": lambda: rng.choice(([], ["a"], ["a", "nope"], "a", [1], [["a"]], None)),
    }
    for key in rng.sample(list(extras), rng.randint(0, 3)):
        req[key] = extras[key]()
    if rng.random() < 0.05:
        req[v.text(rng)] = v.plain(rng)
    return req


class RequestTarget(Target):
    """The control socket's request line: a JSON object, or ValueError ("BadRequest")."""

    name = "request"
    max_len = MAX_LINE + 64
    tokens = tuple(
        s.encode() for s in ('{"op": "', '"id": "', '", ', "}", "[", "{", '"', "\\u", "\\ud800")
    ) + tuple(f'"{op}"'.encode() for op in OPS)

    def seeds(self) -> list[bytes]:
        rng = random.Random(2)
        return [json.dumps(request(rng)).encode() + b"\n" for _ in range(64)]

    def generate(self, rng: random.Random) -> bytes:
        roll = rng.random()
        if roll < 0.05:
            return v.deep(rng).encode()
        if roll < 0.07:
            return b'{"op": "' + b"x" * (MAX_LINE + rng.randint(-2, 2)) + b'"}\n'
        if roll < 0.1:
            return rng.randbytes(rng.randint(0, 64))
        return json.dumps(request(rng), ensure_ascii=rng.random() < 0.5).encode() + b"\n"

    def run(self, data: bytes) -> str:
        # What the server's readline(MAX_LINE + 1) hands over.
        line = data[: data.index(b"\n") + 1] if b"\n" in data else data
        line = line[: MAX_LINE + 1]
        try:
            req = parse_request(line)
        except ValueError as e:
            json.dumps({"ok": False, "error": f"bad request: {e}", "kind": "BadRequest"})
            return f"bad {_shape(str(e), 24)}"
        if type(req) is not dict:
            raise Broken(f"parse_request returned a {type(req).__name__}")
        return f"ok {type(req.get('op')).__name__}"


# -- the child's control stream ----------------------------------------------------------------


def _child_value(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.25:
        return rng.choice((ChildReady(), ChildHeartbeat())).pack()
    if roll < 0.5:
        sizes = (0, 1, 10, 255, 256, 257, 8192, 8193, 32768, 32769)
        texts = [
            rng.choice(("", "x", "\udcff", "\u00e9")) * rng.choice(sizes)
            if rng.random() < 0.3
            else v.text(rng, surrogates=True)
            for _ in range(3)
        ]
        return ChildFailed(*texts).pack()
    if roll < 0.65:  # a record of another stream, or a known tag with wrong fields
        tag = rng.choice(sorted(_protocol._REGISTRY))
        return (tag, *(v.plain(rng) for _ in range(rng.randint(0, 4))))
    if roll < 0.75:
        return ("child_failed", *(v.plain(rng) for _ in range(rng.randint(0, 4))))
    return _wire_value(rng, 0)


def _wire_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth >= 9 or roll < 0.5:
        value = v.scalar(rng)
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            return 0
        if isinstance(value, str) and rng.random() < 0.1:
            return value.encode("utf-8", "surrogatepass")
        return value
    if roll < 0.8:
        items = [_wire_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
        return tuple(items) if rng.random() < 0.5 else items
    return {v.text(rng): _wire_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def frames(rng: random.Random) -> bytes:
    """What a child may write on its control pipe: frames, whole or broken."""
    out = bytearray(rng.randbytes(1))  # how run() splits the rest into reads
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        roll = rng.random()
        if roll < 0.05:
            out += _wire.HEADER.pack(rng.choice((CHILD_FRAME, CHILD_FRAME + 1, 2**32 - 1)))
        elif roll < 0.1:
            out += _wire.HEADER.pack(rng.randint(0, 64)) + rng.randbytes(rng.randint(0, 64))
        else:
            try:
                out += _wire.encode(_child_value(rng))
            except (ValueError, struct.error):  # the sender refuses: too deep, too big, surrogates
                out += _wire.encode(None)
    return bytes(out)


_PLAIN = (type(None), bool, int, float, str, bytes)


def _check_plain(value: Any, depth: int = 0) -> None:
    if isinstance(value, list | tuple):
        for item in value:
            _check_plain(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_plain(key, depth + 1)
            _check_plain(item, depth + 1)
    elif type(value) not in _PLAIN:
        raise Broken(f"decoded a {type(value).__name__}: not plain data")
    if depth > _wire.MAX_DEPTH + 1:
        raise Broken(f"decoded a value {depth} levels deep")


class FrameTarget(Target):
    """The launcher's reader of a child's control pipe: Decoder(CHILD_FRAME), then
    `_protocol.decode(value, CHILD_RECORDS)` and `child_failure`: WireError only."""

    name = "frames"
    max_len = CHILD_FRAME + 1024
    tokens = (b"N", b"T", b"F", b"i", b"f", b"s", b"b", b"t", b"l", b"d", b"\x00\x00\x00")

    def seeds(self) -> list[bytes]:
        rng = random.Random(3)
        return [frames(rng) for _ in range(64)]

    def generate(self, rng: random.Random) -> bytes:
        return frames(rng)

    def run(self, data: bytes) -> str:
        mode, body = (data[0], data[1:]) if data else (0, b"")
        step = (len(body) or 1) if mode % 4 == 0 else 1 if mode % 4 == 1 else mode * 7 % 97 + 1
        if step == 1 and len(body) > 2048:
            step = 65536  # os.read's size, as read_available uses
        decoder = _wire.Decoder(CHILD_FRAME)
        records = 0
        try:
            for at in range(0, len(body), step):
                for value in decoder.feed(body[at : at + step]):
                    _check_plain(value)
                    record = _protocol.decode(value, _protocol.CHILD_RECORDS)
                    if isinstance(record, ChildFailed):
                        _protocol.child_failure(record)
                    elif not isinstance(record, ChildReady | ChildHeartbeat):
                        raise Broken(f"decoded a {type(record).__name__} from a child")
                    records += 1
                if decoder.pending >= _wire.HEADER.size + CHILD_FRAME:
                    raise Broken(f"{decoder.pending} bytes pending, over one frame")
        except _wire.WireError as e:
            return f"wire {_shape(str(e).split(chr(39))[0], 30)}"
        return f"ok {min(records, 3)} {min(decoder.pending, 1)}"


# -- sd_notify ----------------------------------------------------------------------------------

_NOTIFY_KEYS = ("READY", "STATUS", "MAINPID", "WATCHDOG", "STOPPING", "RELOADING", "ERRNO")


def datagram(rng: random.Random, own: int) -> bytes:
    lines = []
    for _ in range(rng.randint(0, 5)):
        key = rng.choice(_NOTIFY_KEYS) if rng.random() < 0.9 else v.text(rng)
        value = rng.choice(("1", "0", "trigger", str(own), "1", "\u00b2", "\u0663", " 1", "+1"))
        if rng.random() < 0.3:
            value = v.text(rng) * rng.choice((1, 1, 100, 2000))
        lines.append(f"{key}={value}" if rng.random() < 0.95 else key)
    sep = rng.choice(("\n", "\n", "\r\n", "\x00"))
    data = sep.join(lines).encode("utf-8", "surrogatepass")
    if rng.random() < 0.05:
        data += b"X" * (MAX_DATAGRAM - len(data) + rng.randint(-1, 1))
    return data


class NotifyTarget(Target):
    """The sd_notify datagram parser (`NotifyEndpoint`): never raises; one datagram in
    eight through the real socket (recvmsg, credentials), the rest to its parser."""

    name = "sd_notify"
    max_len = MAX_DATAGRAM + 64
    tokens = (*(f"{k}=".encode() for k in _NOTIFY_KEYS), b"\n", b"1", b"trigger")

    def open(self) -> None:
        self.pid = os.getpid()
        self.endpoint = NotifyEndpoint("fuzz", watchdog=1.0)
        self.endpoint.attach(self.pid)
        self.client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    def close(self) -> None:
        self.client.close()
        self.endpoint.close()

    def seeds(self) -> list[bytes]:
        rng = random.Random(4)
        return [b"READY=1", b"WATCHDOG=1\nSTATUS=up", f"MAINPID={os.getpid()}".encode()] + [
            datagram(rng, os.getpid()) for _ in range(61)
        ]

    def generate(self, rng: random.Random) -> bytes:
        return datagram(rng, self.pid)

    def run(self, data: bytes) -> str:
        ep = self.endpoint
        if len(data) % 8 == 0:
            self.client.sendto(data, ep.path)
            notes = ep.read()
            if len(notes) > 1:
                raise Broken(f"one datagram read as {len(notes)}")
        else:
            note = ep._accept(data, 0, self.pid)
            notes = [] if note is None else [note]
        if len(ep.refused) > MAX_REFUSED:
            raise Broken(f"{len(ep.refused)} refusals kept, over {MAX_REFUSED}")
        for note in notes:
            if note.status is not None and len(note.status) > MAX_STATUS:
                raise Broken(f"a STATUS of {len(note.status)} characters")
            if note.main_pid is not None and note.main_pid not in _family(self.pid):
                raise Broken(f"MAINPID={note.main_pid} accepted: not of this child's tree")
        if not notes:
            return "refused " + _shape(ep.refused[-1].why, 20) if ep.refused else "none"
        note = notes[0]
        return "note " + "".join(
            "1" if getattr(note, f) else "0"
            for f in ("ready", "status", "main_pid", "watchdog", "watchdog_trigger", "stopping")
        )

    def state(self) -> str:
        return f"{len(self.endpoint.refused)} refusals kept"


def _family(pid: int) -> set[int]:
    return {pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))}


# -- events files -------------------------------------------------------------------------------

_KINDS = ("child_started", "child_exited", "child_terminated", "x")
_EXIT_KINDS = ("normal", "shutdown", "exit_code", "killed", "exception", "x")


def event_line(rng: random.Random) -> str:
    data: dict[str, Any] = {
        "time": rng.choice((1.5, 0, -1, 1e308, 10**400 if rng.random() < 0.1 else 2)),
        "supervisor": rng.choice(("t", "t/pool", "")),
        "context": rng.choice(_KINDS),
        "offender": rng.choice(("w", None)),
        "reason": None,
        "pid": rng.choice((None, 1234)),
        "incarnation": rng.choice((None, 1)),
        "detail": rng.choice(("", "x")),
    }
    if rng.random() < 0.5:
        reason = {"kind": rng.choice(_EXIT_KINDS), "code": rng.choice((None, 1))}
        if rng.random() < 0.3:
            reason[rng.choice(("signal", "message", "traceback", "stderr_tail", "x"))] = v.plain(
                rng
            )
        data["reason"] = reason
    for _ in range(rng.choice((0, 0, 1, 2))):
        key = rng.choice(list(data))
        if rng.random() < 0.3:
            del data[key]
        else:
            data[key] = v.plain(rng)
    if rng.random() < 0.02:
        return v.deep(rng)
    try:
        return json.dumps(data)
    except ValueError:
        return "{}"


class EventsTarget(Target):
    """`actors.load_events` on a file: events, or ValueError (OSError reading it)."""

    name = "events"
    tokens = tuple(
        s.encode() for s in ('"time": ', '"context": "', '"reason": {', '"kind": "', "null", "\n")
    )

    def open(self) -> None:
        folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, self.path = tempfile.mkstemp(prefix="nt-fuzz-", suffix=".jsonl", dir=folder)
        os.close(fd)

    def close(self) -> None:
        os.unlink(self.path)

    def seeds(self) -> list[bytes]:
        rng = random.Random(5)
        return [
            "\n".join(event_line(rng) for _ in range(rng.randint(1, 3))).encode() + b"\n"
            for _ in range(64)
        ]

    def generate(self, rng: random.Random) -> bytes:
        lines = [event_line(rng) for _ in range(rng.randint(0, 4))]
        return "\n".join(lines).encode() + rng.choice((b"\n", b"", b"\n\n"))

    def run(self, data: bytes) -> str:
        with open(self.path, "wb") as f:
            f.write(data)
        try:
            events = load_events(self.path)
        except ValueError as e:
            return f"bad {_shape(str(e).removeprefix(self.path), 30)}"
        for event in events:
            _use(event)
        return f"ok {min(len(events), 3)}"


def _use(event: Event) -> None:
    """What a tool does with a loaded event: print it, write it, read it back."""
    str(event)
    data = event_to_dict(event)
    again = event_from_dict(json.loads(json.dumps(data)))
    if again != event and event.time == event.time:  # NaN is never equal
        raise Broken(f"{event!r} read back as {again!r}")


_KINDS = ("supervisor_started", "child_started", "child_exited", "child_terminated",
          "start_failed", "child_unhealthy", "probe_failed", "child_healthy",
          "reached_max_restart_intensity", "supervisor_stopped", "operator_action")  # fmt: skip


def journal_line(rng: random.Random) -> str:
    """A line of `nannytree run --event-log`, plausible or not."""
    data: dict[str, Any] = {
        "time": rng.choice((rng.uniform(0, 100), 0, -1, 1e308, float("nan"), "1", None)),
        "who": rng.choice(("t", "t/w", "t/p", "t/p/x", "", "t/\x1b[2J", "u/w", "/", 3)),
        "what": rng.choice((*_KINDS, "", 7)),
        "reason": rng.choice((None, "exit code 1", "unhealthy: 3 failed", "watchdog", "normal", 1)),
        "detail": rng.choice(("", "one_for_one", "failing 1/3", None)),
    }
    if rng.random() < 0.1:
        data["time"] = 10**400
    return json.dumps(data)


class JournalTarget(Target):
    """`supervision.simulate.fit` on a journal's lines: a Fit, or NotEnoughHistory."""

    name = "journal"
    tokens = tuple(
        s.encode() for s in ('"time": ', '"who": "t/', '"what": "child_', '"reason": "', "\n")
    )

    def seeds(self) -> list[bytes]:
        rng = random.Random(7)
        return [self.generate(rng) for _ in range(64)]

    def generate(self, rng: random.Random) -> bytes:
        lines = [journal_line(rng) for _ in range(rng.randint(0, 12))]
        return "\n".join(lines).encode() + rng.choice((b"\n", b""))

    def run(self, data: bytes) -> str:
        from supervision.simulate import NotEnoughHistory, fit, read_journal

        try:
            found = fit(read_journal(data.splitlines()))
        except NotEnoughHistory as e:
            return f"bad {_shape(str(e), 30)}"
        text = str(found)
        if "\x1b" in text:
            raise Broken(f"an escape reached the report: {text!r}")
        for child in found.children.values():
            assert child.models  # every fitted figure makes a valid model (or SpecError)
        return f"ok {min(len(found.children), 3)}"


TARGETS: dict[str, type[Target]] = {
    t.name: t
    for t in (TomlTarget, RequestTarget, FrameTarget, NotifyTarget, EventsTarget, JournalTarget)
}
