"""Every program run for a child runs as that child (issue 35, items 3 and 6): exec
probes, `start_check` and reload checks take the child's uid, gid and groups, its
clean environment (systemd's User=), and leave nothing behind at their timeout; a
root run is an explicit opt-in (`as_root`), in a folder of root's, named by `check`.

Each attack is played on real processes, as root, with a real unprivileged user."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from actors import Tree
from supervision import (
    ChildSpec,
    ExecProbe,
    Liveness,
    Reload,
    SpecError,
    StartError,
    SupervisorSpec,
    load_tree,
)
from tests.support import RACE_SECONDS, wait_until
from tests.support.users import User

DEADLINE = 20.0
CLI = [sys.executable, "-m", "actors.cli"]
SYSTEM_PYTHON = "/usr/bin/python3"  # nannytree's own is under /root, which the user cannot read
# Root's variables a child must not see (the test's process gets them, as a root
# shell, sudo or a login would give them).
ROOT_ONLY = {
    "XDG_RUNTIME_DIR": "/run/user/0",
    "SUDO_USER": "admin",
    "MAIL": "/var/mail/root",
    "NT_ROOT_SECRET": "s3cret",
}


@pytest.fixture
def root_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/root")
    for name, value in ROOT_ONLY.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def app(child_user: User) -> Path:
    """The child's folder (its cwd), its user's: the user may rewrite what is in it."""
    folder = child_user.home / "app"
    folder.mkdir()
    return child_user.chown(folder, 0o755)


def spy(folder: Path, user: User) -> Path:
    """The child's `check.sh`, as its user rewrote it: it says who ran it, where, with
    which variables, and copies /etc/shadow when it can."""
    script = folder / "check.sh"
    script.write_text(
        textwrap.dedent(
            """\
            #!/bin/sh
            out="$(dirname "$0")/$1"
            id -u > "$out.uid.tmp"; id -G > "$out.groups"; pwd > "$out.cwd"; env > "$out.env"
            if cat /etc/shadow > /dev/null 2>&1; then cp /etc/shadow "$out.shadow"; fi
            mv "$out.uid.tmp" "$out.uid"
            exit 0
            """
        )
    )
    return user.chown(script, 0o755)


def env_of(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def assert_the_childs_env(env: dict[str, str], user: User) -> None:
    assert env["HOME"] == str(user.home)
    assert env["USER"] == env["LOGNAME"] == user.name
    assert env["SHELL"] == "/bin/sh"
    leaked = sorted(set(ROOT_ONLY) & set(env))
    assert not leaked, f"root's variables reached the child's program: {leaked}"


def running(marker: str) -> list[psutil.Process]:
    """Processes, of any user, with `marker` in their command line (zombies aside)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if marker in (p.info["cmdline"] or ()) and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p)
    return found


@contextlib.contextmanager
def started(spec: ChildSpec) -> Iterator[Tree]:
    tree = Tree.start(SupervisorSpec(id="root", children=[spec], intensity=5, period=60))
    try:
        yield tree
    finally:
        tree.stop()


# -- every program run for a child runs as the child ---------------------------------------

Kind = Callable[[list[str], str, Path], ChildSpec]

