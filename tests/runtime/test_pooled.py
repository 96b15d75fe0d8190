"""Pooled actors: no thread per actor, one message at a time per actor, in order,
and a handler that waits never holds up another actor."""

from __future__ import annotations

import threading
from typing import Any

import pykka
import pytest

from actors._runtime import _pooled as _dispatch
from actors._runtime._actor_loop import Fatal, ThreadedActor
from actors._runtime._pooled import PooledActor, blocking, pool_threads
from supervision import ChildSpec, Strategy, SupervisorSpec
from tests.support import wait_until


class Recorder(PooledActor):
    def __init__(
        self, gate: threading.Event | None = None, entered: list[int] | None = None
    ) -> None:
        super().__init__()
        self.gate = gate
        self.entered = entered
        self.seen: list[Any] = []
        self.inside = 0
        self.overlap = False

    def on_receive(self, message: Any) -> Any:
        self.inside += 1
        if self.inside > 1:
            self.overlap = True
        try:
            if message == "report":
                return list(self.seen), self.overlap
            if message == "wait":
                assert self.gate is not None and self.entered is not None
                self.entered.append(1)
                with blocking():
                    self.gate.wait(30)
            elif message == "boom":
                raise ValueError("boom")
            self.seen.append(message)
            return message
        finally:
            self.inside -= 1


def test_an_actor_handles_its_messages_in_order_one_at_a_time() -> None:
    refs = [Recorder.start() for _ in range(20)]
    try:
        for i in range(200):
            for ref in refs:
                ref.tell(i)
        for ref in refs:
            assert ref.ask("end") == "end"
            assert ref.ask("report") == ([*range(200), "end"], False)
    finally:
        for ref in refs:
            ref.stop()


def test_a_thousand_idle_actors_hold_no_thread_each() -> None:
    before = threading.active_count()
    refs = [Recorder.start() for _ in range(1000)]
    try:
        for ref in refs:
            ref.ask("ping")
        assert threading.active_count() - before <= _dispatch.RUNNABLE + 2
    finally:
        for ref in refs:
            ref.stop()


def test_a_waiting_handler_does_not_hold_up_other_actors() -> None:
    gate, entered = threading.Event(), []
    waiting = [Recorder.start(gate, entered) for _ in range(_dispatch.RUNNABLE + 3)]
    other = Recorder.start()
    try:
        for ref in waiting:
            ref.tell("wait")
        wait_until(lambda: len(entered) == len(waiting), 10, "all handlers waiting")
        assert other.ask("still served", timeout=10) == "still served"
    finally:
        gate.set()
        for ref in [*waiting, other]:
            ref.stop()


def test_a_stopped_actor_answers_dead_and_a_failing_one_stops() -> None:
    ref = Recorder.start()
    ref.stop()
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("late")
    failing = Recorder.start()
    with pytest.raises(ValueError, match="boom"):
        failing.ask("boom")  # an asked failure is the caller's
    assert failing.is_alive()
    failing.tell("boom")  # a told one stops the actor, as with pykka's own
    wait_until(lambda: not failing.is_alive(), 10, "the failing actor stopped")


def test_extra_pool_threads_retire_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_dispatch, "IDLE_RETIRE", 0.05)
    gate, entered = threading.Event(), []
    refs = [Recorder.start(gate, entered) for _ in range(8)]
    try:
        for ref in refs:
            ref.tell("wait")
        wait_until(lambda: pool_threads() >= 8, 10, "a thread per waiting handler")
    finally:
        gate.set()
        for ref in refs:
            ref.stop()
    # Threads already idle may sleep out the old timeout once before they see the new one.
    wait_until(lambda: pool_threads() <= _dispatch.KEEP, 15, "extra threads retired")


def test_a_tree_of_command_children_costs_no_thread_per_child(tree: Any) -> None:
    n = 200
    before = threading.active_count()
    spec = SupervisorSpec(
        id="many",
        children=[ChildSpec(id=f"c{i}", command=["sleep", "1000"]) for i in range(n)],
    )
    ref = tree(spec)
    children = ref.proxy().which_children().get()
    assert len(children) == n and all(c.pid for c in children)
    assert threading.active_count() - before < 20  # was one per child


