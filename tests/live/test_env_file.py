"""`env_file` on real processes (docs/explanation/trust.md, "Whose rights each action
uses"): a `user =` child's file read with that user's rights, so a symlink it puts in
place of its file gives it nothing of root's; a file read with the tree's own rights
refused where another user could change it; `update` reading a changed file again and
replacing only that child; `check` naming an env file's problem beside the others.
Every wait has a deadline; nothing sleeps to synchronise."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import Tree, load_tree_file
from supervision import ConfigError, UpdateRefused
from tests.support import wait_until
from tests.support.users import User

DEADLINE = 20.0
CLI = [sys.executable, "-m", "actors.cli"]
SECRET = "root-only-value"


def as_user(user: User, *argv: str) -> None:
    subprocess.run(argv, user=user.uid, group=user.gid, check=True, timeout=30)


@pytest.fixture
def app(child_user: User) -> Path:
    """The child's folder, its user's: the user may put anything in it."""
    folder = child_user.home / "app"
    folder.mkdir()
    return child_user.chown(folder, 0o755)


@pytest.fixture
def root_secret() -> Iterator[Path]:
    """An env file of root's, 0600, in a folder every user may look into."""
    folder = Path(tempfile.mkdtemp(prefix="nt-env-", dir="/tmp"))
    folder.chmod(0o755)
    secret = folder / "secret.env"
    secret.write_text(f"TOKEN={SECRET}\n")
    secret.chmod(0o600)
    yield secret
    secret.unlink()
    folder.rmdir()


def tree_file(folder: Path, child: str, top: str = "") -> Path:
    path = folder / "t.toml"
    path.write_text(f'{top}\n[supervisor]\nid = "t"\n\n[[supervisor.children]]\n{child}\n')
    return path


def writes_token(out: Path) -> str:
    """A command that writes $TOKEN to `out` (whole, by a rename), then runs on."""
    script = f'printf %s "$TOKEN" > {out}.tmp; mv {out}.tmp {out}; exec sleep 600'
    return f'command = ["sh", "-c", {json.dumps(script)}]'


def test_a_user_child_reads_its_own_env_file_as_itself(
    child_user: User, app: Path, tmp_path: Path
) -> None:
    env = app / "app.env"
    env.write_text('TOKEN="the user\'s own"\n')
    child_user.chown(env, 0o600)  # its own, for its eyes only: root reads it as the user
    out = app / "out"
    path = tree_file(
        tmp_path, f'id = "app"\nuser = "{child_user.name}"\nenv_file = "{env}"\n{writes_token(out)}'
    )
    tree = Tree.start(load_tree_file(path))
    try:
        wait_until(out.exists, DEADLINE, "the child to write its TOKEN")
        assert out.read_text() == "the user's own"
        assert out.stat().st_uid == child_user.uid  # the child itself runs as the user
    finally:
        tree.stop()