KINDS: dict[str, Kind] = {
    "ready probe": lambda argv, user, cwd: ChildSpec(
        id="app", command=["sleep", "600"], user=user, cwd=str(cwd), ready=ExecProbe(argv)
    ),
    "liveness probe": lambda argv, user, cwd: ChildSpec(
        id="app",
        command=["sleep", "600"],
        user=user,
        cwd=str(cwd),
        liveness=Liveness(ExecProbe(argv, period=0.1)),
    ),
    "start_check": lambda argv, user, cwd: ChildSpec(
        id="app", command=["sleep", "600"], user=user, cwd=str(cwd), start_check=argv
    ),
    "reload check": lambda argv, user, cwd: ChildSpec(
        id="app",
        command=["sleep", "600"],
        user=user,
        cwd=str(cwd),
        reload=Reload(check=argv),
    ),
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_program_run_for_a_child_runs_as_the_child(
    kind: str, child_user: User, app: Path, root_env: None
) -> None:
    """The child's user rewrote its check.sh: whatever runs it runs it as that user,
    with its groups and variables, and /etc/shadow stays unread."""
    script = spy(app, child_user)
    spec = KINDS[kind]([str(script), "ran"], child_user.name, app)
    with started(spec) as tree:
        if kind == "reload check":
            tree.nanny.reload_child("app").get()
        wait_until((app / "ran.uid").exists, DEADLINE, f"the {kind} to run")
    assert (app / "ran.uid").read_text().split() == [str(child_user.uid)]
    groups = {int(g) for g in (app / "ran.groups").read_text().split()}
    assert groups == set(os.getgrouplist(child_user.name, child_user.gid))
    assert (app / "ran.cwd").read_text().strip() == str(app)  # its own cwd: its business
    assert_the_childs_env(env_of(app / "ran.env"), child_user)
    assert not (app / "ran.shadow").exists(), "the child's script read /etc/shadow"


def test_the_child_itself_gets_its_users_environment_and_none_of_roots(
    child_user: User, app: Path, root_env: None
) -> None:
    out = app / "child.env"
    spec = ChildSpec(
        id="app",
        command=["sh", "-c", f"env > {out}.tmp; mv {out}.tmp {out}; exec sleep 600"],
        user=child_user.name,
        cwd=str(app),
        env={"ON_PURPOSE": "yes"},
    )
    with started(spec):
        wait_until(out.exists, DEADLINE, "the child to write its env")
    env = env_of(out)
    assert_the_childs_env(env, child_user)
    assert env["ON_PURPOSE"] == "yes"  # the tree file's own variables still pass
    assert env["PATH"] == os.environ["PATH"]  # and PATH, as systemd passes it


def test_a_root_owned_python_probe_never_imports_the_childs_module_as_root(
    child_user: User, app: Path
) -> None:
    """`python3 -m healthcheck` searches its working directory first: the child's
    healthcheck.py there runs (if at all) as the child, never as root."""
    planted = app / "healthcheck.py"
    planted.write_text(
        "import os, pathlib\n"
        "here = pathlib.Path(__file__).parent\n"
        "(here / 'imported.tmp').write_text(str(os.getuid()))\n"
        "(here / 'imported.tmp').rename(here / 'imported')\n"
    )
    child_user.chown(planted, 0o644)
    spec = ChildSpec(
        id="app",
        command=["sleep", "600"],
        user=child_user.name,
        cwd=str(app),
        liveness=Liveness(ExecProbe([SYSTEM_PYTHON, "-m", "healthcheck"], period=0.1)),
    )
    with started(spec):
        wait_until((app / "imported").exists, DEADLINE, "the probe to run")
    assert (app / "imported").read_text() == str(child_user.uid)


# -- bounded: no process left, no output kept past CHECK_OUTPUT ------------------------------


@pytest.mark.parametrize("kind", ["start_check", "liveness probe"])
def test_a_program_killed_at_its_timeout_leaves_no_process_behind(
    kind: str, child_user: User, app: Path
) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}"  # `sleep` of a number no one else uses
    argv = ["sh", "-c", f"sleep {marker} & sleep {marker}"]
    try:
        if kind == "start_check":
            spec = ChildSpec(
                id="app",
                command=["sleep", "600"],
                user=child_user.name,
                cwd=str(app),
                start_check=argv,
                start_check_timeout=0.3,
            )
            with pytest.raises(StartError, match=r"ran over 0\.3s"):
                Tree.start(SupervisorSpec(id="root", children=[spec]))
        else:
            spec = ChildSpec(
                id="app",
                command=["sleep", "600"],
                user=child_user.name,
                cwd=str(app),
                liveness=Liveness(ExecProbe(argv, timeout=0.2, period=0.1), failures=1000),
            )
            with started(spec) as tree:
                wait_until(
                    lambda: (
                        (h := tree.nanny.which_children().get()[0].health) is not None
                        and h.failures >= 3
                    ),
                    DEADLINE,
                    "three probes killed at their timeout",
                )
        wait_until(
            lambda: not running(marker),
            DEADLINE,
            f"the {kind}'s background process to be gone",
        )
    finally:
        for p in running(marker):
            with contextlib.suppress(psutil.Error):
                p.kill()


