"""The graph walk every backend shares: occurrence numbering, validation, lowering by table."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from rxrl.actors import ActorGroup
from rxrl.errors import PlanError
from rxrl.graph import Broadcast, Call, FromActors, Node, check_driver_inputs

C = TypeVar("C")
R = TypeVar("R")

#: a backend's lowering of one node: (context, node, occurrence id, lowered inputs) -> lowered
Lowerer = Callable[[C, Any, int, list[R]], R]


def occurrences(root: Node) -> Iterator[tuple[int, Node]]:
    """Every node occurrence in pre-order with its id. A node reachable twice occurs twice.

    The ids are the stable names of choice points and events: every backend numbers the
    same plan the same way, which is what lets the reference interpreter replay a trace
    recorded by another backend.
    """
    counter = 0
    stack = [root]
    while stack:
        node = stack.pop()
        yield counter, node
        counter += 1
        stack.extend(reversed(node.inputs))


def lower(root: Node, table: Mapping[type[Node], Lowerer[C, R]], ctx: C, backend: str) -> R:
    """Lower ``root`` bottom-up with ``table[type(node)]``, numbering occurrences in pre-order."""
    counter = iter(range(1 << 62))

    def go(node: Node) -> R:
        nid = next(counter)
        lowerer = table.get(type(node))
        if lowerer is None:
            raise PlanError(node.label, node.site,
                            f"the {backend!r} backend does not support the {node.op} operator")
        return lowerer(ctx, node, nid, [go(child) for child in node.inputs])

    return go(root)


def validate(root: Node) -> None:
    """Check what types cannot: driver operators never read shards, the root is a driver stream."""
    if root.shards is not None:
        raise PlanError(root.label, root.site,
                        f"a plan must end in a driver stream, but this one has {root.shards} shards",
                        "collect the shards with ops.barrier() or ops.gather() before running")
    for _, node in occurrences(root):
        check_driver_inputs(node)


def fingerprint(root: Node) -> str:
    """A short hash of the plan's shape (operator labels in walk order), for trace checks."""
    h = hashlib.sha256()
    for nid, node in occurrences(root):
        h.update(f"{nid}:{node.op}:{len(node.inputs)}:{node.shards};".encode())
    return h.hexdigest()[:16]


def actor_groups(root: Node) -> list[ActorGroup[Any]]:
    """The distinct actor groups a plan names, in walk order."""
    seen: dict[int, ActorGroup[Any]] = {}
    for _, node in occurrences(root):
        if isinstance(node, FromActors | Broadcast | Call):
            seen.setdefault(id(node.group), node.group)
    return list(seen.values())
