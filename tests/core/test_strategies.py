"""Strategies (sections 3 and 5): the exhaustive exit table, one_for_all, rest_for_one,
simple_one_for_one, the retry loop per strategy, and a state machine that checks the
invariants on random runs."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from supervision import (
    AlreadyPresent,
    AlreadyStarted,
    AutoShutdown,
    ChildNotFound,
    ChildRestarting,
    ChildRunning,
    ChildSpec,
    EventKind,
    ExitKind,
    ExitReason,
    Restart,
    SimpleOneForOneError,
    SpecError,
    StartError,
    Strategy,
    Supervisor,
    SupervisorNotRunning,
    SupervisorSpec,
    TerminateChildren,
    TooManyChildren,
)
from tests.support.fake_executor import (
    ChildExit,
    FakeExecutor,
    Retry,
    noop,
    running,
    worker,
)

REASONS = {
    "normal": ExitReason.normal(),
    "shutdown": ExitReason.shutdown(),
    "exit_code": ExitReason(ExitKind.EXIT_CODE, code=1),
    "killed": ExitReason(ExitKind.KILLED, signal=9),
}

# -- the exhaustive table: the middle of three children exits --------------------------
#
# Static strategies: a (permanent), b (the restart type under test), c (permanent).
# simple_one_for_one: three dynamic children w-1, w-2, w-3 of the template's restart type.

P, T, X = "permanent", "transient", "temporary"
ABC, AC = ["a", "b", "c"], ["a", "c"]
W, W13 = ["w-1", "w-2", "w-3"], ["w-1", "w-3"]

TABLE = [
    # strategy       restart reason     terminated  started          charged remaining
    ("one_for_one", P, "normal", [], ["b"], True, ABC),
    ("one_for_one", P, "shutdown", [], ["b"], True, ABC),
    ("one_for_one", P, "exit_code", [], ["b"], True, ABC),
    ("one_for_one", P, "killed", [], ["b"], True, ABC),
    ("one_for_one", T, "normal", [], [], False, ABC),
    ("one_for_one", T, "shutdown", [], [], False, ABC),
    ("one_for_one", T, "exit_code", [], ["b"], True, ABC),
    ("one_for_one", T, "killed", [], ["b"], True, ABC),
    ("one_for_one", X, "normal", [], [], False, AC),
    ("one_for_one", X, "shutdown", [], [], False, AC),
    ("one_for_one", X, "exit_code", [], [], False, AC),
    ("one_for_one", X, "killed", [], [], False, AC),
    ("one_for_all", P, "normal", ["c", "a"], ["a", "b", "c"], True, ABC),
    ("one_for_all", P, "shutdown", ["c", "a"], ["a", "b", "c"], True, ABC),
    ("one_for_all", P, "exit_code", ["c", "a"], ["a", "b", "c"], True, ABC),
    ("one_for_all", P, "killed", ["c", "a"], ["a", "b", "c"], True, ABC),
    ("one_for_all", T, "normal", [], [], False, ABC),
    ("one_for_all", T, "shutdown", [], [], False, ABC),
    ("one_for_all", T, "exit_code", ["c", "a"], ["a", "b", "c"], True, ABC),
    ("one_for_all", T, "killed", ["c", "a"], ["a", "b", "c"], True, ABC),
    ("one_for_all", X, "normal", [], [], False, AC),
    ("one_for_all", X, "shutdown", [], [], False, AC),
    ("one_for_all", X, "exit_code", [], [], False, AC),
    ("one_for_all", X, "killed", [], [], False, AC),
    ("rest_for_one", P, "normal", ["c"], ["b", "c"], True, ABC),
    ("rest_for_one", P, "shutdown", ["c"], ["b", "c"], True, ABC),
    ("rest_for_one", P, "exit_code", ["c"], ["b", "c"], True, ABC),
    ("rest_for_one", P, "killed", ["c"], ["b", "c"], True, ABC),
    ("rest_for_one", T, "normal", [], [], False, ABC),
    ("rest_for_one", T, "shutdown", [], [], False, ABC),
    ("rest_for_one", T, "exit_code", ["c"], ["b", "c"], True, ABC),
    ("rest_for_one", T, "killed", ["c"], ["b", "c"], True, ABC),
    ("rest_for_one", X, "normal", [], [], False, AC),
    ("rest_for_one", X, "shutdown", [], [], False, AC),
    ("rest_for_one", X, "exit_code", [], [], False, AC),
    ("rest_for_one", X, "killed", [], [], False, AC),
    ("simple_one_for_one", P, "normal", [], ["w-2"], True, W),
    ("simple_one_for_one", P, "shutdown", [], ["w-2"], True, W),
    ("simple_one_for_one", P, "exit_code", [], ["w-2"], True, W),
    ("simple_one_for_one", P, "killed", [], ["w-2"], True, W),
    ("simple_one_for_one", T, "normal", [], [], False, W13),
    ("simple_one_for_one", T, "shutdown", [], [], False, W13),
    ("simple_one_for_one", T, "exit_code", [], ["w-2"], True, W),
    ("simple_one_for_one", T, "killed", [], ["w-2"], True, W),
    ("simple_one_for_one", X, "normal", [], [], False, W13),
    ("simple_one_for_one", X, "shutdown", [], [], False, W13),
    ("simple_one_for_one", X, "exit_code", [], [], False, W13),
    ("simple_one_for_one", X, "killed", [], [], False, W13),
]


def three_children(strategy: str, restart: str) -> FakeExecutor:
    if strategy == "simple_one_for_one":
        spec = SupervisorSpec("sup", strategy=strategy, children=[worker("w", restart=restart)])
        ex = running(spec)
        for _ in range(3):
            ex.ok("start_child", ())
        return ex
    children = [worker("a"), worker("b", restart=restart), worker("c")]
    return running(SupervisorSpec("sup", strategy=strategy, children=children))


@pytest.mark.parametrize(
    ("strategy", "restart", "reason", "terminated", "started", "charged", "remaining"),
    TABLE,
    ids=[f"{r[0]}-{r[1]}-{r[2]}" for r in TABLE],
)
def test_middle_child_exit_table(
    strategy, restart, reason, terminated, started, charged, remaining
):
    ex = three_children(strategy, restart)
    middle = ex.sup.children()[1].id
    ex.clock.advance(1.0)
    mark = len(ex.log)
    ex.exit(middle, REASONS[reason])
    assert ex.terminated_ids(mark) == terminated, "terminated, in this order"
    assert ex.started_ids(mark) == started, "started, in this order"
    assert ex.log[mark:] == [("terminate", c) for c in terminated] + [("start", c) for c in started]
    assert ex.sup.restart_times == ((1.0,) if charged else ())
    assert [c.id for c in ex.sup.children()] == remaining
    states = {c.id: c.state for c in ex.sup.children()}
    if middle in remaining:
        assert states.pop(middle) == ("running" if started else "stopped")
    assert set(states.values()) <= {"running"}, "every other child runs"
    assert not ex.exits
    assert not ex.mailbox


# -- one_for_all --------------------------------------------------------------------


def test_one_for_all_removes_temporary_bystanders_instead_of_restarting_them():
    children = [worker("a"), worker("t", restart="temporary"), worker("c")]
    ex = running(SupervisorSpec("sup", strategy="one_for_all", children=children))
    mark = len(ex.log)
    ex.exit("c")
    assert ex.log[mark:] == [("terminate", "t"), ("terminate", "a"), ("start", "a"), ("start", "c")]
    assert [c.id for c in ex.sup.children()] == ["a", "c"]
    assert EventKind.CHILD_DELETED in ex.event_kinds()


def test_one_for_all_bystander_that_died_unnoticed_is_restarted_and_its_exit_is_stale():
    ex = running(
        SupervisorSpec(
            "sup",
            strategy="one_for_all",
            intensity=5,
            children=[
                worker("a"),
                worker("b"),
                worker("c"),
            ],
        )
    )
    ex.kill("b")
    ex.kill("c")  # queued behind b's exit; c is terminated by b's group restart first
    mark = len(ex.log)
    ex.step()
    assert ex.log[mark:] == [
        ("terminate", "c"),
        ("terminate", "a"),
        ("start", "a"),
        ("start", "b"),
        ("start", "c"),
    ]
    mark = len(ex.log)
    ex.step()  # c's exit, from the incarnation the group restart replaced
    assert ex.log[mark:] == []
    assert ex.events[-1].context is EventKind.STALE_EXIT_IGNORED
    assert ex.sup.restart_times == (0.0,)


def test_one_for_all_retry_reterminates_the_siblings_already_restarted():
    ex = running(
        SupervisorSpec(
            "sup",
            strategy="one_for_all",
            intensity=5,
            children=[
                worker("a"),
                worker("b"),
                worker("c"),
            ],
        )
    )
    ex.fail_starts("b")
    mark = len(ex.log)
    ex.exit("c")
    assert ex.log[mark:] == [
        ("terminate", "b"),
        ("terminate", "a"),
        ("start", "a"),
        ("start_failed", "b"),
    ]
    assert {c.id: c.state for c in ex.sup.children()} == {
        "a": "running",
        "b": "restarting",
        "c": "stopped",
    }
    mark = len(ex.log)
    ex.drain()
    assert ex.log[mark:] == [("terminate", "a"), ("start", "a"), ("start", "b"), ("start", "c")]
    assert len(ex.sup.restart_times) == 2, "the retry is charged too"


# -- rest_for_one ----------------------------------------------------------------------


def rest_for_one(*ids: str, **flags) -> FakeExecutor:
    spec = SupervisorSpec(
        "sup", strategy="rest_for_one", children=[worker(i) for i in ids], **flags
    )
    return running(spec)


def test_rest_for_one_first_child_exit_restarts_every_child():
    ex = rest_for_one("a", "b", "c")
    mark = len(ex.log)
    ex.exit("a")
    assert ex.log[mark:] == [
        ("terminate", "c"),
        ("terminate", "b"),
        ("start", "a"),
        ("start", "b"),
        ("start", "c"),
    ]


def test_rest_for_one_last_child_exit_restarts_only_it():
    ex = rest_for_one("a", "b", "c")
    mark = len(ex.log)
    ex.exit("c")
    assert ex.log[mark:] == [("start", "c")]


def test_rest_for_one_leaves_children_before_the_crashed_one_alone_even_if_stopped():
    ex = rest_for_one("a", "b", "c", intensity=5)
    ex.ok("terminate_child", "a")
    a_before = ex.sup.which_child("a")
    mark = len(ex.log)
    ex.exit("b")
    assert ex.log[mark:] == [("terminate", "c"), ("start", "b"), ("start", "c")]
    assert ex.sup.which_child("a") == a_before


def test_rest_for_one_removes_temporary_children_in_the_rest():
    spec = SupervisorSpec(
        "sup",
        strategy="rest_for_one",
        children=[worker("a"), worker("b"), worker("t", restart="temporary"), worker("d")],
    )
    ex = running(spec)
    mark = len(ex.log)
    ex.exit("b")
    assert ex.log[mark:] == [
        ("terminate", "d"),
        ("terminate", "t"),
        ("start", "b"),
        ("start", "d"),
    ]
    assert [c.id for c in ex.sup.children()] == ["a", "b", "d"]


def test_rest_for_one_retry_resumes_at_the_failed_child():
    ex = rest_for_one("a", "b", "c", "d", intensity=5)
    ex.fail_starts("c")
    b_incarnation = None
    mark = len(ex.log)
    ex.exit("b")
    assert ex.log[mark:] == [
        ("terminate", "d"),
        ("terminate", "c"),
        ("start", "b"),
        ("start_failed", "c"),
    ]
    b_incarnation = ex.incarnation("b")
    mark = len(ex.log)
    ex.drain()
    assert ex.log[mark:] == [("start", "c"), ("start", "d")]
    assert ex.incarnation("b") == b_incarnation, "b, before the failed child, stays up"
    assert [c.state for c in ex.sup.children()] == ["running"] * 4


# -- simple_one_for_one ----------------------------------------------------------------


def simple(template: ChildSpec | SupervisorSpec | None = None, **flags) -> FakeExecutor:
    spec = SupervisorSpec(
        "pool",
        strategy="simple_one_for_one",
        children=[template or worker("w")],
        **flags,
    )
    return running(spec)


def test_simple_one_for_one_starts_nothing_at_init():
    ex = simple()
    assert ex.log == []
    assert ex.sup.children() == []
    assert ex.sup.count_children().specs == 1


def test_simple_one_for_one_generates_ids_from_the_template_and_never_reuses_them():
    ex = simple(worker("w", restart="temporary"))
    first = ex.ok("start_child", ())
    second = ex.ok("start_child", None)
    assert (first.id, second.id) == ("w-1", "w-2")
    ex.ok("terminate_child", "w-1")
    assert ex.ok("start_child", ()).id == "w-3"


def test_simple_one_for_one_appends_extra_args_to_the_template_args():
    ex = simple(ChildSpec("w", target=noop, args=(1,)))
    ex.ok("start_child", (2, 3))
    assert ex.sup.get_childspec("w-1").args == (1, 2, 3)


def test_simple_one_for_one_appends_extra_args_to_the_command_argv():
    ex = simple(ChildSpec("w", command=["sleep"]))
    ex.ok("start_child", ["10"])
    spec = ex.sup.get_childspec("w-1")
    assert spec.command == ("sleep", "10")
    assert spec.args == ()


def test_simple_one_for_one_children_are_addressable_by_pid():
    ex = simple()
    ex.ok("start_child", ())
    ex.ok("start_child", ())
    pid = ex.pid("w-2")
    assert ex.sup.which_child(pid).id == "w-2"
    assert ex.sup.get_childspec(pid).id == "w-2"
    assert ex.ok("terminate_child", pid) is None
    assert ex.log[-1] == ("terminate", "w-2")
    assert [c.id for c in ex.sup.children()] == ["w-1"], "a terminated dynamic child is gone"
    with pytest.raises(ChildNotFound):
        ex.sup.which_child(pid)


def test_simple_one_for_one_refuses_more_than_max_children():
    ex = simple(max_children=2)
    ex.ok("start_child", ())
    ex.ok("start_child", ())
    reply = ex.call("start_child", ())
    assert isinstance(reply.error, TooManyChildren)
    assert reply.error.max_children == 2
    assert "max_children=2" in str(reply.error)
    assert len(ex.sup.children()) == 2


def test_simple_one_for_one_child_that_ends_without_restart_frees_its_max_children_slot():
    ex = simple(worker("w", restart="transient"), max_children=1)
    ex.ok("start_child", ())
    ex.exit("w-1", ExitReason.normal())
    assert ex.sup.children() == []
    assert ex.sup.count_children().workers == 0
    assert ex.ok("start_child", ()).id == "w-2"


def test_simple_one_for_one_shuts_children_down_in_parallel_with_the_template_shutdown():
    ex = simple(worker("w", shutdown=2.5))
    for _ in range(3):
        ex.ok("start_child", ())
    ex.exit("w-2", ExitReason.normal())  # restarted: permanent
    actions = ex.shutdown()
    [terminate_all] = [a for a in actions if isinstance(a, TerminateChildren)]
    assert set(terminate_all.child_ids) == {"w-1", "w-2", "w-3"}
    assert terminate_all.shutdown == 2.5
    assert [entry[0] for entry in ex.log[-1:]] == ["terminate_all"]
    assert ex.terminated_ids() == [], "no sequential TerminateChild"
    assert ex.exits[0].reason.is_normal
    assert ex.live() == []


def test_simple_one_for_one_shutdown_without_children_just_exits():
    ex = simple()
    actions = ex.shutdown()
    assert not any(isinstance(a, TerminateChildren) for a in actions)
    assert ex.exits


def test_simple_one_for_one_restarts_only_the_crashed_child_and_shares_the_intensity():
    ex = simple(intensity=1)
    for _ in range(3):
        ex.ok("start_child", ())
    mark = len(ex.log)
    ex.exit("w-1")
    assert ex.log[mark:] == [("start", "w-1")]
    ex.exit("w-3")
    assert ex.log[-1][0] == "terminate_all"
    assert ex.exits


def test_simple_one_for_one_start_failure_replies_the_error_and_stores_nothing():
    ex = simple()
    ex.fail_starts("w-1", reason=ExitReason.start_failure("exec failed"))
    reply = ex.call("start_child", ())
    assert isinstance(reply.error, StartError)
    assert reply.error.reason == ExitReason.start_failure("exec failed")
    assert ex.sup.children() == []


def test_simple_one_for_one_failed_restart_is_retried():
    ex = simple(intensity=5)
    ex.ok("start_child", ())
    ex.fail_starts("w-1")
    ex.exit("w-1")
    assert ex.sup.which_child("w-1").state == "restarting"
    ex.drain()
    assert ex.log[-2:] == [("start_failed", "w-1"), ("start", "w-1")]


@pytest.mark.parametrize(
    "extra", ["abc", b"abc", 42, worker("x")], ids=["str", "bytes", "int", "spec"]
)
def test_simple_one_for_one_start_child_takes_a_tuple_of_extra_args(extra):
    ex = simple()
    reply = ex.call("start_child", extra)
    assert isinstance(reply.error, SpecError)
    assert reply.error.field == "extra_args"
    assert "tuple of extra arguments" in str(reply.error)


def test_simple_one_for_one_supervisor_template_takes_no_extra_args():
    ex = simple(SupervisorSpec("sub"))
    reply = ex.call("start_child", (1,))
    assert isinstance(reply.error, SpecError)
    assert reply.error.child == "sub"
    assert ex.ok("start_child", ()).type == "supervisor"


# -- invariants on random runs (hypothesis state machine) ---------------------------------

POOL = ["a", "b", "c", "d", "e"]
DYNAMIC = [f"w-{i}" for i in range(1, 8)]
ANY_REASON = st.sampled_from([*REASONS.values(), ExitReason.shutdown("done")])


class SupervisorMachine(RuleBasedStateMachine):
    """Random exits, retries, clock steps and API calls on a random supervisor."""

    ex: FakeExecutor

    @initialize(data=st.data())
    def build(self, data):
        strategy = data.draw(st.sampled_from(list(Strategy)), label="strategy")
        self.simple = strategy is Strategy.SIMPLE_ONE_FOR_ONE
        auto = AutoShutdown.NEVER
        if not self.simple:
            auto = data.draw(st.sampled_from(list(AutoShutdown)), label="auto_shutdown")
        n = 1 if self.simple else data.draw(st.integers(1, 4), label="children")
        children = []
        for i in range(n):
            restart = data.draw(st.sampled_from(list(Restart)))
            significant = (
                auto is not AutoShutdown.NEVER
                and restart is not Restart.PERMANENT
                and data.draw(st.booleans())
            )
            shutdown = data.draw(st.sampled_from([1.0, "brutal_kill"]))
            cid = "w" if self.simple else POOL[i]
            children.append(
                worker(cid, restart=restart, significant=significant, shutdown=shutdown)
            )
        self.spec = SupervisorSpec(
            "sup",
            strategy=strategy,
            intensity=data.draw(st.integers(0, 3), label="intensity"),
            period=data.draw(st.sampled_from([1.0, 5.0, 30.0]), label="period"),
            children=children,
            auto_shutdown=auto,
            max_children=3 if self.simple else None,
        )
        self.ex = FakeExecutor(Supervisor(self.spec))
        for cid in data.draw(st.lists(st.sampled_from(POOL[:n]), max_size=2), label="fail"):
            self.ex.fail_starts(cid)
        self.charges: list[float] = []
        self._input(self.ex.start, [c.id for c in children])

    # -- checking one input -------------------------------------------------------

    def _order(self) -> list[str]:
        return [c.id for c in self.ex.sup.children()]

    def _input(self, do, order: list[str], charged: bool = False) -> None:
        """Run one input; check the order of starts and terminations it caused and
        that it gave up exactly when the model's charges exceed the intensity."""
        mark, events = len(self.ex.log), len(self.ex.events)
        do()
        # start_child appends: a new id goes after every id the supervisor had.
        order = order + [c for _, c in self.ex.log[mark:] if isinstance(c, str) and c not in order]
        position = {cid: i for i, cid in enumerate(order)}
        runs: list[tuple[str, list[int]]] = []
        for what, cid in self.ex.log[mark:]:
            if what == "terminate_all":
                runs.append((what, []))
                continue
            kind = "stop" if what == "terminate" else "start"
            if runs and runs[-1][0] == kind:
                runs[-1][1].append(position[cid])
            else:
                runs.append((kind, [position[cid]]))
        for kind, positions in runs:
            if kind == "start":
                assert positions == sorted(set(positions)), f"starts out of order: {runs}"
            elif kind == "stop":
                assert positions == sorted(set(positions), reverse=True), f"stops: {runs}"
        now = self.ex.clock.now
        if charged:
            self.charges.append(now)
        over = charged and (
            sum(1 for t in self.charges if t >= now - self.spec.period) > self.spec.intensity
        )
        gave_up = EventKind.MAX_INTENSITY_REACHED in self.ex.event_kinds(events)
        assert gave_up == over, f"charges={self.charges} now={now} gave_up={gave_up}"
        if over:
            assert self.ex.exits

    def _info(self, key):
        try:
            return self.ex.sup.which_child(key)
        except ChildNotFound:
            return None

    # -- rules ---------------------------------------------------------------------

    @precondition(lambda self: self.ex.live())
    @rule(data=st.data(), reason=ANY_REASON)
    def crash(self, data, reason):
        self.ex.kill(data.draw(st.sampled_from(sorted(self.ex.live()))), reason)

    @precondition(lambda self: self.ex.mailbox)
    @rule()
    def deliver(self):
        message = self.ex.mailbox[0]
        sup = self.ex.sup
        live = sup.mode == "running"
        charged = stale = current = False
        if isinstance(message, ChildExit):
            info = self._info(message.child_id)
            current = (
                live
                and info is not None
                and info.state == "running"
                and info.incarnation == message.incarnation
            )
            stale = not current
            if current:
                charged = info.restart is Restart.PERMANENT or (
                    info.restart is Restart.TRANSIENT and not message.reason.is_normal
                )
        elif isinstance(message, Retry):
            info = self._info(message.child_id)
            charged = live and info is not None and info.state == "restarting"
        mark, events = len(self.ex.log), len(self.ex.events)
        self._input(self.ex.step, self._order(), charged)
        if stale:
            assert self.ex.log[mark:] == []
            assert self.ex.event_kinds(events) == [EventKind.STALE_EXIT_IGNORED]
        if current and not charged:  # no restart: no sibling started (3, point 3)
            assert self.ex.started_ids(mark) == []

    @rule(data=st.data())
    def fail_next_start(self, data):
        self.ex.fail_starts(data.draw(st.sampled_from(DYNAMIC if self.simple else POOL)))

    @rule(dt=st.sampled_from([0.0, 0.4, 2.0, 7.0, 40.0]))
    def tick(self, dt):
        self.ex.clock.advance(dt)

    @precondition(lambda self: self.ex.sup.children())
    @rule(data=st.data())
    def stale_exit(self, data):
        child = data.draw(st.sampled_from(self.ex.sup.children()))
        self.ex.post_exit(child.id, child.incarnation - 1 if child.incarnation else 0)

    @rule(
        data=st.data(), method=st.sampled_from(["terminate_child", "restart_child", "delete_child"])
    )
    def api_on_child(self, data, method):
        sup = self.ex.sup
        keys = DYNAMIC if self.simple else POOL
        key = data.draw(st.sampled_from(keys))
        if self.simple and data.draw(st.booleans()) and sup.children():
            key = data.draw(st.sampled_from(sup.children())).pid or key
        info = self._info(key)
        reply = None

        def call():
            nonlocal reply
            reply = self.ex.call(method, key)

        self._input(call, self._order())
        error = type(reply.error) if reply.error is not None else None
        if self.ex.exits:  # API calls never stop a supervisor, so it was stopped before
            assert error is SupervisorNotRunning
            return
        if self.simple and method != "terminate_child":
            assert error is SimpleOneForOneError
        elif info is None:
            assert error is ChildNotFound
        elif method == "terminate_child":
            assert error is None
            after = self._info(info.id)
            assert after is None or after.state == "stopped"
        elif info.state == "running":
            assert error is ChildRunning
        elif info.state == "restarting":
            assert error is ChildRestarting
        elif method == "delete_child":
            assert error is None and self._info(info.id) is None
        else:
            assert error in (None, StartError)
            assert self._info(info.id).state == ("running" if error is None else "stopped")

    @rule(data=st.data())
    def api_start_child(self, data):
        if self.simple:
            before = len(self.ex.sup.children())
            reply = None

            def call():
                nonlocal reply
                reply = self.ex.call("start_child", ())

            self._input(call, self._order())
            if self.ex.exits:
                assert isinstance(reply.error, SupervisorNotRunning)
            elif before >= 3:
                assert isinstance(reply.error, TooManyChildren)
            else:
                assert reply.error is None or isinstance(reply.error, StartError)
            return
        cid = data.draw(st.sampled_from(POOL))
        restart = data.draw(st.sampled_from(list(Restart)))
        info = self._info(cid)
        reply = None

        def call():
            nonlocal reply
            reply = self.ex.call("start_child", worker(cid, restart=restart))

        self._input(call, self._order())
        if self.ex.exits:
            assert isinstance(reply.error, SupervisorNotRunning)
        elif info is not None:
            expected = AlreadyStarted if info.state == "running" else AlreadyPresent
            assert isinstance(reply.error, expected)
        elif reply.error is None:
            assert self._order()[-1] == cid, "start_child appends"
        else:
            assert isinstance(reply.error, StartError)
            assert self._info(cid) is None

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def idle_between_inputs(self):
        assert not self.ex.sup.busy

    @invariant()
    def which_children_is_reverse_of_children(self):
        assert self.ex.sup.which_children() == self.ex.sup.children()[::-1]

    @invariant()
    def executor_and_core_agree_on_running_children(self):
        sup = self.ex.sup
        if self.ex.exits:
            assert sup.mode == "stopped"
            assert all(c.state == "stopped" for c in sup.children())
            assert self.ex.live() == []
            return
        states = {c.state for c in sup.children()}
        assert states <= {"running", "stopped", "restarting"}
        for c in sup.children():
            if c.state == "running":
                assert self.ex.processes[c.id].incarnation == c.incarnation
        for cid in self.ex.live():
            assert sup.which_child(cid).incarnation == self.ex.incarnation(cid)
        running_ = sum(1 for c in sup.children() if c.state == "running")
        assert sup.count_children().active == running_


TestSupervisorMachine = SupervisorMachine.TestCase
TestSupervisorMachine.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, database=None
)
