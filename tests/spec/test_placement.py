"""Tier 0: Placement, its checks, choose_node per policy, placement in TOML, reasons."""

from __future__ import annotations

import pytest

from supervision import (
    ChildSpec,
    ConfigError,
    ExitKind,
    ExitReason,
    NodeInfo,
    Placement,
    Restart,
    SpecError,
    Supervisor,
    SupervisorSpec,
    choose_node,
    load_tree,
    unknown_nodes,
)

A = NodeInfo("id-a", "node-a", {"zone": "1"}, {"CPU": 2.0, "gpu": 1.0})
B = NodeInfo("id-b", "node-b", {"zone": "2"}, {"CPU": 2.0})
C = NodeInfo("id-c", "node-c", {"zone": "2"}, {"CPU": 1.0, "gpu": 2.0})
ALL = [A, B, C]


def test_prefer_is_the_default_and_starts_on_the_named_node() -> None:
    placement = Placement(node="node-b")
    assert placement.policy == "prefer"
    assert choose_node(placement, ALL) == "id-b"
    assert choose_node(Placement(node="id-c"), ALL) == "id-c"  # ids work as well as names


def test_prefer_keeps_the_previous_node_after_a_crash() -> None:
    # A remote crash with the node alive: back where it was, even if `node` names another.
    assert choose_node(Placement(node="node-b"), ALL, previous_node="id-c") == "id-c"


def test_prefer_falls_back_in_order_when_the_node_is_gone() -> None:
    placement = Placement(node="node-a", fallback=["node-c", "node-b"])
    assert choose_node(placement, [B, C], previous_node="id-a") == "id-c"
    assert choose_node(placement, [B], previous_node="id-a") == "id-b"


def test_prefer_takes_any_eligible_node_when_no_fallback_lives() -> None:
    placement = Placement(node="node-a", fallback=["node-x"])
    assert choose_node(placement, [C, B], previous_node="id-a") == "id-b"  # by id, stable
    assert choose_node(placement, [], previous_node="id-a") is None


def test_pinned_never_moves() -> None:
    placement = Placement(node="node-a", policy="pinned")
    assert choose_node(placement, ALL) == "id-a"
    assert choose_node(placement, ALL, previous_node="id-a") == "id-a"
    assert choose_node(placement, [B, C], previous_node="id-a") is None


def test_spread_moves_round_robin() -> None:
    placement = Placement(policy="spread")
    assert choose_node(placement, ALL) == "id-a"
    assert choose_node(placement, ALL, previous_node="id-a") == "id-b"
    assert choose_node(placement, ALL, previous_node="id-c") == "id-a"  # wraps around
    assert choose_node(placement, [A, C], previous_node="id-b") == "id-c"  # previous gone


