"""A supervisor stopping its children: `Stops` carries out the core's stops, one
child at a time, a run of stops on its own thread, or many children at once with
one deadline (docs/scale.md, "A run of stops"; docs/acting-ahead.md), each
within the deadline its own parent set. Each stop of a worker's process is the
one stop of actors/_shell/_stopping.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import pykka

from supervision import ExitKind, ExitReason, Shutdown, Supervisor

from ._children import ChildActors
from ._messages import FinishStop, PrepareStop, ShutdownTree, Stop
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


class Stops:
    """One supervisor's stops of its children, as its core asks for them."""

    def __init__(
        self, core: Supervisor, children: ChildActors, next_token: Callable[[], int]
    ) -> None:
        self._core = core
        self._children = children
        self._next_token = next_token
        self.deadline: float | None = None  # set by a parent's ShutdownTree
        # Children of a run of stops already stopped (why, and when), until the core
        # asks for them.
        self._stopped_ahead: dict[str, tuple[ExitReason, float]] = {}

    def _deadline_for(self, shutdown: Shutdown) -> float | None:
        """When a subtree with this shutdown must be gone, within our own deadline."""
        own = None
        if shutdown == "brutal_kill":
            own = time.monotonic()
        elif shutdown != "infinity":
            own = time.monotonic() + float(shutdown)
        if own is None or self.deadline is None:
            return own if own is not None else self.deadline
        return min(own, self.deadline)

    def terminate(self, child_id: str, shutdown: Shutdown) -> ExitReason:
        """Stop one child: a worker's process, or a nested tree."""
        nested = self._children.nested
        try:
            if child_id in nested:
                token = self._next_token()
                reason = cast(
                    ExitReason | None,
                    nested.pop(child_id).ask(ShutdownTree(token, self._deadline_for(shutdown))),
                )
                return reason or ExitReason.shutdown()
            worker = self._children.workers[child_id]
            reason = cast(ExitReason, worker.ask(Stop(self._next_token(), self.deadline)))
            warn_if_late(self._core.name, child_id, reason)
            return reason
        except Exception as e:
            return failed_stop(e)

    def terminate_in_turn(self, child_id: str, shutdown: Shutdown) -> tuple[ExitReason, float]:
        """Stop a worker's child, and the worker children the core stops right after
        it, one after the other on this thread: a stop signal goes out once the
        process before has exited (OTP's order), with no round trip through a worker
        or the core between two of them (docs/scale.md, "A run of stops")."""
        if child_id in self._stopped_ahead:
            return self._stopped_ahead.pop(child_id)
        workers, nested = self._children.workers, self._children.nested
        if child_id not in workers or child_id in nested:
            return self.terminate(child_id, shutdown), time.monotonic()
        run = [child_id]
        for next_id in self._core.next_terminations(RUN_OF_STOPS - 1):
            if next_id not in workers or next_id in nested:
                break
            run.append(next_id)
        stopped = stop_run({c: workers[c] for c in run}, self.deadline, self._core.name)
        self._stopped_ahead.update(stopped)
        return self._stopped_ahead.pop(child_id)

    def terminate_many(
        self, child_ids: tuple[str, ...], shutdown: Shutdown
    ) -> dict[str, ExitReason]:
        """Stop many children at once, with one deadline (OTP 5.4's one shared timer)."""
        deadline = self._deadline_for(shutdown)
        nested = self._children.nested
        futures = {}
        for child_id in child_ids:
            token = self._next_token()
            if child_id in nested:
                message: Any = ShutdownTree(token, deadline)
                futures[child_id] = nested.pop(child_id).ask(message, block=False)
            else:
                worker = self._children.workers[child_id]
                futures[child_id] = worker.ask(Stop(token, deadline), block=False)
        return gather_stops(futures, self._core.name, shutdown)

    def check_idle(self) -> None:
        """The core is done stopping: nothing may stay stopped ahead, unasked."""
        if self._stopped_ahead and not self._core.busy:
            log.error("nanny %r stopped %s ahead, unasked", self._core.name, self._stopped_ahead)
            self._stopped_ahead.clear()

    def stop_nested(self) -> None:
        """The nanny ends: every nested tree stops."""
        for nested in self._children.nested.values():
            try:
                nested.ask(ShutdownTree(self._next_token()))
            except pykka.ActorDeadError:
                pass  # it gave up (or stopped) first: nothing left to stop
            except Exception:
                log.exception("nanny %r: stopping a nested tree failed", self._core.name)
        self._children.nested.clear()
