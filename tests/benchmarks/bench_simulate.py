"""How fast the simulator runs: simulated events per second, and a sweep's wall time.

1. Events per wall-clock second (median and p95 over samples) for a 10-child
   and a 1,000-child one_for_one tree whose workers crash at random (24
   virtual hours, events kept).
1b. CPU-seconds per simulated hour and events per CPU-second at 1,000 children:
   a one_for_one root of 10 supervisors x 100 workers, each crashing with an MTBF
   of an hour (Exponential), 24 virtual hours, events kept (issue 39's trial).
2. The decision core's cost per exit and restart (one_for_one and rest_for_one
   with the last child failing; intensity 10^6) at 1 and at 10,000 children:
   it must not grow with N or with the restart window.
3. A sweep of 100 specs (10 intensities x 10 periods) x 20 seeds x 24 virtual
   hours on a three-worker service (one flaky worker, MTBF 5 min; two with an
   MTBF of an hour), on every core through `actors.experiment.sweep`.
4. A simulated week of issue 39's trial tree (`trial_tree`: a db under
   rest_for_one that hangs with a mean of an hour, seen by a liveness probe
   every 20 s, 3 failures; a web tier of 3 workers crashing with an MTBF of
   60 s), in CPU-seconds, without and with the event list; then with the db's
   probe also flapping (`[Hang, Flapping]`, 5 % of probes).

    .venv/bin/python tests/benchmarks/bench_simulate.py [--samples 5] [--skip-sweep]
        [--only-trial]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from supervision import ChildSpec, SupervisorSpec
from supervision.simulate import CRASH, Exponential, FaultModel, simulate
from tests.support.trial_tree import trial_tree

DAY = 24 * 3600.0


def noop() -> None:
    """Never run: the simulation starts no processes."""


def tree(n: int) -> SupervisorSpec:
    children = [ChildSpec(f"w{i}", target=noop) for i in range(n)]
    # Lax enough never to give up: every crash is a restart.
    return SupervisorSpec("root", intensity=10**6, period=5.0, children=children)


def service(intensity: int, period: float) -> SupervisorSpec:
    children = [ChildSpec(name, target=noop) for name in ("db", "api", "cache")]
    return SupervisorSpec("service", intensity=intensity, period=period, children=children)


SERVICE_FAULTS: dict[str, FaultModel] = {
    "db": Exponential(mtbf=3600.0, start_duration=2.0),
    "api": Exponential(mtbf=300.0, start_duration=0.5),
    "cache": Exponential(mtbf=3600.0, start_duration=0.3),
}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def events_per_second(n: int, mtbf: float, samples: int) -> None:
    faults = {f"w{i}": Exponential(mtbf=mtbf) for i in range(n)}
    walls = []
    events = 0
    for seed in range(samples):
        started = time.perf_counter()
        result = simulate(tree(n), faults, duration=DAY, seed=seed)
        walls.append(time.perf_counter() - started)
        events = len(result.events)
    print(
        f"{n:>5} children (MTBF {mtbf:g} s each), 24 h, {events:,} events a run: "
        f"{events / statistics.median(walls):,.0f} events/s at the median run, "
        f"{events / p95(walls):,.0f} at the p95 run"
    )


def nested_thousand() -> tuple[SupervisorSpec, dict[str, FaultModel]]:
    """A one_for_one root of 10 supervisors x 100 workers, each with an MTBF of 1 h."""
    subs = [
        SupervisorSpec(
            f"s{j}",
            intensity=10**6,
            period=5.0,
            children=[ChildSpec(f"w{i}", target=noop) for i in range(100)],
        )
        for j in range(10)
    ]
    faults: dict[str, FaultModel] = {
        f"s{j}/w{i}": Exponential(mtbf=3600.0) for j in range(10) for i in range(100)
    }
    return SupervisorSpec("root", intensity=10**6, period=5.0, children=subs), faults


def cpu_per_simulated_hour(samples: int) -> None:
    spec, faults = nested_thousand()
    hours = 24.0
    cpus = []
    events = 0
    for seed in range(samples):
        started = time.process_time()
        result = simulate(spec, faults, duration=hours * 3600.0, seed=seed)
        cpus.append(time.process_time() - started)
        events = len(result.events)
    median, slow = statistics.median(cpus), p95(cpus)
    print(
        f"1,000 children (10 x 100, MTBF 1 h each), {hours:g} h, {events:,} events a run: "
        f"{median / hours * 1000:.1f} CPU-ms per simulated hour ({hours / median:.1f} h per "
        f"CPU-second), {events / median:,.0f} events per CPU-second at the median run; "
        f"{slow / hours * 1000:.1f} CPU-ms per hour at the p95 run"
    )


def core_exit_cost(n: int, strategy: str, samples: int) -> float:
    """Median microseconds for one exit + restart of the last child, driven directly."""
    from supervision import StartChild, Supervisor

    spec = SupervisorSpec(
        "root",
        strategy=strategy,
        intensity=10**6,
        period=3600.0,
        children=[ChildSpec(f"w{i}", target=noop) for i in range(n)],
    )
    sup = Supervisor(spec)
    pid = 1

    def answer(actions: list) -> None:  # type: ignore[type-arg]
        nonlocal pid
        while actions and isinstance(actions[-1], StartChild):
            pid += 1
            actions = sup.started(actions[-1].child_id, pid, pid, 0.0)

    answer(sup.start(0.0))
    last = f"w{n - 1}"
    rounds = 2000
    times = []
    now = 0.0
    for _ in range(samples):
        started = time.perf_counter()
        for _ in range(rounds):
            now += 0.001
            incarnation = sup.which_child(last).incarnation
            answer(sup.child_exited(last, incarnation, CRASH, now))
        times.append((time.perf_counter() - started) / rounds * 1e6)
    return statistics.median(times)


def sweep_time(workers: int) -> None:
    from actors.experiment import sweep

    started = time.perf_counter()
    table = sweep(
        service,
        SERVICE_FAULTS,
        duration=DAY,
        seeds=range(20),
        root_restart_delay=30.0,
        workers=workers,
        intensity=[1, 2, 3, 4, 5, 6, 8, 10, 15, 20],
        period=[5.0, 10.0, 20.0, 30.0, 60.0, 90.0, 120.0, 300.0, 600.0, 3600.0],
    )
    wall = time.perf_counter() - started
    runs = len(table.rows) * len(table.seeds)
    print(
        f"sweep: {len(table.rows)} specs x {len(table.seeds)} seeds x 24 h = {runs} runs "
        f"on {workers} processes in {wall:.1f} s ({runs / wall:.0f} runs/s)"
    )


def trial_week(samples: int) -> None:
    from supervision.simulate import Flapping, Hang

    crashes = {f"web/w{i}": Exponential(mtbf=60.0) for i in range(3)}
    hangs = {"db": Hang(mean=3600.0), **crashes}
    flaky = {"db": [Hang(mean=3600.0), Flapping(probability=0.05)], **crashes}
    for name, faults in (("hang", hangs), ("hang+flapping", flaky)):
        for keep in (False, True):
            cpu, events = [], 0
            for seed in range(samples):
                started = time.process_time()
                result = simulate(
                    trial_tree(),
                    faults,  # type: ignore[arg-type]
                    duration=7 * DAY,
                    seed=seed,
                    root_restart_delay=30.0,
                    keep_events=keep,
                )
                cpu.append(time.process_time() - started)
                events = len(result.events)
            print(
                f"trial tree, a week, db {name}, keep_events={keep}: "
                f"{statistics.median(cpu):.2f} CPU-s (median of {samples}; p95 {p95(cpu):.2f})"
                + (f", {events} events" if keep else "")
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--only-trial", action="store_true")
    args = parser.parse_args()
    if args.only_trial:
        trial_week(args.samples)
        return
    trial_week(args.samples)
    events_per_second(10, 600.0, args.samples)
    events_per_second(1000, 60_000.0, args.samples)
    cpu_per_simulated_hour(args.samples)
    for strategy in ("one_for_one", "rest_for_one"):
        one, many = (core_exit_cost(n, strategy, args.samples) for n in (1, 10_000))
        print(
            f"core, {strategy}: an exit and restart of the last child costs {one:.1f} us "
            f"at 1 child, {many:.1f} us at 10,000 (intensity 10^6, window growing)"
        )
    if not args.skip_sweep:
        sweep_time(os.cpu_count() or 1)


if __name__ == "__main__":
    main()
