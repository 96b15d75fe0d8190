"""compare(): several specs on one fault model and the same seeds, side by side in a `Table`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .._errors import SpecError
from ..spec._spec import SupervisorSpec
from ._defaults import DEFAULT_ROOT_RESTART_DELAY, DEFAULT_SEEDS
from ._faults import FaultEntry
from ._run import simulate
from ._table import Table, summarize


def compare(
    specs: Mapping[str, SupervisorSpec],
    faults: Mapping[str, FaultEntry] | None = None,
    *,
    duration: float,
    seeds: Iterable[int] = DEFAULT_SEEDS,
    root_restart_delay: float | None = DEFAULT_ROOT_RESTART_DELAY,
) -> Table:
    """Run each spec on the same fault model and seeds; return a `Table` row per spec.

    `str(table)` renders it as plain text; `table.rows` holds the figures
    (means over the seeds).
    """
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
                keep_events=False,
            )
            for seed in seed_list
        ]
        rows.append(summarize(name, results))
    return Table(rows, duration=float(duration), seeds=tuple(seed_list))
