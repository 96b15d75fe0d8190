"""Spec validation: every field, good and bad values, bad combinations, defaults."""

from __future__ import annotations

import dataclasses
import math
import signal
from pathlib import Path
from typing import Any

import pytest

import supervision.spec._spec as spec_module
from supervision import (
    BRUTAL_KILL,
    INFINITY,
    AutoShutdown,
    Backoff,
    ChildSpec,
    ExitKind,
    ExitReason,
    ReadyFile,
    Reload,
    Restart,
    SpecError,
    Strategy,
    SupervisorSpec,
    check_childspecs,
    parse_signal,
)


def work() -> None:
    pass


def child(child_id: str = "w", **fields: Any) -> ChildSpec:
    if "target" not in fields and "command" not in fields:
        fields["target"] = work
    return ChildSpec(child_id, **fields)


def assert_spec_error(
    err: SpecError, child: str | None, field: str, value: Any, allowed: str
) -> None:
    """The error names the child, the field and the bad value, and says what is allowed."""
    assert err.child == child
    assert err.field == field
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(err.value)
    else:
        assert err.value == value
    assert allowed in err.expected
    text = str(err)
    assert repr(field) in text
    assert repr(value) in text
    assert allowed in text
    if child is not None:
        assert repr(child) in text


# -- ChildSpec: good values ------------------------------------------------------


def test_child_spec_defaults_are_as_documented():
    spec = ChildSpec("w", target=work)
    assert spec.restart is Restart.PERMANENT
    assert spec.shutdown == 5.0
    assert spec.significant is False
    assert spec.start_timeout == 30.0
    assert spec.ready == "started"
    assert spec.min_uptime == 0.0
    assert spec.backoff is None
    assert spec.normal_exit_codes == frozenset({0})
    assert spec.args == ()
    assert spec.kwargs == {}
    assert spec.command is None
    assert spec.env is None
    assert spec.inherit_env is True
    assert spec.cwd is None
    assert spec.memory_limit is None
    assert spec.stdout is None
    assert spec.stderr is None
    assert spec.fresh_interpreter is False
    assert spec.type == "worker"


def test_supervisor_spec_defaults_are_as_documented():
    spec = SupervisorSpec("s")
    assert spec.strategy is Strategy.ONE_FOR_ONE
    assert spec.intensity == 1
    assert spec.period == 5.0
    assert spec.auto_shutdown is AutoShutdown.NEVER
    assert spec.children == ()
    assert spec.max_children is None
    assert spec.restart is Restart.PERMANENT
    assert spec.shutdown == INFINITY
    assert spec.significant is False
    assert spec.backoff is None
    assert spec.type == "supervisor"


@pytest.mark.parametrize(
    "name",
    [
        "restart",
        "shutdown",
        "significant",
        "strategy",
        "intensity",
        "period",
        "auto_shutdown",
        "start_timeout",
        "ready",
        "min_uptime",
        "stdout",
        "stderr",
        "normal_exit_codes",
        "backoff",
    ],
)
def test_module_docstring_states_every_default(name):
    assert f"`{name}`" in (spec_module.__doc__ or "")


def test_child_spec_normalises_good_values():
    spec = ChildSpec(
        "w",
        target=work,
        args=[1, 2],
        kwargs={"k": 1},
        restart="transient",
        shutdown=3,
        significant=True,
        env={"A": "1"},
        inherit_env=False,
        cwd=Path("/tmp"),
        ready="notify",
        start_timeout=2,
        memory_limit=4096,
        stdout="/tmp/out.log",
        stderr=Path("/tmp/err.log"),
        normal_exit_codes=[0, 3],
        fresh_interpreter=True,
        min_uptime=1,
        backoff=Backoff(),
    )
    assert spec.args == (1, 2)
    assert spec.kwargs == {"k": 1}
    assert spec.restart is Restart.TRANSIENT
    assert spec.shutdown == 3.0
    assert isinstance(spec.shutdown, float)
    assert spec.significant is True
    assert spec.env == {"A": "1"}
    assert spec.start_timeout == 2.0
    assert spec.normal_exit_codes == frozenset({0, 3})
    assert spec.fresh_interpreter is True
    assert spec.min_uptime == 1.0
    assert spec.backoff == Backoff()


