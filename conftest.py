"""The documentation's examples, run by the README's test command (Sybil).

In README.md and docs/**/*.md:

- a ```python block runs, in one namespace per page, from a fresh empty folder; a
  block that only includes an examples/ file (`--8<-- "examples/x.py"`) does not:
  the file runs as itself, in CI or in a test;
- a ```toml block is loaded as a tree file: a whole file as written, a fragment
  (child keys, or a table below `[supervisor]`) inside the smallest tree that holds it;
- `<!-- skip: next -->` before a block says it is not meant to run (a sketch, or a
  command's output), and is the only way out.

Examples/ files appear on the pages by inclusion (`--8<--`), and run as themselves.

Here too, for every test: the groups the suite's xdist workers keep together.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from supervision import load_tree
from tests.support import fail_if_left_behind

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
_ROOT = Path(__file__).parent  # where `--8<--` paths start (mkdocs.yml: base_path)
_CHILD = '[supervisor]\nid = "doc"\n[[supervisor.children]]\n'


def tree_text(fragment: str) -> str:
    """The smallest tree file holding a page's TOML fragment."""
    if re.search(r"^\[supervisor\]", fragment, re.MULTILINE):
        return fragment
    if re.search(r"^\[", fragment, re.MULTILINE):
        return '[supervisor]\nid = "doc"\n' + fragment
    head = _CHILD
    if not re.search(r"^id\s*=", fragment, re.MULTILINE):
        head += 'id = "doc-child"\n'
    if not re.search(r"^(command|target)\s*=", fragment, re.MULTILINE):
        head += 'command = ["true"]\n'
    return head + fragment


def _included_only(source: str) -> bool:
    return all(
        not line.strip() or line.lstrip().startswith("--8<--") for line in source.splitlines()
    )


def _run_python(example: Example) -> None:
    if _included_only(example.parsed):
        return
    # Padded so a traceback names the page's own line.
    code = compile("\n" * example.line + example.parsed, example.path, "exec")
    exec(code, example.namespace)


def _load_toml(example: Example) -> None:
    if _included_only(example.parsed):  # the included tree files, as they are
        for line in example.parsed.split():
            if line != "--8<--":
                text = (_ROOT / line.strip('"')).read_text()
                load_tree(text, line.strip('"'), vars=_any_vars(text))
        return
    text = tree_text(example.parsed)
    load_tree(text, "doc.toml", vars=_any_vars(text))


def _any_vars(text: str) -> dict[str, str]:
    return {name: "8000" for name in _VAR.findall(text)}  # any ${NAME}: a port will do


@pytest.fixture
def doc_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A page's examples run from an empty folder, as a reader's would, and leave no
    process or actor behind."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    fail_if_left_behind("a page's example")


def _setup(namespace: dict[str, Any]) -> None:
    namespace["__name__"] = "__doc_example__"
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")


pytest_collect_file = Sybil(
    parsers=[
        CodeBlockParser(language="python", evaluator=_run_python),
        CodeBlockParser(language="toml", evaluator=_load_toml),
        SkipParser(),
    ],
    patterns=["README.md", "docs/**/*.md", "docs/*.md"],
    fixtures=["doc_folder"],
    setup=_setup,
).pytest()


# -- the suite on four workers -----------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dist", "no") == "loadgroup" and _groups_ignored():
        raise pytest.UsageError(
            "pytest-xdist ignores test groups under pytest 9.2 (pytest-xdist#1386), and this "
            "suite needs them: install 'pytest<9.2' (as the test extra does) or run with -n 0"
        )
    if "PYTEST_XDIST_WORKER" in os.environ:
        # execnet gives xdist's workers COLUMNS=80 and LINES=24: without them a worker
        # runs the CLI as a plain `pytest` does, with no terminal (160 columns).
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)


def _groups_ignored() -> bool:
    import xdist

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())

    return version(pytest.__version__) >= (9, 2) and version(xdist.__version__) <= (3, 8)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The suite runs on 4 xdist workers (`-n 4 --dist loadgroup`, pyproject.toml);
    what must not be split or run twice at once goes to one worker as a group:
    - the modules that start a Ray cluster, one module after another (a cluster each:
      two at once would starve 2 cores);
    - the tests of the built docs site (one build, into one picture cache);
    - the soak tests, one after another, beside the rest of the suite;
    - each page's examples (README.md, docs/): they run in order, in one namespace.

    The long groups come first, longest first, so that each starts on a worker of its
    own at once and the rest of the suite fills the others around them: the Ray
    modules (about 5 minutes on 2 cores) would otherwise start late and end last.
    """
    first = {"ray": 0, "docs": 1, "soak": 2}
    rank: dict[int, int] = {}
    for item in items:
        module = getattr(item, "module", None)
        if isinstance(vars(module).get("ray") if module else None, ModuleType):
            group = "ray"
        elif "built_site" in getattr(item, "fixturenames", ()):
            group = "docs"
        elif item.get_closest_marker("soak"):
            group = "soak"
        elif item.path.suffix == ".md":
            group = item.nodeid.split("::")[0]  # the page
        else:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
        rank[id(item)] = first.get(group, len(first))
    items.sort(key=lambda item: rank.get(id(item), len(first)))  # stable: order kept within
