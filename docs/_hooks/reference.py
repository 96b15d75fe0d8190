"""MkDocs hook: the reference pages generated from the code, so they cannot drift.

A page asks for a generated part with a marker line, `<!-- generated: NAME -->`:

- `toml-keys`: every key of a tree file, by table (docs/_hooks/config_doc.py, with
  the defaults read from the spec dataclasses and the engine's parameters);
- `cli`: every `nannytree` command and its flags, from the argparse parser;
- `exit-codes`: the commands' exit statuses (actors/cli/_exit.py);
- `exit-kinds`, `event-kinds`: every ExitKind and EventKind, with its meaning.

An unknown marker fails the build. tests/docs/test_reference.py checks the output.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import functools
import importlib.util
import re
import signal
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _sibling(name: str) -> ModuleType:
    """A module of this folder, by its path (mkdocs loads hooks by path, not as a
    package), loaded once: tests/docs/test_reference.py patches the same one."""
    key = f"nannytree_docs_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        assert spec and spec.loader
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]


config_doc = _sibling("config_doc")  # what each key of a tree file means

MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.MULTILINE)
NO_DEFAULT = object()


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace each marker of a page with the part it names."""

    def generate(match: re.Match[str]) -> str:
        name = match[1]
        if name not in GENERATORS:
            raise ValueError(f"unknown generated part {name!r}; known: {', '.join(GENERATORS)}")
        return GENERATORS[name]()

    return MARKER.sub(generate, markdown)


# -- cells ------------------------------------------------------------------------------------


_CODE_SPAN = re.compile(r"(`+).+?\1")


def cell(text: str) -> str:
    """Text for a table cell: a pipe would end the cell, unless in a code span (the
    tables extension reads those whole, and would show the backslash)."""
    parts, at = [], 0
    for span in _CODE_SPAN.finditer(text):
        parts += [_bare(text[at : span.start()]), span[0]]
        at = span.end()
    parts.append(_bare(text[at:]))
    return "".join(parts).replace("\n", " ")


def _bare(text: str) -> str:
    """Text out of code spans: a pipe ends a cell, and <runtime dir> would be a tag."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def toml_value(value: Any) -> str:
    """A default as a tree file would write it; None as "none"."""
    if value is None:
        return "none"
    if isinstance(value, signal.Signals):
        return code(f'"{value.name.removeprefix("SIG")}"')
    if isinstance(value, enum.Enum):
        return code(f'"{value.value}"')
    if isinstance(value, bool):
        return code("true" if value else "false")
    if isinstance(value, str):
        return code(f'"{value}"')
    if isinstance(value, range):
        return f"{value.start}-{value.stop - 1}"
    if isinstance(value, int | float):
        return code(repr(value))
    if isinstance(value, frozenset | set):
        return code("[" + ", ".join(repr(v) for v in sorted(value)) + "]")
    if isinstance(value, tuple | list):
        return code("[" + ", ".join(repr(v) for v in value) + "]")
    if isinstance(value, dict) and not value:
        return code("{}")
    raise ValueError(f"no TOML form for the default {value!r}")


# -- tree files ---------------------------------------------------------------------------------


@functools.cache
def spec_classes() -> dict[str, tuple[Any, str]]:
    """The classes a key maps to, by name: the class (for RayEngine, which needs Ray to
    import, its parameters' defaults read from its source) and its page anchor."""
    import supervision

    names = (
        "ChildSpec",
        "SupervisorSpec",
        "Backoff",
        "RestartLimit",
        "Reload",
        "Placement",
        "TcpProbe",
        "HttpProbe",
        "ExecProbe",
        "LogLine",
        "ReadyFile",
        "Liveness",
        "ListenSocket",
        "EngineConfig",
    )
    found: dict[str, tuple[Any, str]] = {
        n: (getattr(supervision, n), f"supervision.{n}") for n in names
    }
    engine = init_defaults(ROOT / "actors" / "ray.py", "RayEngine")
    found["RayEngine"] = (engine, "actors.ray.RayEngine")
    return found


def init_defaults(path: Path, name: str) -> dict[str, Any]:
    """The defaults of class `name`'s __init__ parameters, from its source (a literal,
    or a module constant bound to one); NO_DEFAULT for a parameter without one."""
    tree = ast.parse(path.read_text())
    constants = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    args = init.args
    positional = [*args.posonlyargs, *args.args][1:]  # not self
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    pairs = [*zip(positional, [*defaults, *args.defaults], strict=True)]
    pairs += zip(args.kwonlyargs, args.kw_defaults, strict=True)

    def value(node: ast.expr | None) -> Any:
        if node is None:
            return NO_DEFAULT
        if isinstance(node, ast.Name) and node.id in constants:
            node = constants[node.id]
        return ast.literal_eval(node)

    return {arg.arg: value(node) for arg, node in pairs}


def field_default(mapped: str) -> Any:
    """The default of "Class.field": the dataclass field's, or the parameter's of
    RayEngine (read from its source); NO_DEFAULT when it has none. KeyError when the
    class or the field does not exist."""
    owner, name = mapped.split(".")
    cls = spec_classes()[owner][0]
    if dataclasses.is_dataclass(cls):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        f = fields[name]
        if f.default is not dataclasses.MISSING:
            return f.default
        if f.default_factory is not dataclasses.MISSING:
            return f.default_factory()
        return NO_DEFAULT
    return cls[name]


def shown_default(key: str, doc: Any) -> str:
    """The Default cell of a key: the field's own default, or the doc's when it has none."""
    value = NO_DEFAULT if doc.field is None else field_default(doc.field)
    if value is NO_DEFAULT:
        if doc.default is None:
            raise ValueError(f"{key}: its field has no default; give KeyDoc a default text")
        return str(doc.default)
    if doc.default is not None:
        raise ValueError(f"{key}: KeyDoc's default would hide the field's ({value!r})")
    return toml_value(value)


def field_link(mapped: str | None) -> str:
    if mapped is None:
        return "-"
    owner, name = mapped.split(".")
    return f"[{owner}][{spec_classes()[owner][1]}].{name}"


def toml_type(text: str) -> str:
    return " or ".join(code(part) for part in text.split(" | "))


def toml_keys() -> str:
    parts = []
    for t in config_doc.TABLES:
        missing = [k for k in t.keys if k not in t.docs]
        extra = [k for k in t.docs if k not in t.keys]
        if missing or extra:
            raise ValueError(
                f"table {t.name}: keys without a KeyDoc {missing}, KeyDocs of no key {extra} "
                "(docs/_hooks/config_doc.py)"
            )
        rows = []
        for key in t.keys:
            doc = t.docs[key]
            rows.append(
                (
                    code(key),
                    toml_type(doc.toml),
                    shown_default(f"{t.name}.{key}", doc),
                    field_link(doc.field),
                    doc.text,
                )
            )
        parts.append(
            f"### {t.title} {{#{t.name}}}\n\n{t.where}\n\n"
            + table(("Key", "TOML type", "Default", "Sets", "Meaning"), rows)
        )
    return "\n\n".join(parts)


# -- the command --------------------------------------------------------------------------------


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=88)


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs == 0:
            return code(names)
        metavar = str(action.metavar or action.dest.upper())
        return code(f"{names} {metavar}")
    metavar = str(action.metavar or action.dest)
    if action.nargs in ("*", "?"):
        return code(f"[{metavar} ...]" if action.nargs == "*" else f"[{metavar}]")
    return code(metavar)


