"""A random schedule for one chaos run: a tree of 2-3 levels and the faults to inject.

Pure: `generate(seed, directory)` draws everything from `random.Random(seed)`,
so a seed names a schedule (the run's directory is where its workers wait).
The fault times are not drawn here: each fault has a `gap`, the seconds the
runner waits at least after the previous one; the runner records the times.
"""

from __future__ import annotations

import os
import random
import signal
from dataclasses import dataclass, field
from typing import Any, Literal

from supervision import ChildSpec, Restart, Strategy, SupervisorSpec

from ._child import obey

FaultKind = Literal["exit", "signal", "raise", "call"]
STATIC = (Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE)
SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)
GAPS = (0.05, 0.5)  # seconds between two faults, at least (drawn uniformly)
PERIODS = (1.5, 2.0, 3.0, 5.0)  # against faults every 0.3 s: give-ups happen
TEMPLATE = "w"  # a simple_one_for_one supervisor's template; its children are w-1, w-2...


@dataclass(frozen=True)
class Fault:
    """One fault. `where` is a worker's path below the root ("sub/w1", "sub/pool/w-2")
    for exit, signal and raise, and a supervisor's path ("" for the root) for a call.

    `code`: the exit code, or the signal's number. `method`, `arg`: the API call;
    a call's `arg` is a child id, a ChildSpec (start_child), () (start_child on a
    simple_one_for_one supervisor) or ("pid", id) (terminate_child by that child's pid).
    """

    kind: FaultKind
    where: str
    gap: float
    code: int = 0
    method: str = ""
    arg: Any = None

    def __str__(self) -> str:
        if self.kind == "exit":
            return f"{self.where} exits {self.code}"
        if self.kind == "signal":
            return f"{self.where} gets {signal.Signals(self.code).name}"
        if self.kind == "raise":
            return f"{self.where} raises"
        arg = self.arg.id if isinstance(self.arg, ChildSpec) else self.arg
        return f"{self.where or '(root)'}.{self.method}({arg!r})"


@dataclass(frozen=True)
class Schedule:
    seed: int
    spec: SupervisorSpec
    faults: tuple[Fault, ...]
    directory: str = field(repr=False)

    def describe(self) -> str:
        lines = [f"seed {self.seed}: {describe_tree(self.spec)}"]
        lines += [f"  +{f.gap:.2f}s {f}" for f in self.faults]
        return "\n".join(lines)


def describe_tree(spec: SupervisorSpec) -> str:
    """One line: each supervisor with its strategy, intensity/period and children."""
    parts = []
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            parts.append(describe_tree(child))
        else:
            parts.append(f"{child.id}:{child.restart.value[:4]}")
    head = f"{spec.id}[{spec.strategy.value} {spec.intensity}/{spec.period:g}s"
    if spec.restart is not Restart.PERMANENT:
        head += f" {spec.restart.value}"
    return f"{head}: {', '.join(parts)}]"


def worker(child_id: str, restart: Restart, directory: str) -> ChildSpec:
    """A worker that waits for its instruction in `directory` (tests/chaos/_child.py)."""
    return ChildSpec(
        id=child_id,
        target=obey,
        args=(directory,),
        restart=restart,
        stderr=os.path.join(directory, "stderr"),  # the raised tracebacks, out of the way
    )


def _restart(rng: random.Random, weights: tuple[int, int, int]) -> Restart:
    kinds = (Restart.PERMANENT, Restart.TRANSIENT, Restart.TEMPORARY)
    return rng.choices(kinds, weights)[0]


class _Builder:
    def __init__(self, rng: random.Random, directory: str) -> None:
        self.rng = rng
        self.directory = directory
        self.names = 0

    def name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def supervisor(self, sid: str, depth: int, levels: int) -> SupervisorSpec:
        rng = self.rng
        pool = depth > 1 and rng.random() < 0.4
        common: dict[str, Any] = {
            "intensity": rng.choice((2, 3) if depth == 1 else (1, 1, 2, 3)),
            "period": rng.choice(PERIODS),
            "restart": Restart.PERMANENT if depth == 1 else _restart(rng, (3, 1, 1)),
        }
        if pool:
            template = worker(TEMPLATE, _restart(rng, (2, 1, 1)), self.directory)
            return SupervisorSpec(
                id=sid,
                strategy=Strategy.SIMPLE_ONE_FOR_ONE,
                max_children=rng.choice((None, 3)),
                children=[template],
                **common,
            )
        n = rng.randint(2, 4)
        nested = rng.randrange(n) if depth < levels else None  # one at least, to reach `levels`
        children: list[ChildSpec | SupervisorSpec] = []
        for i in range(n):
            if i == nested or (depth < levels and rng.random() < 0.25):
                children.append(self.supervisor(self.name("s"), depth + 1, levels))
            else:
                children.append(worker(self.name("w"), _restart(rng, (2, 1, 1)), self.directory))
        return SupervisorSpec(id=sid, strategy=rng.choice(STATIC), children=children, **common)


