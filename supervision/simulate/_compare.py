"""compare(): several specs on one fault model and the same seeds, side by side in a `Table`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .._errors import SpecError
from ..spec._spec import SupervisorSpec
from ._defaults import DEFAULT_ROOT_RESTART_DELAY, DEFAULT_SEEDS
from ._faults import FaultEntry
from ._metrics import MetricLike, all_metrics, check_metrics, kind_of, needs_events
from ._run import simulate
from ._table import Table, summarize


def compare(
    specs: Mapping[str, SupervisorSpec],
    faults: Mapping[str, FaultEntry] | None = None,
    *,
    duration: float,
    seeds: Iterable[int] = DEFAULT_SEEDS,
    root_restart_delay: float | None = DEFAULT_ROOT_RESTART_DELAY,
    metrics: Mapping[str, MetricLike | str] | None = None,
) -> Table:
    """Run each spec on the same fault model and seeds; return a `Table` row per spec.

    `str(table)` renders it as plain text; `table.rows` holds the figures
    (means over the seeds, and every run's); `metrics`: named metrics of your
    own, kept per run beside the defaults (as `sweep`'s).
    """
    chosen = check_metrics(metrics)
    keep = any(needs_events(m) for m in chosen.values())
    seed_list = list(seeds)
    if not seed_list:
        raise SpecError(None, "seeds", seeds, "expected at least one seed")
    rows = []
    for name, spec in specs.items():
        results = [
            simulate(
                spec,
                faults,
                duration=duration,
                seed=seed,
                root_restart_delay=root_restart_delay,
                keep_events=keep,
            )
            for seed in seed_list
        ]
        rows.append(summarize(name, results, chosen))
    kinds = {n: kind_of(m) for n, m in all_metrics(chosen).items()}
    return Table(rows, float(duration), tuple(seed_list), tuple(chosen), kinds)
