"""Variables in tree files: ${NAME}, ${NAME:-default} and $${, from the harness or the
environment; an integer variable as a whole value is a number; an unset one says
where it is used and how to fix it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from actors import load_tree_file, load_tree_text, testing
from supervision import ChildSpec, ConfigError, SupervisorSpec, TcpProbe, load_tree

SERVICE = str(Path(__file__).parents[1] / "support" / "health_service.py")


def _tree(child: str) -> str:
    return f'[supervisor]\nid = "root"\n[[supervisor.children]]\nid = "web"\n{child}\n'


def _web(text: str, **values: object) -> ChildSpec:
    (child,) = load_tree(text, "t.toml", vars=values).children
    assert isinstance(child, ChildSpec)
    return child


def test_a_variable_and_a_default_in_a_string():
    child = _web(
        _tree(
            'command = ["serve", "--port=${PORT}", "--log=${LEVEL:-info}", "${A}${B}"]\n'
            'env = { WHERE = "${HOST}:${PORT}", EMPTY = "${NONE:-}" }'
        ),
        PORT="8000",
        HOST="localhost",
        A="x",
        B="y",
    )
    assert child.command == ("serve", "--port=8000", "--log=info", "xy")
    assert child.env == {"WHERE": "localhost:8000", "EMPTY": ""}


def test_a_default_is_used_for_an_empty_value_as_sh_does():
    child = _web(_tree('command = ["run", "${LEVEL:-info}", "${LEVEL}."]'), LEVEL="")
    assert child.command == ("run", "info", ".")


def test_a_whole_integer_variable_is_a_number_where_a_number_goes():
    child = _web(
        _tree(
            'command = ["serve", "${PORT}"]\nready = { tcp = "${PORT}" }\n'
            'start_timeout = "${WAIT:-7}"\nenv = { PORT = "${PORT}" }\nargs = []'
        ),
        PORT="8123",
    )
    assert child.ready == TcpProbe(8123)
    assert child.start_timeout == 7.0
    assert child.command == ("serve", "8123")  # argv and env stay text
    assert child.env == {"PORT": "8123"}


def test_an_int_from_the_harness_is_text_in_text_and_a_number_elsewhere():
    child = _web(_tree('command = ["serve", "${PORT}"]\nready = { tcp = "${PORT}" }'), PORT=8124)
    assert child.command == ("serve", "8124")
    assert child.ready == TcpProbe(8124)


def test_a_dollar_dollar_brace_is_a_literal_and_a_bare_dollar_is_kept():
    child = _web(
        _tree('command = ["sh", "-c", "echo $${HOME} $HOME $$ ${X} $${X:-y}"]'), X="1", HOME="/h"
    )
    assert child.command == ("sh", "-c", "echo ${HOME} $HOME $$ 1 ${X:-y}")


def test_keys_are_not_substituted():
    child = _web(_tree('command = ["x"]\nenv = { "${K}" = "v" }'), K="KEY")
    assert child.env == {"${K}": "v"}


def test_an_unset_variable_names_the_table_path_the_variable_and_the_fix():
    with pytest.raises(ConfigError) as caught:
        _web(_tree('command = ["serve"]\nready = { tcp = "${PORT}" }'))
    error = caught.value
    assert error.path == "supervisor.children[0].ready.tcp"
    message = str(error)
    assert "t.toml: supervisor.children[0].ready.tcp" in message
    assert "the variable PORT is not set" in message
    assert "${PORT:-value}" in message and "$${PORT}" in message


def test_every_unset_variable_is_reported_in_file_order():
    text = '[supervisor]\nid = "root"\n' + "".join(
        f'[[supervisor.children]]\nid = "c{i}"\ncommand = ["x", "${{V{i}}}"]\n' for i in range(12)
    )
    with pytest.raises(ConfigError) as caught:
        load_tree(text, "t.toml", vars={"V3": "ok"})
    paths = [e.path for e in caught.value.errors]
    assert paths == [f"supervisor.children[{i}].command[1]" for i in range(12) if i != 3]
    assert all("not set" in str(e) for e in caught.value.errors)


def test_an_unset_variable_does_not_hide_the_files_other_problems():
    """`check` without a ${PORT} value still lists every other mistake of the file;
    what the variable's own places say then is not a second problem."""
    text = (
        '[supervisor]\nid = "root"\n'
        '[[supervisor.children]]\nid = "web"\ncommand = ["srv", "${PORT}"]\n'
        'ready = { tcp = "${PORT}" }\nrestrat = "permanent"\n'
        '[[supervisor.children]]\nid = "worker"\ncommand = ["w"]\nshutdown = -3\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_tree(text, "t.toml", vars={})
    found = [(e.path, "not set" in str(e)) for e in caught.value.errors]
    assert found == [
        ("supervisor.children[0].command[1]", True),
        ("supervisor.children[0].ready.tcp", True),
        ("supervisor.children[0].restrat", False),
        ("supervisor.children[1].shutdown", False),
    ]


@pytest.mark.parametrize("bad", ["${", "${1X}", "${A B}", "${A:default}", "x ${A"])
def test_a_brace_that_is_not_a_variable_is_an_error_with_the_fix(bad):
    with pytest.raises(ConfigError, match=r"write \$\$\{ for a literal \$\{") as caught:
        _web(_tree(f'command = ["x", "{bad}"]'), A="1")
    assert caught.value.path == "supervisor.children[0].command[1]"


def test_the_pure_loader_substitutes_nothing_without_vars():
    (child,) = load_tree(_tree('command = ["x", "${UNSET_ANYWHERE}", "$${"]')).children
    assert isinstance(child, ChildSpec)
    assert child.command == ("x", "${UNSET_ANYWHERE}", "$${")


def test_the_file_loaders_take_the_environment_and_vars_over_it(tmp_path, monkeypatch):
    monkeypatch.setenv("NT_TEST_PORT", "8200")
    monkeypatch.setenv("NT_TEST_NAME", "from-env")
    path = tmp_path / "t.toml"
    path.write_text(
        _tree('command = ["serve", "${NT_TEST_NAME}"]\nready = { tcp = "${NT_TEST_PORT}" }')
    )
    (child,) = load_tree_file(path).children
    assert isinstance(child, ChildSpec)
    assert child.ready == TcpProbe(8200) and child.command == ("serve", "from-env")
    (child,) = load_tree_file(path, vars={"NT_TEST_PORT": 8201}).children
    assert isinstance(child, ChildSpec)
    assert child.ready == TcpProbe(8201) and child.command == ("serve", "from-env")
    (child,) = load_tree_text(path.read_text(), "t.toml").children
    assert isinstance(child, ChildSpec) and child.ready == TcpProbe(8200)
    monkeypatch.delenv("NT_TEST_PORT")
    with pytest.raises(ConfigError, match="NT_TEST_PORT is not set"):
        load_tree_file(path)


SERVICE_TREE = f"""
[supervisor]
id = "svc"

[[supervisor.children]]
id = "web"
command = ["{sys.executable}", "{SERVICE}", "${{PORT}}"]
ready = {{ tcp = "${{PORT}}" }}
stderr = "capture"
"""


def test_from_toml_takes_vars_and_starts_the_service_on_that_port(tmp_path):
    path = tmp_path / "svc.toml"
    path.write_text(SERVICE_TREE)
    port = testing.free_port()
    with testing.TreeHarness.from_toml(path, vars={"PORT": port}) as tree:
        assert tree.child("web").state == "running"
        assert f"listening on 127.0.0.1:{port}" in tree.output("web")


def test_the_fixture_takes_a_tree_file_and_vars(nanny_tree, tmp_path):
    path = tmp_path / "svc.toml"
    path.write_text(SERVICE_TREE)
    port = testing.free_port()
    tree = nanny_tree(path, vars={"PORT": port})
    assert tree.spec.children[0].ready == TcpProbe(port)
    assert tree.wait_output("web", rf"listening on 127\.0\.0\.1:{port}")
    with pytest.raises(TypeError, match="pass its path"):
        nanny_tree(SupervisorSpec(id="x", children=[ChildSpec(id="c", command=["true"])]), vars={})
