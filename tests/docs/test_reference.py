"""The site's reference pages are generated from the code (docs/_hooks/reference.py):
every key, flag, exit status, reason, event and public name is on them, with the
code's own defaults. A key, flag or kind added without its description fails here."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from actors.cli import _exit
from actors.cli._parser import _parser
from supervision import EventKind, ExitKind
from supervision._events import EVENT_KIND_MEANINGS
from supervision._reasons import EXIT_KIND_MEANINGS
from supervision.config import _keys as config_keys
from supervision.spec._sockets import SOCKET_KEYS
from tests.support import import_ray

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "reference"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "reference_hook", ROOT / "docs" / "_hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = _hook()
_config_doc = hook.config_doc  # docs/_hooks/config_doc.py, as the hook reads it


def _sections(markdown: str) -> dict[str, str]:
    """Generated text by its `{#anchor}` heading."""
    parts = re.split(r"^### .* \{#([\w-]+)\}$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _rows(section: str) -> dict[str, list[str]]:
    """A table's rows by their first cell's code text: the other cells. A pipe in a
    code span is the span's, as the tables extension reads it."""
    rows = {}
    for line in section.splitlines():
        spans = re.findall(r"`[^`]*`", line)
        bare = re.sub(r"`[^`]*`", "\0", line)
        cells = []
        for piece in re.split(r"(?<!\\)\|", bare)[1:-1]:
            while "\0" in piece:
                piece = piece.replace("\0", spans.pop(0), 1)
            cells.append(piece.strip())
        if cells and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


# -- tree files ---------------------------------------------------------------------------


def test_every_key_tuple_of_the_loader_has_its_table() -> None:
    tables = {t.keys for t in _config_doc.TABLES}
    tuples = {
        n: v for n, v in vars(config_keys).items() if n.endswith("_KEYS") and n != "PROBE_KEYS"
    }
    tuples |= {f"PROBE_KEYS[{k!r}]": v for k, v in config_keys.PROBE_KEYS.items()}
    tuples["SOCKET_KEYS"] = SOCKET_KEYS
    parts = {"LOG_KEYS"}  # written in the worker's and the supervisors' tables
    for name, keys in tuples.items():
        if name in parts:
            assert set(keys) <= set(config_keys.WORKER_KEYS) & set(config_keys.SUPERVISOR_KEYS)
        else:
            assert keys in tables, f"{name} has no TableDoc in docs/_hooks/config_doc.py"


def test_every_key_of_every_table_is_described_and_shown() -> None:
    shown = _sections(hook.toml_keys())
    for t in _config_doc.TABLES:
        missing = [k for k in t.keys if k not in t.docs]
        assert not missing, (
            f"keys of table {t.name!r} without a description: {missing}; add a KeyDoc "
            "for each to docs/_hooks/config_doc.py"
        )
        assert list(_rows(shown[t.name])) == list(t.keys), t.name


def test_a_key_added_without_a_description_fails_the_build_with_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = next(t for t in _config_doc.TABLES if t.name == "worker")
    grown = dataclasses.replace(worker, keys=(*worker.keys, "new_key"))
    monkeypatch.setattr(_config_doc, "TABLES", (grown,))
    with pytest.raises(ValueError, match=r"worker: keys without a KeyDoc \['new_key'\]"):
        hook.toml_keys()


def test_every_mapped_field_exists() -> None:
    for t in _config_doc.TABLES:
        for key, doc in t.docs.items():
            if doc.field is not None:
                try:
                    hook.field_default(doc.field)
                except KeyError:
                    pytest.fail(f"{t.name}.{key} maps to {doc.field}, which does not exist")


def test_the_defaults_shown_are_the_fields_defaults() -> None:
    shown = _sections(hook.toml_keys())
    for t in _config_doc.TABLES:
        rows = _rows(shown[t.name])
        for key, doc in t.docs.items():
            default = rows[key][1]
            value = hook.NO_DEFAULT if doc.field is None else hook.field_default(doc.field)
            if value is hook.NO_DEFAULT:
                assert doc.default is not None and default == doc.default, (t.name, key)
            else:
                assert doc.default is None, f"{t.name}.{key}: a text would hide {value!r}"
                assert default == hook.toml_value(value), (t.name, key)


@pytest.mark.parametrize(
    ("table", "key", "shown"),
    [
        ("worker", "shutdown", "`5.0`"),
        ("supervisor", "shutdown", '`"infinity"`'),
        ("root", "intensity", "`1`"),
        ("root", "period", "`5.0`"),
        ("worker", "stop_signal", '`"TERM"`'),
        ("worker", "normal_exit_codes", "`[0]`"),
        ("worker", "ready", '`"started"`'),
        ("worker", "memory_limit", "none"),
        ("backoff", "initial", "`0.1`"),
        ("reload", "signal", '`"HUP"`'),
        ("probe-http", "status", "200-399"),
        ("sockets", "backlog", "`4096`"),
        ("engine", "lease_timeout", "`30.0`"),
    ],
)
def test_some_defaults_as_a_reader_reads_them(table: str, key: str, shown: str) -> None:
    assert _rows(_sections(hook.toml_keys())[table])[key][1] == shown


def test_the_page_example_loads_and_the_marker_is_on_it() -> None:
    page = (PAGES / "toml.md").read_text()
    assert "<!-- generated: toml-keys -->" in page


# -- the command ----------------------------------------------------------------------------


def test_every_command_and_flag_is_on_the_page() -> None:
    text = hook.cli()
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sections = _sections(text)
    for name, command in sub.choices.items():
        assert name in sections, name
        for action in command._actions:
            for option in action.option_strings:
                assert re.search(rf"`[^`]*{re.escape(option)}\b", sections[name]), (name, option)
            if not action.option_strings:
                assert str(action.metavar or action.dest) in sections[name], (name, action.dest)
    # A pipe in a flag's metavar stays in its code span, unescaped.
    assert "--lease-timeout S|off" in _rows(sections["run"])


