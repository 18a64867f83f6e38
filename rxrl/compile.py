"""Compiling a plan: the one walk that numbers, validates, fingerprints and fuses it for every backend.

``compile_plan(node)`` turns a plan's node graph into a ``Compiled`` object that every backend
lowers (``lower``). It does, once, what each backend used to do for itself:

- **ids**: every node occurrence gets a stable number in pre-order (the root is 0). A node
  reached twice occurs twice and runs twice (a plan value is a description), except a
  ``split``, which is the one node with several consumers: it gets one id, when it is first
  reached, and its branches read from that one node. Ids name choice points, trace entries
  and events, so every backend numbers a plan alike.
- **validation** of what types cannot catch (driver operators never read shards, the root is
  a driver stream, every branch of a split is consumed exactly once);
- the plan's **fingerprint** (its shape, for trace checks) and the **actor groups** it names;
- **fused shard chains**: a collector's sharded input (a source and its shard-local steps) is
  replaced by one ``ShardChain`` node, which backends run inside each actor.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import attrs

from rxrl import graph as g
from rxrl.actors import ActorGroup
from rxrl.errors import PlanError

C = TypeVar("C")
R = TypeVar("R")

#: a backend's lowering of one node: (context, node, id, lowered inputs) -> lowered
Lowerer = Callable[[C, Any, int, list[R]], R]


@attrs.frozen(eq=False)
class Step:
    """One node of a compiled plan: its id, its graph node and the steps it reads from."""

    id: int
    node: g.Node
    inputs: tuple[Step, ...]


@attrs.frozen(eq=False)
class Compiled:
    """A plan compiled once for every backend (see the module docstring).

    ``root`` is the fused graph that backends lower; ``nodes`` maps every id to the node it
    names (fused steps included), for events and error messages.
    """

    root: Step
    nodes: Mapping[int, g.Node]
    fingerprint: str
    groups: tuple[ActorGroup[Any], ...]

    def steps(self) -> Iterator[Step]:
        """Every step of the fused graph once, in id order."""
        seen: dict[int, Step] = {}
        stack = [self.root]
        while stack:
            step = stack.pop()
            if step.id not in seen:
                seen[step.id] = step
                stack.extend(step.inputs)
        return iter(sorted(seen.values(), key=lambda s: s.id))


#: the last plan compiled with checks, and what it compiled to: a caller that looks at a plan
#: before running it (``rxrl.train`` sizes the local Ray by its actors) and the run then share
#: one compilation. Nodes and `Compiled` are frozen, so a hit is the same result.
_last: tuple[weakref.ref[g.Node], Compiled] | None = None


def compile_plan(root: g.Node, *, check: bool = True) -> Compiled:
    """Compile the plan ending in ``root``; ``check=False`` skips validation and fusion
    (for printing plans that would not run). The same root compiled again (with checks) is
    the same `Compiled`, not a second walk."""
    global _last
    if check and _last is not None and _last[0]() is root:
        return _last[1]
    compiled = _compile(root, check)
    if check:
        _last = (weakref.ref(root), compiled)
    return compiled


def _compile(root: g.Node, check: bool) -> Compiled:
    walk = _Walk(check)
    top = walk.visit(root)
    if check:
        if root.shards is not None:
            raise PlanError(root.label, root.site,
                            f"a plan must end in a driver stream, but this one has {root.shards} shards",
                            "collect the shards with ops.barrier() or ops.gather() before running")
        walk.check_splits()
        top = _fuse(top, {})
    return Compiled(top, walk.nodes, walk.hash.hexdigest()[:16], tuple(walk.groups.values()))


class _Walk:
    """Pre-order numbering with the split node shared, validating and hashing as it goes."""

    def __init__(self, check: bool) -> None:
        self.check = check
        self.nodes: dict[int, g.Node] = {}
        self.hash = hashlib.sha256()
        self.groups: dict[int, ActorGroup[Any]] = {}
        self.splits: dict[int, Step] = {}
        #: per split (by identity), the branch indices read so far and where
        self.branches: dict[int, dict[int, g.Branch]] = {}

    def visit(self, node: g.Node) -> Step:
        nid = len(self.nodes)
        self.nodes[nid] = node
        # the same record the graph walk always hashed, so that traces of plans without a
        # split keep their fingerprint
        extra = f":{node.index}" if isinstance(node, g.Branch) else ""
        self.hash.update(f"{nid}:{node.op}:{len(node.inputs)}:{node.shards}{extra};".encode())
        for group in node.groups():
            self.groups.setdefault(id(group), group)
        if self.check:
            g.check_driver_inputs(node)
        if isinstance(node, g.Branch):
            return Step(nid, node, (self._split(node),))
        return Step(nid, node, tuple(self.visit(child) for child in node.inputs))

    def _split(self, branch: g.Branch) -> Step:
        split = branch.split
        seen = self.branches.setdefault(id(split), {})
        if self.check and branch.index in seen:
            other = seen[branch.index]
            raise PlanError(
                f"{split.label}", split.site,
                f"branch {branch.index} is read twice (by the plan at {other.site} and at "
                f"{branch.site}): a branch has one consumer",
                "split into more branches, or build the plan that reads the branch once")
        seen[branch.index] = branch
        step = self.splits.get(id(split))
        if step is None:
            step = self.splits[id(split)] = self.visit(split)
        return step

    def check_splits(self) -> None:
        for step in self.splits.values():
            split = step.node
            assert isinstance(split, g.Split)
            missing = sorted(set(range(split.n)) - set(self.branches[id(split)]))
            if missing:
                raise PlanError(
                    split.label, split.site,
                    f"branch(es) {missing} of {split.n} are not read by the plan, so the split "
                    "would buffer their items without bound",
                    "read every branch (ops.concurrently/alongside run side flows), or split "
                    "into fewer branches")


def _fuse(step: Step, done: dict[int, Step]) -> Step:
    """``step`` with every collector's sharded input replaced by one ``ShardChain`` step."""
    if step.id in done:  # a shared split, already rebuilt
        return done[step.id]
    node = step.node
    if node.collects:
        (chain,) = step.inputs
        fused = Step(step.id, node, (_chain_step(chain, done),))
    else:
        fused = Step(step.id, node, tuple(_fuse(s, done) for s in step.inputs))
    done[step.id] = fused
    return fused