@pytest.mark.parametrize(
    ("ready", "stored"),
    [("started", "started"), ("notify", "notify"), (2, 2.0), (ReadyFile("/r"), ReadyFile("/r"))],
)
def test_ready_accepts_started_notify_seconds_and_a_ready_file(ready, stored):
    assert child(ready=ready).ready == stored


@pytest.mark.parametrize("where", [None, "/tmp/out.log", Path("/tmp/out.log"), "capture"])
def test_stdout_and_stderr_accept_none_a_path_or_capture(where):
    spec = child(stdout=where, stderr=where)
    assert (spec.stdout, spec.stderr) == (where, where)


def test_command_child_may_wait_for_seconds_of_uptime_or_a_ready_file():
    assert ChildSpec("w", command=["true"], ready=1.5).ready == 1.5
    assert ChildSpec("w", command=["true"], ready=ReadyFile("/r")).ready == ReadyFile("/r")


def test_child_spec_copies_mutable_arguments():
    args, kwargs, env = [1], {"k": 1}, {"A": "1"}
    spec = ChildSpec("w", target=work, args=args, kwargs=kwargs, env=env)
    args.append(2)
    kwargs["k"] = 2
    env["A"] = "2"
    assert spec.args == (1,)
    assert spec.kwargs == {"k": 1}
    assert spec.env == {"A": "1"}


def test_command_child_spec_stores_argv_as_a_tuple():
    spec = ChildSpec("w", command=["sleep", "10"])
    assert spec.command == ("sleep", "10")
    assert spec.target is None


@pytest.mark.parametrize("shutdown", [0, 0.5, 7, BRUTAL_KILL, INFINITY])
def test_shutdown_accepts_seconds_brutal_kill_and_infinity(shutdown):
    assert child(shutdown=shutdown).shutdown == shutdown


@pytest.mark.parametrize("restart", list(Restart))
def test_every_restart_type_is_accepted_by_value_or_member(restart):
    assert child(restart=restart.value).restart is restart
    assert child(restart=restart).restart is restart


def test_child_spec_is_frozen():
    spec = child()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.restart = Restart.TEMPORARY  # type: ignore[misc]


# -- ChildSpec: bad values -------------------------------------------------------

BAD_CHILD_FIELDS = [
    # field, bad value, what the message says is allowed
    ("restart", "sometimes", "Restart.PERMANENT, Restart.TRANSIENT, Restart.TEMPORARY"),
    ("restart", None, "expected one of Restart."),
    ("shutdown", -1, "seconds >= 0"),
    ("shutdown", math.inf, 'use "infinity"'),
    ("shutdown", math.nan, "seconds >= 0"),
    ("shutdown", True, '"brutal_kill" or "infinity"'),
    ("shutdown", "soon", '"brutal_kill" or "infinity"'),
    ("shutdown", None, '"brutal_kill" or "infinity"'),
    ("significant", "yes", "True or False"),
    ("significant", 1, "True or False"),
    ("args", "abc", "tuple of arguments"),
    ("args", 42, "tuple of arguments"),
    ("kwargs", [("k", 1)], "mapping of keyword arguments"),
    ("env", {"A": 1}, "mapping of str to str"),
    ("env", {1: "x"}, "mapping of str to str"),
    ("env", ["A=1"], "mapping of str to str"),
    ("inherit_env", "no", "True or False"),
    ("cwd", 42, "directory path"),
    ("ready", "now", 'expected "started", "notify" (targets), "sd_notify" (commands)'),
    ("ready", 0, "seconds of uptime > 0"),
    ("ready", -1.0, "seconds of uptime > 0"),
    ("ready", math.inf, "seconds of uptime > 0"),
    ("ready", True, "seconds of uptime > 0"),
    ("ready", None, "seconds of uptime > 0"),
    ("ready", 30, "must be below start_timeout=30.0"),
    ("ready", ReadyFile(""), "ReadyFile takes a file path"),
    ("min_uptime", -1, "seconds >= 0"),
    ("min_uptime", math.inf, "seconds >= 0"),
    ("min_uptime", True, "seconds >= 0"),
    ("min_uptime", "1", "seconds >= 0"),
    ("backoff", 0.5, "None or Backoff(...)"),
    ("start_timeout", 0, "seconds > 0"),
    ("start_timeout", -1.0, "seconds > 0"),
    ("start_timeout", True, "seconds > 0"),
    ("start_timeout", "10", "seconds > 0"),
    ("start_timeout", math.inf, "finite"),
    ("memory_limit", 4095, ">= 4096"),
    ("memory_limit", True, ">= 4096"),
    ("memory_limit", 4096.5, ">= 4096"),
    ("memory_limit", "1G", ">= 4096"),
    ("stdout", 1, "file path"),
    ("stderr", 1, "file path"),
    ("normal_exit_codes", 0, "set of ints"),
    ("normal_exit_codes", {256}, "from 0 to 255"),
    ("normal_exit_codes", {-1}, "from 0 to 255"),
    ("normal_exit_codes", {True}, "from 0 to 255"),
    ("normal_exit_codes", "0", "from 0 to 255"),
    ("normal_exit_codes", [[0]], "from 0 to 255"),
    ("fresh_interpreter", "yes", "True or False"),
]


