"""The simulator as the oracle (issue 23): a live tree under random faults, replayed in
`supervision.simulate`; the two must make the same decisions.

    python -m tests.chaos --schedules N --seed S [--margin M] [--verbose]

A schedule (`_schedule`, random per seed) is a tree of 2-3 levels (every strategy,
simple_one_for_one included, small intensities and periods so that supervisors give
up) and 10-20 faults: a worker exits with a code (0 or not; permanent, transient and
temporary workers), is killed by a signal (KILL, TERM, INT), raises; API calls
(terminate_child, by id or by pid, restart_child, delete_child, start_child). The
live runner (`_live`) runs it on real processes and records each fault's time; the
replay (`_replay`) feeds the same faults, at those times, to the simulator, and
compares the event sequences (which child restarted, which siblings were stopped,
which supervisor gave up, with what reason) and the calls' outcomes.

The margin (`_oracle.MARGIN`, 0.3 s): live, an exit is handled a few
milliseconds after its fault (more under load: the lag is measured), and the
intensity is charged then; the replay charges it at the fault's time. A restart
charged near an intensity window's edge could fall on either side of it, so no
fault is injected within the margin of an edge: it waits until the edge has
passed (`moved` counts them). Each comparison also counts the pairs of exits
that a supervisor heard within its period in one run and not in the other; a
difference with such a pair is reported as one of timing, not of decision.

Left out, because the simulator cannot replay them as they happen live: faults
that land while the tree is still acting on the previous one (the replay's
starts and stops take no time, so each fault waits until the tree has made the
decisions the replay made), signal_child (the simulator has no such call; a
signal is sent with os.kill and replayed as the exit it causes), pause_child
(a paused worker cannot read its instruction), and terminate_child's
with_dependents (a scripted call passes no keyword arguments).

The modules here are not tests themselves: tests/chaos/test_oracle.py runs them.

This module imports nothing: a worker imports `_child` through it, and each
restart would pay for the rest. `_oracle` holds `run_schedule` and `Totals`.
"""
