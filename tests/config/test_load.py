"""TOML tree files: good files load into the same specs as Python; bad ones say where and why."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from actors._treefile import import_target, load_tree_file
from supervision import (
    AutoShutdown,
    Backoff,
    ChildSpec,
    ConfigError,
    ReadyFile,
    Reload,
    Restart,
    RestartLimit,
    Strategy,
    SupervisorSpec,
    UnresolvedTarget,
    load_tree,
)
from tests.targets import children

ROOT = Path(__file__).resolve().parents[2]


def _resolve(ref: str):
    return {"tests.targets.children:sleep_forever": children.sleep_forever}[ref]


FULL = """
[supervisor]
id = "root"
strategy = "rest_for_one"
intensity = 4
period = 30
auto_shutdown = "any_significant"

[[supervisor.children]]
id = "web"
command = "python3 -m http.server '8000'"
restart = "transient"
shutdown = "brutal_kill"
env = { PORT = "8000" }
inherit_env = false
cwd = "www"
ready = 0.5
start_timeout = 5
min_uptime = 1
memory_limit = "512M"
stdout = "capture"
stderr = "logs/web.err"
normal_exit_codes = [0, 3]
significant = true
backoff = { initial = 0.5, max = 10 }

[[supervisor.children]]
id = "job"
target = "tests.targets.children:sleep_forever"
args = [1, "two"]
kwargs = { three = 3 }
ready = "notify"
warm_start = true
shutdown = "infinity"
backoff = true

[[supervisor.children]]
id = "pool"
strategy = "one_for_all"
restart = "temporary"
shutdown = 10

[[supervisor.children.children]]
id = "a"
command = ["sleep", "60"]
ready = { file = "/run/a.ready" }

[[supervisor.children.children]]
id = "inner"
type = "supervisor"