@pytest.mark.parametrize(
    ("field", "value", "allowed"), BAD_CHILD_FIELDS, ids=lambda v: repr(v)[:30]
)
def test_bad_child_field_is_refused_naming_child_field_value_and_what_is_allowed(
    field, value, allowed
):
    with pytest.raises(SpecError) as info:
        child("w", **{field: value})
    assert_spec_error(info.value, "w", field, value, allowed)


@pytest.mark.parametrize("bad_id", [42, "", None])
def test_child_id_must_be_a_non_empty_string(bad_id):
    with pytest.raises(SpecError) as info:
        ChildSpec(bad_id, target=work)
    assert_spec_error(info.value, None, "id", bad_id, "non-empty string")


def test_child_id_with_a_slash_is_refused():
    with pytest.raises(SpecError) as info:
        child("a/b")
    assert_spec_error(info.value, "a/b", "id", "a/b", "'/' separates supervisors")


def test_child_with_both_target_and_command_is_refused():
    with pytest.raises(SpecError) as info:
        ChildSpec("w", target=work, command=["true"])
    assert_spec_error(info.value, "w", "target", work, "exactly one of target=")


def test_child_with_neither_target_nor_command_is_refused():
    with pytest.raises(SpecError) as info:
        ChildSpec("w")
    assert_spec_error(info.value, "w", "target", None, "exactly one of target=")


def test_target_must_be_callable():
    with pytest.raises(SpecError) as info:
        ChildSpec("w", target="work")  # type: ignore[arg-type]
    assert_spec_error(info.value, "w", "target", "work", "expected a callable")


@pytest.mark.parametrize("command", ["sleep 10", b"sleep 10"])
def test_command_given_as_a_string_is_refused_with_the_sh_c_remedy(command):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=command)
    assert_spec_error(info.value, "w", "command", command, "['sh', '-c', line]")


@pytest.mark.parametrize("command", [[], ["sleep", 10], [None]])
def test_command_must_be_a_non_empty_list_of_str(command):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=command)
    assert_spec_error(info.value, "w", "command", command, "non-empty list of str")


@pytest.mark.parametrize("fresh", [True, 1])
def test_fresh_interpreter_is_refused_for_a_command_child(fresh):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], fresh_interpreter=fresh)
    assert_spec_error(info.value, "w", "fresh_interpreter", fresh, "only a target= child")


def test_ready_notify_is_refused_for_a_command_child():
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], ready="notify")
    assert_spec_error(
        info.value, "w", "ready", "notify", "only a target= child can call actors.child.ready()"
    )


def test_significant_permanent_child_is_a_bad_combination():
    with pytest.raises(SpecError) as info:
        child("w", significant=True)
    assert_spec_error(info.value, "w", "significant", True, "a permanent child cannot be")


@pytest.mark.parametrize("restart", [Restart.TRANSIENT, Restart.TEMPORARY])
def test_significant_transient_or_temporary_child_is_accepted(restart):
    assert child(restart=restart, significant=True).significant is True


# -- SupervisorSpec --------------------------------------------------------------

