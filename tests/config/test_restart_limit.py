"""restart_limit in a tree file: one line per child, and a bad one names the child,
the field and the fix (its decisions: tests/core/ and tests/sim/)."""

from __future__ import annotations

import pytest

from supervision import ChildSpec, ConfigError, RestartLimit, load_tree


def test_one_line_in_a_tree_file():
    spec = load_tree(
        """
        [supervisor]
        id = "shop"
        intensity = 10
        period = 30

        [[supervisor.children]]
        id = "nginx"
        command = ["nginx", "-g", "daemon off;"]
        restart_limit = { intensity = 3, period = 10 }

        [[supervisor.children]]
        id = "redis"
        command = ["redis-server"]
        restart_limit = {}
        """
    )
    nginx, redis = spec.children
    assert isinstance(nginx, ChildSpec) and isinstance(redis, ChildSpec)
    assert nginx.restart_limit == RestartLimit(intensity=3, period=10.0)
    assert redis.restart_limit == RestartLimit()  # the defaults: 5 in 30 s


@pytest.mark.parametrize(
    ("value", "where", "message"),
    [
        ("3", "restart_limit", "expected a table"),
        ("{ intensity = 3, perod = 10 }", "restart_limit.perod", 'did you mean "period"'),
        ("{ intensity = -1 }", "restart_limit.intensity", "expected an integer >= 0"),
        ("{ period = 0 }", "restart_limit.period", "seconds > 0"),
        ('{ period = "10s" }', "restart_limit.period", "seconds > 0"),
    ],
)
def test_a_bad_restart_limit_names_the_child_the_field_and_the_fix(value, where, message):
    with pytest.raises(ConfigError) as caught:
        load_tree(
            f"""
            [supervisor]
            id = "shop"
            [[supervisor.children]]
            id = "nginx"
            command = ["nginx"]
            restart_limit = {value}
            """
        )
    text = str(caught.value)
    assert f"supervisor.children[0].{where}" in text
    assert message in text


def test_a_temporary_child_with_a_restart_limit_is_refused_in_a_file():
    with pytest.raises(ConfigError, match="a temporary child is never restarted"):
        load_tree(
            """
            [supervisor]
            id = "shop"
            [[supervisor.children]]
            id = "job"
            command = ["true"]
            restart = "temporary"
            restart_limit = { intensity = 1 }
            """
        )
