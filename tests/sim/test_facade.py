"""supervision.simulate is a facade over private modules; supervision/ has no import circle."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from types import ModuleType

import supervision.simulate as facade

ROOT = Path(__file__).resolve().parents[2]
SUPERVISION = ROOT / "supervision"
FACADE = SUPERVISION / "simulate" / "__init__.py"


def test_the_facade_defines_nothing_of_its_own():
    """Its body is a docstring, imports from its own private modules, and `__all__`."""
    body = ast.parse(FACADE.read_text()).body
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    for node in body[1:]:
        if isinstance(node, ast.ImportFrom):
            private = node.level > 0 and (node.module or "").split(".")[-1].startswith("_")
            assert node.module == "__future__" or private, ast.unparse(node)
        else:
            assert isinstance(node, ast.Assign), f"line {node.lineno}: {ast.unparse(node)}"
            assert [ast.unparse(t) for t in node.targets] == ["__all__"], ast.unparse(node)


def _private_modules() -> list[ModuleType]:
    prefix = facade.__name__ + "."
    found = [importlib.import_module(m.name) for m in pkgutil.iter_modules(facade.__path__, prefix)]
    assert found and all(m.__name__.rsplit(".", 1)[1].startswith("_") for m in found)
    return found


def test_every_public_name_is_a_private_modules_own():
    """Each exported name is defined in exactly one private module, the one that owns it."""
    modules = _private_modules()
    assert len(set(facade.__all__)) == len(facade.__all__)
    for name in facade.__all__:
        value = getattr(facade, name)
        owners = [m.__name__ for m in modules if name in _defined_in(m)]
        assert len(owners) == 1, f"{name} is defined in {owners}"
        assert getattr(importlib.import_module(owners[0]), name) is value
        home = getattr(value, "__module__", owners[0])
        if isinstance(value, type) or callable(value):
            assert home == owners[0], f"{name} says it lives in {home}, not {owners[0]}"


def _defined_in(module: ModuleType) -> set[str]:
    """The names a module's own top level binds (not those it imports)."""
    path = Path(str(module.__file__))
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_engine_reexports_nothing():
    """`_run` imports only what it uses and exports no list: the public names are the facade's."""
    run = importlib.import_module("supervision.simulate._run")
    assert not hasattr(run, "__all__")
    tree = ast.parse(Path(str(run.__file__)).read_text())
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                assert (alias.asname or alias.name) in used, f"_run imports {alias.name} unused"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Who imports whom inside supervision/, counting imports anywhere in a file."""
    paths = sorted(SUPERVISION.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                module = ".".join(p for p in (base, node.module or "") if p)
                targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            else:
                continue
            edges.update(t for t in targets if t in modules and t != name)
    return graph


def test_supervision_has_no_import_circle():
    graph = _import_graph()
    assert "supervision.simulate._run" in graph["supervision.simulate._sweep"]
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise AssertionError(f"import circle: {' -> '.join(error.args[1])}") from None


def test_the_simulator_imports_at_the_top_only():
    """No import inside a function, nor under TYPE_CHECKING: nothing dodges a circle."""
    for path in sorted((SUPERVISION / "simulate").glob("*.py")):
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                assert id(node) in top, f"{path.name}:{node.lineno} imports below the top level"