BAD_SUPERVISOR_FIELDS = [
    ("strategy", "round_robin", "Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL"),
    ("intensity", -1, "integer >= 0"),
    ("intensity", 1.5, "integer >= 0"),
    ("intensity", True, "integer >= 0"),
    ("intensity", "1", "integer >= 0"),
    ("period", 0, "seconds > 0"),
    ("period", -5, "seconds > 0"),
    ("period", "5", "seconds > 0"),
    ("period", True, "seconds > 0"),
    ("period", math.inf, "finite"),
    ("auto_shutdown", "sometimes", "AutoShutdown.NEVER, AutoShutdown.ANY_SIGNIFICANT"),
    ("restart", "sometimes", "Restart.PERMANENT"),
    ("shutdown", -1, "seconds >= 0"),
    ("shutdown", "later", '"brutal_kill" or "infinity"'),
    ("significant", "yes", "True or False"),
    ("backoff", "exponential", "None or Backoff(...)"),
    ("children", 42, "list of specs"),
    ("children", [42], "ChildSpec or SupervisorSpec items"),
]


@pytest.mark.parametrize(
    ("field", "value", "allowed"), BAD_SUPERVISOR_FIELDS, ids=lambda v: repr(v)[:30]
)
def test_bad_supervisor_field_is_refused_naming_supervisor_field_value_and_what_is_allowed(
    field, value, allowed
):
    with pytest.raises(SpecError) as info:
        SupervisorSpec("s", **{field: value})
    bad = value[0] if field == "children" and isinstance(value, list) else value
    assert_spec_error(info.value, "s", field, bad, allowed)


def test_single_spec_as_children_is_refused():
    one = child("w")
    with pytest.raises(SpecError) as info:
        SupervisorSpec("s", children=one)  # type: ignore[arg-type]
    assert_spec_error(info.value, "s", "children", one, "list of specs")


@pytest.mark.parametrize("bad_id", [42, "", "a/b"])
def test_supervisor_id_is_checked_like_a_child_id(bad_id):
    with pytest.raises(SpecError) as info:
        SupervisorSpec(bad_id)
    assert info.value.field == "id"
    assert info.value.value == bad_id


def test_supervisor_spec_normalises_good_values():
    inner = SupervisorSpec("inner", restart="transient", significant=True, shutdown=10)
    spec = SupervisorSpec(
        "s",
        strategy="rest_for_one",
        intensity=0,
        period=2,
        children=[child("a"), inner],
        auto_shutdown="any_significant",
    )
    assert spec.strategy is Strategy.REST_FOR_ONE
    assert spec.intensity == 0
    assert spec.period == 2.0
    assert spec.auto_shutdown is AutoShutdown.ANY_SIGNIFICANT
    assert spec.children == (child("a"), inner)
    assert inner.restart is Restart.TRANSIENT
    assert inner.shutdown == 10.0


def test_significant_permanent_supervisor_is_a_bad_combination():
    with pytest.raises(SpecError) as info:
        SupervisorSpec("s", significant=True)
    assert_spec_error(info.value, "s", "significant", True, "a permanent child cannot be")


def test_duplicate_child_ids_are_refused_naming_the_id():
    with pytest.raises(SpecError) as info:
        SupervisorSpec("s", children=[child("a"), child("b"), child("a")])
    assert_spec_error(info.value, "a", "id", "a", "duplicate child id")


def test_significant_child_under_auto_shutdown_never_is_a_bad_combination():
    with pytest.raises(SpecError) as info:
        SupervisorSpec("s", children=[child("a", restart="transient", significant=True)])
    assert_spec_error(info.value, "a", "significant", True, "auto_shutdown is NEVER")


@pytest.mark.parametrize("auto", [AutoShutdown.ANY_SIGNIFICANT, AutoShutdown.ALL_SIGNIFICANT])
def test_significant_child_under_auto_shutdown_is_accepted(auto):
    spec = SupervisorSpec(
        "s", auto_shutdown=auto, children=[child("a", restart="temporary", significant=True)]
    )
    assert spec.children[0].significant


@pytest.mark.parametrize("n", [0, 2])
def test_simple_one_for_one_needs_exactly_one_template(n):
    children = [child(f"w{i}") for i in range(n)]
    with pytest.raises(SpecError) as info:
        SupervisorSpec("s", strategy="simple_one_for_one", children=children)
    assert_spec_error(info.value, "s", "children", [c.id for c in children], "exactly one")