[[supervisor.children.children.children]]
id = "b"
command = ["sleep", "60"]
"""


def test_a_full_file_loads_every_field():
    spec = load_tree(FULL, "/srv/app/tree.toml", resolve_target=_resolve)
    assert isinstance(spec, SupervisorSpec)
    assert (spec.id, spec.strategy, spec.intensity, spec.period) == (
        "root",
        Strategy.REST_FOR_ONE,
        4,
        30.0,
    )
    assert spec.auto_shutdown is AutoShutdown.ANY_SIGNIFICANT
    web, job, pool = spec.children
    assert web == ChildSpec(
        id="web",
        command=["python3", "-m", "http.server", "8000"],
        restart=Restart.TRANSIENT,
        shutdown="brutal_kill",
        env={"PORT": "8000"},
        inherit_env=False,
        cwd="/srv/app/www",  # relative to the file
        ready=0.5,
        start_timeout=5.0,
        min_uptime=1.0,
        memory_limit=512 * 1024**2,
        stdout="capture",
        stderr="/srv/app/logs/web.err",
        normal_exit_codes={0, 3},
        significant=True,
        backoff=Backoff(initial=0.5, max=10.0),
    )
    assert isinstance(job, ChildSpec)
    assert job.target is children.sleep_forever
    assert (job.args, job.kwargs, job.ready, job.shutdown) == (
        (1, "two"),
        {"three": 3},
        "notify",
        "infinity",
    )
    assert job.warm_start and job.backoff == Backoff()
    assert isinstance(pool, SupervisorSpec)
    assert (pool.strategy, pool.restart, pool.shutdown) == (
        Strategy.ONE_FOR_ALL,
        Restart.TEMPORARY,
        10.0,
    )
    a, inner = pool.children
    assert isinstance(a, ChildSpec) and a.ready == ReadyFile("/run/a.ready")
    assert isinstance(inner, SupervisorSpec) and [c.id for c in inner.children] == ["b"]


def test_the_smallest_file_takes_every_default_and_the_file_stem_as_id():
    spec = load_tree(
        b'[supervisor]\n[[supervisor.children]]\nid = "a"\ncommand = ["true"]\n', "x/web.toml"
    )
    # A tree file's worker is contained by default (docs/otp-semantics.md section 4.2).
    child = ChildSpec(id="a", command=["true"], restart_limit=RestartLimit())
    assert spec == SupervisorSpec(id="web", children=[child])


def test_without_a_resolver_targets_stay_unresolved_and_say_so_when_called():
    text = '[supervisor]\nid = "r"\n[[supervisor.children]]\nid = "j"\ntarget = "no.such:thing"\n'
    spec = load_tree(text)
    target = spec.children[0].target  # type: ignore[union-attr]
    assert target == UnresolvedTarget("no.such:thing")
    with pytest.raises(RuntimeError, match="never imported"):
        target()


def test_the_shipped_files_load(tmp_path):
    shop = load_tree_file(ROOT / "examples" / "tree.toml")
    assert shop.strategy is Strategy.ONE_FOR_ALL and len(shop.children) == 3
    demo = load_tree_file(ROOT / "actors" / "cli" / "demo.toml")
    ids = [c.id for c in demo.children]
    assert ids == ["clock", "flaky", "pipeline", "fragile"]


def test_targets_import_from_the_files_directory(tmp_path):
    (tmp_path / "mymod_for_config_test.py").write_text("def work():\n    return 42\n")
    (tmp_path / "t.toml").write_text(
        '[supervisor]\n[[supervisor.children]]\nid = "w"\ntarget = "mymod_for_config_test:work"\n'
    )
    spec = load_tree_file(tmp_path / "t.toml")
    assert spec.children[0].target() == 42  # type: ignore[union-attr,misc]


def test_import_target_follows_attribute_paths():
    assert import_target("tests.targets.children:sleep_forever") is children.sleep_forever
    assert import_target("pathlib:Path.cwd") == Path.cwd


def test_an_unreadable_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read it"):
        load_tree_file(tmp_path / "nope.toml")


def _child(body: str, before: str = "") -> str:
    """A file whose third child (children[2]) has `body`."""
    return (
        '[supervisor]\nid = "root"\n'
        + before
        + '[[supervisor.children]]\nid = "a"\ncommand = ["true"]\n'
        + '[[supervisor.children]]\nid = "b"\ncommand = ["true"]\n'
        + "[[supervisor.children]]\n"
        + body
    )


C2 = "supervisor.children[2]"

BAD = [
    # (file text, table path, fragments the message must hold)
    ("[supervisor\n", "", ["not valid TOML", "line 1"]),
    ('[supervisors]\nid = "x"\n', "supervisors", ['did you mean "supervisor"']),
    ("# nothing yet\n", "supervisor", ["missing", "[supervisor]"]),
    (
        _child('id = "c"\ncommand = ["true"]\nrestart = "sometimes"\n'),
        f"{C2}.restart",
        ['"sometimes"', '"permanent", "transient", "temporary"'],
    ),
    (
        _child('id = "c"\ncommand = ["true"]\nrestrat = "temporary"\n'),
        f"{C2}.restrat",
        ['did you mean "restart"', "allowed here:"],
    ),
    (_child('command = ["true"]\n'), f"{C2}.id", ["missing", "unique id"]),
    (_child('id = "a/b"\ncommand = ["true"]\n'), f"{C2}.id", ['"a/b"', 'without "/"']),
    (_child('id = "a"\ncommand = ["true"]\n'), f"{C2}.id", ["duplicate", "supervisor.children[0]"]),
    (_child('id = "c"\n'), f"{C2}.command", ["missing", "target"]),
    (_child('id = "c"\ncommand = ["x"]\ntarget = "m:f"\n'), f"{C2}.target", ["not both"]),
    (_child('id = "c"\ncommand = []\n'), f"{C2}.command", ["a program to run"]),
    (_child('id = "c"\ncommand = ["sleep", 1]\n'), f"{C2}.command", ["array of strings"]),
    (_child('id = "c"\ncommand = "sh -c \'oops"\n'), f"{C2}.command", ["cannot split"]),
    (_child('id = "c"\ntarget = "mod.func"\n'), f"{C2}.target", ['"package.module:function"']),
    (_child('id = "c"\ncommand = ["x"]\nenv = { PORT = 8000 }\n'), f"{C2}.env.PORT", ["quote it"]),
    (_child('id = "c"\ncommand = ["x"]\nshutdown = -1\n'), f"{C2}.shutdown", ['"brutal_kill"']),
    (_child('id = "c"\ncommand = ["x"]\nshutdown = "soon"\n'), f"{C2}.shutdown", ['"soon"']),
    (
        _child('id = "c"\ncommand = ["x"]\nmemory_limit = "lots"\n'),
        f"{C2}.memory_limit",
        ['"512M"'],
    ),
    (_child('id = "c"\ncommand = ["x"]\nmemory_limit = 100\n'), f"{C2}.memory_limit", [">= 4096"]),
    (_child('id = "c"\ncommand = ["x"]\nready = "whenever"\n'), f"{C2}.ready", ['"notify"']),
    (
        _child('id = "c"\ncommand = ["x"]\nready = "notify"\n'),
        f"{C2}.ready",
        ["actors.child.ready()"],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\ninherit_env = "yes"\n'),
        f"{C2}.inherit_env",
        ["true or false"],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\nnormal_exit_codes = [256]\n'),
        f"{C2}.normal_exit_codes",
        ["0-255"],
    ),
    (_child('id = "c"\ncommand = ["x"]\nstart_timeout = 0\n'), f"{C2}.start_timeout", ["> 0"]),
    (_child('id = "c"\ncommand = ["x"]\ntype = "thing"\n'), f"{C2}.type", ['"supervisor"']),
    (
        _child('id = "c"\ncommand = ["x"]\nrestart = "transient"\nsignificant = true\n'),
        f"{C2}.significant",
        ['auto_shutdown = "any_significant"'],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\n', 'strategy = "one_for_some"\n'),
        "supervisor.strategy",
        ['"one_for_all"'],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\n', "intensity = 1.5\n"),
        "supervisor.intensity",
        ["integer >= 0"],
    ),
    (_child('id = "c"\ncommand = ["x"]\n', "period = 0\n"), "supervisor.period", ["> 0"]),
    (
        _child('id = "c"\ncommand = ["x"]\n', 'restart = "temporary"\n'),
        "supervisor.restart",
        ["unknown key"],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\n', 'strategy = "simple_one_for_one"\n'),
        "supervisor.children",
        ["exactly one child spec"],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\nbackoff = { initial = 5, max = 1 }\n'),
        f"{C2}.backoff.max",
        [">= initial=5.0"],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\nbackoff = { start = 1 }\n'),
        f"{C2}.backoff.start",
        ["initial"],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\nbackoff = 3\n'),
        f"{C2}.backoff",
        ["true, false or a table"],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\nwarm_start = true\n'),
        f"{C2}.warm_start",
        ["only a target="],
    ),
    (_child('id = "c"\ncommand = ["x", "a\\u0000b"]\n'), f"{C2}.command[1]", ["NUL bytes"]),
    (_child('id = "c"\ncommand = ["x"]\nenv = { "A=B" = "1" }\n'), f'{C2}.env."A=B"', ["'='"]),
    (_child('id = "c"\ncommand = ["x"]\nenv = { "" = "1" }\n'), f'{C2}.env.""', ["non-empty"]),
    (
        _child('id = "c"\ncommand = ["x"]\nenv = { A = "1\\u0000" }\n'),
        f"{C2}.env.A",
        ["NUL bytes"],
    ),
    (_child('id = "c"\ncommand = ["x"]\ncwd = "/tmp\\u0000x"\n'), f"{C2}.cwd", ["NUL bytes"]),
    (_child('id = "c"\ncommand = ["x"]\nstop_signal = "TREM"\n'), f"{C2}.stop_signal", ['"TERM"']),
    (_child('id = "c"\ncommand = ["x"]\nstop_signal = 1.5\n'), f"{C2}.stop_signal", ["a number"]),
    (_child('id = "c"\ncommand = ["x"]\nkill_mode = "mixed"\n'), f"{C2}.kill_mode", ['"main"']),
    (_child('id = "c"\ncommand = ["x"]\nwatchdog = 0\n'), f"{C2}.watchdog", ["> 0"]),
    (
        _child('id = "c"\ncommand = ["x"]\nwatchdog = 1\nshutdown = "infinity"\n'),
        f"{C2}.watchdog",
        ["brutal_kill"],
    ),
    (
        _child('id = "c"\ntarget = "tests.targets.children:sleep_forever"\npid_file = "x.pid"\n'),
        f"{C2}.pid_file",
        ["command="],
    ),
    (_child('id = "c"\ncommand = ["x"]\nreload = "KILL"\n'), f"{C2}.reload.signal", ["SIGKILL"]),
    (_child('id = "c"\ncommand = ["x"]\nreload = 1.5\n'), f"{C2}.reload", ['"HUP"']),
    (
        _child('id = "c"\ncommand = ["x"]\nreload = { signal = "HUP", chek = ["t"] }\n'),
        f"{C2}.reload.chek",
        ['did you mean "check"'],
    ),
    (
        _child('id = "c"\ncommand = ["x"]\nreload = { check = [] }\n'),
        f"{C2}.reload.check",
        ["a program to run"],
    ),
    (
        _child('id = "c"\ntarget = "tests.targets.children:sleep_forever"\nready = "sd_notify"\n'),
        f"{C2}.ready",
        ['ready="notify"'],
    ),
    ('[supervisor]\nchildren = "web"\n', "supervisor.children", ["[[...children]] tables"]),
    (
        '[supervisor]\nid = "r"\n[[supervisor.children]]\nid = "p"\nstrategy = "one_for_one"\n'
        '[[supervisor.children.children]]\nid = "x"\ncommand = ["y"]\nrestart = "never"\n',
        "supervisor.children[0].children[0].restart",
        ['"never"'],
    ),
]


@pytest.mark.parametrize(("text", "path", "fragments"), BAD, ids=[b[1] or "syntax" for b in BAD])
def test_a_bad_file_names_file_path_value_and_fix(text, path, fragments):
    with pytest.raises(ConfigError) as info:
        load_tree(text, "conf/tree.toml", resolve_target=_resolve)
    e = info.value
    assert (e.filename, e.path) == ("conf/tree.toml", path)
    message = str(e)
    assert message.startswith(f"conf/tree.toml: {path}" if path else "conf/tree.toml: ")
    for fragment in fragments:
        assert fragment in message, message


def test_one_pass_reports_the_supervisors_keys_and_every_child_behind_them():
    """A bad strategy does not hide its children's problems, nor does a duplicate id the
    rest of that child's: `check` lists them all at once."""
    text = (
        '[supervisor]\nid = "r"\nstrategy = "one_for_al"\nintensity = -1\n'
        '[[supervisor.children]]\nid = "a"\ncommand = ["true"]\n'
        '[[supervisor.children]]\nid = "a"\ncommand = ["true"]\nrestart = "sometimes"\n'
        '[[supervisor.children]]\nid = "sub"\nstrategy = "all"\nshutdown = "soon"\n'
        '[[supervisor.children.children]]\nid = "x"\ncommand = ["y"]\nshutdown = -1\n'
    )
    with pytest.raises(ConfigError) as info:
        load_tree(text, "t.toml")
    assert [e.path for e in info.value.errors] == [
        "supervisor.strategy",
        "supervisor.intensity",
        "supervisor.children[1].id",
        "supervisor.children[1].restart",
        "supervisor.children[2].strategy",
        "supervisor.children[2].shutdown",
        "supervisor.children[2].children[0].shutdown",
    ]
    assert str(info.value).startswith("t.toml: 7 problems:\n  t.toml: supervisor.strategy")