def test_a_symlink_the_user_puts_in_place_of_its_env_file_reads_nothing_of_roots(
    child_user: User, app: Path, tmp_path: Path, root_secret: Path
) -> None:
    as_user(child_user, "ln", "-s", str(root_secret), str(app / "app.env"))
    child = f'id = "app"\nuser = "{child_user.name}"\nenv_file = "{app}/app.env"\n'
    child += 'command = ["sleep", "600"]'
    path = tree_file(tmp_path, child)
    with pytest.raises(ConfigError) as caught:
        load_tree_file(path)
    text = str(caught.value)
    assert caught.value.path == "supervisor.children[0].env_file"
    assert f"child 'app': cannot read env file {app}/app.env as user {child_user.name!r}" in text
    assert "Permission denied" in text and f"let {child_user.name!r} read it" in text
    assert SECRET not in text
    # `check` reads it as `run` does: the same refusal, and nothing of the file shown.
    done = subprocess.run(
        [*CLI, "check", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Permission denied" in done.stderr and SECRET not in done.stderr + done.stdout


def test_the_tree_files_env_file_is_read_as_each_user_child(
    child_user: User, app: Path, tmp_path: Path, root_secret: Path
) -> None:
    """The tree's env_file is read with each child's rights: the root child gets it,
    the user's child is refused it, by name."""
    child = f'id = "app"\nuser = "{child_user.name}"\ncommand = ["sleep", "600"]'
    path = tree_file(tmp_path, child, top=f'env_file = "{root_secret}"')
    with pytest.raises(ConfigError) as caught:
        load_tree_file(path)
    assert caught.value.path == "env_file"
    assert f"child 'app': cannot read env file {root_secret} as user" in str(caught.value)
    path = tree_file(
        tmp_path, 'id = "app"\ncommand = ["sleep", "600"]', f'env_file = "{root_secret}"'
    )
    assert load_tree_file(path).children[0].env == {"TOKEN": SECRET}


def test_a_root_childs_env_file_that_another_user_can_change_is_refused(
    child_user: User, app: Path, tmp_path: Path
) -> None:
    """Read with the tree's rights, a file another user can change would be that user's
    say in a root process's environment (LD_PRELOAD): refused, with the fix."""
    env = app / "app.env"
    env.write_text("LD_PRELOAD=/home/evil.so\n")
    child_user.chown(env, 0o644)
    path = tree_file(tmp_path, f'id = "app"\nenv_file = "{env}"\ncommand = ["sleep", "600"]')
    with pytest.raises(ConfigError) as caught:
        load_tree_file(path)
    assert f"can be written by user {child_user.name}" in str(caught.value)
    assert "user = ..." in str(caught.value)
    loose = tmp_path / "loose.env"  # root's file, in root's folder, but anyone may write it
    loose.write_text("A=1\n")
    loose.chmod(0o666)
    path = tree_file(tmp_path, f'id = "app"\nenv_file = "{loose}"\ncommand = ["sleep", "600"]')
    with pytest.raises(ConfigError, match="can be changed by a user other than root"):
        load_tree_file(path)


def test_update_reads_the_changed_env_file_and_replaces_only_its_child(tmp_path: Path) -> None:
    env = tmp_path / "web.env"
    env.write_text("TOKEN=first\n")
    out = tmp_path / "out"
    path = tmp_path / "t.toml"
    path.write_text(
        '[supervisor]\nid = "t"\n\n[[supervisor.children]]\nid = "web"\n'
        f'env_file = "web.env"\n{writes_token(out)}\n\n'
        '[[supervisor.children]]\nid = "other"\ncommand = ["sleep", "600"]\n'
    )
    tree = Tree.start(load_tree_file(path))
    try:
        wait_until(out.exists, DEADLINE, "web to write its TOKEN")
        assert out.read_text() == "first"
        pids = {c.id: c.pid for c in tree.nanny.which_children().get()}
        assert tree.update(path, settle=0).message == "no change"
        out.unlink()
        env.write_text("TOKEN=second\n")
        assert tree.update(path, settle=0).message == "changed: web"
        wait_until(out.exists, DEADLINE, "the new web to write its TOKEN")
        assert out.read_text() == "second"
        now = {c.id: c.pid for c in tree.nanny.which_children().get()}
        assert now["other"] == pids["other"] and now["web"] not in (None, pids["web"])
        env.write_text("broken\n")  # refused before anything stops
        with pytest.raises(UpdateRefused, match=r"env file .*web\.env, line 1"):
            tree.update(path, settle=0)
        assert {c.id: c.pid for c in tree.nanny.which_children().get()} == now
    finally:
        tree.stop()


def test_check_names_an_env_file_problem_beside_the_files_others(tmp_path: Path) -> None:
    (tmp_path / "web.env").write_text("PORT=8000\nHOST\n")
    path = tmp_path / "t.toml"
    path.write_text(
        '[supervisor]\nid = "t"\n\n[[supervisor.children]]\nid = "web"\n'
        'command = ["sleep", "600"]\nenv_file = ["web.env", "absent.env"]\n\n'
        '[[supervisor.children]]\nid = "job"\ncommand = ["sleep", "600"]\nstopwaitsecs = 10\n'
    )
    done = subprocess.run(
        [*CLI, "check", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert any(
        "supervisor.children[0].env_file" in line
        and f"child 'web': env file {tmp_path}/web.env, line 2: 'HOST' has no '='" in line
        for line in lines
    ), lines
    assert any(f"{tmp_path}/absent.env does not exist" in line for line in lines), lines
    assert any(
        "stopwaitsecs is supervisord's" in line and "use shutdown = 10" in line for line in lines
    ), lines
    assert lines[-1].endswith("3 problems; the tree would not run as written")
