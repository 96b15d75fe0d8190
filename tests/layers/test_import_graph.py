"""The house's floors, read from the source: no import circle in `actors` or
`supervision`, and no import that runs back up a floor.

Every import counts: at the top of a module, inside a function, and under
`TYPE_CHECKING` (a circle held open by an import inside a function is still a
circle: the modules are cut along the wrong lines). The floors, from the top:

    run host    actors/host/: `nannytree run`'s process, serving one tree; it speaks
                the command's protocol (actors/cli/_control.py) and reads the
                operations' records (actors/_operate/_records.py)
    command     actors/cli/: parse, the socket client, render; it imports the run
                host only to hand over to it, inside the functions of `run`, `demo`
                and `check` (`_cmd_run.py`, `_cmd_check.py`), and no actor code: no
                pykka, nothing of _shell/, _process/, _runtime/, nor of _launcher/
                but the two stdlib modules it shares (where sockets live, the safe
                open of a log file), directly or through what it imports
    testing     actors/testing/: the harness, its waits, the plugin (beside the command)
    front ends  the public modules at the top of actors/
    actors/_tree.py      the Tree handle and the composition root
    actors/_operate/     what an operator does to a live tree: find, update, restart,
                         the ready judge, the snapshot
    actors/_shell/       the actors that carry out the core's decisions
    actors/_remote/      the engine port for subtrees on other hosts, the far side
    actors/_process/     the port to OS processes and its adapters
    actors/_runtime/  actors/_launcher/  supervision/simulate/
                         the actor runtime; the launcher process; the simulator
    supervision/         the pure core: the machine that decides (tests/layers/test_rules.py
                         holds supervision/ pure)
    supervision/config/  the file format: a tree file read into specs (the package's
                         __init__ exports it; the core never reads a file)
    supervision/spec/    the spec language: what the core is told to run, and its checks
    supervision/_errors.py  supervision/_reasons.py
                         the vocabulary all of supervision speaks: its errors, exit reasons

A module may import its own folder and any floor below its own, never a floor
above it nor a folder beside it on its floor.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("actors", "supervision")

# (floor, folder): a module's folder is the longest prefix listed here.
FLOORS: dict[str, int] = {
    "actors.host": 10,  # the run host, above the command whose protocol it speaks
    "actors.pytest_plugin": 10,  # the plugin's first name: actors.testing's plugin
    "actors.cli": 9,
    "actors.testing": 9,  # the harness, the plugin and the fakes: over the front ends
    "actors": 8,  # the public front ends at the top of actors/
    "actors._tree": 7,
    "actors._operate": 6,  # what an operator does to a live tree, through the nannies
    "actors._treefile": 6,  # tree files on disk, loaded into a spec (Tree.update reads one)
    "actors._shell": 5,
    "actors._remote": 4,
    "actors._process": 3,
    "actors._runtime": 2,
    "actors._launcher": 2,
    "supervision.simulate": 2,  # the simulator runs the core
    "actors._version": 1,
    "supervision": 1,
    "supervision.config": 0,  # below the package, whose __init__ exports load_tree
    "supervision.spec": -1,  # the core and the file format read specs; specs read neither
    "supervision._errors": -2,  # the vocabulary: a module each, below the spec language
    "supervision._reasons": -2,
}


# The command's hand-overs to the run host, each inside a function.
HAND_OVERS = {"actors.cli._cmd_run", "actors.cli._cmd_check"}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """(module imported, line) for every import in the file, resolved to a module of
    the two packages where it names one (a name imported from a package resolves to
    its submodule when there is one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in MODULES else target), node.lineno


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _ in _imports(name, path):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name and target.split(".")[0] in PACKAGES:
                graph[name].add(target)
    return graph


def _folder(module: str) -> str:
    best = ""
    for folder in FLOORS:
        if (module == folder or module.startswith(folder + ".")) and len(folder) > len(best):
            best = folder
    assert best, f"{module} is on no floor: add its folder to FLOORS"
    return best


def test_every_module_is_on_a_floor() -> None:
    for module in MODULES:
        _folder(module)


def test_no_import_circle() -> None:
    graph = _graph()
    # Tarjan's strongly connected components: any with two or more modules is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


def test_no_import_runs_up_a_floor_or_across_one() -> None:
    wrong = []
    for name, targets in _graph().items():
        if name == "actors":
            continue  # the package's own names, imported lazily on first use
        here = _folder(name)
        for target in targets:
            there = _folder(target)
            if there == here or FLOORS[there] < FLOORS[here]:
                continue
            if name in HAND_OVERS and there == "actors.host":
                continue  # lazily: see test_the_command_imports_no_actor_code
            if target == "actors" and name.startswith("actors."):
                continue  # `from actors import X`: held to X's own floor below
            wrong.append(f"{name} -> {target}")
    assert not wrong, "imports that run up or across a floor:\n  " + "\n  ".join(sorted(wrong))


def test_a_public_name_is_imported_from_no_floor_below_its_home() -> None:
    """`from actors import X` inside the package reads X's home module lazily: it is
    that module's floor that counts (a fake below the tree may not reach up for it)."""
    wrong = []
    for name, path in MODULES.items():
        if not name.startswith("actors.") or name in HAND_OVERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "actors" and not node.level:
                for alias in node.names:
                    home = _public_home(alias.name)
                    there, here = _folder(home), _folder(name)
                    if there != here and FLOORS[there] >= FLOORS[here]:
                        wrong.append(f"{name}:{node.lineno} -> {home} ({alias.name})")
    assert not wrong, "imports that run up or across a floor:\n  " + "\n  ".join(sorted(wrong))


