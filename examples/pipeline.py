"""A three-level tree that crashes at every level, and escalates.

    root (one_for_one)
    ├── producer                        a Python worker
    ├── chain (rest_for_one)            stages that depend on the ones before them
    │   ├── parse
    │   ├── enrich
    │   └── pool (one_for_all, intensity 1)   consumers that share state
    │       ├── consumer-1
    │       ├── consumer-2
    │       └── consumer-3
    └── jobs (simple_one_for_one)      a dynamic pool of jobs, from one template

It kills one process at each level, prints the tree and the events each time,
then crashes the pool twice in a row so that it gives up and its parent
restarts it (escalation).

    python examples/pipeline.py
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence

from actors import EventLog, NannyActor, TreeNode
from supervision import ChildSpec, Event, EventKind, Restart, Strategy, SupervisorSpec


def run_stage(name: str) -> None:
    """A stage of the pipeline: in real life it would read, work and write."""
    while True:
        time.sleep(1)


def job(seconds: str) -> None:
    time.sleep(float(seconds))


def build_spec() -> SupervisorSpec:
    consumers = [
        ChildSpec(id=f"consumer-{i}", target=run_stage, args=(f"consumer-{i}",)) for i in (1, 2, 3)
    ]
    return SupervisorSpec(
        id="root",
        strategy=Strategy.ONE_FOR_ONE,
        intensity=5,
        period=10.0,
        children=[
            ChildSpec(id="producer", target=run_stage, args=("producer",)),
            SupervisorSpec(
                id="chain",
                strategy=Strategy.REST_FOR_ONE,
                intensity=3,
                period=10.0,
                children=[
                    ChildSpec(id="parse", target=run_stage, args=("parse",)),
                    ChildSpec(id="enrich", target=run_stage, args=("enrich",)),
                    SupervisorSpec(
                        id="pool",
                        strategy=Strategy.ONE_FOR_ALL,
                        intensity=1,
                        period=10.0,
                        children=consumers,
                    ),
                ],
            ),
            SupervisorSpec(
                id="jobs",
                strategy=Strategy.SIMPLE_ONE_FOR_ONE,
                intensity=10,
                period=10.0,
                children=[
                    ChildSpec(
                        id="job", target=job, restart=Restart.TRANSIENT, shutdown="brutal_kill"
                    )
                ],
            ),
        ],
    )


def print_tree(nodes: Sequence[TreeNode], indent: str = "  ") -> None:
    for node in nodes:
        c = node.info
        pid = c.pid if c.pid is not None else "-"
        print(f"{indent}{c.id:<12} {c.type:<10} pid={pid!s:<7} {c.state:<8} restarts={c.restarts}")
        print_tree(node.children, indent + "    ")


def find_pid(nodes: Sequence[TreeNode], child_id: str) -> int:
    for node in nodes:
        if node.info.id == child_id and node.info.pid is not None:
            return node.info.pid
        try:
            return find_pid(node.children, child_id)
        except LookupError:
            pass
    raise LookupError(child_id)


class Step:
    """Print what happens between two points of the run."""

    def __init__(self, ref: object, log: EventLog) -> None:
        self.ref, self.log, self.mark = ref, log, len(log)

    def show(self, title: str, until: Callable[[Event], bool]) -> None:
        self.log.wait_for(until, timeout=10, start=self.mark)
        events = self.log.snapshot()[self.mark - self.log.dropped :]
        self.mark = len(self.log)
        print(f"\n== {title}")
        for event in events:
            print(f"   {event}")


def started(child_id: str, supervisor: str | None = None) -> Callable[[Event], bool]:
    return lambda e: (
        e.context is EventKind.CHILD_STARTED
        and e.offender == child_id
        and (supervisor is None or e.supervisor == supervisor)
    )


def main() -> None:
    ref = NannyActor.start(build_spec())
    nanny = ref.proxy()
    log: EventLog = nanny.event_log().get()
    step = Step(ref, log)
    try:
        print("the tree, in start order:")
        print_tree(nanny.which_tree().get())

        os.kill(find_pid(nanny.which_tree().get(), "producer"), signal.SIGKILL)
        step.show("kill producer: one_for_one restarts only it", started("producer"))

        os.kill(find_pid(nanny.which_tree().get(), "parse"), signal.SIGKILL)
        step.show(
            "kill parse: rest_for_one restarts parse, enrich and the pool after it",
            started("pool", "root/chain"),
        )

        os.kill(find_pid(nanny.which_tree().get(), "consumer-2"), signal.SIGKILL)
        step.show(
            "kill consumer-2: one_for_all restarts every consumer",
            started("consumer-3", "root/chain/pool"),
        )

        jobs = nanny.child_nanny("jobs").get().proxy()
        for seconds in ("60", "60", "0.2"):
            jobs.start_child((seconds,)).get()
        os.kill(jobs.which_children().get()[-1].pid, signal.SIGKILL)
        step.show(
            "three dynamic jobs; kill job-1 (transient, so it restarts); job-3 ends normally",
            lambda e: e.context is EventKind.CHILD_EXITED and e.offender == "job-3",
        )

        # The pool allows 1 restart in 10 s. It used it above: the next crash exceeds it,
        # the pool gives up with reason shutdown, and chain (rest_for_one) restarts it.
        os.kill(find_pid(nanny.which_tree().get(), "consumer-1"), signal.SIGKILL)
        step.show(
            "kill consumer-1 again: the pool gives up, chain restarts it (escalation)",
            started("pool", "root/chain"),
        )
        print("\nthe tree now:")
        print_tree(nanny.which_tree().get())
    finally:
        ref.stop()
    print("\nstopped: every process of the tree is gone")


if __name__ == "__main__":
    main()
