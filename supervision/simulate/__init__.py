"""Restart-strategy experiments in virtual time: the live decision core, no processes.

`simulate(spec, faults, duration=...)` runs a `SupervisorSpec` against a fault
model per worker and returns the events a live tree would report, with a report
per child and for the tree. `compare(specs, faults, ...)` runs several specs on
the same fault model and seeds and returns a `Table`; `sweep(build, faults,
..., **axes)` runs a grid of specs over seeds and returns a `SweepTable` with
95% confidence intervals (`actors.experiment.sweep` runs it on every core).
All three share one set of defaults (`DEFAULT_SEEDS`, `DEFAULT_ROOT_RESTART_DELAY`),
and take `metrics={name: metric}`, figures of a run of your own (`metric("k_of_n(1,
web/a, web/b)")`, or a function of the result); `compare` and `sweep` keep every
run's, for `table.paired(a, b, metric)` and `table.to_pandas()`.

How it models a tree (the same as `actors.NannyActor`, in virtual time):

- Each supervisor is an actor with a FIFO mailbox: child exits and restart
  retries queue while it is busy. It carries out the core's actions in order;
  a start takes the child's `start_duration`, a stop its `stop_duration`
  (bounded by its `shutdown` spec), and the supervisor waits meanwhile.
- A nested supervisor is a child whose "process" is a sub-simulation. Starting
  it runs its init; stopping it runs its shutdown; when it gives up, its parent
  gets an ordinary child exit with its `shutdown` reason.
- `ScheduleRetry(delay)` (a failed restart's retry, or a `Backoff` delay)
  posts the retry to the mailbox after `delay` seconds (0: at once, behind
  what is queued), as the live tree's timer does.
- Exits are noticed at once; times tie-break in the order they were scheduled,
  so a run is deterministic for a given seed.
- When the root gives up, the run ends there (the rest of `duration` counts as
  downtime), unless `root_restart_delay` is given: then the root is started
  again that many seconds later, as systemd's Restart=always would.
- Scripted API calls (`calls=[call(t, "start_child", ...)]`) go through the
  supervisor's mailbox at their time; `result.calls` holds what each returned
  or raised. A "stop" call stops the tree and ends the run.
- A start takes the fault model's `start_duration`, or `ready` seconds when
  the spec's `ready` is a number; a child with a readiness check that is not
  ready within `start_timeout` fails to start (reason start_timeout), as live.
  `min_uptime` is the core's: an exit sooner after the start is a failed start.
  So is `required=False`: a child whose first start fails (`failed_starts={1}`) is
  left failed while its siblings start, as live (docs/otp-semantics.md section 16).
- A probe as `ready` (TcpProbe, HttpProbe, ExecProbe) is tried at once and
  every probe period: the start ends at the first attempt at or after the
  model's `answers_after` (its service's warm-up), or fails at `start_timeout`
  if that attempt would be later. `ready="exited"` (a one-shot step): its run is
  its start: `start_duration` seconds (or what its model draws: a relative
  `Scripted` entry), then a normal exit, reported after its start as live; an
  abnormal exit is a failed start, and its next sibling starts only after it.
- A `liveness` probe runs `initial_delay` after the child is ready (or
  resumed), then every `period`: it fails while its service does not answer
  (before `answers_after`; a `Hang`, at the probe's `timeout`; a `Flapping`
  model, at random or by a pattern); `failures` in a row stop the child as by
  its stop signal and `shutdown`, with reason unhealthy, restarted by its
  strategy and counted in the intensity. Events are reported as live
  (supervision.LivenessCount decides): probe_failed for every failed attempt
  ("failing 2/3" in its detail), child_unhealthy and child_healthy on a change,
  liveness_killed when the threshold begins the stop (its child_exited, reason
  unhealthy, follows). Without the event list (`keep_events=False`) none of
  them is made.
- `MemoryGrowth` models a leak: the process is stopped with reason
  memory_limit when its RSS reaches the spec's `memory_limit`.
- `Hang` models a process that stays alive but stops answering (after each
  start, or at absolute times, as a SIGSTOP): it counts as down from the hang;
  the spec's `watchdog` or its `liveness` probe ends it, whichever decides
  first (reason watchdog or unhealthy, then its `shutdown`, since a hung
  process ignores SIGTERM). Reports count the unhealthy stops. Its hang is an
  event, child_hung, which only a simulation reports (a live tree sees the
  failed probes); `event_sequence` leaves it out to compare with a live run.
- A worker's `faults` entry may be a list of models, combined: a hang, a
  flapping probe and crashes at once (`[Hang(...), Flapping(...),
  Exponential(...)]`), each drawing from its own streams, so adding a model
  leaves the others' draws as they were; the rules for each pair are in
  supervision/simulate/_faults.py and docs/health-simulation.md.
- A paused child keeps its process (its scripted faults still happen) and
  counts as down for availability until resumed.
- Workers get pids as live ones do: distinct and deterministic, counted from
  1000 in the order their processes start in the run; a scripted call names one
  with `pid_of("w-2")` (`terminate_child` of a simple_one_for_one child by pid).

Faults are keyed by a worker's path below the root: "web" for a child of the
root, "pool/w1" for a child of the nested supervisor "pool". A worker without
a fault model never fails. Below a simple_one_for_one supervisor a path names
its children by template or by id:

- "pool/w", the template "w" of "pool": every child started from it gets its
  own copy of the model (its own random draws, its own relative script); an
  absolute `Scripted` exit there ends, at its time, the process of each of
  those children that runs then (all at once; their exits reach "pool" in
  start order).
- "pool/w-2", a child's id as the live tree gives it: the child of the second
  `start_child` on "pool" (ids count from 1 in each incarnation of "pool", a
  failed start included, and are never reused), whatever "pool/w" says.

The most specific key wins, a child's own id before its template's, from the
innermost supervisor out ("pool/sub-1/x" before "pool/sub/x" when "sub" is
the template of "pool" and "x" a worker of it).

The package, module by module: `_run` is the engine (`simulate`), which drives
the simulated supervisors of `_node` (their messages: `_messages`, their workers'
processes and drawn faults: `_process`); `_compare`
and `_sweep` run it over specs and seeds; `_stats` holds the confidence
intervals, `_table` compare()'s table, `_report` what one run reports,
`_metrics` the metrics over a run (built-ins, `metric(text)`), `_runs`
what a table of kept runs does (paired comparisons, export), `_faults`
and `_ops` the fault models and scripted calls, `_health` the readiness
and liveness probes' schedules, `_keys` how `faults` keys name
workers, `_defaults` the shared defaults; nodes and node faults are
`_nodes.py`. A tree's history: `_journal` reads an event journal back,
`_rates` estimates rates with their intervals, `_fit` turns them into fault
models per worker, `_tune` searches settings on them. This module only
re-exports (tests/sim/test_facade.py checks it).
"""

