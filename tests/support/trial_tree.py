"""Issue 39's trial tree, for the simulator's benchmarks and tests: a db a liveness
probe watches, under rest_for_one, beside a web supervisor of three workers."""

from __future__ import annotations

from supervision import ChildSpec, Liveness, Strategy, SupervisorSpec, TcpProbe


def noop() -> None:
    """Never run: the simulation starts no processes."""


def trial_tree(probe_period: float = 20.0, failures: int = 3) -> SupervisorSpec:
    liveness = Liveness(TcpProbe(5432, period=probe_period, timeout=2.0), failures=failures)
    db = ChildSpec("db", target=noop, liveness=liveness, shutdown=5.0)
    web = SupervisorSpec(
        "web",
        intensity=5,
        period=30.0,
        children=[ChildSpec(f"w{i}", target=noop) for i in range(3)],
    )
    return SupervisorSpec(
        "root", strategy=Strategy.REST_FOR_ONE, intensity=5, period=60.0, children=[db, web]
    )
