"""A tree file's `[engine]` table: read one to one onto the engine's parameters, and
refused, every mistake at once, with its table path and the fix."""

from __future__ import annotations

import pytest

from supervision import ConfigError, load_tree
from supervision.config._engine import (
    EngineConfig,
    load_engine,
)

TREE = '\n[supervisor]\nid = "t"\n'


def test_each_key_is_the_engine_parameter_of_its_name() -> None:
    text = (
        """
[engine]
kind = "ray"
address = "ray://head:10001"
lease_timeout = 12
liveness_timeout = 2.5
unreachable_timeout = false
health_check_period = 0.5
health_check_timeout = 1
health_check_failure_threshold = 3
health_check_initial_delay = 2
runtime_env = { pip = ["requests"], env_vars = { A = "1" } }
"""
        + TREE
    )
    config = load_engine(text, "t.toml")
    assert config == EngineConfig(
        "ray",
        "ray://head:10001",
        {
            "lease_timeout": 12.0,
            "liveness_timeout": 2.5,
            "unreachable_timeout": None,  # false: off
            "health_check_period": 0.5,
            "health_check_timeout": 1.0,
            "health_check_failure_threshold": 3,
            "health_check_initial_delay": 2.0,
            "runtime_env": {"pip": ["requests"], "env_vars": {"A": "1"}},
        },
    )
    assert load_tree(text, "t.toml").id == "t"  # the tree reads as before


def test_a_file_without_the_table_has_no_engine_and_absent_keys_keep_the_defaults() -> None:
    assert load_engine(TREE, "t.toml") is None
    assert load_engine("[engine]\n" + TREE, "t.toml") == EngineConfig("ray", None, {})


@pytest.mark.parametrize("address", ["auto", "local", "ray://10.0.0.1:10001", "head:6379"])
def test_addresses_as_nannytree_run_takes_them(address: str) -> None:
    config = load_engine(f'[engine]\naddress = "{address}"\n' + TREE, "t.toml")
    assert config is not None and config.address == address


def test_every_mistake_in_the_table_is_reported_with_the_tree_s() -> None:
    text = """
[engine]
kind = "k8s"
address = "http://head"
lease = 30
liveness_timeout = -1
unreachable_timeout = true
health_check_failure_threshold = 0
health_check_period = "1s"
runtime_env = "requests"

[supervisor]
id = "t"

[[supervisor.children]]
id = "a"
command = ["sleep", "1"]
restart = "sometimes"
"""
    with pytest.raises(ConfigError) as caught:
        load_tree(text, "t.toml")
    found = {e.path: str(e) for e in caught.value.errors}
    assert set(found) == {
        "engine.lease",
        "engine.kind",
        "engine.address",
        "engine.liveness_timeout",
        "engine.unreachable_timeout",
        "engine.health_check_failure_threshold",
        "engine.health_check_period",
        "engine.runtime_env",
        "supervisor.children[0].restart",
    }
    assert 'did you mean "lease_timeout"?' in found["engine.lease"]
    assert 'expected "ray"' in found["engine.kind"]
    assert '"HOST:PORT"' in found["engine.address"]
    assert "seconds > 0 or false (off)" in found["engine.unreachable_timeout"]
    assert "integer >= 1" in found["engine.health_check_failure_threshold"]
    assert found["engine.health_check_period"].endswith("expected a number of seconds > 0")
    with pytest.raises(ConfigError) as again:  # load_engine reads the table alone
        load_engine(text, "t.toml")
    assert all(e.path.startswith("engine.") for e in again.value.errors)


def test_the_table_must_be_a_table_and_a_misspelt_one_is_named() -> None:
    with pytest.raises(ConfigError, match="engine is 3; expected a table: \\[engine\\]"):
        load_tree("engine = 3\n" + TREE, "t.toml")
    with pytest.raises(ConfigError, match=r'engnie is .*did you mean "engine"'):
        load_tree('[engnie]\nkind = "ray"\n' + TREE, "t.toml")


def test_variables_are_substituted_in_the_table() -> None:
    text = '[engine]\naddress = "${HEAD}:6379"\n' + TREE
    config = load_engine(text, "t.toml", vars={"HEAD": "10.1.2.3"})
    assert config is not None and config.address == "10.1.2.3:6379"


def test_flags_over_the_file() -> None:
    file = EngineConfig("ray", "auto", {"lease_timeout": 30.0, "liveness_timeout": 5.0})
    flags = EngineConfig("ray", None, {"lease_timeout": None})
    assert flags.over(file) == EngineConfig(
        "ray", "auto", {"lease_timeout": None, "liveness_timeout": 5.0}
    )
    assert EngineConfig("ray", "local", {}).over(file).address == "local"
    assert flags.over(None) is flags