@pytest.mark.soak
@pytest.mark.timeout(RACE_SECONDS + 300)
def test_soak_a_check_never_leaves_its_group_behind(child_user: User, app: Path) -> None:
    """Rounds of checks run as the child that leave a process in their group, by
    exiting at once or at their timeout: after each, none is left."""
    from actors._shell._check_run import run_check

    spec = ChildSpec(id="app", command=["true"], user=child_user.name, cwd=str(app))
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}"
    ways = [
        (["sh", "-c", f"sleep {marker} & exit 1"], 5.0, "exited 1"),
        (["sh", "-c", f"sleep {marker} & sleep {marker}"], 0.05, "ran over"),
        (["sh", "-c", f"(sleep {marker} &) ; echo said; exit 0"], 5.0, None),
    ]
    rounds = 0
    deadline = time.monotonic() + RACE_SECONDS
    try:
        while time.monotonic() < deadline or rounds < 30:
            argv, timeout, why = ways[rounds % len(ways)]
            failed = run_check(spec, argv, timeout, "start_check")
            assert (failed is None) if why is None else (failed is not None and why in failed.why)
            wait_until(lambda: not running(marker), 5.0, f"round {rounds}: nothing left")
            rounds += 1
    finally:
        for p in running(marker):
            with contextlib.suppress(psutil.Error):
                p.kill()


def test_a_checks_output_is_bounded_in_the_host() -> None:
    """A check that writes 32 MiB: the host keeps its last CHECK_OUTPUT bytes, never
    the whole of it."""
    from actors._shell._check_run import CHECK_OUTPUT, run_check

    spec = ChildSpec(id="app", command=["true"])
    flood = ["sh", "-c", "head -c 33554432 /dev/zero | tr '\\0' x; echo; echo the end; exit 3"]
    tracemalloc.start()
    try:
        failed = run_check(spec, flood, 30.0, "start_check")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert failed is not None and "exited 3" in failed.why
    assert failed.output.endswith("the end") and len(failed.output) <= CHECK_OUTPUT
    assert peak < 4 * 1024 * 1024, f"the host held {peak} bytes of a check's output"


# -- the root opt-in --------------------------------------------------------------------------


def root_spy(folder: Path) -> Path:
    """A root-owned script in a root-only folder: who ran it, where, with what HOME."""
    script = folder / "root-check.sh"
    script.write_text(
        '#!/bin/sh\nout="$(dirname "$0")/$1"\n'
        'id -u > "$out.uid.tmp"; pwd > "$out.cwd"; env > "$out.env"; mv "$out.uid.tmp" "$out.uid"\n'
    )
    script.chmod(0o700)
    return script


ROOT_KINDS: dict[str, Kind] = {
    "ready probe": lambda argv, user, cwd: ChildSpec(
        id="app",
        command=["sleep", "600"],
        user=user,
        cwd=str(cwd),
        ready=ExecProbe(argv, as_root=True),
    ),
    "liveness probe": lambda argv, user, cwd: ChildSpec(
        id="app",
        command=["sleep", "600"],
        user=user,
        cwd=str(cwd),
        liveness=Liveness(ExecProbe(argv, period=0.1, as_root=True)),
    ),
    "start_check": lambda argv, user, cwd: ChildSpec(
        id="app",
        command=["sleep", "600"],
        user=user,
        cwd=str(cwd),
        start_check=argv,
        start_check_as_root=True,
    ),
    "reload check": lambda argv, user, cwd: ChildSpec(
        id="app",
        command=["sleep", "600"],
        user=user,
        cwd=str(cwd),
        reload=Reload(check=argv, check_as_root=True),
    ),
}