def test_labels_and_resources_filter_nodes() -> None:
    assert choose_node(Placement(labels={"zone": "2"}), ALL) == "id-b"
    assert choose_node(Placement(resources={"gpu": 2}), ALL) == "id-c"
    assert choose_node(Placement(resources={"gpu": 1}, labels={"zone": "2"}), ALL) == "id-c"
    assert choose_node(Placement(resources={"gpu": 3}), ALL) is None
    # A pinned node that lacks what is asked is no node at all.
    assert choose_node(Placement(node="node-b", policy="pinned", resources={"gpu": 1}), ALL) is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"policy": "anywhere"}, "placement.policy"),
        ({"policy": "pinned"}, "placement.node"),
        ({"node": ""}, "placement.node"),
        ({"node": 3}, "placement.node"),
        ({"labels": {"zone": 1}}, "placement.labels"),
        ({"resources": {"gpu": -1}}, "placement.resources"),
        ({"resources": {"gpu": float("nan")}}, "placement.resources"),
        ({"fallback": "node-b"}, "placement.fallback"),
        ({"node": "a", "policy": "pinned", "fallback": ["b"]}, "placement.fallback"),
    ],
)
def test_bad_placements_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as info:
        Placement(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_placement_only_on_a_supervisor_spec() -> None:
    spec = SupervisorSpec(
        id="b", placement=Placement(node="node-b"), children=[ChildSpec(id="w", command=["true"])]
    )
    assert spec.placement == Placement(node="node-b")
    with pytest.raises(SpecError) as info:
        SupervisorSpec(id="b", placement={"node": "x"})  # type: ignore[arg-type]
    assert (info.value.child, info.value.field) == ("b", "placement")
    with pytest.raises(TypeError):
        ChildSpec(id="w", command=["true"], placement=Placement())  # type: ignore[call-arg]


TREE = """
[supervisor]
id = "root"
[[supervisor.children]]
id = "web"
command = ["true"]
[[supervisor.children]]
id = "ingest"
type = "supervisor"
placement = { node = "node-b", policy = "prefer", fallback = ["node-c"], \
  labels = { zone = "2" }, resources = { node_b = 0.01 } }
[[supervisor.children.children]]
id = "reader"
command = ["true"]
"""


def test_placement_in_a_tree_file() -> None:
    spec = load_tree(TREE)
    remote = spec.children[1]
    assert isinstance(remote, SupervisorSpec)
    assert remote.placement == Placement(
        node="node-b", fallback=("node-c",), labels={"zone": "2"}, resources={"node_b": 0.01}
    )


@pytest.mark.parametrize(
    ("replace", "path"),
    [
        ('policy = "prefer"', "supervisor.children[1].placement.policy"),
        ('fallback = ["node-c"]', "supervisor.children[1].placement.fallback"),
    ],
)
def test_bad_placement_in_a_tree_file(replace: str, path: str) -> None:
    bad = {"policy": 'policy = "nearby"', "fallback": 'fallback = "node-c"'}[path.rsplit(".", 1)[1]]
    text = TREE.replace(replace, bad)
    with pytest.raises(ConfigError) as info:
        load_tree(text, "t.toml")
    assert info.value.path == path


def test_placement_is_refused_on_the_root_and_unknown_keys() -> None:
    with pytest.raises(ConfigError, match="unknown key"):
        load_tree('[supervisor]\nid = "root"\nplacement = { node = "b" }\n')
    with pytest.raises(ConfigError, match="did you mean"):
        load_tree(TREE.replace("policy =", "polcy ="))


def test_remote_reasons_are_abnormal_and_restart_by_type() -> None:
    remote = [ExitKind.REMOTE_CRASH, ExitKind.NODE_DOWN, ExitKind.REMOTE_UNRESPONSIVE]
    assert all(not ExitReason(kind).is_normal for kind in remote)
    # A remote give-up crosses as shutdown: normal. The OTP table over all four reasons.
    reasons = [ExitReason.shutdown("remote gave up"), *(ExitReason(k) for k in remote)]
    for restart in Restart:
        for reason in reasons:
            sup = Supervisor(
                SupervisorSpec(
                    id="root",
                    intensity=10,
                    children=[SupervisorSpec(id="b", restart=restart, placement=Placement())],
                )
            )
            sup.start(0.0)
            sup.started("b", None, 1, 0.0)
            actions = sup.child_exited("b", 1, reason, 1.0)
            restarted = any(type(a).__name__ == "StartChild" for a in actions)
            expected = restart is Restart.PERMANENT or (
                restart is Restart.TRANSIENT and not reason.is_normal
            )
            assert restarted == expected, (restart, reason)


def test_a_node_name_no_node_has_is_said_with_the_names_there_are_and_the_closest() -> None:
    nodes = [NodeInfo("a" * 56, "head"), NodeInfo("b" * 56, "node-b"), NodeInfo("c" * 56, "node-c")]
    placement = Placement(node="zz", fallback=["node-c", "nod-b"])
    assert unknown_nodes(placement, nodes) == [
        "placement.node 'zz' is no node's id or name (nodes: head, node-b, node-c)",
        "placement.fallback 'nod-b' is no node's id or name (nodes: head, node-b, node-c); "
        "did you mean 'node-b'?",
    ]
    assert unknown_nodes(Placement(node="b" * 56, fallback=["head"]), nodes) == []
    assert unknown_nodes(placement, []) == []  # no nodes known: nothing to say


def test_nodes_that_share_a_name_are_listed_with_the_start_of_their_id() -> None:
    nodes = [
        NodeInfo("1234567890" + "0" * 46, "10.0.0.1"),
        NodeInfo("abcdef1234" + "0" * 46, "10.0.0.1"),
    ]
    (note,) = unknown_nodes(Placement(node="10.0.0.2"), nodes)
    assert "(nodes: 10.0.0.1#12345678, 10.0.0.1#abcdef12)" in note
    assert "did you mean '10.0.0.1'?" in note
