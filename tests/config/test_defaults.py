"""A tree file's [defaults] table and its default restart_limit (docs/otp-semantics.md
section 15): what each worker gets, how a file opts out, and a bad default named by
its path. The Python API has no such default (tests/spec)."""

from __future__ import annotations

import pytest

from supervision import (
    Backoff,
    ChildSpec,
    ConfigError,
    Restart,
    RestartLimit,
    SupervisorSpec,
    load_tree,
)

TREE = """
[supervisor]
id = "shop"
{root}

[[supervisor.children]]
id = "web"
command = ["web"]
{web}

[[supervisor.children]]
id = "job"
command = ["job"]
restart = "temporary"

[[supervisor.children]]
id = "workers"
strategy = "{strategy}"
children = [{{ id = "mailer", command = ["mailer"] }}]
"""


def load(defaults: str = "", web: str = "", strategy: str = "one_for_all") -> SupervisorSpec:
    head = f"[defaults]\n{defaults}\n" if defaults else ""
    return load_tree(head + TREE.format(root="", web=web, strategy=strategy), "shop.toml")


def workers(spec: SupervisorSpec) -> dict[str, ChildSpec]:
    found: dict[str, ChildSpec] = {}
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            found.update(workers(child))
        else:
            found[child.id] = child
    return found


def limits(spec: SupervisorSpec) -> dict[str, RestartLimit | None]:
    return {cid: c.restart_limit for cid, c in workers(spec).items()}  # type: ignore[misc]


def test_a_worker_restarted_alone_gets_five_restarts_in_thirty_seconds_by_default():
    # web: one_for_one; job: temporary (never restarted); mailer: one_for_all (its
    # crash is meant to restart its group, which a limit of its own would not).
    assert limits(load()) == {"web": RestartLimit(5, 30.0), "job": None, "mailer": None}


def test_under_one_for_one_every_restartable_worker_is_contained():
    assert limits(load(strategy="one_for_one"))["mailer"] == RestartLimit()


def test_defaults_restart_limit_changes_it_and_false_opts_the_file_out():
    tuned = load("restart_limit = { intensity = 2, period = 60 }")
    assert limits(tuned) == {"web": RestartLimit(2, 60.0), "job": None, "mailer": None}
    assert set(limits(load("restart_limit = false")).values()) == {None}


def test_a_worker_opts_out_with_restart_limit_false_or_sets_its_own():
    assert limits(load(web="restart_limit = false"))["web"] is None
    own = load("restart_limit = false", web="restart_limit = { intensity = 9 }")
    assert limits(own)["web"] == RestartLimit(9, 30.0)


def test_a_worker_under_one_for_all_gets_a_limit_only_from_its_own_table():
    text = TREE.format(root="", web="", strategy="one_for_all").replace(
        '"mailer", command = ["mailer"]', '"mailer", command = ["mailer"], restart_limit = {}'
    )
    assert limits(load_tree(text, "shop.toml"))["mailer"] == RestartLimit()


def test_defaults_fill_the_keys_a_worker_does_not_write():
    spec = load(
        'shutdown = 20\nbackoff = true\nrequired = false\nstop_signal = "INT"\n'
        'kill_mode = "main"\nstart_timeout = 3\nmin_uptime = 1\nrestart = "transient"',
        web="shutdown = 2\nrequired = true",
    )
    web, mailer = workers(spec)["web"], workers(spec)["mailer"]
    assert (web.shutdown, web.required, web.restart) == (2, True, Restart.TRANSIENT)
    assert (mailer.shutdown, mailer.required, mailer.backoff) == (20, False, Backoff())
    assert (mailer.stop_signal, mailer.kill_mode) == (2, "main")
    assert (mailer.start_timeout, mailer.min_uptime) == (3.0, 1.0)
    assert workers(spec)["job"].restart is Restart.TEMPORARY  # its own key wins
    nested = spec.children[2]
    assert isinstance(nested, SupervisorSpec) and nested.shutdown == "infinity"  # workers only


def test_a_temporary_default_gives_no_restart_limit():
    assert set(limits(load('restart = "temporary"')).values()) == {None}


@pytest.mark.parametrize(
    ("defaults", "where", "message"),
    [
        ("shutdwn = 3", "defaults.shutdwn", 'did you mean "shutdown"'),
        ("command = ['x']", "defaults.command", "unknown key"),
        ("shutdown = -1", "defaults.shutdown", "expected seconds >= 0"),
        ('kill_mode = "all"', "defaults.kill_mode", '"group"'),
        ("restart_limit = 3", "defaults.restart_limit", "expected a table"),
        ('required = "no"', "defaults.required", "expected true or false"),
    ],
)
def test_a_bad_default_names_its_path_the_value_and_the_fix(defaults, where, message):
    with pytest.raises(ConfigError) as raised:
        load(defaults)
    text = str(raised.value)
    assert where in text and message in text, text


def test_defaults_must_be_a_table():
    with pytest.raises(ConfigError, match=r"defaults.*expected a table: \[defaults\]"):
        load_tree('defaults = 3\n[supervisor]\nid = "r"\n', "r.toml")


def test_required_is_read_per_worker():
    assert workers(load(web="required = false"))["web"].required is False
    with pytest.raises(ConfigError, match=r"children\[0\]\.required.*expected true or false"):
        load(web="required = 1")