def _chain_step(top: Step, done: dict[int, Step]) -> Step:
    """The shard chain ending in ``top``: its source, its local steps, and the source's
    shards it runs (subsets commute with local steps, so they fold into ``indices``); an
    aggregate's sub-plans, fused, are the chain's inputs."""
    steps: list[tuple[int, g.Node]] = []
    picked: tuple[int, ...] | None = None  # top shard -> shard of the level reached
    step = top
    while not isinstance(step.node, g.FromActors | g.FromIterables | g.Aggregate):
        assert step.node.local and len(step.inputs) == 1, "validation keeps shards local"
        if isinstance(step.node, g.Subset):
            below = step.node.indices
            picked = below if picked is None else tuple(below[i] for i in picked)
        else:
            steps.append((step.id, step.node))
        (step,) = step.inputs
    source = step.node
    inputs: tuple[Step, ...] = ()
    if isinstance(source, g.Aggregate):
        if picked is not None:
            raise PlanError(source.label, source.site, "a subset of aggregated shards would "
                            "leave aggregators that nobody reads", "aggregate into fewer parts")
        inputs = tuple(_fuse(s, done) for s in step.inputs)
    chain = g.ShardChain(source=source, source_id=step.id, steps=tuple(reversed(steps)),
                         indices=picked, site=source.site)
    return Step(top.id, chain, inputs)


def lower(plan: Compiled, table: Mapping[type[g.Node], Lowerer[C, R]], ctx: C, backend: str) -> R:
    """Lower ``plan`` bottom-up with ``table``, each step once (a split's outputs are shared).

    ``table`` is looked up along the node type's MRO, so one entry serves a family
    (``Union`` covers ``Concurrently``). An entry marked with `takes_steps` is given its
    input steps unlowered (Ray ships an aggregate's sub-plans to actors instead).
    """
    lowered: dict[int, R] = {}

    def go(step: Step) -> R:
        if step.id in lowered:
            return lowered[step.id]
        lowerer = entry(table, step.node)
        if lowerer is None:
            raise PlanError(step.node.label, step.node.site,
                            f"the {backend!r} backend does not support the {step.node.op} operator")
        ins: list[Any] = (list(step.inputs) if getattr(lowerer, "takes_steps", False)
                          else [go(s) for s in step.inputs])
        out = lowered[step.id] = lowerer(ctx, step.node, step.id, ins)
        return out

    return go(plan.root)


def takes_steps(lowerer: Callable[..., R]) -> Callable[..., R]:
    """Mark ``lowerer`` as taking its node's input steps, not their lowerings (see `lower`)."""
    setattr(lowerer, "takes_steps", True)  # noqa: B010 - an attribute of a function
    return lowerer


def entry(table: Mapping[type[g.Node], R], node: g.Node) -> R | None:
    """``table``'s entry for ``node``'s type or its nearest base class."""
    for cls in type(node).__mro__:
        found = table.get(cls)
        if found is not None:
            return found
    return None