@pytest.mark.parametrize("auto", [AutoShutdown.ANY_SIGNIFICANT, AutoShutdown.ALL_SIGNIFICANT])
def test_simple_one_for_one_with_auto_shutdown_is_refused(auto):
    with pytest.raises(SpecError) as info:
        SupervisorSpec(
            "s",
            strategy="simple_one_for_one",
            children=[child("w")],
            auto_shutdown=auto,
        )
    assert_spec_error(info.value, "s", "auto_shutdown", auto, "cannot auto-shutdown")


@pytest.mark.parametrize("strategy", ["one_for_one", "one_for_all", "rest_for_one"])
def test_max_children_is_refused_on_a_static_supervisor(strategy):
    with pytest.raises(SpecError) as info:
        SupervisorSpec("s", strategy=strategy, max_children=3)
    assert_spec_error(info.value, "s", "max_children", 3, "only simple_one_for_one")


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_max_children_must_be_an_integer_at_least_zero(bad):
    with pytest.raises(SpecError) as info:
        SupervisorSpec("s", strategy="simple_one_for_one", children=[child()], max_children=bad)
    assert_spec_error(info.value, "s", "max_children", bad, "integer >= 0")


@pytest.mark.parametrize("good", [0, 1, 100])
def test_max_children_accepts_integers_at_least_zero(good):
    spec = SupervisorSpec("s", strategy="simple_one_for_one", children=[child()], max_children=good)
    assert spec.max_children == good


# -- check_childspecs ------------------------------------------------------------


def test_check_childspecs_accepts_a_good_list_and_a_generator():
    specs = [child("a"), child("b"), SupervisorSpec("c")]
    assert check_childspecs(specs) is None
    assert check_childspecs(s for s in specs) is None


def test_check_childspecs_refuses_duplicate_ids():
    with pytest.raises(SpecError) as info:
        check_childspecs([child("a"), SupervisorSpec("a")])
    assert_spec_error(info.value, "a", "id", "a", "duplicate child id")


@pytest.mark.parametrize("specs", [42, child("a")], ids=["int", "one spec"])
def test_check_childspecs_refuses_a_non_list(specs):
    with pytest.raises(SpecError) as info:
        check_childspecs(specs)
    assert_spec_error(info.value, None, "children", specs, "list of specs")


def test_check_childspecs_names_the_supervisor_for_a_non_spec_item():
    with pytest.raises(SpecError) as info:
        check_childspecs([child("a"), {"id": "b"}], supervisor="root")  # type: ignore[list-item]
    assert_spec_error(info.value, "root", "children", {"id": "b"}, "ChildSpec or SupervisorSpec")


def test_check_childspecs_without_auto_shutdown_does_not_check_significant():
    # OTP's check_childspecs/1 skips the never/significant check; /2 does it.
    significant = child("a", restart="transient", significant=True)
    assert check_childspecs([significant]) is None
    assert check_childspecs([significant], AutoShutdown.ANY_SIGNIFICANT) is None
    with pytest.raises(SpecError) as info:
        check_childspecs([significant], AutoShutdown.NEVER)
    assert_spec_error(info.value, "a", "significant", True, "auto_shutdown is NEVER")


@pytest.mark.parametrize(
    "name", [f.name for f in dataclasses.fields(ChildSpec)], ids=lambda name: name
)
def test_every_child_field_has_a_check_that_names_it(name):
    """A field added without its check would let any value through: this catches it."""
    fields: dict[str, Any] = {"command": ["true"]}
    if name == "target":
        fields["command"] = None
    fields[name] = object()
    with pytest.raises(SpecError) as info:
        ChildSpec(**({"id": "w"} | fields))
    assert info.value.field == name


@pytest.mark.parametrize(
    "name", [f.name for f in dataclasses.fields(SupervisorSpec)], ids=lambda name: name
)
def test_every_supervisor_field_has_a_check_that_names_it(name):
    with pytest.raises(SpecError) as info:
        SupervisorSpec(**({"id": "s"} | {name: object()}))
    assert info.value.field == name


# -- bad input the OS or the call would refuse later, refused when the spec is built ----


@pytest.mark.parametrize("key", [1, None, ("a",)])
def test_kwargs_with_a_non_string_key_is_refused_naming_the_key(key):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", target=print, kwargs={key: 1})
    assert_spec_error(info.value, "w", "kwargs", key, "names must be str")


@pytest.mark.parametrize("name", ["", "A=B", "=", "A\0B"])
def test_env_names_that_the_os_cannot_hold_are_refused(name):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], env={name: "1"})
    assert_spec_error(info.value, "w", "env", name, "non-empty, without '='")


