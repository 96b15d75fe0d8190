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

Each page's examples run in order, in one namespace: one xdist group per page. The
suite's other groups, and their order, are tests/conftest.py's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
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


# -- each page on one worker --------------------------------------------------------


def pytest_itemcollected(item: pytest.Item) -> None:
    """A page's examples (README.md, docs/) run in order, in one namespace: one xdist
    group per page (tests/conftest.py orders the groups)."""
    if item.path.suffix == ".md":
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
