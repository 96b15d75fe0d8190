"""python -m tests.fuzz TARGET [--inputs N] [--seconds S]: see tests/fuzz/__init__.py."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import tests.fuzz as package

from ._engine import Target, fuzz
from ._targets import TARGETS


def _targets() -> dict[str, type[Target]]:
    from ._control_target import ControlTarget

    return {**TARGETS, ControlTarget.name: ControlTarget}


def main(argv: list[str] | None = None) -> int:
    targets = _targets()
    parser = argparse.ArgumentParser(
        prog="python -m tests.fuzz",
        description=package.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", choices=[*targets, "all"])
    parser.add_argument("--inputs", type=int, default=1_000_000, help="per target")
    parser.add_argument("--seconds", type=float, default=None, help="per target, at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--deadline", type=float, default=None, help="seconds per input")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "nannytree-fuzz",
        help="where the inputs of findings are saved",
    )
    opts = parser.parse_args(argv)
    names = list(targets) if opts.target == "all" else [opts.target]
    found = 0
    for name in names:
        target = targets[name]()
        if opts.deadline is not None:
            target.deadline = opts.deadline
        print(f"{name}: fuzzing, {opts.inputs} inputs, deadline {target.deadline} s", flush=True)
        report = fuzz(
            target,
            opts.inputs,
            seconds=opts.seconds,
            seed=opts.seed,
            out=opts.out,
            progress=lambda line: print(line, flush=True),
        )
        print(report.summary(), flush=True)
        found += len(report.findings)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
