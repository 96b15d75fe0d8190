"""Which restart strategy keeps a service most available? An experiment in virtual time.

One fault model: a service of three processes where the middle one ("api")
crashes every 30 s on average and the other two crash rarely. The same faults
(same seeds) are run under one_for_one, rest_for_one and one_for_all, each with
OTP's default intensity (1 restart in 5 s) and a laxer one (5 in 30 s), each
with restarts at once (OTP) and with nannytree's default `Backoff()`. When the
root supervisor gives up, it is started again 30 s later, as systemd's
Restart=always with RestartSec=30 would.

It prints the comparison table and saves it as experiment.txt, and saves a
timeline of the first minutes of the runs at OTP's default intensity as
experiment.png, in --out (default: here). Then it sweeps one_for_one's
intensity x period over 20 seeds on every core and saves the availability as
a heatmap, sweep.png (and the sweep's table as sweep.txt). No processes are
started: a day of virtual time per run takes a fraction of a second.

    python examples/experiment.py --out /tmp/experiment
"""

from __future__ import annotations

import argparse
from pathlib import Path

from actors.experiment import sweep
from actors.plot import plot_heatmap, plot_timelines
from supervision import Backoff, ChildSpec, Strategy, SupervisorSpec
from supervision.simulate import Exponential, FaultModel, compare, simulate

STRATEGIES = (Strategy.ONE_FOR_ONE, Strategy.REST_FOR_ONE, Strategy.ONE_FOR_ALL)
INTENSITIES = ((1, 5.0), (5, 30.0))  # (restarts, within seconds)
BACKOFFS = (None, Backoff())  # OTP's restart at once; nannytree's default backoff
ROOT_RESTART_DELAY = 30.0
PLOTTED_INTENSITY = 1  # the timeline shows the runs at OTP's default intensity
SWEPT_INTENSITIES = (1, 2, 3, 5, 10, 20)
SWEPT_PERIODS = (5.0, 10.0, 30.0, 60.0, 300.0)

FAULTS: dict[str, FaultModel] = {
    # A database that crashes about every two hours and takes 2 s to start.
    "db": Exponential(mtbf=2 * 3600.0, start_duration=2.0, stop_duration=0.5),
    # The flaky middle child: a crash every 30 s on average, 0.5 s to start.
    "api": Exponential(mtbf=30.0, start_duration=0.5, stop_duration=0.2),
    # A cache that crashes about once an hour.
    "cache": Exponential(mtbf=3600.0, start_duration=0.3, stop_duration=0.1),
}


def service() -> None:
    """The children's target; never run: the simulation starts no processes."""


def spec(
    strategy: Strategy, intensity: int, period: float, backoff: Backoff | None
) -> SupervisorSpec:
    return SupervisorSpec(
        id="service",
        strategy=strategy,
        intensity=intensity,
        period=period,
        children=[
            ChildSpec(name, target=service, backoff=backoff) for name in ("db", "api", "cache")
        ],
    )


def one_for_one(intensity: int, period: float) -> SupervisorSpec:
    """A point of the sweep (module level: the sweep's worker processes pickle it)."""
    return spec(Strategy.ONE_FOR_ONE, intensity, period, None)


def specs() -> dict[str, SupervisorSpec]:
    return {
        f"{strategy.value} {n}/{period:g}s{' backoff' if backoff else ''}": spec(
            strategy, n, period, backoff
        )
        for strategy in STRATEGIES
        for n, period in INTENSITIES
        for backoff in BACKOFFS
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("."), help="directory for the outputs")
    parser.add_argument("--hours", type=float, default=24.0, help="virtual hours per run")
    parser.add_argument("--seeds", type=int, default=5, help="runs per spec")
    parser.add_argument("--window", type=float, default=600.0, help="seconds shown in the plot")
    parser.add_argument("--sweep-seeds", type=int, default=20, help="runs per point of the sweep")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    table = compare(
        specs(),
        FAULTS,
        duration=args.hours * 3600,
        seeds=range(args.seeds),
        root_restart_delay=ROOT_RESTART_DELAY,
    )
    print(table)
    (args.out / "experiment.txt").write_text(f"{table}\n")

    plotted = {name: s for name, s in specs().items() if s.intensity == PLOTTED_INTENSITY}
    runs = {
        name: simulate(
            s, FAULTS, duration=args.window, seed=0, root_restart_delay=ROOT_RESTART_DELAY
        ).events
        for name, s in plotted.items()
    }
    swept = sweep(
        one_for_one,
        FAULTS,
        duration=args.hours * 3600,
        seeds=range(args.sweep_seeds),
        root_restart_delay=ROOT_RESTART_DELAY,
        intensity=SWEPT_INTENSITIES,
        period=SWEPT_PERIODS,
    )
    print(f"\n{swept}")
    (args.out / "sweep.txt").write_text(f"{swept}\n")
    try:
        plot_timelines(runs, args.out / "experiment.png", end=args.window)
        plot_heatmap(swept, "availability", "period", "intensity", args.out / "sweep.png")
    except ModuleNotFoundError as e:
        print(f"\nno plot: {e}")
        return
    print(f"\nsaved experiment.txt, experiment.png, sweep.txt and sweep.png in {args.out}")


if __name__ == "__main__":
    main()