def _arg_default(action: argparse.Action) -> str:
    default = action.default
    if action.nargs == 0 or isinstance(default, bool):
        return ""
    if isinstance(default, Path | str | int | float) and default != argparse.SUPPRESS:
        return code(str(default))
    return ""  # None, or a flag's own "not given" marker


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.help is not argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)
    ]


def _usage(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = _formatter
    return parser.format_usage().strip()


def cli() -> str:
    from actors.cli._parser import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    parts = [
        f"```text\n{_usage(parser)}\n```",
        table(
            ("Argument", "Meaning"),
            [(_argument(a), a.help or "") for a in _arguments(parser)],
        ),
        table(("Command", "What it does"), [(f"[{n}](#{n})", helps[n]) for n in sub.choices]),
    ]
    for name, p in sub.choices.items():
        what = helps[name]
        text = f"### nannytree {name} {{#{name}}}\n\n{what[:1].upper()}{what[1:]}.\n\n"
        if p.description:
            text += p.description + "\n\n"
        text += f"```text\n{_usage(p)}\n```\n\n"
        text += table(
            ("Argument", "Meaning", "Default"),
            [(_argument(a), a.help or "", _arg_default(a)) for a in _arguments(p)],
        )
        parts.append(text)
    return "\n\n".join(parts)


def exit_codes() -> str:
    from actors.cli._exit import MEANINGS

    return table(("Status", "Meaning"), [(code(str(n)), text) for n, text in MEANINGS.items()])


# -- reasons and events -----------------------------------------------------------------------


def exit_kinds() -> str:
    from supervision import ExitKind, ExitReason
    from supervision._reasons import EXIT_KIND_MEANINGS

    return table(
        ("Reason", "Normal?", "Meaning"),
        [
            (
                code(kind.value),
                "normal" if ExitReason(kind).is_normal else "abnormal",
                EXIT_KIND_MEANINGS[kind],
            )
            for kind in ExitKind
        ],
    )


def event_kinds() -> str:
    from supervision import EventKind
    from supervision._events import EVENT_KIND_MEANINGS

    return table(
        ("Event", "Meaning"),
        [(code(kind.value), EVENT_KIND_MEANINGS[kind]) for kind in EventKind],
    )


GENERATORS: dict[str, Callable[[], str]] = {
    "toml-keys": toml_keys,
    "cli": cli,
    "exit-codes": exit_codes,
    "exit-kinds": exit_kinds,
    "event-kinds": event_kinds,
}