def test_children_stopped_at_once_wait_on_timers_not_threads(tree: Any, tmp_path: Any) -> None:
    """simple_one_for_one children are all sent SIGTERM at once (OTP); each stop
    then waits for its exit as a message, so 40 slow stops hold no 40 threads."""
    n = 40
    release = tmp_path / "release"
    script = (
        f'trap \'touch "{tmp_path}/term-$1"; while [ ! -e "{release}" ]; do sleep 0.02; done; '
        "exit 0' TERM; while :; do sleep 0.05; done"
    )
    spec = SupervisorSpec(
        id="pool",
        strategy=Strategy.SIMPLE_ONE_FOR_ONE,
        children=[ChildSpec(id="w", command=["sh", "-c", script, "sh"], shutdown=30)],
    )
    ref = tree(spec)
    nanny = ref.proxy()
    for i in range(n):
        nanny.start_child((str(i),)).get()
    wait_until(lambda: len(nanny.which_children().get()) == n, 30, "all started")
    threads = pool_threads()  # those left by earlier tests retire later
    stopper = threading.Thread(target=lambda: ref.stop(timeout=60))
    stopper.start()
    try:
        wait_until(lambda: len(list(tmp_path.glob("term-*"))) == n, 30, "every child got SIGTERM")
        assert pool_threads() - threads < n // 4
    finally:
        release.touch()
        stopper.join(60)
    assert not stopper.is_alive()


def test_a_forked_host_gets_a_pool_of_its_own() -> None:
    """After os.fork() the pool's threads are not in the child: the child's actors
    must still be served, by a pool started afresh there."""
    import os
    import warnings

    ref = Recorder.start()
    ref.ask("warm")  # the parent's pool has threads now
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 1
        try:
            child = Recorder.start()
            code = 0 if child.ask("here", timeout=10) == "here" else 2
        finally:
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        ref.stop()


class Starting(PooledActor):
    def __init__(self, log: list[str], fail: bool = False) -> None:
        super().__init__()
        self.log = log
        self.fail = fail

    def on_start(self) -> None:
        self.log.append("on_start")
        if self.fail:
            raise RuntimeError("cannot start")

    def on_receive(self, message: Any) -> Any:
        self.log.append(message)
        return message


def test_on_start_runs_before_the_first_message_even_one_sent_at_once() -> None:
    log: list[str] = []
    ref = Starting.start(log)
    try:
        assert ref.ask("first", timeout=10) == "first"
        assert ref.ask("second", timeout=10) == "second"
        assert log == ["on_start", "first", "second"]
    finally:
        ref.stop()
    idle: list[str] = []
    Starting.start(idle).stop()  # never told anything: set up and stopped all the same
    assert idle == ["on_start"]


def test_an_actor_whose_on_start_fails_is_stopped_before_any_message() -> None:
    log: list[str] = []
    ref = Starting.start(log, fail=True)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("first", timeout=10)
    assert log == ["on_start"]
    wait_until(lambda: not ref.is_alive(), 10, "the actor to stop")


# -- a BaseException: the actor and its tree, never the process --------------------------


class Doom(BaseException):
    """What a handler raises where pykka would stop every actor (as SystemExit)."""


class Above(PooledActor):
    """Makes an actor in its handler (so it is that actor's actor above); keeps what it is told."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[Any] = []

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, type):
            return message.start()
        if message == "told":
            return list(self.told)
        self.told.append(message)
        return None


class PooledDoomed(PooledActor):
    stopped = threading.Event()

    def on_receive(self, message: Any) -> Any:
        raise Doom("broken on purpose")

    def on_stop(self) -> None:
        type(self).stopped.set()


class ThreadedDoomed(ThreadedActor):
    stopped = threading.Event()

    def on_receive(self, message: Any) -> Any:
        raise Doom("broken on purpose")

    def on_stop(self) -> None:
        type(self).stopped.set()


@pytest.mark.parametrize("doomed", [PooledDoomed, ThreadedDoomed])
def test_a_base_exception_stops_its_actor_and_tells_the_one_above_not_every_actor(
    doomed: type[PooledDoomed | ThreadedDoomed],
) -> None:
    doomed.stopped.clear()
    above, bystander = Above.start(), Recorder.start()
    try:
        ref = above.ask(doomed)
        with pytest.raises(pykka.ActorDeadError):  # the asker is answered, not left waiting
            ref.ask("anything", timeout=10)
        assert doomed.stopped.is_set() and not ref.is_alive()  # stopped as pykka's: on_stop ran
        wait_until(lambda: bool(above.ask("told")), 10, "the actor above told")
        (fatal,) = above.ask("told")
        assert isinstance(fatal, Fatal) and fatal.ref is ref
        assert isinstance(fatal.error, Doom) and str(fatal.error) == "broken on purpose"
        assert above.is_alive() and bystander.ask("still here", timeout=10) == "still here"
    finally:
        above.stop()
        bystander.stop()


class DoomedAtStart(PooledActor):
    def on_start(self) -> None:
        raise Doom("cannot start")


def test_a_base_exception_in_on_start_stops_the_actor_and_answers_its_askers() -> None:
    ref = DoomedAtStart.start()
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("first", timeout=10)
    wait_until(lambda: not ref.is_alive(), 10, "the actor to stop")
    assert pykka.ActorRegistry.get_by_urn(ref.actor_urn) is None
