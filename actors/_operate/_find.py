"""Finding a child of a live tree by path or id: its supervisor's nanny, and the
child as a `Target` that control calls go through. The one lookup of the run
host's controller, the update and the test harness.

A key is a path ("pool/w1", "root/pool/w1") or a bare id, looked for anywhere in
the tree, depth first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pykka

from supervision import ChildInfo, ChildNotFound, NotForwarded

from .._shell._api import TreeNode
from .._shell._nanny import NannyActor

Ref = pykka.ActorRef[Any]
OP_TIMEOUT = 600.0  # seconds an operator's call waits for its supervisor's answer
# Every exception that means "no answer in time": pykka's Timeout is no TimeoutError.
TIMEOUTS: tuple[type[Exception], ...] = (TimeoutError, pykka.Timeout)
N = TypeVar("N")


def nanny_at(root: Ref, path: str, timeout: float = OP_TIMEOUT) -> Ref:
    """The nanny of the running supervisor at `path` ("shop/apps"; "shop" or "":
    the root itself)."""
    ref = root
    for part in path.split("/")[1:]:
        ref = ref.proxy().child_nanny(part).get(timeout=timeout)
    return ref


def is_nanny(ref: Ref) -> bool:
    """Whether `ref` is a local nanny, not the stand-in for a remote subtree (which
    forwards its own children's calls only: the rest raise NotForwarded)."""
    return issubclass(ref.actor_class, NannyActor)


def walk(nodes: Iterable[TreeNode]) -> Iterator[TreeNode]:
    """Every node of a which_tree listing, depth first."""
    for node in nodes:
        yield node
        yield from walk(node.children)


def named(
    nodes: Iterable[N], root: str, key: str, *, path: Callable[[N], str], ident: Callable[[N], str]
) -> list[N]:
    """The nodes `key` names, in their order: by path below the root ("pool/w1") or
    from it ("root/pool/w1"), or by id anywhere. Any kind of node: `path` and `ident`
    read its path and id (a which_tree listing's, or a snapshot's records)."""
    wanted = key.strip("/")
    if "/" in wanted:
        paths = {f"{root}/{wanted}", wanted}
        return [n for n in nodes if path(n) in paths]
    return [n for n in nodes if ident(n) == wanted]


def matching(nodes: Iterable[TreeNode], root: str, key: str) -> list[TreeNode]:
    """The nodes of a which_tree listing that `key` names, depth first."""
    return named(walk(nodes), root, key, path=lambda n: n.path, ident=lambda n: n.info.id)


def find_node(nodes: Iterable[TreeNode], root: str, key: str, *, first: bool = False) -> TreeNode:
    """The node `key` names. Raises ChildNotFound; or LookupError when a bare id
    names several children, unless `first` (the test harness's way: the first
    found, depth first)."""
    matches = matching(nodes, root, key)
    if not matches:
        raise ChildNotFound(root, key)
    if len(matches) > 1 and not first:
        listed = ", ".join(m.path for m in matches)
        raise LookupError(f"{key!r} names several children ({listed}); give its path")
    return matches[0]


@dataclass(frozen=True)
class Target:
    """A child found by id or path: its supervisor's ref and where it sits.

    `nanny` is None for a child deeper than the top level of a remote subtree (its
    control calls are not forwarded); `remote` is the path of the remote subtree it
    belongs to, if any; `status` its last sd_notify STATUS= text."""

    nanny: pykka.ActorRef[Any] | None
    child_id: str
    path: str
    info: ChildInfo
    status: str = ""
    remote: str | None = None

    def call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        """`method(*args)` on the child's supervisor, awaited; a ValueError saying so
        where a remote subtree does not forward it."""
        if self.nanny is None:
            raise ValueError(
                f"{self.path} is below the top level of the remote subtree "
                f"{self.remote}: control calls reach only a remote subtree's own "
                f"children; act on {self.remote} instead"
            )
        bound = getattr(self.nanny.proxy(), method)
        try:
            return bound(*args).get(timeout=OP_TIMEOUT if timeout is None else timeout)
        except NotForwarded:  # the remote subtree's stand-in forwards a part of the API
            raise ValueError(
                f"{self.path} runs in the remote subtree {self.remote}, whose "
                f"supervisor does not forward {method}; act on {self.remote} instead"
            ) from None


def find_target(
    root: Ref,
    nodes: Iterable[TreeNode],
    root_id: str,
    key: str,
    *,
    timeout: float = OP_TIMEOUT,
    first: bool = False,
) -> Target:
    """The child `key` names in the listing `nodes` of the tree whose root nanny is
    `root`, with the nanny of its supervisor (None below a remote subtree's top
    level). Raises as `find_node` does."""
    found = find_node(nodes, root_id, key, first=first)
    nanny: Ref | None = root
    remote = None
    walked = root_id
    for supervisor in found.path.split("/")[1:-1]:
        walked = f"{walked}/{supervisor}"
        if remote is not None or nanny is None:  # below a remote subtree's own children
            nanny = None
            break
        nanny = nanny.proxy().child_nanny(supervisor).get(timeout=timeout)
        if not is_nanny(nanny):
            remote = walked
    return Target(nanny, found.info.id, found.path, found.info, found.status, remote)
