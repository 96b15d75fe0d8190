"""The simulator as the oracle: a live tree under a random schedule of faults and the
same schedule replayed in `supervision.simulate` make the same decisions
(tests/chaos/__init__.py says how; `python -m tests.chaos` runs more schedules)."""

from __future__ import annotations

import random
import signal
import time

import pytest

from supervision import ChildSpec, EventKind, Restart, Strategy, SupervisorSpec
from tests.chaos._oracle import MARGIN, Totals, run_schedule
from tests.chaos._replay import Injected, compare, off_the_edges, replay, window_edges
from tests.chaos._schedule import Fault, generate, worker
from tests.support import SOAK_SECONDS

# Seeds whose schedules cover, between them: every strategy, three levels, a
# simple_one_for_one pool with faults on its children by id, every kind of fault,
# calls that succeed and calls that fail, nested give-ups and the root's.
SEEDS = (8, 9, 17)
# Where a fault lands near an intensity window's edge it is moved off it, by the
# live run's own timing: on a loaded machine seed 8 can end one level short of the
# root's give-up. These seeds also reach it, and run only while it is missing.
MORE_ROOT_GIVE_UPS = (1, 6, 11)
MAX = EventKind.MAX_INTENSITY_REACHED.value


def _reproduce(seed: int) -> str:
    return f"reproduce with: python -m tests.chaos --schedules 1 --seed {seed} -v"


def _supervisors(spec: SupervisorSpec) -> list[SupervisorSpec]:
    found = [spec]
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            found += _supervisors(child)
    return found


def test_random_schedules_make_the_same_decisions_live_and_simulated() -> None:
    totals = Totals()
    outcomes = []
    for seed in SEEDS:
        outcome = run_schedule(seed)
        assert outcome.agrees, f"{outcome.explain()}\n{_reproduce(seed)}"
        totals.add(outcome)
        outcomes.append(outcome)
    # What the seeds were chosen for, so that a change of the generator cannot
    # quietly make them cover less.
    specs = [o.schedule.spec for o in outcomes]
    assert {s.strategy for spec in specs for s in _supervisors(spec)} == set(Strategy)
    landed = [i for o in outcomes for i in o.live.injected if i.landed and i.outcome is None]
    assert {i.fault.kind for i in landed} == {"exit", "signal", "raise", "call"}
    assert any("/w-" in "/" + i.fault.where for i in landed if i.fault.kind != "call")
    assert any(i.outcome for o in outcomes for i in o.live.injected)  # a call that failed

    def give_ups() -> list[str]:
        return [d[0] for o in outcomes for d in o.comparison.live if d[1] == MAX]

    for seed in MORE_ROOT_GIVE_UPS:
        if "root" in give_ups():
            break
        outcome = run_schedule(seed)
        assert outcome.agrees, f"{outcome.explain()}\n{_reproduce(seed)}"
        totals.add(outcome)
        outcomes.append(outcome)
    assert "root" in give_ups() and any(g.count("/") >= 2 for g in give_ups()), give_ups()
    assert totals.decisions >= 100, totals.summary()


# -- the comparison and the margin, without processes -------------------------------------


def _tree() -> SupervisorSpec:
    return SupervisorSpec(
        id="root",
        strategy=Strategy.ONE_FOR_ALL,
        intensity=1,
        period=1.0,
        children=[worker("a", Restart.PERMANENT, "/u"), worker("b", Restart.TRANSIENT, "/u")],
    )


def _exit(where: str, at: float, code: int = 1) -> Injected:
    return Injected(Fault("exit", where, 0.0, code=code), at)


def test_the_comparison_tells_a_different_decision() -> None:
    # As if live: a crashes at 0.5 and b at 2.0 (restarts); the replay's b exits 0 at
    # 2.0 instead (transient: not restarted). The comparison must say where they part.
    as_live = replay(_tree(), [_exit("a", 0.5), _exit("b", 2.0)], 3.0)
    replayed = replay(_tree(), [_exit("a", 0.5), _exit("b", 2.0, code=0)], 3.0)
    same = compare(as_live.events, 0.0, as_live, [])
    assert same.agrees and same.compared > 0 and same.crossings == 0
    differs = compare(as_live.events, 0.0, replayed, [])
    assert not differs.agrees and differs.first is not None
    assert differs.live[differs.first][1:3] == ("child_exited", "b")
    assert "first difference" in differs.explain()


def test_the_comparison_tells_a_pair_of_exits_on_either_side_of_an_edge() -> None:
    # The root hears exits at 0.5 and 1.45 (within its 1 s period); live, the second
    # came 0.1 s late (1.55: outside). Both decided alike here, but the pair is counted.
    run = replay(_tree(), [_exit("a", 0.5), _exit("a", 1.45)], 3.0)
    late = [type(e)(**{**vars(e), "time": e.time + 0.1}) if e.time > 1.0 else e for e in run.events]
    assert compare(late, 0.0, run, []).crossings == 1
    assert max(compare(late, 0.0, run, []).lags) == pytest.approx(0.1)


def test_a_fault_near_a_window_edge_is_moved_past_it() -> None:
    run = replay(_tree(), [_exit("a", 0.5)], 3.0)
    edges = window_edges(run)
    assert edges == [1.5]  # the exit at 0.5, plus the root's period
    assert off_the_edges(1.0, edges, MARGIN) == 1.0
    assert off_the_edges(1.4, edges, MARGIN) == pytest.approx(1.5 + MARGIN)
    assert off_the_edges(1.5 + MARGIN, edges, MARGIN) == 1.5 + MARGIN
    # Edges close together: past all of them.
    assert off_the_edges(1.4, [1.5, 1.5 + MARGIN * 1.5], MARGIN) == pytest.approx(
        1.5 + MARGIN * 2.5
    )


def test_a_schedule_is_named_by_its_seed() -> None:
    a, b = generate(5, "/d"), generate(5, "/d")
    assert a.describe() == b.describe() and a.spec == b.spec
    assert generate(6, "/d").describe() != a.describe()
    kinds = {f.kind for seed in range(20) for f in generate(seed, "/d").faults}
    assert kinds == {"exit", "signal", "raise", "call"}
    codes = {
        f.code for seed in range(20) for f in generate(seed, "/d").faults if f.kind == "signal"
    }
    assert codes == {signal.SIGKILL, signal.SIGTERM, signal.SIGINT}
    assert isinstance(worker("x", Restart.TEMPORARY, "/d"), ChildSpec)


# -- the long run -------------------------------------------------------------------------


@pytest.mark.soak
@pytest.mark.timeout(SOAK_SECONDS + 300)
def test_soak_random_schedules_make_the_same_decisions() -> None:
    """Random schedules for NANNYTREE_SOAK_SECONDS: no difference, and the figures."""
    first = random.randrange(1 << 30)
    totals = Totals()
    deadline = time.monotonic() + SOAK_SECONDS
    seed = first
    while time.monotonic() < deadline:
        totals.add(run_schedule(seed))
        seed += 1
    print(f"\nchaos oracle, seeds {first}..{seed - 1}: {totals.summary()}")
    for outcome in totals.timing:  # a lag beat the margin: said, not failed
        print(f"{outcome.explain()}\n{_reproduce(outcome.schedule.seed)}")
    details = "\n\n".join(
        f"{o.explain()}\n{_reproduce(o.schedule.seed)}" for o in totals.differences
    )
    assert not totals.differences, f"{totals.summary()}\n{details}"
    assert totals.schedules >= 1