def test_a_target_that_cannot_be_imported_says_why():
    text = _child('id = "c"\ntarget = "no_such_module_x:run"\n')
    with pytest.raises(ConfigError) as info:
        load_tree(text, "t.toml", resolve_target=import_target)
    assert info.value.path == f"{C2}.target"
    assert "cannot import it (ModuleNotFoundError" in str(info.value)


def test_a_target_that_is_not_callable_is_refused():
    text = _child('id = "c"\ntarget = "math:pi"\n')
    with pytest.raises(ConfigError, match="names a float, not a function"):
        load_tree(text, "t.toml", resolve_target=import_target)


def test_bytes_that_are_not_utf8_are_refused():
    with pytest.raises(ConfigError, match=r"t\.toml: not UTF-8"):
        load_tree(b"\xff\xfe[supervisor]", "t.toml")


DAEMON = """
[supervisor]
id = "web"

[[supervisor.children]]
id = "nginx"
command = ["nginx", "-g", "daemon off;"]
stop_signal = "QUIT"
kill_mode = "main"
ready = "sd_notify"
watchdog = 10
reload = { signal = "HUP", check = ["nginx", "-t"], check_timeout = 5 }

[[supervisor.children]]
id = "legacy"
command = ["legacyd"]
stop_signal = 15
pid_file = "run/legacyd.pid"
reload = "USR1"
"""


