"""What loading the pytest plugin costs every pytest session (issue 38, item 5: 0.66 s
then): nothing of the harness, pykka or the tree until a test starts one. Its time
is in tests/benchmarks (python -X importtime); here, what it imports."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "pykka",
    "psutil",
    "cloudpickle",
    "actors._tree",
    "actors._shell",
    "actors.testing._harness",
)


def _imported_after(code: str) -> set[str]:
    probe = (
        "import sys; before = set(sys.modules); " + code + "; "
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(out.stdout.split())


def test_loading_the_plugin_imports_no_harness_pykka_or_tree() -> None:
    loaded = _imported_after("import pytest; import actors.testing.pytest_plugin")
    heavy = sorted(m for m in loaded if m.startswith(HEAVY))
    assert heavy == [], heavy


def test_a_testing_name_is_imported_when_first_used() -> None:
    loaded = _imported_after("import actors.testing as t; t.TreeHarness")
    assert "actors.testing._harness" in loaded and "pykka" in loaded