def test_a_nul_byte_in_an_env_value_is_refused_naming_the_variable():
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], env={"PORT": "80\x0000"})
    assert_spec_error(info.value, "w", "env", "80\x0000", "the value of PORT cannot contain NUL")


@pytest.mark.parametrize("argv", [["ec\0ho"], ["echo", "a\0b"]])
def test_a_nul_byte_in_a_command_argument_is_refused(argv):
    bad = next(a for a in argv if "\0" in a)
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=argv)
    assert_spec_error(info.value, "w", "command", bad, "cannot contain NUL")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cwd", "/tmp/\0x"),
        ("cwd", Path("/tmp/\0x")),
        ("cwd", b"/tmp\0".decode()),
        ("stdout", "out\0.log"),
        ("stderr", "err\0.log"),
    ],
)
def test_a_nul_byte_in_a_path_is_refused(field, value):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], **{field: value})
    assert_spec_error(info.value, "w", field, value, "cannot contain NUL")


def test_a_nul_byte_in_a_ready_file_path_is_refused():
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], ready=ReadyFile("/tmp/r\0"))
    assert info.value.field == "ready" and "NUL" in info.value.expected


def test_string_kwargs_and_plain_env_still_pass():
    spec = ChildSpec("w", target=print, kwargs={"sep": "-"}, env={"A_B": "x=y"})
    assert spec.kwargs == {"sep": "-"} and spec.env == {"A_B": "x=y"}


# -- real daemons: stop_signal, kill_mode, sd_notify, watchdog, pid_file, reload ----------


def test_daemon_fields_default_to_todays_behaviour():
    spec = ChildSpec("w", command=["true"])
    assert spec.stop_signal == signal.SIGTERM and type(spec.stop_signal) is int
    assert spec.kill_mode == "group"
    assert spec.watchdog is None and spec.pid_file is None and spec.reload is None
    assert not spec.notify_socket


@pytest.mark.parametrize(
    ("given", "number"),
    [
        ("QUIT", signal.SIGQUIT),
        ("SIGQUIT", signal.SIGQUIT),
        ("quit", signal.SIGQUIT),
        (3, 3),
        (signal.SIGINT, signal.SIGINT),
        ("WINCH", signal.SIGWINCH),
    ],
)
def test_stop_signal_takes_a_name_or_a_number_and_stores_an_int(given, number):
    spec = ChildSpec("w", command=["true"], stop_signal=given)
    assert spec.stop_signal == number and type(spec.stop_signal) is int


@pytest.mark.parametrize("bad", ["TREM", "SIG_DFL", "", 0, -1, 999, 2.0, True, None, "STOP"])
def test_a_bad_stop_signal_is_refused(bad):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], stop_signal=bad)
    assert info.value.child == "w" and info.value.field == "stop_signal"
    assert "signal" in info.value.expected


def test_parse_signal_is_the_same_parser_for_everyone():
    assert parse_signal("hup") == parse_signal("SIGHUP") == parse_signal(1) == signal.SIGHUP
    with pytest.raises(ValueError):
        parse_signal("NOPE")


@pytest.mark.parametrize("mode", ["group", "main"])
def test_kill_mode_group_or_main(mode):
    assert ChildSpec("w", command=["true"], kill_mode=mode).kill_mode == mode  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["mixed", "process", None, 1])
def test_a_bad_kill_mode_is_refused_naming_the_modes(bad):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], kill_mode=bad)
    assert_spec_error(info.value, "w", "kill_mode", bad, '"group"')


def test_sd_notify_readiness_is_for_commands_and_gives_a_notify_socket():
    spec = ChildSpec("w", command=["redis-server"], ready="sd_notify")
    assert spec.ready == "sd_notify" and spec.notify_socket


def test_sd_notify_is_refused_for_a_target_pointing_at_notify():
    with pytest.raises(SpecError) as info:
        ChildSpec("w", target=print, ready="sd_notify")
    assert_spec_error(info.value, "w", "ready", "sd_notify", 'use ready="notify"')


def test_ready_notify_for_a_command_points_at_sd_notify():
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], ready="notify")
    assert '"sd_notify"' in info.value.expected