def test_daemon_keys_load_into_the_same_spec_as_python():
    spec = load_tree(DAEMON, "/etc/nanny/web.toml")
    nginx, legacy = spec.children
    assert nginx == ChildSpec(
        "nginx",
        command=["nginx", "-g", "daemon off;"],
        stop_signal="SIGQUIT",
        kill_mode="main",
        ready="sd_notify",
        watchdog=10.0,
        reload=Reload("HUP", check=["nginx", "-t"], check_timeout=5),
        restart_limit=RestartLimit(),
    )
    assert legacy == ChildSpec(
        "legacy",
        command=["legacyd"],
        pid_file="/etc/nanny/run/legacyd.pid",
        reload=Reload(signal.SIGUSR1),
        restart_limit=RestartLimit(),
    )


def test_the_daemons_example_loads_with_its_daemon_fields():
    spec = load_tree_file(ROOT / "examples" / "daemons.toml")
    redis, nginx = spec.children
    assert isinstance(redis, ChildSpec) and isinstance(nginx, ChildSpec)
    assert redis.ready == "sd_notify" and redis.notify_socket
    assert redis.stop_signal == signal.SIGTERM and redis.shutdown == 60.0
    assert nginx.stop_signal == signal.SIGQUIT and nginx.kill_mode == "group"
    assert nginx.reload == Reload(signal.SIGHUP, check=("nginx", "-t", "-q"))
    assert nginx.command is not None and "daemon off;" in nginx.command[2]
