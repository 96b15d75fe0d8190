"""`env_file`: systemd's EnvironmentFile= format read as systemd reads it, merged
under a child's `env`, and every problem named with the child, the file, the line
and the fix (supervision/config/_env_file.py; the reads with a user's rights are
tests/live/test_env_file.py's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors._treefile import load_tree_file, read_env_file
from supervision import ConfigError, load_tree
from supervision.config._env_file import (
    MAX_ENV_FILE_BYTES,
    EnvFileProblem,
    parse_env_file,
)

# Each as systemd's parse_env_file_internal reads it (src/basic/env-file.c).
SYSTEMD_CASES = [
    (b"A=1\n", {"A": "1"}),
    (b"A=1", {"A": "1"}),  # no newline at the end
    (b"  A  =  spaced out  \n", {"A": "spaced out"}),  # around the key, before and after
    (b"# comment\n; also a comment\n\n   # indented\nA=1\n", {"A": "1"}),
    (b"A=x # not a comment\n", {"A": "x # not a comment"}),  # none after a value
    (b'A="two words"\n', {"A": "two words"}),
    (b"A='single $X \\n'\n", {"A": "single $X \\n"}),  # nothing escaped, nothing expanded
    (b'A="q\\"b\\\\s\\`t\\$d"\n', {"A": 'q"b\\s`t$d'}),  # the four escapes in "..."
    (b'A="keep \\n and \\x"\n', {"A": "keep \\n and \\x"}),  # any other: the \\ stays
    (b"A=un\\ quoted\\\\\n", {"A": "un quoted\\"}),  # unquoted: the next char as is
    (b"A=trail\\ \n", {"A": "trail "}),  # an escaped space is kept at the end
    (b"A=first \\\nsecond\n", {"A": "first second"}),  # a continuation
    (b'A="one \\\ntwo"\n', {"A": "one two"}),  # in double quotes too
    (b"A='multi\nline'\n", {"A": "multi\nline"}),  # a newline inside quotes is kept
    (b"A=\"x\"'y' z\n", {"A": "xyz"}),  # after a closing quote: a quote, or text
    (b"A=\"x\" y 'z'\n", {"A": "xy 'z'"}),  # ... and once unquoted, quotes are text
    (b'A=x "y"\n', {"A": 'x "y"'}),  # ... but not inside an unquoted value
    (b"A=\nB=\n", {"A": "", "B": ""}),
    (b"A=1\r\nB=2\r\n", {"A": "1", "B": "2"}),  # CRLF
    (b"A=1\nA=2\n", {"A": "2"}),  # the later one wins
    (b"# comment \\\nA=1\n", {"A": "1"}),  # a comment never continues (systemd 254)
    (b"A=caf\xc3\xa9\n# \xff not UTF-8, in a comment\n", {"A": "café"}),
    (b"", {}),
]


@pytest.mark.parametrize(("data", "expected"), SYSTEMD_CASES)
def test_env_files_read_as_systemd_reads_them(data: bytes, expected: dict[str, str]) -> None:
    assert parse_env_file(data) == expected


# What systemd skips with a log line, or drops silently, is refused: (file, line, text).
REFUSED = [
    (b"A=1\nNO_EQUALS\n", 2, "has no '='"),
    (b"A=1\n\n  NO_EQUALS", 3, "has no '='"),
    (b"export A=1\n", 1, "write A=... without `export`"),
    (b"1A=2\n", 1, "not a variable name"),
    (b"A=1\n=2\n", 2, "no name before '='"),
    (b"A-B=2\n", 1, "not a variable name"),
    (b"A=1\nB='open\n\nC=3\n", 2, "never closed"),
    (b'A="open', 1, "never closed"),
    (b"A=1\nB=\xff\xfe\n", 2, "not UTF-8"),
    (b"A=1\nB=x\0y\n", 2, "NUL byte"),
]


@pytest.mark.parametrize(("data", "line", "text"), REFUSED)
def test_what_systemd_would_skip_is_refused_with_its_line(
    data: bytes, line: int, text: str
) -> None:
    with pytest.raises(EnvFileProblem) as caught:
        parse_env_file(data)
    assert caught.value.line == line
    assert text in str(caught.value)
    assert str(caught.value).startswith(f"line {line}: ")


def test_an_env_file_past_its_limit_is_refused() -> None:
    parse_env_file(b"A=" + b"x" * (MAX_ENV_FILE_BYTES - 3) + b"\n")  # at the limit: read
    with pytest.raises(EnvFileProblem, match="larger than 1 MiB"):
        parse_env_file(b"A=" + b"x" * MAX_ENV_FILE_BYTES)


# -- in a tree file --------------------------------------------------------------


def _tree(folder: Path, top: str, *children: str) -> Path:
    text = top + '\n[supervisor]\nid = "t"\n'
    for i, body in enumerate(children):
        text += f'\n[[supervisor.children]]\nid = "c{i}"\ncommand = ["true"]\n{body}\n'
    path = folder / "t.toml"
    path.write_text(text)
    return path


def test_precedence_is_the_trees_files_then_the_childs_then_env(tmp_path: Path) -> None:
    (tmp_path / "tree.env").write_text("A=tree\nB=tree\nC=tree\nD=tree\n")
    (tmp_path / "one.env").write_text("B=one\nC=one\n")
    (tmp_path / "two.env").write_text("C=two\n")
    path = _tree(
        tmp_path,
        'env_file = "tree.env"',
        'env_file = ["one.env", "two.env"]\nenv = { D = "env" }',
        "",
    )
    first, second = load_tree_file(path).children
    assert first.env == {"A": "tree", "B": "one", "C": "two", "D": "env"}
    assert second.env == {"A": "tree", "B": "tree", "C": "tree", "D": "tree"}


def test_a_dash_lets_a_file_be_missing_and_paths_are_the_tree_files(tmp_path: Path) -> None:
    elsewhere = tmp_path / "conf"
    elsewhere.mkdir()
    (elsewhere / "app.env").write_text("A=1\n")
    path = _tree(elsewhere, "", 'env_file = ["-absent.env", "app.env"]')
    assert load_tree_file(path).children[0].env == {"A": "1"}
    assert load_tree_file(str(path)).children[0].env == {"A": "1"}


def test_a_missing_file_names_the_child_the_file_and_the_fix(tmp_path: Path) -> None:
    path = _tree(tmp_path, "", 'env_file = "absent.env"')
    with pytest.raises(ConfigError) as caught:
        load_tree_file(path)
    e = caught.value
    assert e.path == "supervisor.children[0].env_file"
    assert "child 'c0'" in str(e)
    assert f"{tmp_path}/absent.env does not exist" in str(e)
    assert 'write "-absent.env" to go on without it' in str(e)


def test_a_malformed_line_names_the_child_the_file_and_the_line(tmp_path: Path) -> None:
    (tmp_path / "app.env").write_text("A=1\n# fine\nexport B=2\n")
    path = _tree(tmp_path, "", 'env_file = "app.env"')
    with pytest.raises(ConfigError) as caught:
        load_tree_file(path)
    text = str(caught.value)
    assert "child 'c0'" in text
    assert f"env file {tmp_path}/app.env, line 3:" in text
    assert "write B=... without `export`" in text


def test_every_problem_is_in_one_pass_and_the_trees_file_once(tmp_path: Path) -> None:
    (tmp_path / "tree.env").write_text("OK=1\nbroken line\n")
    path = _tree(
        tmp_path,
        'env_file = "tree.env"',
        'env_file = "absent.env"',
        'restart = "sometimes"',
        "",
    )
    with pytest.raises(ConfigError) as caught:
        load_tree_file(path)
    found = [(e.path, str(e)) for e in caught.value.errors]
    assert [p for p, _ in found] == [
        "env_file",
        "supervisor.children[0].env_file",
        "supervisor.children[1].restart",
    ], found
    assert "line 2: 'broken line' has no '='" in found[0][1]
    assert "child" not in found[0][1]  # the tree's own file: every child's problem alike


def test_a_file_that_is_not_a_regular_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo.env")
    path = _tree(tmp_path, "", 'env_file = "fifo.env"')
    with pytest.raises(ConfigError, match="not a regular file"):
        load_tree_file(path)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("1", "expected a path or an array of paths"),
        ('["a.env", 2]', "expected a path or an array of paths"),
        ('""', "expected a path"),
        ('"-"', "expected a path"),
    ],
)
def test_a_malformed_env_file_key_is_refused(tmp_path: Path, value: str, text: str) -> None:
    for top, child in ((f"env_file = {value}", ""), ("", f"env_file = {value}")):
        with pytest.raises(ConfigError, match=text):
            load_tree(_tree(tmp_path, top, child).read_text(), str(tmp_path / "t.toml"))


def test_load_tree_without_a_reader_reads_no_file() -> None:
    text = 'env_file = "/nonexistent.env"\n[supervisor]\nid = "t"\n'
    text += '[[supervisor.children]]\nid = "a"\ncommand = ["true"]\nenv_file = "x.env"\n'
    assert load_tree(text).children[0].env is None  # the paths are checked, not read


def test_a_variable_in_a_path_stays_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "7.env").write_text("A=seven\n")
    monkeypatch.setenv("WHICH", "7")
    path = _tree(tmp_path, "", 'env_file = "${WHICH}.env"')
    assert load_tree_file(path).children[0].env == {"A": "seven"}


def test_the_reader_reads_at_most_one_byte_past_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.env"
    big.write_bytes(b"A=" + b"x" * (2 * MAX_ENV_FILE_BYTES))
    assert len(read_env_file(str(big), None, None)) == MAX_ENV_FILE_BYTES + 1
    path = _tree(tmp_path, "", 'env_file = "big.env"')
    with pytest.raises(ConfigError, match="larger than 1 MiB, the limit of an env file"):
        load_tree_file(path)


def test_a_changed_file_is_read_again_by_the_next_load(tmp_path: Path) -> None:
    """`nannytree update` loads the tree file again, env files and all: a changed value
    is a changed spec (the live test: tests/live/test_env_file.py)."""
    (tmp_path / "app.env").write_text("A=1\n")
    path = _tree(tmp_path, "", 'env_file = "app.env"')
    before = load_tree_file(path).children[0]
    (tmp_path / "app.env").write_text("A=2\n")
    after = load_tree_file(path).children[0]
    assert (before.env, after.env) == ({"A": "1"}, {"A": "2"})
    assert before != after


# -- properties ----------------------------------------------------------------------

_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
# Any text an environment value can hold: no NUL, no lone surrogate (not UTF-8).
_VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"))


def _systemd_writes(name: str, value: str) -> str:
    """A line as systemd's own writer writes it (env-file.c, write_env_var): in double
    quotes, with `"`, `\\`, `` ` `` and `$` escaped, when it holds a control character,
    whitespace or a character a shell would take; as it is otherwise."""
    special = set(" \t\n\r" + '"\\`$' + "*?[" + "'()<>|&;!")
    if any(c in special or ord(c) < 32 or ord(c) == 127 for c in value):
        value = '"' + "".join("\\" + c if c in '"\\`$' else c for c in value) + '"'
    return f"{name}={value}\n"


@given(st.dictionaries(_NAMES, _VALUES, max_size=8))
def test_what_systemds_writer_writes_reads_back_the_same(env: dict[str, str]) -> None:
    text = "".join(_systemd_writes(k, v) for k, v in env.items())
    assert parse_env_file(text.encode()) == env


@given(st.binary(max_size=300))
def test_any_bytes_read_or_are_refused_with_a_line(data: bytes) -> None:
    try:
        found = parse_env_file(data)
    except EnvFileProblem as e:
        # A line ends at \n or, as in systemd's parser, at a lone \r.
        assert 1 <= e.line <= data.count(b"\n") + data.count(b"\r") + 1
    else:
        assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) for k in found)
        assert all("\0" not in v for v in found.values())