def _supervisors(spec: SupervisorSpec, prefix: str = "") -> dict[str, SupervisorSpec]:
    """Every supervisor by its path below the root ("" the root, "s1/s2")."""
    found = {prefix.rstrip("/"): spec}
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            found.update(_supervisors(child, prefix + child.id + "/"))
    return found


class _Faults:
    """Draws faults over the children the schedule can name so far."""

    def __init__(self, rng: random.Random, spec: SupervisorSpec, directory: str) -> None:
        self.rng = rng
        self.directory = directory
        self.supervisors = _supervisors(spec)
        # Child ids a call or a fault may name, per supervisor (added ones included).
        self.ids = {
            path: [c.id for c in s.children]
            for path, s in self.supervisors.items()
            if s.strategy is not Strategy.SIMPLE_ONE_FOR_ONE
        }
        self.pools = {
            path: 0 for path, s in self.supervisors.items() if path not in self.ids
        }  # start_child calls so far
        self.added = 0

    def _path(self, supervisor: str, child: str) -> str:
        return f"{supervisor}/{child}" if supervisor else child

    def workers(self) -> list[str]:
        found = []
        for path, ids in self.ids.items():
            for cid in ids:
                if not isinstance(self.supervisors.get(self._path(path, cid)), SupervisorSpec):
                    found.append(self._path(path, cid))
        for path, starts in self.pools.items():
            found += [self._path(path, f"{TEMPLATE}-{i}") for i in range(1, starts + 1)]
        return found

    def draw(self) -> Fault:
        rng = self.rng
        gap = round(rng.uniform(*GAPS), 3)
        hungry = [path for path, starts in self.pools.items() if starts < 2]
        if hungry and rng.random() < 0.5:  # a pool's first children: something to fault
            pool = rng.choice(hungry)
            self.pools[pool] += 1
            return Fault("call", pool, gap, method="start_child", arg=())
        workers = self.workers()
        kind: FaultKind = rng.choices(("exit", "signal", "raise", "call"), (3.5, 2.5, 1.5, 2.5))[0]
        if kind == "call" or not workers:
            return self._call(gap)
        where = rng.choice(workers)
        if kind == "exit":
            return Fault("exit", where, gap, code=rng.choice((0, 0, 1, 2, 3)))
        if kind == "signal":
            return Fault("signal", where, gap, code=int(rng.choice(SIGNALS)))
        return Fault("raise", where, gap)

    def _call(self, gap: float) -> Fault:
        rng = self.rng
        supervisor = rng.choice(sorted(self.supervisors))
        if supervisor in self.pools:
            starts = self.pools[supervisor]
            method = rng.choices(
                ("start_child", "terminate_child", "terminate_by_pid", "restart_child"),
                (4 if starts < 3 else 1, 2, 2, 0.3),
            )[0]
            if method == "start_child" or starts == 0:
                self.pools[supervisor] = starts + 1
                return Fault("call", supervisor, gap, method="start_child", arg=())
            child = f"{TEMPLATE}-{rng.randint(1, starts)}"
            if method == "terminate_by_pid":
                return Fault("call", supervisor, gap, method="terminate_child", arg=("pid", child))
            return Fault("call", supervisor, gap, method=method, arg=child)
        ids = self.ids[supervisor]
        method = rng.choices(
            ("terminate_child", "restart_child", "delete_child", "start_child"), (3, 3, 1, 1.5)
        )[0]
        if method == "start_child":
            if ids and rng.random() < 0.2:  # one that is there already (or was)
                old = self.supervisors[supervisor].children
                spec = rng.choice([c for c in old if isinstance(c, ChildSpec)] or [None])
                if spec is not None:
                    return Fault("call", supervisor, gap, method=method, arg=spec)
            self.added += 1
            spec = worker(f"x{self.added}", _restart(rng, (2, 1, 1)), self.directory)
            ids.append(spec.id)
            return Fault("call", supervisor, gap, method=method, arg=spec)
        child = rng.choice(ids) if ids and rng.random() < 0.95 else "ghost"
        return Fault("call", supervisor, gap, method=method, arg=child)


def generate(seed: int, directory: str, faults: tuple[int, int] = (10, 20)) -> Schedule:
    """The schedule named by `seed`: a tree of 2-3 levels, every strategy, and
    between `faults[0]` and `faults[1]` faults."""
    rng = random.Random(seed)
    builder = _Builder(rng, directory)
    spec = builder.supervisor("root", 1, rng.choice((2, 3)))
    drawer = _Faults(rng, spec, directory)
    drawn = tuple(drawer.draw() for _ in range(rng.randint(*faults)))
    return Schedule(seed, spec, drawn, directory)
