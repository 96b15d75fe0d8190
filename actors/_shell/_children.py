"""The actors that stand for one supervisor's children: a WorkerActor per worker
(made with the spec it runs), a nested NannyActor or a RemoteChild per
supervisor child (with the incarnation it was started as), and what a remote
child's stand-in says of it (its node, its pid, whether it answers).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pykka

from supervision import ChildInfo, ChildNotRunning, ChildSpec, ExitKind, ExitReason

from ._context import TreeContext
from ._messages import Pause, Resume
from ._worker import WorkerActor


def crash_reason(e: BaseException) -> ExitReason:
    """The exit reason of an actor that failed with `e`."""
    return ExitReason(ExitKind.ACTOR_CRASHED, exc_type=type(e).__name__, message=str(e)[:8192])


class ChildActors:
    """The live actors of one supervisor's children, by child id."""

    def __init__(self, context: TreeContext, supervisor: str) -> None:
        self._context = context
        self._supervisor = supervisor
        self.workers: dict[str, pykka.ActorRef[WorkerActor]] = {}
        self._worker_specs: dict[str, ChildSpec] = {}  # the spec each worker was made with
        self.nested: dict[str, pykka.ActorRef[Any]] = {}  # a NannyActor or a RemoteChild
        self._incarnations: dict[str, int] = {}  # of each nested child, started so far
        self.remote: dict[str, Any] = {}  # multi-host: child id -> its RemoteStatus

    def worker_for(
        self, child_id: str, spec: ChildSpec, owner: pykka.ActorRef[Any]
    ) -> pykka.ActorRef[WorkerActor]:
        """The child's worker, made with `spec` (a new one when the spec changed)."""
        worker = self.workers.get(child_id)
        if worker is not None and self._worker_specs.get(child_id) is not spec:
            worker.stop()  # replace_child gave the child a new spec: a worker of it
            worker = None
        if worker is None or not worker.is_alive():
            worker = WorkerActor.start(spec, self._context, owner, self._supervisor)
            self.workers[child_id] = worker
            self._worker_specs[child_id] = spec
        return worker

    def next_incarnation(self, child_id: str) -> int:
        """The incarnation a nested child's next start makes."""
        incarnation = self._incarnations.get(child_id, 0) + 1
        self._incarnations[child_id] = incarnation
        return incarnation

    def remove(self, child_id: str) -> None:
        """The core forgot the child: its worker goes."""
        worker = self.workers.pop(child_id, None)
        self._worker_specs.pop(child_id, None)
        if worker is not None:
            worker.stop()

    def ask_worker(self, info: ChildInfo, message: Any, what: str) -> Any:
        """Ask a running (or paused) worker child's worker; ChildNotRunning otherwise."""
        worker = self.workers.get(info.id)
        if info.type != "worker" or worker is None or info.state not in ("running", "paused"):
            raise ChildNotRunning(self._supervisor, info.id, what)
        return worker.ask(message)

    def pause(self, child_id: str, *, paused: bool) -> None:
        # SIGSTOP/SIGCONT; a process that just died has its exit on the way: nothing to do.
        with contextlib.suppress(ChildNotRunning, pykka.ActorDeadError):
            self.workers[child_id].ask(Pause() if paused else Resume())

    def stop_workers(self) -> None:
        # All at once (their processes are already stopped): a thousand workers
        # must not cost a thousand round trips one after the other.
        futures = [worker.stop(block=False) for worker in self.workers.values()]
        self.workers.clear()
        for future in futures:
            with contextlib.suppress(pykka.ActorDeadError):
                future.get()
