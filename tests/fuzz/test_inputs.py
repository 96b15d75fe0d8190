"""Every input a stranger writes, fuzzed (issue 23): a tree file, a control request,
a child's control pipe, an sd_notify datagram, an events file, an event journal to
fit. Nothing may raise but the documented error, hang, or hold more than its bound.

The targets and the long runs (a million inputs each) are in tests/fuzz/; here each
runs under hypothesis for a bounded number of examples, a deadline per example, and
the bugs the fuzzers found stay fixed.
"""

from __future__ import annotations

import json
import os
import random
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors import Tree, load_events
from actors._shell._sd_notify import NotifyEndpoint
from actors.host._server import ControlSocket, parse_request
from supervision import ChildSpec, ConfigError, EventKind, SupervisorSpec, load_tree
from tests.fuzz._control_target import ControlTarget
from tests.fuzz._engine import Target, fuzz, mutate
from tests.fuzz._targets import (
    EventsTarget,
    FrameTarget,
    JournalTarget,
    NotifyTarget,
    RequestTarget,
    TomlTarget,
)

FAST = settings(
    max_examples=300,
    deadline=None,  # pytest-timeout ends a hang; a busy machine's slow example is none
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@contextmanager
def opened(target: Target) -> Iterator[Target]:
    target.open()
    try:
        yield target
    finally:
        target.close()


def inputs(target: Target) -> st.SearchStrategy[bytes]:
    """Random bytes, the target's generated inputs, and its seeds mutated."""
    seeds = target.seeds()

    def mutated(args: tuple[random.Random, bytes]) -> bytes:
        rng, seed = args
        return mutate(rng, seed, seeds, target.tokens, target.max_len)

    randoms = st.randoms(use_true_random=False)
    return st.one_of(
        st.binary(max_size=512),
        randoms.map(lambda rng: target.generate(rng)[: target.max_len]),
        st.tuples(randoms, st.sampled_from(seeds)).map(mutated),
    )


def check_target(target: Target, config: settings = FAST) -> None:
    with opened(target):

        @config
        @given(inputs(target))
        def documented_errors_only(data: bytes) -> None:
            target.run(data)

        documented_errors_only()


# -- each target under hypothesis ----------------------------------------------------------


def _name(make: type[Target]) -> str:
    return make.name


@pytest.mark.parametrize(
    "make",
    [TomlTarget, RequestTarget, FrameTarget, NotifyTarget, EventsTarget, JournalTarget],
    ids=_name,
)
def test_a_parser_raises_only_its_documented_error(make: Callable[[], Target]) -> None:
    check_target(make())


def test_the_control_socket_answers_every_request_and_the_tree_runs_on() -> None:
    """Fuzzed request lines to `nannytree run`'s server and Controller on a live tree:
    each gets JSON lines, no handler raises, and the tree leaves no process."""
    check_target(
        ControlTarget(),
        settings(FAST, max_examples=60),
    )


# -- the fuzzer finds what it should (a harness that cannot fail is a defect) ---------------


class _Planted(Target):
    name = "planted"
    deadline = 0.2
    fresh = 0.0

    def seeds(self) -> list[bytes]:
        return [b"hello world"]

    def run(self, data: bytes) -> str:
        if b"\xff" in data:
            raise KeyError("planted")
        if data.startswith(b"\x00"):
            while True:  # a hang: the deadline must end it
                pass
        return "ok"


def test_the_fuzzer_reports_an_undocumented_error_and_a_hang() -> None:
    report = fuzz(_Planted(), 2000, seed=1)
    keys = set(report.findings)
    assert any(k.startswith("KeyError at ") for k in keys), keys
    assert "hang" in keys, keys
    assert report.outcomes["ok"] > 1000 and report.findings["hang"].data.startswith(b"\x00")


# -- the bugs the fuzzers found, fixed -----------------------------------------------------

TREE = '[supervisor]\nid = "r"\n[[supervisor.children]]\nid = "w"\ncommand = ["sleep", "1"]\n'


@pytest.mark.parametrize("nest", ["[", "{a = "])
def test_a_tree_file_nested_too_deep_is_a_config_error(nest: str) -> None:
    # tomllib raised RecursionError.
    with pytest.raises(ConfigError, match="nested too deep"):
        load_tree(f"[supervisor]\nx = {nest * 5000}")


def test_a_memory_limit_too_large_to_count_is_a_config_error() -> None:
    # int(float("9" * 400)) raised OverflowError.
    with pytest.raises(ConfigError, match=r"memory_limit is .*count in bytes"):
        load_tree(TREE + f'memory_limit = "{"9" * 400}M"\n')
    (child,) = load_tree(TREE + 'memory_limit = "1.5G"\n').children
    assert isinstance(child, ChildSpec) and child.memory_limit == 3 << 29


def test_a_request_nested_too_deep_is_a_bad_request(tmp_path: Path) -> None:
    # json's decoder raised RecursionError: the connection closed with no answer.
    deep = b"[" * 50_000 + b"\n"
    with pytest.raises(ValueError, match="nested too deep"):
        parse_request(deep)
    control = ControlSocket.bind(tmp_path / "x.sock")
    try:
        control.serve(lambda request, send: None)  # never called: the line is refused
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(20)
            s.connect(str(control.path))
            s.sendall(deep)
            answer = json.loads(s.makefile("rb").readline())
    finally:
        control.close()
    assert answer == {
        "ok": False,
        "error": "bad request: nested too deep",
        "kind": "BadRequest",
    }


@pytest.mark.parametrize("key", ["user", "group"])
@pytest.mark.parametrize("digit", ["\u00b2", "\u0663"])
def test_a_user_or_group_of_non_ascii_digits_is_a_config_error(key: str, digit: str) -> None:
    # "²".isdigit() but int("²") raised ValueError (found by the toml fuzzer).
    with pytest.raises(ConfigError, match=key):
        load_tree(TREE + f'{key} = "{digit}"\n')


def test_a_request_whose_op_is_not_a_string_is_answered(tmp_path: Path) -> None:
    # An op that was a list made the operator-event check raise TypeError
    # (unhashable), after the answer was computed but before it was sent.
    from actors import EventLog
    from actors.host._controller import Controller

    answers: list[dict[str, object]] = []
    controller = Controller(None, EventLog(), {}, lambda why: None, lambda: None)  # type: ignore[arg-type]
    for op in (["stop"], {"a": 1}, 3, None):
        controller.handle({"op": op, "_peer": {"pid": 1, "uid": 0}}, answers.append)  # type: ignore[arg-type]
    assert len(answers) == 4 and all(a.get("ok") is False for a in answers), answers


@pytest.mark.parametrize("digit", ["\u00b2", "\u0663"])
def test_a_mainpid_of_non_ascii_digits_is_refused(digit: str) -> None:
    # "²".isdigit() but int("²") raised ValueError; "٣" was read as pid 3.
    with NotifyEndpoint("c") as endpoint:
        endpoint.attach(os.getpid())
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(f"READY=1\nMAINPID={digit}".encode(), endpoint.path)
        (note,) = endpoint.read()
        assert note.ready and note.main_pid is None
        assert endpoint.refused[-1].why == f"MAINPID={digit!r} is not a process id"


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("[" * 50_000, "not an event: nested too deep|maximum recursion"),
        ('{"time": 1, "supervisor": "t", "context": "child_started", "pid": [1]}', "pid is a"),
        ('{"time": 1, "supervisor": "t"}', "context is missing"),
        ("[1]", "is a list, not an object"),
        ('{"time": 1e999999, "supervisor": "t", "context": "x"}', "not an event"),
        (f'{{"time": {"9" * 400}, "supervisor": "t", "context": "child_started"}}', "too large"),
        (
            '{"time": 1, "supervisor": "t", "context": "child_exited", "reason": {"x": 1}}',
            "reason.kind is missing",
        ),
        (
            '{"time": 1, "supervisor": "t", "context": "child_exited",'
            ' "reason": {"kind": "normal", "x": 1}}',
            r"reason has unknown fields \['x'\]",
        ),
    ],
)
def test_an_events_file_line_that_is_not_an_event_is_a_value_error(
    tmp_path: Path, line: str, why: str
) -> None:
    path = tmp_path / "events.jsonl"
    good = '{"time": 1.0, "supervisor": "t", "context": "child_started", "offender": "w"}'
    path.write_text(f"{good}\n\n{line}\n")
    with pytest.raises(ValueError, match=rf"events\.jsonl, line 3: (.*)({why})") as e:
        load_events(path)
    assert e.value.__cause__ is None


