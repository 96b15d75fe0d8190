"""What `env_file` costs a load of the tree file (`check`, `run`, each `update`).

    python -m tests.benchmarks.env_files [--children 1 10 50] [--rounds 7]

For each size, the same generated tree loaded (`actors.load_tree_file`) three ways,
alternating: without env files; with one per child, read as nannytree; and, as
root, with every child a `user =` child, its file read as that user (a process per
file and user). Figures only, never assertions: median and p95 per way, in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from actors import load_tree_file


def _trees(folder: Path, n: int, user: str | None) -> dict[str, Path]:
    """The tree files of one size: `none`, `own` and (with a user) `user`."""
    files = {}
    for way in ("none", "own", *(("user",) if user else ())):
        text = '[supervisor]\nid = "bench"\n'
        for i in range(n):
            env = folder / f"c{i}.env"
            env.write_text("DATABASE_URL=postgres://app@127.0.0.1/app\nTOKEN='two words'\n")
            env.chmod(0o644)
            text += f'\n[[supervisor.children]]\nid = "c{i}"\ncommand = ["true"]\n'
            if way != "none":
                text += f'env_file = "{env}"\n'
            if way == "user":
                text += f'user = "{user}"\n'
        path = folder / f"{way}-{n}.toml"
        path.write_text(text)
        files[way] = path
    return files


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--children", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    user = None
    if os.geteuid() == 0:
        user = f"ntb{uuid.uuid4().hex[:8]}"
        subprocess.run(["useradd", "--no-create-home", user], check=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            folder.chmod(0o755)  # the user reads its files here
            for n in args.children:
                files = _trees(folder, n, user)
                times: dict[str, list[float]] = {way: [] for way in files}
                for _ in range(args.rounds):
                    for way, path in files.items():
                        start = time.perf_counter()
                        load_tree_file(path)
                        times[way].append((time.perf_counter() - start) * 1000)
                for way, found in times.items():
                    found.sort()
                    p95 = found[min(len(found) - 1, int(0.95 * len(found)))]
                    print(
                        f"{n:4d} children, env files {way:5s}: median "
                        f"{statistics.median(found):8.1f} ms  p95 {p95:8.1f} ms"
                    )
    finally:
        if user is not None:
            subprocess.run(["userdel", user], check=False)


if __name__ == "__main__":
    main()
