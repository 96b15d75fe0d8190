"""A one-shot step's events read in the order things happened (issue 37): its
`child_started` (its start counts at its exit: ready="exited"), then its
`child_exited`, then the next child's start, which waited for it. The exit comes
with its start's answer (StartDone.ended) and the core applies it before the next
step of its plan; it used to wait, deferred, behind the starts that followed."""

from __future__ import annotations

from pathlib import Path

from actors import Tree
from supervision import (
    ChildSpec,
    EventKind,
    ExitReason,
    Report,
    StartChild,
    Supervisor,
    SupervisorSpec,
)
from tests.support.fake_executor import worker

SHOWN = (EventKind.CHILD_STARTED, EventKind.CHILD_EXITED, EventKind.STALE_EXIT_IGNORED)


def test_the_core_applies_an_exit_that_came_with_the_start_before_the_next_start() -> None:
    spec = SupervisorSpec("sup", children=[worker("migrate", restart="transient"), worker("web")])
    sup = Supervisor(spec)
    sup.start(0.0)
    actions = sup.started("migrate", 100, 1, 1.0, ended=ExitReason.normal(), uptime=1.0)
    steps = [
        (a.event.context, a.event.offender) if isinstance(a, Report) else ("start", a.child_id)
        for a in actions
        if isinstance(a, Report | StartChild)
    ]
    assert steps == [
        (EventKind.CHILD_STARTED, "migrate"),
        (EventKind.CHILD_EXITED, "migrate"),
        ("start", "web"),
    ]
    assert sup.which_child("migrate").state == "stopped"


def _one_shot(marks: Path, restart: str = "transient") -> ChildSpec:
    return ChildSpec(
        id="migrate",
        command=["sh", "-c", f"sleep 0.2; echo done >> {marks}/migrated"],
        restart=restart,
        ready="exited",
    )


def _order(tree: Tree) -> list[tuple[str, str | None]]:
    return [(e.context.value, e.offender) for e in tree.events() if e.context in SHOWN]


def test_a_one_shot_exits_before_the_children_after_it_start(tmp_path: Path) -> None:
    tree = Tree.start(
        SupervisorSpec(
            "root",
            children=[
                _one_shot(tmp_path),
                ChildSpec(id="web", command=["sleep", "60"]),
                ChildSpec(id="worker", command=["sleep", "60"]),
            ],
        )
    )
    try:
        assert _order(tree) == [
            ("child_started", "migrate"),
            ("child_exited", "migrate"),
            ("child_started", "web"),
            ("child_started", "worker"),
        ]
        migrate = tree.nanny.which_child("migrate").get()
        assert (migrate.state, migrate.pid) == ("stopped", None)
        assert migrate.last_exit is not None and migrate.last_exit.is_normal
        # The operator runs it again: started, then exited, in its call.
        info = tree.nanny.restart_child("migrate").get()
        assert info.id == "migrate"
        assert _order(tree)[4:] == [("child_started", "migrate"), ("child_exited", "migrate")]
        assert tree.nanny.which_child("migrate").get().state == "stopped"
        assert (tmp_path / "migrated").read_text() == "done\ndone\n"
    finally:
        tree.stop(timeout=30)


def test_a_temporary_one_shot_is_gone_before_the_next_child_starts(tmp_path: Path) -> None:
    tree = Tree.start(
        SupervisorSpec(
            "root",
            children=[
                _one_shot(tmp_path, "temporary"),
                ChildSpec(id="web", command=["sleep", "60"]),
            ],
        )
    )
    try:
        assert _order(tree) == [
            ("child_started", "migrate"),
            ("child_exited", "migrate"),
            ("child_started", "web"),
        ]
        assert [c.id for c in tree.nanny.which_children().get()] == ["web"]
    finally:
        tree.stop(timeout=30)