def raise_a_lone_surrogate() -> None:
    raise ValueError("bad \ud800 text")


def test_a_python_child_error_with_a_lone_surrogate_is_still_reported() -> None:
    spec = SupervisorSpec(
        id="r",
        intensity=0,
        children=[ChildSpec(id="w", target=raise_a_lone_surrogate, restart="temporary")],
    )
    with Tree(spec) as tree:
        exited = tree.log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED, 30)
    assert exited.reason is not None and exited.reason.exc_type == "ValueError"
    assert "bad" in exited.reason.message


# -- the long run, as a soak test ------------------------------------------------------------

SOAK_SECONDS = float(os.environ.get("NANNYTREE_FUZZ_SECONDS", "5"))  # per target; CI: 20


@pytest.mark.soak
@pytest.mark.timeout(SOAK_SECONDS + 120)
@pytest.mark.parametrize(
    "make",
    [
        TomlTarget,
        RequestTarget,
        FrameTarget,
        NotifyTarget,
        EventsTarget,
        JournalTarget,
        ControlTarget,
    ],
    ids=_name,
)
def test_fuzz_soak(make: Callable[[], Target], tmp_path: Path) -> None:
    """Each target for NANNYTREE_FUZZ_SECONDS (python -m tests.fuzz runs it longer)."""
    seed = random.randrange(1 << 32)  # rerun: python -m tests.fuzz TARGET --seed N
    report = fuzz(make(), 10**9, seconds=SOAK_SECONDS, seed=seed, out=tmp_path)
    assert not report.findings, f"seed {seed}: {report.summary()}"
    # Memory: nothing the run holds grows in its second half (a leak would).
    assert report.rss_end - report.rss_half < 16 << 20, f"seed {seed}: {report.summary()}"
