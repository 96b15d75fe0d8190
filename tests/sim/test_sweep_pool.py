"""actors.experiment: a sweep's pool (what its tasks share goes to each worker once)
and its progress bar."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import pytest

from actors.experiment import process_map
from actors.experiment import sweep as parallel_sweep
from supervision import ChildSpec, SupervisorSpec
from supervision.simulate import Exponential, sweep


@dataclass(frozen=True)
class Task:
    n: int
    shared: list[int]  # one object, in every task


def where_is_shared(task: Task) -> tuple[int, int, int]:
    return task.n, os.getpid(), id(task.shared)


def test_what_tasks_share_reaches_each_worker_once_and_results_keep_their_order():
    shared = list(range(1000))
    results = list(
        process_map(2, progress=False)(where_is_shared, [Task(n, shared) for n in range(200)])
    )
    assert [n for n, _, _ in results] == list(range(200))
    copies: dict[int, set[int]] = {}
    for _, pid, ident in results:
        copies.setdefault(pid, set()).add(ident)
    assert pid != os.getpid() and len(copies) <= 2
    # One copy per worker, across all of its chunks (not one per chunk or task).
    assert all(len(idents) == 1 for idents in copies.values()), copies


def test_a_spec_made_in_a_function_runs_on_the_pool_as_here():
    def target() -> None:  # not importable by name: reaches the workers by value
        """Never run."""

    def build(intensity: int) -> SupervisorSpec:
        children = [ChildSpec(c, target=target) for c in "ab"]
        return SupervisorSpec("root", intensity=intensity, period=5.0, children=children)

    faults = {"a": Exponential(mtbf=20.0), "b": Exponential(mtbf=60.0)}
    kw = {"duration": 600.0, "seeds": range(4), "intensity": [1, 3, 10]}
    one_seed = {**kw, "seeds": [5]}  # each spec in one task only
    here = sweep(build, faults, **kw)
    pool = parallel_sweep(build, faults, workers=2, progress=False, **kw)
    assert [r.availability for r in pool.rows] == [r.availability for r in here.rows]
    assert [r.give_ups for r in pool.rows] == [r.give_ups for r in here.rows]
    alone = parallel_sweep(build, faults, workers=2, progress=False, **one_seed)
    assert [r.restarts for r in alone.rows] == [
        r.restarts for r in sweep(build, faults, **one_seed).rows
    ]


def test_the_bar_counts_runs_done_and_left(capsys):
    list(process_map(2, progress=True, description="points")(abs, range(-6, 0)))
    err = capsys.readouterr().err
    assert "points:" in err and "6/6 runs done, 0 left" in err


def test_no_bar_unless_stderr_is_a_terminal_or_it_is_asked_for(capsys):
    assert not sys.stderr.isatty()
    assert list(process_map(1)(abs, range(-3, 0))) == [3, 2, 1]
    assert capsys.readouterr().err == ""


def test_a_bar_asked_for_without_tqdm_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now fails
    with pytest.raises(ImportError, match=r"pip install 'nannytree\[experiment\]'"):
        process_map(2, progress=True)
    # Not asked for: a terminal without tqdm gets no bar, and no error.
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert list(process_map(1)(abs, [-1, -2])) == [1, 2]


def fails_on_seven(n: int) -> int:
    if n == 7:
        raise ValueError("run 7 failed")
    return n


def test_a_failing_run_fails_the_sweep_with_its_error():
    with pytest.raises(ValueError, match="run 7 failed"):
        list(process_map(2, progress=False)(fails_on_seven, range(40)))
