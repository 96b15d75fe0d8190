"""A supervisor stopping its children: a run of stops carried out on its own thread,
and many children stopped at once with one deadline (docs/scale.md, "A run of
stops"; docs/acting-ahead.md). Each stop is the one stop of actors/_shell/_stopping.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, cast

import pykka

from supervision import ExitKind, ExitReason, Shutdown

from ._messages import FinishStop, PrepareStop
from ._stopping import StopOrder, StopOutcome, carry_out

log = logging.getLogger("nannytree")

# The most stops carried out in one run: what a run keeps alive (its orders, answers
# and futures) stays young for the GC; 10,000 at once brought five full collections.
RUN_OF_STOPS = 128

_LATE = "supervisor's shutdown deadline"


def failed_stop(e: BaseException) -> ExitReason:
    """A stop that could not be asked or answered: its actor was gone, or failed."""
    if isinstance(e, pykka.ActorDeadError):
        return ExitReason.shutdown("already stopped")
    return ExitReason(ExitKind.ACTOR_CRASHED, exc_type=type(e).__name__, message=str(e)[:8192])


def warn_if_late(supervisor: str, child_id: str, reason: ExitReason) -> None:
    if _LATE in reason.message:
        log.warning("%s/%s %s", supervisor, child_id, reason.message)


def stop_run(
    workers: Mapping[str, pykka.ActorRef[Any]], deadline: float | None, supervisor: str
) -> dict[str, tuple[ExitReason, float]]:
    """Stop the workers' processes one after the other, in the mapping's order, on this
    thread: each stop signal once the process before has exited (OTP's order), with no
    round trip through a worker or the core between two. Each child's exit reason, and
    the time its stop ended (its event's time)."""
    # Every worker lets go of its process at once; then the stops, in order. All
    # answers first: the pool's work is done before the first signal, and does not
    # compete with the run for the GIL.
    asked = [(c, worker.ask(PrepareStop(), block=False)) for c, worker in workers.items()]
    orders: list[tuple[str, StopOrder | ExitReason]] = []
    for c, future in asked:
        try:
            orders.append((c, future.get()))
        except Exception as e:
            orders.append((c, failed_stop(e)))
    results: dict[str, ExitReason] = {}
    stopped_at: dict[str, float] = {}
    finishing = []
    for c, order in orders:
        stopped_at[c] = time.monotonic()
        if isinstance(order, ExitReason):  # it had no process left
            results[c] = order
            continue
        try:
            outcome = carry_out(order, deadline, time.monotonic())
        except Exception:
            log.exception("nanny %r: cannot stop %r; its worker kills it", supervisor, c)
            outcome = StopOutcome(None, False, False, None, False)
        stopped_at[c] = time.monotonic()
        finishing.append((c, outcome))
    # Told after the run: handling them on the pool meanwhile would slow the run
    # (the GIL: a busy pool thread keeps it for a switch interval).
    told = [(c, workers[c].ask(FinishStop(o), block=False)) for c, o in finishing]
    for c, future in told:
        try:
            results[c] = cast(ExitReason, future.get())
            warn_if_late(supervisor, c, results[c])
        except Exception as e:
            results[c] = failed_stop(e)
    return {c: (r, stopped_at[c]) for c, r in results.items()}


def gather_stops(
    futures: Mapping[str, pykka.Future[Any]], supervisor: str, shutdown: Shutdown
) -> dict[str, ExitReason]:
    """The answers of stops asked all at once (OTP 5.4's one shared timer), and one
    warning for all that were still running at the deadline."""
    results: dict[str, ExitReason] = {}
    for child_id, future in futures.items():
        try:
            results[child_id] = future.get() or ExitReason.shutdown()
        except Exception as e:
            results[child_id] = failed_stop(e)
    late = [c for c, r in results.items() if _LATE in r.message]
    if late:
        shown = ", ".join(late[:5]) + (f" and {len(late) - 5} more" if len(late) > 5 else "")
        log.warning(
            "%s: %d of %d children were still running at the shutdown deadline "
            "(shutdown=%s); killed with SIGKILL: %s",
            supervisor,
            len(late),
            len(results),
            shutdown,
            shown,
        )
    return results