def test_every_exit_status_has_its_meaning() -> None:
    constants = {n: v for n, v in vars(_exit).items() if n.isupper() and isinstance(v, int)}
    assert sorted(_exit.MEANINGS) == sorted(set(constants.values()))
    rows = _rows(hook.exit_codes())
    assert set(rows) == {str(v) for v in constants.values()}


# Every command's module, the parser, and the run host's main.
CLI = ROOT / "actors" / "cli"
COMMANDS = [
    *sorted(f"cli/{p.name}" for p in [*CLI.glob("_cmd_*.py"), CLI / "_parser.py"]),
    "host/_run.py",
]


@pytest.mark.parametrize("module", COMMANDS)
def test_commands_return_named_exit_statuses(module: str) -> None:
    source = (ROOT / "actors" / module).read_text()
    assert not re.findall(r"\breturn \d+\b(?!\.)|_exit\(\d+\)", source)


# -- reasons and events -----------------------------------------------------------------------


def test_every_exit_kind_and_event_kind_has_a_meaning_on_the_page() -> None:
    assert set(EXIT_KIND_MEANINGS) == set(ExitKind), "describe it in EXIT_KIND_MEANINGS"
    assert set(EVENT_KIND_MEANINGS) == set(EventKind), "describe it in EVENT_KIND_MEANINGS"
    assert all(EXIT_KIND_MEANINGS.values()) and all(EVENT_KIND_MEANINGS.values())
    assert set(_rows(hook.exit_kinds())) == {k.value for k in ExitKind}
    assert set(_rows(hook.event_kinds())) == {k.value for k in EventKind}
    assert _rows(hook.exit_kinds())["shutdown"][0] == "normal"
    assert _rows(hook.exit_kinds())["killed"][0] == "abnormal"


def test_an_unknown_marker_fails_the_build() -> None:
    with pytest.raises(ValueError, match="unknown generated part 'nothing'"):
        hook.on_page_markdown("<!-- generated: nothing -->\n", page=None)


# -- the API pages ---------------------------------------------------------------------------------

API = {
    "api-supervision.md": ["supervision"],
    "api-actors.md": ["actors", "actors.child", "actors.ray"],
    "api-simulate.md": ["supervision.simulate", "actors.experiment", "actors.plot"],
}


def _public(name: str) -> list[str]:
    """A module's `__all__`, read from its source: actors.ray needs no Ray to be documented
    (the site's build reads the source too, with griffe)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    for node in ast.parse(Path(spec.origin).read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                return list(ast.literal_eval(node.value))
    raise AssertionError(f"{name} has no __all__")


def _documented(page: str) -> set[str]:
    return set(re.findall(r"^::: ([\w.]+)$", (PAGES / page).read_text(), re.MULTILINE))


@pytest.mark.parametrize("page", sorted(API))
def test_every_public_name_is_on_its_api_page(page: str) -> None:
    documented = _documented(page)
    for name in API[page]:
        for public in _public(name):
            full = f"{name}.{public}"
            assert full in documented or name in documented, f"{full} is not on {page}"


def test_the_testing_page_documents_the_plugin_and_every_export_of_actors_testing() -> None:
    import actors.testing

    documented = _documented("api-testing.md")
    assert {"actors.testing.pytest_plugin", "actors.testing"} <= documented
    for name in actors.testing._HOMES:  # its names, imported on first use
        assert f"actors.testing.{name}" in documented, name


@pytest.mark.timeout(900)  # the session's first build draws the pictures
def test_the_site_builds_strict_and_renders_every_public_name(built_site: Path) -> None:
    """The whole site (mkdocs build --strict), then each public name's anchor."""
    site = built_site
    html = "".join((site / "reference" / p[:-3] / "index.html").read_text() for p in API)
    html += (site / "reference" / "api-testing" / "index.html").read_text()
    anchors = set(re.findall(r'id="((?:actors|supervision)\.[\w.]+)"', html))
    for modules in API.values():
        for name in modules:
            missing = [p for p in _public(name) if f"{name}.{p}" not in anchors]
            assert not missing, f"{name}: not rendered (a docstring missing?): {missing}"
    assert "actors.testing.pytest_plugin.nanny_tree" in anchors


def test_the_engine_defaults_read_from_the_source_are_ray_engines_own() -> None:
    """The hook reads RayEngine's defaults from its source: the docs build without Ray."""
    import_ray()
    import inspect

    from actors.ray import RayEngine

    read = hook.init_defaults(ROOT / "actors" / "ray.py", "RayEngine")
    params = inspect.signature(RayEngine).parameters
    assert read == {
        n: hook.NO_DEFAULT if p.default is inspect.Parameter.empty else p.default
        for n, p in params.items()
    }


# -- the privilege table ---------------------------------------------------------------------------


def test_every_row_of_the_privilege_table_names_tests_that_exist() -> None:
    """docs/explanation/trust.md's table of whose rights each action uses: every row
    names at least one test, and each named test is in tests/."""
    text = (ROOT / "docs" / "explanation" / "trust.md").read_text()
    section = text.split("## Whose rights each action uses", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) > 10, "the table is missing"
    for row in rows[1:]:  # the header aside
        what = row.split("|")[1].strip()
        named = re.findall(r"`((?:\w+/)?test_\w+\.py)::(test_\w+)`", row.split("|")[-2])
        assert named, f"the row {what!r} names no test"
        for file, test in named:
            source = (ROOT / "tests" / file).read_text()
            assert f"def {test}(" in source, f"the row {what!r} names {file}::{test}, not found"
