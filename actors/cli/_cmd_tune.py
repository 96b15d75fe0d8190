"""`nannytree tune events.jsonl --tree tree.toml --objective ... --require ...`: a tree's
own event journal read back into fault models (supervision.simulate.fit), then settings
searched on the simulator for the objective under the constraints
(supervision.simulate.tune). Runs nothing live: the tree file's targets stay unresolved.

The journal is read as data, bounded: lines are read lazily (read_journal stops at its
MAX_LINES), each at most LINE_BYTES at a time (a longer line is skipped, never held in
memory whole; read_journal refuses it).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from ._client import error
from ._exit import FAILED, OK

LINE_BYTES = 64 * 1024  # supervision.simulate's MAX_LINE_BYTES: longer lines are skipped


def add_tune_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ._args import positive

    p = sub.add_parser(
        "tune",
        help="fit fault models to an event journal and search settings on the simulator",
        description="Read a tree's event journal (`run --event-log`; rotated files may be "
        "given too) into fault models per worker, then search each supervisor's "
        "intensity and period, each failing worker's backoff and restart_limit and each "
        "probed worker's liveness period and failures for the objective under the "
        "constraints, and replay the recommendation against the current settings on "
        "fresh seeds. A metric is one of supervision.simulate's built-ins "
        "(BUILTIN_METRICS): availability, availability(PATH), k_of_n(K, PATH, ...), "
        "all_of(PATH, ...), any_of(PATH, ...), restarts, restarts(PATH), give_ups, "
        "give_ups(SUPERVISOR), time_to_give_up, unhealthy, unhealthy(PATH), "
        "downtime_per_incident(PATH), time_to_detect(PATH); a PATH is below the root.",
    )
    p.add_argument("journal", type=Path, nargs="+", help="the event journal (JSON Lines)")
    p.add_argument("--tree", type=Path, required=True, help="the tree's TOML file")
    p.add_argument(
        "--objective",
        required=True,
        help="'max METRIC' or 'min METRIC', e.g. 'min restarts'",
    )
    p.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="CONSTRAINT",
        help="'METRIC >= N' or 'METRIC <= N' (N may end in %%), e.g. "
        "'availability(web) >= 99.9%%'; repeatable",
    )
    p.add_argument(
        "--duration",
        type=positive,
        metavar="S",
        help="simulated seconds per run (default: the journal's span)",
    )
    p.add_argument("--seeds", type=int, default=20, metavar="N", help="search seeds (20)")
    p.add_argument(
        "--holdout", type=int, default=20, metavar="N", help="fresh seeds of the held-out replay"
    )
    p.add_argument(
        "--min-starts",
        type=int,
        default=1,
        metavar="N",
        help="starts a worker needs in the journal to be fitted (1)",
    )
    p.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    from actors import load_tree_file
    from supervision import ConfigError, TooLarge
    from supervision.simulate import NotEnoughHistory, TuneError, fit, read_journal, tune

    if args.seeds < 2 or args.holdout < 2:
        error("--seeds and --holdout need 2 seeds at least (an interval needs two runs)")
        return FAILED
    try:
        spec = load_tree_file(args.tree, resolve_targets=False)
    except (ConfigError, TooLarge) as e:
        error(e)
        return FAILED
    try:
        journal = read_journal(_lines(args.journal))
    except OSError as e:
        error(f"cannot read the journal: {e}")
        return FAILED
    try:
        fitted = fit(journal, spec, min_starts=args.min_starts)
        print(fitted)
        print()
        result = tune(
            spec,
            fitted,
            objective=args.objective,
            require=args.require,
            duration=args.duration,
            seeds=range(args.seeds),
            holdout=range(100_000, 100_000 + args.holdout),
        )
    except (NotEnoughHistory, TuneError) as e:
        error(e)
        return FAILED
    print(result)
    return OK


def _lines(paths: list[Path]) -> Iterator[bytes]:
    """The files' lines, read lazily; a line longer than LINE_BYTES comes as its first
    LINE_BYTES + 1 bytes (which the reader refuses) and its rest is skipped unread."""
    for path in paths:
        with path.open("rb") as f:
            while line := f.readline(LINE_BYTES + 1):
                if len(line) > LINE_BYTES and not line.endswith(b"\n"):
                    while rest := f.readline(LINE_BYTES):  # the rest, a block at a time
                        if rest.endswith(b"\n"):
                            break
                yield line
