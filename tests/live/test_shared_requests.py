"""Children built alike share one spawn request and one launcher template; children
that differ in anything the request carries get their own, and a change of the
host's environment reaches each child's next start (docs/scale.md)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from actors import Tree
from actors.testing import wait_gone
from supervision import ChildSpec, EventKind, SupervisorSpec
from tests.support import wait_until


def _pid(tree: Tree, child: str) -> int:
    pid = tree.nanny.which_child(child).get().pid
    assert pid is not None
    return int(pid)


def _wait_file(path: Path) -> str:
    wait_until(lambda: path.exists() and path.read_text().endswith("\n"), 20, str(path))
    return path.read_text().strip()


def test_like_children_share_one_template_until_the_last_is_gone() -> None:
    specs = [ChildSpec(id=f"c{i}", command=["sleep", "60"]) for i in range(20)]
    tree = Tree.start(SupervisorSpec("root", children=specs))
    launcher = tree.context.spawner
    assert [users for _, users in launcher._templates.values()] == [20]
    pids = [_pid(tree, s.id) for s in specs]
    assert len(set(pids)) == 20
    tree.stop(timeout=30)
    assert launcher._templates == {} and launcher._by_request == {}
    assert wait_gone(pids) == []


def test_children_that_differ_get_what_each_asked_for(tmp_path: Path) -> None:
    write = "echo $WHO $(pwd) >> {out}; exec sleep 60"
    (tmp_path / "a").mkdir()
    specs = [
        ChildSpec(
            id="one", command=["sh", "-c", write.format(out=tmp_path / "one")], env={"WHO": "1"}
        ),
        ChildSpec(
            id="two", command=["sh", "-c", write.format(out=tmp_path / "two")], env={"WHO": "2"}
        ),
        ChildSpec(
            id="three",
            command=["sh", "-c", write.format(out=tmp_path / "three")],
            env={"WHO": "2"},
            cwd=tmp_path / "a",
        ),
    ]
    tree = Tree.start(SupervisorSpec("root", children=specs))
    try:
        assert _wait_file(tmp_path / "one") == f"1 {os.getcwd()}"
        assert _wait_file(tmp_path / "two") == f"2 {os.getcwd()}"
        assert _wait_file(tmp_path / "three") == f"2 {tmp_path / 'a'}"
    finally:
        tree.stop(timeout=30)


def test_a_changed_host_env_reaches_each_like_childs_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NT_SHARED_PROBE", "before")
    specs = [
        ChildSpec(
            id=i,
            command=["sh", "-c", f'echo "$NT_SHARED_PROBE" >> {tmp_path / i}; exec sleep 60'],
        )
        for i in ("a", "b")
    ]
    tree = Tree.start(SupervisorSpec("root", intensity=5, children=specs))
    try:
        assert _wait_file(tmp_path / "a") == "before"
        assert _wait_file(tmp_path / "b") == "before"
        monkeypatch.setenv("NT_SHARED_PROBE", "after")
        for child in ("a", "b"):
            since = len(tree.log)
            os.kill(_pid(tree, child), signal.SIGKILL)
            tree.log.wait_for(
                lambda e, c=child: e.context is EventKind.CHILD_STARTED and e.offender == c,
                20,
                start=since,
            )
        for child in ("a", "b"):
            path = tmp_path / child
            # (A restart armed ahead may run the old request for a moment first.)
            wait_until(lambda p=path: p.read_text().split()[-1] == "after", 20, child)
            assert path.read_text().split()[0] == "before"
    finally:
        tree.stop(timeout=30)


def test_like_python_children_share_one_template_and_other_arguments_do_not() -> None:
    from tests.targets import children

    specs = [ChildSpec(id=f"p{i}", target=children.sleep_forever) for i in range(5)]
    specs.append(ChildSpec(id="other", target=children.exit_with, args=(0,), restart="temporary"))
    tree = Tree.start(SupervisorSpec("root", children=specs))
    try:
        users = sorted(users for _, users in tree.context.spawner._templates.values())
        assert users in ([5], [1, 5])  # the temporary one may be gone already
    finally:
        tree.stop(timeout=30)
