"""What an update decides besides its plan, with no process: the preflight (the
workers it would start, their problems, each once), the apply policy (which
failed steps stop it), its settle, and what keeps a service up: the rollback of a
failed replacement and which replacements may start before the old process stops
(supervision/_update.py)."""

from __future__ import annotations

import pytest

from supervision import (
    UPDATE_SETTLE_MAX,
    ChildSpec,
    HttpProbe,
    ListenSocket,
    Replace,
    Restart,
    StartAgain,
    StopOld,
    StoreSpec,
    SupervisorSpec,
    UpdateFailed,
    UpdateOutcome,
    UpdateRefused,
    check_settle,
    may_overlap,
    plan_restart_all,
    plan_update,
    preflight,
    rollback_of,
    standby_of,
    starting_workers,
    stops_the_update,
    taken_after_a_stop,
)


def cmd(cid: str, program: str = "sleep") -> ChildSpec:
    return ChildSpec(id=cid, command=[program, "60"])


def tree(*children: ChildSpec | SupervisorSpec) -> SupervisorSpec:
    return SupervisorSpec(id="shop", children=list(children))


def test_the_preflight_looks_only_at_what_the_plan_would_start() -> None:
    old = tree(cmd("web"), SupervisorSpec(id="apps", children=[cmd("app"), cmd("redis")]))
    new = tree(
        cmd("web"),
        SupervisorSpec(id="apps", children=[cmd("app", "slepe"), cmd("redis")]),
        cmd("extra", "nope"),
    )
    plan = plan_update(old, new)
    assert [w.id for w in starting_workers(plan)] == ["app", "extra"]
    asked: list[str] = []

    def problems_of(child: ChildSpec) -> list[str]:
        asked.append(child.id)
        program = child.command[0] if child.command else ""
        return [] if program == "sleep" else [f"child {child.id!r}: program {program!r}"]

    assert preflight(plan, problems_of) == [
        "child 'app': program 'slepe'",
        "child 'extra': program 'nope'",
    ]
    assert asked == ["app", "extra"]  # web and redis run on: never looked at


def test_a_problem_found_twice_is_listed_once_and_an_empty_plan_has_none() -> None:
    old = tree(cmd("a"))
    new = tree(SupervisorSpec(id="a", children=[cmd("x", "bad"), cmd("y", "bad")]))
    plan = plan_update(old, new)
    assert preflight(plan, lambda c: ["the program 'bad' is missing"]) == [
        "the program 'bad' is missing"
    ]
    assert preflight(plan_update(old, old), lambda c: ["never asked"]) == []


def test_a_failed_start_lets_the_update_go_on_any_other_failure_stops_it() -> None:
    assert stops_the_update(start_failed=False)
    assert not stops_the_update(start_failed=True)


def test_after_a_stop_only_the_stored_specs_are_still_brought_in_step() -> None:
    inner = SupervisorSpec(id="apps", children=[cmd("app")])
    assert taken_after_a_stop(StoreSpec("shop", "apps", inner))
    for step in (
        Replace("shop", cmd("web")),
        StopOld("web", plan_restart_all(["web"]).steps[0].change),
        StartAgain("web", plan_restart_all(["web"]).steps[1].change),
    ):
        assert not taken_after_a_stop(step)


@pytest.mark.parametrize("value", [0, 0.5, 1, UPDATE_SETTLE_MAX])
def test_a_settle_in_range_is_taken_as_seconds(value: float) -> None:
    assert check_settle(value) == float(value)


@pytest.mark.parametrize("value", [-1, UPDATE_SETTLE_MAX + 1, True, "1", None, float("nan")])
def test_a_settle_out_of_range_or_not_a_number_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="settle must be seconds from 0 to 600"):
        check_settle(value)


def test_the_update_errors_are_nanny_errors_carrying_what_was_found_or_done() -> None:
    refused = UpdateRefused("shop", "refused: 1 problem", ("child 'a': program 'x'",))
    assert isinstance(refused, ValueError) and str(refused) == "refused: 1 problem"
    assert refused.problems == ("child 'a': program 'x'",) and refused.tree == "shop"
    outcome = UpdateOutcome(failed=[(Replace("shop", cmd("a")), "failed to start")])
    failed = UpdateFailed("shop", "failed: replace a", outcome)
    assert isinstance(failed, ValueError) and failed.outcome is outcome


def served(cid: str = "web", version: str = "1", **fields: object) -> ChildSpec:
    """A worker whose listening socket nannytree holds (docs/sockets.md)."""
    return ChildSpec(
        id=cid,
        command=["python3", "server.py"],
        env={"VERSION": version},
        sockets=[ListenSocket("127.0.0.1:8080", name="http")],
        **fields,  # type: ignore[arg-type]
    )


def test_a_replacement_is_planned_with_the_spec_it_rolls_back_to() -> None:
    old, new = tree(cmd("web"), cmd("db")), tree(cmd("web", "true"), cmd("db"))
    (step,) = plan_update(old, new).steps
    assert isinstance(step, Replace) and step.was == cmd("web")
    back = rollback_of(step)
    assert back is not None
    assert (back.supervisor, back.spec, back.was) == ("shop", cmd("web"), cmd("web", "true"))
    assert step == Replace("shop", cmd("web", "true"))  # `was` is not the step's identity


def test_only_a_replacement_with_a_known_old_spec_is_rolled_back() -> None:
    assert rollback_of(Replace("shop", cmd("web"))) is None  # built without `was`
    assert rollback_of(StopOld("web", plan_restart_all(["web"]).steps[0].change)) is None
    sup = SupervisorSpec(id="apps", children=[cmd("app")])
    back = rollback_of(Replace("shop", cmd("apps"), was=sup))
    assert back is not None and back.spec == sup  # a subtree replaced whole, too


def test_a_worker_whose_held_sockets_the_new_spec_keeps_may_start_before_the_old_stops() -> None:
    assert may_overlap(served(), served(version="2"))
    assert may_overlap(served(), served(version="2", ready="sd_notify"))
    assert may_overlap(served(), served(version="2", ready=2.0))


@pytest.mark.parametrize(
    ("was", "new", "why"),
    [
        (cmd("web"), cmd("web", "true"), "no held socket: the new one would bind it too"),
        (served(), cmd("web"), "the new spec drops the socket"),
        (
            served(),
            served(version="2", ready=HttpProbe("http://127.0.0.1:8080/health")),
            "a probe on the shared socket could be answered by the old process",
        ),
        (served(), served(version="2", pid_file="/run/web.pid"), "two daemons, one pid file"),
        (served(), SupervisorSpec(id="web", children=[cmd("x")]), "a supervisor"),
        (None, served(), "the old spec is not known"),
    ],
)
def test_where_two_processes_cannot_serve_at_once_the_old_one_stops_first(
    was: ChildSpec | None, new: ChildSpec | SupervisorSpec, why: str
) -> None:
    assert not may_overlap(was, new), why


def test_the_standby_is_the_new_spec_under_a_free_id_temporary_and_not_significant() -> None:
    step = Replace("shop", served(version="2"), was=served())
    standby = standby_of(step, {"web", "db"})
    assert standby.id == "web~update"
    assert (standby.restart, standby.significant) == (Restart.TEMPORARY, False)
    assert standby.env == {"VERSION": "2"} and standby.sockets == served().sockets
    assert standby_of(step, {"web", "web~update"}).id == "web~update2"
    with pytest.raises(ValueError, match="may not start before the old stops"):
        standby_of(Replace("shop", cmd("web", "true"), was=cmd("web")), {"web"})