def test_watchdog_is_seconds_and_a_command_with_one_gets_a_notify_socket():
    spec = ChildSpec("w", command=["true"], watchdog=2)
    assert spec.watchdog == 2.0 and type(spec.watchdog) is float and spec.notify_socket
    target = ChildSpec("t", target=print, watchdog=0.5)
    assert target.watchdog == 0.5 and not target.notify_socket  # heartbeat() instead
    assert ChildSpec("b", command=["true"], watchdog=1, shutdown="brutal_kill").watchdog == 1.0


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, "10", True])
def test_a_bad_watchdog_is_refused(bad):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], watchdog=bad)
    assert info.value.child == "w" and info.value.field == "watchdog"


def test_watchdog_with_an_infinite_shutdown_is_refused():
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["true"], watchdog=1, shutdown="infinity")
    assert_spec_error(info.value, "w", "watchdog", 1.0, "brutal_kill")


def test_pid_file_is_for_commands_and_stored_as_a_str(tmp_path):
    spec = ChildSpec("w", command=["nginx"], pid_file=tmp_path / "nginx.pid")
    assert spec.pid_file == str(tmp_path / "nginx.pid")


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"target": print}, "only a command= child"),
        ({"command": ["x"], "ready": "sd_notify"}, "drop ready='sd_notify'"),
        ({"command": ["x"], "ready": 1.0}, "drop ready=1.0"),
    ],
)
def test_pid_file_with_a_target_or_another_readiness_is_refused(fields, fragment):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", pid_file="/run/x.pid", **fields)
    assert_spec_error(info.value, "w", "pid_file", "/run/x.pid", fragment)


@pytest.mark.parametrize("bad", ["", 5, "/run/x\0.pid"])
def test_a_bad_pid_file_path_is_refused(bad):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["x"], pid_file=bad)
    assert info.value.field == "pid_file"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("HUP", Reload(signal.SIGHUP)),
        (signal.SIGUSR2, Reload(signal.SIGUSR2)),
        ((["nginx", "-t"], "HUP"), Reload(signal.SIGHUP, check=("nginx", "-t"))),
        (Reload("USR1", ["app", "check"], 5), Reload(signal.SIGUSR1, ("app", "check"), 5.0)),
    ],
)
def test_reload_shorthands_become_one_reload_record(given, expected):
    spec = ChildSpec("w", command=["x"], reload=given)
    assert spec.reload == expected
    assert isinstance(spec.reload, Reload) and type(spec.reload.signal) is int


def test_reload_defaults():
    assert Reload() == Reload(signal.SIGHUP, None, 30.0)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ("KILL", "reload.signal"),
        ("NOPE", "reload.signal"),
        ((["nginx -t"], "HUP", 3), "reload"),
        (("nginx -t", "HUP"), "reload.check"),
        (([], "HUP"), "reload.check"),
        ((["a\0"], "HUP"), "reload.check"),
        ({"signal": "HUP"}, "reload"),
    ],
)
def test_a_bad_reload_is_refused_naming_the_child(bad, field):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["x"], reload=bad)
    assert info.value.child == "w" and info.value.field == field


def test_a_bad_reload_check_timeout_is_refused():
    with pytest.raises(SpecError) as info:
        Reload("HUP", check=["true"], check_timeout=0)
    assert info.value.field == "reload.check_timeout"


def test_a_watchdog_exit_is_abnormal():
    reason = ExitReason.watchdog(2.0)
    assert reason.kind is ExitKind.WATCHDOG and not reason.is_normal
    assert str(reason) == "watchdog: no heartbeat for 2 s"


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"stop_signal": "QUIT"}, "stop_signal"), ({"kill_mode": "main"}, "kill_mode")],
)
def test_a_stop_signal_or_kill_mode_that_brutal_kill_would_never_use_is_refused(fields, field):
    with pytest.raises(SpecError) as info:
        ChildSpec("w", command=["x"], shutdown="brutal_kill", **fields)
    assert info.value.child == "w" and info.value.field == field
    assert 'shutdown="brutal_kill"' in info.value.expected
    assert ChildSpec("w", command=["x"], shutdown=1.0, **fields).shutdown == 1.0
    # the defaults go with brutal_kill, whatever way they are written
    assert (
        ChildSpec("w", command=["x"], shutdown="brutal_kill", stop_signal="TERM").stop_signal == 15
    )
