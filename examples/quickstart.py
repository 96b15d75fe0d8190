"""Quick start: a tree of a command, a Python function and a lambda.

It prints the tree, SIGKILLs one child, prints the tree again with the new pid
and restart count, and stops everything in reverse start order.

    python examples/quickstart.py
"""

from __future__ import annotations

import os
import signal
import time

from actors import NannyActor
from supervision import ChildInfo, ChildSpec, EventKind, Restart, Strategy, SupervisorSpec


def work(interval: float) -> None:
    """A Python child: runs until told to stop (SIGTERM arrives as SystemExit)."""
    try:
        while True:
            time.sleep(interval)
    finally:
        pass  # cleanup here runs on stop


def print_tree(title: str, infos: list[ChildInfo]) -> None:
    print(f"\n{title}")
    print(f"  {'id':<8} {'pid':>7}  {'state':<9} {'restarts':>8}  last exit")
    for c in reversed(infos):  # which_children() is newest first, as OTP: print in start order
        last = str(c.last_exit) if c.last_exit else "-"
        print(f"  {c.id:<8} {c.pid or '-':>7}  {c.state:<9} {c.restarts:>8}  {last}")


def main() -> None:
    greeting = "hello from a closure"
    spec = SupervisorSpec(
        id="root",
        strategy=Strategy.ONE_FOR_ONE,
        intensity=3,
        period=5.0,
        children=[
            ChildSpec(id="sleeper", command=["sleep", "600"]),
            ChildSpec(id="worker", target=work, args=(0.5,), restart=Restart.PERMANENT),
            ChildSpec(id="lambda", target=lambda: work(len(greeting) / 10), shutdown=2.0),
        ],
    )
    ref = NannyActor.start(spec)  # returns once every child runs
    nanny = ref.proxy()
    log = nanny.event_log().get()  # the tree's events; readable after the stop too
    try:
        print_tree("started:", nanny.which_children().get())
        victim = next(c for c in nanny.which_children().get() if c.id == "worker")
        print(f"\nkill -9 {victim.pid}  (worker)")
        os.kill(victim.pid, signal.SIGKILL)
        log.wait_for(
            lambda e: (
                e.context is EventKind.CHILD_STARTED
                and e.offender == "worker"
                and e.incarnation == victim.incarnation + 1
            ),
            timeout=10,
        )
        print_tree("after the kill:", nanny.which_children().get())
    finally:
        ref.stop()  # stops lambda, worker, sleeper: reverse start order
    print("\nevents:")
    for event in log.snapshot():
        print(f"  {event}")


if __name__ == "__main__":
    main()