def _edges_of(prefix: str) -> Iterator[tuple[str, str, int]]:
    for name, path in MODULES.items():
        if name == prefix or name.startswith(prefix + "."):
            for target, line in _imports(name, path):
                yield name, target, line


def test_the_launcher_folder_imports_nothing_above_it() -> None:
    """It runs in the launcher and its children: no thread, no lock, no pykka."""
    wrong = [
        f"{name}:{line} -> {target}"
        for name, target, line in _edges_of("actors._launcher")
        if (target.startswith("actors") and not target.startswith("actors._launcher"))
        or target.split(".")[0] == "pykka"
    ]
    assert not wrong, wrong


def test_the_shell_uses_the_process_port_never_an_adapter() -> None:
    wrong = [
        f"{name}:{line} -> {target}"
        for name, target, line in _edges_of("actors._shell")
        if target.startswith("actors._process.") and target != "actors._process._port"
    ]
    assert not wrong, wrong


def test_only_the_composition_root_and_the_front_ends_pick_an_adapter() -> None:
    adapters = ("actors._process._client", "actors._process._fake", "actors.ray")
    allowed = {
        "actors._tree": {"actors._process._client"},  # the default spawner
        "actors.testing": {"actors._process._fake"},  # the fakes ship with their ports
        "actors.host._engine": {"actors.ray"},  # `run --engine ADDRESS`
    }
    wrong = []
    for name, path in MODULES.items():
        for target, line in _imports(name, path):
            if target in adapters and target not in allowed.get(name, set()):
                if name.startswith("actors._process") or name == target:
                    continue  # the adapters' own folder
                wrong.append(f"{name}:{line} -> {target}")
    assert not wrong, wrong


def test_nothing_but_the_run_host_imports_the_cli() -> None:
    wrong = [
        f"{name}:{line} -> {target}"
        for name, path in MODULES.items()
        if not name.startswith(("actors.cli", "actors.host"))
        for target, line in _imports(name, path)
        if target.startswith("actors.cli")
    ]
    assert not wrong, wrong


def test_the_cli_uses_public_names_only() -> None:
    public = {"actors", "actors.child", "actors.testing", "actors.ray", "actors.aio"}
    # The operations layer the run host drives, and the records its answers are made of.
    public |= {m for m in MODULES if m.startswith("actors._operate")}
    wrong = [
        f"{name}:{line} -> {target}"
        for name, target, line in _edges_of("actors.cli")
        if not target.startswith("actors.cli")
        and not (name in HAND_OVERS and target.startswith("actors.host"))
        and (
            (target.startswith("actors") and target not in public | {"actors._version"})
            or (target.startswith("supervision.") and target != "supervision.simulate")
        )
    ]
    assert not wrong, wrong


@pytest.mark.parametrize(
    "folder",
    ["_launcher", "_process", "_remote", "_runtime", "_shell", "_operate", "host", "testing"],
)
def test_each_folder_says_what_it_is_and_may_import(folder: str) -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "actors" / folder / "__init__.py").read_text()))
    assert doc and "import" in doc, f"actors/{folder}/__init__.py needs its docstring"


def _lazy_lines(path: Path) -> set[int]:
    """The lines of the imports made inside a function."""
    lines = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    lines.add(inner.lineno)
    return lines


def _public_home(name: str) -> str:
    """Where `from actors import name` reads it (actors/__init__.py's table)."""
    import actors

    home = actors._HOMES[name]  # type: ignore[attr-defined]
    return "actors" + home if home.startswith(".") else home


def _reached_by_the_command() -> dict[str, str]:
    """Every module of the two packages the command imports, directly or through
    what it imports (function-level imports too), but its hand-overs to the host:
    {module: the module that imports it}."""
    start = [n for n in MODULES if n.startswith("actors.cli")]
    seen = {n: n for n in start}
    todo = list(start)
    while todo:
        name = todo.pop()
        path = MODULES[name]
        lazy = _lazy_lines(path)
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module == "actors" and not node.level:
                targets = [_public_home(a.name) for a in node.names]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = [t for t, line in _imports(name, path) if line == node.lineno]
            for target in targets:
                if name in HAND_OVERS and target.startswith("actors.host") and node.lineno in lazy:
                    continue
                while target and target not in MODULES and "." in target:
                    target = target.rpartition(".")[0]
                if target.split(".")[0] == "pykka":
                    seen.setdefault("pykka", name)
                if target in MODULES and target not in seen:
                    seen[target] = name
                    todo.append(target)
    return seen


def test_the_command_imports_no_actor_code() -> None:
    """`actors/cli/` imports neither pykka nor the live layer: no module of _shell/,
    _process/, _runtime/ or the run host, and of _launcher/ only the two stdlib
    modules the command shares with it (runtime_dir: where sockets live; open_read:
    a child's log file opened safely for `logs -f`)."""
    shared = {"actors._launcher._runtime_dir", "actors._launcher._safe_open"}
    banned = (
        "actors._shell",
        "actors._process",
        "actors._runtime",
        "actors._launcher",
        "actors.host",
    )
    reached = _reached_by_the_command()
    wrong = [
        f"{module} (imported by {by})"
        for module, by in reached.items()
        if module == "pykka" or (module.startswith(banned) and module not in shared)
    ]
    assert not wrong, wrong
    assert "actors.cli._parser" in reached and "actors.cli._control" in reached


def test_every_folder_of_the_two_packages_is_installed() -> None:
    """`pip install .` (not editable) ships the packages pyproject.toml lists: a new
    folder left out of the list imports in a checkout and fails once installed."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    folders = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for package in PACKAGES
        for p in (ROOT / package).rglob("__init__.py")
    }
    assert listed == folders, f"pyproject.toml's packages differ: {sorted(folders ^ listed)}"
