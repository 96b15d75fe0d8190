"""Print one of the README's quick-start commands, exactly as written, for .ci/run to
run: CI and the README cannot drift apart.

    python3 .ci/readme_command.py demo|tests

`demo` is the quick start's first ```sh block, `tests` its second; each must be one
line that starts with `python3 -m venv .venv && `.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def commands() -> dict[str, str]:
    text = README.read_text()
    start = text.index("## Quick start")
    end = text.index("\n## ", start + 1)
    blocks = re.findall(r"^```sh\n(.*?)^```", text[start:end], re.MULTILINE | re.DOTALL)
    if len(blocks) != 2:
        sys.exit(f"README.md's quick start has {len(blocks)} sh blocks, not 2 (demo, tests)")
    found = {}
    for name, block in zip(("demo", "tests"), blocks, strict=True):
        lines = [line for line in block.splitlines() if line.strip()]
        if len(lines) != 1 or not lines[0].startswith("python3 -m venv .venv && "):
            sys.exit(f"README.md's {name} command is not one `python3 -m venv .venv && ...` line")
        found[name] = lines[0]
    return found


if __name__ == "__main__":
    print(commands()[sys.argv[1]])
