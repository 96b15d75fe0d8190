"""The picture of one exit's path through a live tree, with the times measured in a real run.

    python docs/_hooks/exit_path.py OUT.svg [--kills 21]

Starts a real tree (one `sleep` child, one_for_one), kills the child with SIGKILL
`--kills` times, and records when each hop on the host side ran: the launcher
client's reader thread reading the launcher's reports (and, through the worker's
exit gate, telling the nanny ChildExited and, at the successor's birth, the
StartDone of the start it announced ahead), the NannyActor handling them, and the
core deciding (docs/acting-ahead.md, "The exit path"). The hops are timed by
wrapping those methods for this run only (the launcher is another process: what
it does between the kill and its report is not timed). It draws the exit whose
kill-to-started time is the median, as a sequence diagram. Run by the docs build
(docs/_hooks/pictures.py); needs matplotlib.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

READER = "reader\nthread"
LANES = ("child", "launcher", READER, "NannyActor", "core")


@dataclass(frozen=True)
class Hop:
    start: float  # time.monotonic() when the method was entered
    label: str
    what: str  # the type of its first argument (the message or record)


def _trace(hops: list[Hop]) -> None:
    """Wrap the methods on the path so that each call appends a Hop."""
    from actors._process._reader import Reader
    from actors._shell._nanny import NannyActor
    from supervision._core import Supervisor

    def wrap(cls: type, name: str, label: str) -> None:
        inner: Callable[..., Any] = getattr(cls, name)

        @functools.wraps(inner)
        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            hops.append(Hop(time.monotonic(), label, type(args[0]).__name__ if args else ""))
            return inner(self, *args, **kwargs)

        setattr(cls, name, traced)

    wrap(Reader, "dispatch", "reader")
    wrap(NannyActor, "on_receive", "nanny")
    wrap(Supervisor, "child_exited", "core exited")
    wrap(Supervisor, "started", "core started")


@dataclass(frozen=True)
class Exit:
    """One kill's hops, in ms since the kill."""

    steps: list[tuple[float | None, str, str, str]]  # (ms, from lane, to lane, label)
    total: float  # kill -> CHILD_STARTED event, ms


def _first(hops: list[Hop], label: str, what: str, t0: float) -> float:
    for hop in hops:
        if hop.label == label and hop.what == what:
            return (hop.start - t0) * 1e3
    raise RuntimeError(f"no {label} {what} hop after the kill: the path changed; update {__file__}")


def _successor(hops: list[Hop], t0: float) -> tuple[float | None, str, str, str]:
    """The report that the new process runs: Respawned when the launcher restarted it
    ahead (an armed restart), else Spawned (the worker asked for a spawn)."""
    with contextlib.suppress(RuntimeError):
        return (
            _first(hops, "reader", "Respawned", t0),
            "launcher",
            READER,
            "Respawned: the successor runs",
        )
    return (
        _first(hops, "reader", "Spawned", t0),
        "launcher",
        READER,
        "Spawned: the new child runs",
    )


