"""The layering rule: supervision is pure, and each public name has one home."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "actors",
    "pykka",
    "threading",
    "subprocess",
    "time",
    "multiprocessing",
    "asyncio",
    "socket",
    "os",
    "psutil",
    "random",
    "datetime",
    "selectors",
    "signal.setitimer",
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


SUPERVISION = ROOT / "supervision"


@pytest.mark.parametrize(
    "path",
    sorted(SUPERVISION.rglob("*.py")),
    ids=lambda p: p.relative_to(SUPERVISION).as_posix(),
)
def test_supervision_imports_nothing_impure(path):
    name = path.relative_to(SUPERVISION).as_posix()
    bad = _imports(path) & FORBIDDEN
    # os is allowed for os.PathLike / os.fspath in specs only.
    if name in ("spec/_spec.py", "spec/_fields.py", "spec/_checks.py"):
        bad.discard("os")
    # The simulator draws faults from a seeded random.Random: deterministic, no global state.
    if name in ("simulate/_process.py", "simulate/_faults.py", "simulate/_nodes.py"):
        bad.discard("random")
    assert not bad, f"{name} imports {sorted(bad)}: supervision/ must stay pure"


def test_importing_supervision_loads_no_impure_module():
    code = (
        "import sys; import supervision; "
        "print(' '.join(m for m in ('actors', 'pykka', 'threading', 'subprocess', 'psutil') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []


@pytest.mark.parametrize("package", ["supervision", "actors"])
def test_public_names_are_exported_once(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.__all__ names missing {name}"
    assert len(set(module.__all__)) == len(module.__all__)


def test_the_launcher_and_its_children_do_not_import_the_actors():
    code = (
        "import sys; import actors._launcher._main, actors._launcher._bootstrap, actors.child; "
        "print(' '.join(m for m in ('pykka', 'psutil', 'actors._shell._nanny', 'supervision') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []


def test_children_only_tell_their_parents():
    """Invariant 1: no blocking ask goes up the tree, so the tree cannot deadlock on itself."""
    # A worker tells its nanny through its exit gate (the reader reports exits there).
    for name in ("_exit_gate.py", "_nanny.py"):
        tree = ast.parse((ROOT / "actors" / "_shell" / name).read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("ask", "proxy")
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "_parent"
            ):
                raise AssertionError(f"{name}:{node.lineno} asks its parent")
        uses = [
            n.func.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Attribute)
            and n.func.value.attr == "_parent"
        ]
        assert uses and set(uses) == {"tell"}, (name, uses)


def test_no_name_means_two_things_across_the_packages():
    import actors
    import supervision

    shared = set(supervision.__all__) & set(actors.__all__)
    assert all(getattr(supervision, n) is getattr(actors, n) for n in shared), shared
    # Nor inside actors' own modules: a private name that shadows a public one of
    # supervision (a second `Restart`, `ChildError` or `CAPTURE`) reads as the same thing.
    public = set(supervision.__all__)
    for path in sorted((ROOT / "actors").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            defined = []
            if isinstance(node, ast.ClassDef | ast.FunctionDef):
                defined = [node.name]
            elif isinstance(node, ast.Assign):
                defined = [t.id for t in node.targets if isinstance(t, ast.Name)]
            clash = set(defined) & public
            assert not clash, f"{path.name} defines {clash}, which supervision exports"


@pytest.mark.parametrize("package", ["supervision", "actors"])
def test_public_names_show_their_public_home(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, type):
            assert value.__module__ == package, f"{name} says it lives in {value.__module__}"