@pytest.mark.parametrize("kind", ROOT_KINDS)
def test_the_root_opt_in_runs_as_root_in_a_folder_of_roots(
    kind: str, child_user: User, app: Path, tmp_path: Path, root_env: None
) -> None:
    script = root_spy(tmp_path)  # tmp_path: 0700 root, out of the child's reach
    spec = ROOT_KINDS[kind]([str(script), "ran"], child_user.name, app)
    with started(spec) as tree:
        if kind == "reload check":
            tree.nanny.reload_child("app").get()
        wait_until((tmp_path / "ran.uid").exists, DEADLINE, f"the {kind} to run")
    assert (tmp_path / "ran.uid").read_text().split() == ["0"]
    assert (tmp_path / "ran.cwd").read_text().strip() == "/"  # never the child's cwd
    env = env_of(tmp_path / "ran.env")
    assert env["HOME"] == "/root"  # nannytree's own environment, not the child's
    assert env.get("USER") != child_user.name


def test_a_root_run_program_the_child_can_change_is_refused_at_run_time(
    child_user: User, app: Path
) -> None:
    """Even without `check`: a start_check as root whose file the child's user owns
    fails the start, and never runs."""
    script = spy(app, child_user)
    spec = ChildSpec(
        id="app",
        command=["sleep", "600"],
        user=child_user.name,
        start_check=[str(script), "ran"],
        start_check_as_root=True,
    )
    with pytest.raises(StartError) as info:
        Tree.start(SupervisorSpec(id="root", children=[spec]))
    assert f"uid {child_user.uid} (it owns {script})" in str(info.value)
    assert "chown root:root" in str(info.value)
    assert not (app / "ran.uid").exists()


def test_the_root_opt_in_is_refused_where_it_means_nothing_or_a_relative_program() -> None:
    with pytest.raises(SpecError, match=r"start_check_as_root.*user"):
        ChildSpec(id="app", command=["true"], start_check=["true"], start_check_as_root=True)
    with pytest.raises(SpecError, match=r"ready\.as_root.*user"):
        ChildSpec(id="app", command=["true"], ready=ExecProbe(["true"], as_root=True))
    with pytest.raises(SpecError, match="absolute"):
        ChildSpec(
            id="app",
            command=["true"],
            user="nobody",
            start_check=["./check.sh"],
            start_check_as_root=True,
        )


def test_check_names_every_root_run_program_and_refuses_one_the_child_can_change(
    child_user: User, app: Path, tmp_path: Path
) -> None:
    mine = spy(app, child_user)
    tree = tmp_path / "tree.toml"
    tree.write_text(
        textwrap.dedent(
            f"""\
            [supervisor]
            id = "shop"

            [[supervisor.children]]
            id = "web"
            command = ["sleep", "600"]
            user = "{child_user.name}"
            start_check = ["/bin/true"]
            start_check_as_root = true
            ready = {{ exec = ["/bin/true"], as_root = true }}
            reload = {{ signal = "HUP", check = ["/bin/true"], check_as_root = true }}
            """
        )
    )
    spec = load_tree(tree.read_text(), str(tree))
    web = spec.children[0]
    assert isinstance(web, ChildSpec) and web.start_check_as_root
    done = subprocess.run([*CLI, "check", str(tree)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for what in ("start_check", "ready probe", "reload check"):
        assert f"child 'web': its {what} ['/bin/true'] runs as root" in done.stderr

    tree.write_text(
        tree.read_text().replace('start_check = ["/bin/true"]', f'start_check = ["{mine}"]')
    )
    done = subprocess.run([*CLI, "check", str(tree)], capture_output=True, text=True)
    assert done.returncode != 0
    assert f"child 'web': start_check {str(mine)!r} runs as root" in done.stderr
    assert f"uid {child_user.uid}" in done.stderr and "chown root" in done.stderr
