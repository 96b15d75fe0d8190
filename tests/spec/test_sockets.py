"""The spec side of sockets and users: what `sockets`, `user` and `group` accept, in
Python and in a tree file, and what they refuse (docs/sockets.md)."""

from __future__ import annotations

import pytest

from supervision import (
    ChildSpec,
    ConfigError,
    HttpProbe,
    ListenSocket,
    Liveness,
    SpecError,
    TcpProbe,
    load_tree,
)


def child(**fields: object) -> ChildSpec:
    return ChildSpec(id="web", command=["srv"], **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("listen", "family", "port"),
    [
        ("127.0.0.1:8080", "tcp", 8080),
        ("0.0.0.0:80", "tcp", 80),
        ("[::1]:8080", "tcp", 8080),
        ("[::]:65535", "tcp", 65535),
        ("/run/app.sock", "unix", None),
        ("@app", "unix", None),
    ],
)
def test_addresses_accepted(listen: str, family: str, port: int | None) -> None:
    s = ListenSocket(listen, name="x")
    assert (s.family, s.port) == (family, port)


@pytest.mark.parametrize(
    "listen",
    [
        "localhost:80",
        "8080",
        "127.0.0.1",
        "127.0.0.1:0",
        "127.0.0.1:70000",
        "::1:80",
        "[nope]:80",
        "run/app.sock",
        "@",
        "/" + "x" * 200,
        "",
        8080,
        "1.2.3.4:8o",
    ],
)
def test_addresses_refused_with_the_fix(listen: object) -> None:
    with pytest.raises(SpecError) as caught:
        child(sockets=[{"listen": listen}])
    assert caught.value.child == "web"
    assert caught.value.field == "sockets.listen"


def test_tables_become_listen_sockets_named_after_the_child_by_default() -> None:
    spec = child(sockets=[{"listen": "127.0.0.1:1", "name": "http"}, ListenSocket("/tmp/a")])
    assert spec.sockets == (
        ListenSocket("127.0.0.1:1", name="http"),
        ListenSocket("/tmp/a", name="web"),
    )


@pytest.mark.parametrize(
    ("sockets", "words"),
    [
        ("127.0.0.1:1", "expected a list"),
        ({"listen": "127.0.0.1:1"}, "expected a list"),
        ([{"listen": "127.0.0.1:1", "port": 1}], "unknown key(s) 'port'"),
        ([{"name": "x"}], 'listen = "HOST:PORT"'),
        ([{"listen": "127.0.0.1:1", "name": "a:b"}], "LISTEN_FDNAMES"),
        ([{"listen": "127.0.0.1:1", "backlog": 0}], ">= 1"),
        ([{"listen": "127.0.0.1:1"}, {"listen": "127.0.0.1:2"}], "a name of its own"),
        (
            [{"listen": "127.0.0.1:1", "name": "a"}, {"listen": "127.0.0.1:1", "name": "b"}],
            "listed twice",
        ),
    ],
)
def test_bad_sockets_name_child_and_fix(sockets: object, words: str) -> None:
    with pytest.raises(SpecError, match="child 'web'") as caught:
        child(sockets=sockets)
    assert words in str(caught.value)


def test_a_tcp_probe_on_a_socket_port_is_refused_an_http_probe_is_not() -> None:
    sockets = [{"listen": "127.0.0.1:8080"}]
    with pytest.raises(SpecError, match="use an HttpProbe") as caught:
        child(sockets=sockets, ready=TcpProbe(8080))
    assert caught.value.field == "ready"
    with pytest.raises(SpecError, match="nannytree listens on it") as caught:
        child(sockets=sockets, liveness=Liveness(TcpProbe(8080)))
    assert caught.value.field == "liveness"
    child(sockets=sockets, ready=HttpProbe("http://127.0.0.1:8080/"))
    child(sockets=sockets, ready=TcpProbe(9090))  # another port: the child's own


def test_a_fresh_interpreter_takes_sockets_and_a_user() -> None:
    def f() -> None: ...

    spec = ChildSpec(id="t", target=f, fresh_interpreter=True, sockets=[{"listen": "@x"}])
    assert [s.listen for s in spec.sockets] == ["@x"]
    assert ChildSpec(id="t", target=f, fresh_interpreter=True, user="nobody").user == "nobody"


@pytest.mark.parametrize("value", ["nobody", "www-data", 0, 65534, "65534"])
def test_users_and_groups_by_name_or_id(value: object) -> None:
    spec = child(user=value, group=value)
    expected = int(value) if str(value).isdigit() else value
    assert (spec.user, spec.group) == (expected, expected)


@pytest.mark.parametrize("value", ["", "a b", "-x", True, -1, 2.5, ["root"]])
def test_bad_users_are_refused(value: object) -> None:
    with pytest.raises(SpecError, match="field 'user'"):
        child(user=value)


TREE = """
[supervisor]
id = "t"
[[supervisor.children]]
id = "web"
command = ["srv"]
sockets = [{ name = "http", listen = "127.0.0.1:8080" }, { listen = "[::1]:8080", name = "v6" }]
user = "nobody"
group = 65534
"""


def test_a_tree_file_takes_sockets_user_and_group() -> None:
    (web,) = load_tree(TREE).children
    assert isinstance(web, ChildSpec)
    assert [(s.name, s.listen) for s in web.sockets] == [
        ("http", "127.0.0.1:8080"),
        ("v6", "[::1]:8080"),
    ]
    assert (web.user, web.group) == ("nobody", 65534)


def test_a_bad_socket_in_a_tree_file_names_its_path() -> None:
    with pytest.raises(ConfigError) as caught:
        load_tree(TREE.replace("127.0.0.1:8080", "localhost:8080"))
    assert "supervisor.children[0].sockets.listen" in str(caught.value)


def test_the_example_tree_file_loads() -> None:
    from pathlib import Path

    from actors._treefile import load_tree_file

    spec = load_tree_file(Path(__file__).parents[2] / "examples" / "socket_activation.toml")
    (web,) = spec.children
    assert isinstance(web, ChildSpec)
    assert [(s.name, s.listen) for s in web.sockets] == [("http", "127.0.0.1:8080")]