def measure(kills: int) -> list[Exit]:
    from actors import NannyActor
    from supervision import ChildSpec, EventKind, SupervisorSpec

    hops: list[Hop] = []
    _trace(hops)
    spec = SupervisorSpec(
        id="path",
        intensity=10 * kills,
        period=1.0,
        children=[ChildSpec(id="c", command=["sleep", "100000"])],
    )
    exits: list[Exit] = []
    ref = NannyActor.start(spec)
    try:
        nanny = ref.proxy()
        log = nanny.event_log().get()
        for _ in range(kills):
            info = nanny.which_child("c").get()
            time.sleep(0.02)  # not a wait for anything: a quiet tree before each kill
            hops.clear()
            t0 = time.monotonic()
            os.kill(info.pid, signal.SIGKILL)
            started = log.wait_for(
                lambda e, n=info.incarnation: (
                    e.context is EventKind.CHILD_STARTED and e.incarnation == n + 1
                ),
                10.0,
            )
            exited = next(
                e
                for e in log.snapshot()
                if e.context is EventKind.CHILD_EXITED and e.pid == info.pid
            )
            seen = list(hops)
            reason = str(exited.reason) if exited.reason is not None else "?"
            steps: list[tuple[float | None, str, str, str]] = [
                (0.0, "child", "child", f"kill -9 {info.pid}"),
                (None, "child", "launcher", "reaps it, kills its group, starts its successor"),
                (_first(seen, "reader", "Exited", t0), "launcher", READER, "Exited report"),
                (
                    _first(seen, "nanny", "ChildExited", t0),
                    READER,
                    "NannyActor",
                    f"ChildExited ({reason}), classified where it was read",
                ),
                (
                    _first(seen, "core exited", "str", t0),
                    "NannyActor",
                    "core",
                    "child_exited(now): restart",
                ),
                _successor(seen, t0),
                (
                    _first(seen, "nanny", "StartDone", t0),
                    READER,
                    "NannyActor",
                    "StartDone(pid): the start announced ahead, answered",
                ),
                (
                    _first(seen, "core started", "str", t0),
                    "NannyActor",
                    "core",
                    "started(now): child_started",
                ),
            ]
            # In the order they happened (the kill and the launcher's untimed step first).
            steps[2:] = sorted(steps[2:], key=lambda step: step[0] or 0.0)
            exits.append(Exit(steps, (started.time - t0) * 1e3))
    finally:
        ref.stop()
    return exits


def draw(exits: list[Exit], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    totals = sorted(e.total for e in exits)
    median = statistics.median(totals)
    shown = min(exits, key=lambda e: abs(e.total - median))
    x = {lane: i for i, lane in enumerate(LANES)}
    rows = len(shown.steps)
    fig, ax = plt.subplots(figsize=(8.5, 0.42 * rows + 1.2))
    for lane, i in x.items():
        ax.plot([i, i], [-0.6, rows - 0.4], color="#bbbbbb", lw=1, zorder=0)
        ax.text(i, -0.8, lane, ha="center", va="bottom", fontsize=10.5, weight="bold")
    for row, (ms, a, b, label) in enumerate(shown.steps):
        y = row
        stamp = "not timed" if ms is None else f"+{ms:.2f} ms"
        ax.text(-0.3, y, stamp, ha="right", va="center", fontsize=10, family="monospace")
        colour = "#c0392b" if row < 2 else "#1f4e79"
        if a == b:
            ax.plot([x[a]], [y], marker="x", color=colour, ms=10, mew=2)
            ax.text(x[a] + 0.12, y, label, va="center", fontsize=10)
            continue
        ax.annotate(
            "",
            xy=(x[b], y),
            xytext=(x[a], y),
            arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 1.4},
        )
        left = min(x[a], x[b])
        ax.text(left + 0.06, y - 0.15, label, va="bottom", fontsize=10)
    ax.set_xlim(-1.1, len(LANES) - 0.5)
    ax.set_ylim(rows - 0.3, -1.6)
    ax.axis("off")
    ax.set_title(
        f"One exit's path, measured: kill -9 to child_started in {shown.total:.2f} ms\n"
        f"(the median of {len(exits)} kills; fastest {totals[0]:.2f} ms, "
        f"slowest {totals[-1]:.2f} ms)",
        fontsize=10,
        loc="left",
    )
    fig.tight_layout()
    fig.savefig(out, bbox_inches="tight", metadata={"Date": None} if out.suffix == ".svg" else None)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path)
    parser.add_argument("--kills", type=int, default=21)
    args = parser.parse_args(argv)
    exits = measure(args.kills)
    draw(exits, args.out)
    print(f"{args.out}: median {statistics.median(e.total for e in exits):.2f} ms")


if __name__ == "__main__":
    main()