from __future__ import annotations

from ._compare import compare
from ._defaults import DEFAULT_ROOT_RESTART_DELAY, DEFAULT_SEEDS
from ._defaults import DEFAULT_SEED as DEFAULT_SEED
from ._faults import (
    CRASH,
    START_FAILURE,
    Exponential,
    FaultModel,
    Flapping,
    Hang,
    Healthy,
    MemoryGrowth,
    Scripted,
)
from ._fit import ChildFit, Fit, NotEnoughHistory, fit
from ._journal import read_journal
from ._metrics import (
    BUILTIN_METRICS,
    Availability,
    Custom,
    DowntimePerIncident,
    GiveUps,
    KOfN,
    Metric,
    Restarts,
    TimeToDetect,
    TimeToGiveUp,
    Unhealthy,
    custom,
    metric,
)
from ._nodes import Cluster, NodeDown, NodeFailures, NodeUp, Unreachable
from ._nodes import NodeFault as NodeFault
from ._ops import Call, CallResult, PidOf, call, pid_of
from ._rates import Proportion, Rate
from ._report import ChildReport, SimulationResult, TreeReport, event_sequence
from ._report import ChildType as ChildType
from ._run import simulate
from ._runs import Paired
from ._stats import Estimate
from ._sweep import METRICS, SweepRow, SweepTable, grid, sweep
from ._table import ComparisonRow, Table
from ._tune import Knob, TuneError, Tuning, tune

__all__ = [
    "BUILTIN_METRICS",
    "CRASH",
    "DEFAULT_ROOT_RESTART_DELAY",
    "DEFAULT_SEEDS",
    "METRICS",
    "START_FAILURE",
    "Availability",
    "Call",
    "CallResult",
    "ChildFit",
    "ChildReport",
    "Cluster",
    "ComparisonRow",
    "Custom",
    "DowntimePerIncident",
    "Estimate",
    "Exponential",
    "FaultModel",
    "Fit",
    "Flapping",
    "GiveUps",
    "Hang",
    "Healthy",
    "KOfN",
    "Knob",
    "MemoryGrowth",
    "Metric",
    "NodeDown",
    "NodeFailures",
    "NodeUp",
    "NotEnoughHistory",
    "Paired",
    "PidOf",
    "Proportion",
    "Rate",
    "Restarts",
    "Scripted",
    "SimulationResult",
    "SweepRow",
    "SweepTable",
    "Table",
    "TimeToDetect",
    "TimeToGiveUp",
    "TreeReport",
    "TuneError",
    "Tuning",
    "Unhealthy",
    "Unreachable",
    "call",
    "compare",
    "custom",
    "event_sequence",
    "fit",
    "grid",
    "metric",
    "pid_of",
    "read_journal",
    "simulate",
    "sweep",
    "tune",
]
