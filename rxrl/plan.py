"""The typed front: `Plan[T]`, `Shards[T]` and the operators `|` composes them with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, overload

from rxrl.actors import Placement, as_placement
from rxrl.errors import PlanError
from rxrl.graph import Node

T = TypeVar("T")
U = TypeVar("U")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)
U_co = TypeVar("U_co", covariant=True)
V = TypeVar("V")


class Op(Generic[T_contra, U_co]):
    """A stream transformer from ``T`` items to ``U`` items that runs on the driver.

    ``plan | op`` attaches it. Build ops with the constructors in :mod:`rxrl.ops`.
    """

    __slots__ = ("_attach", "name")

    def __init__(self, attach: Callable[[Node], Node], name: str) -> None:
        self._attach = attach
        self.name = name

    def attach(self, node: Node) -> Node:
        """The node this operator makes when it reads from ``node``."""
        return self._attach(node)

    def __or__(self, then: Op[U_co, V]) -> Op[T_contra, V]:
        """A reusable segment: ``plan | (a | b)`` is ``plan | a | b``."""
        return Op(_compose(self, then), f"{self.name} | {then.name}")

    def __repr__(self) -> str:
        return f"<op {self.name}>"


class LocalOp(Op[T_contra, U_co]):
    """An operator that may also run inside each shard: ``shards | op`` stays sharded."""

    __slots__ = ()

    @overload
    def __or__(self, then: LocalOp[U_co, V]) -> LocalOp[T_contra, V]: ...

    @overload
    def __or__(self, then: Op[U_co, V]) -> Op[T_contra, V]: ...

    def __or__(self, then: Op[U_co, V]) -> Op[T_contra, V]:
        kind = LocalOp if isinstance(then, LocalOp) else Op
        return kind(_compose(self, then), f"{self.name} | {then.name}")


class Collect(Generic[T_contra, U_co]):
    """Turns ``Shards[T]`` into a driver ``Plan[U]`` (``barrier``, ``gather``)."""

    __slots__ = ("_attach", "name")

    def __init__(self, attach: Callable[[Node], Node], name: str) -> None:
        self._attach = attach
        self.name = name

    def attach(self, node: Node) -> Node:
        """The node this collector makes when it reads from ``node``."""
        return self._attach(node)

    def __repr__(self) -> str:
        return f"<collect {self.name}>"


def _compose(first: Op[Any, Any], then: Op[Any, Any]) -> Callable[[Node], Node]:
    given: object = then
    if not isinstance(given, Op):
        raise TypeError(f"an operator can only be followed by an rxrl operator, got {given!r}")
    return lambda node: then.attach(first.attach(node))


class Plan(Generic[T_co]):
    """A stream of ``T`` on the driver. Immutable; building it runs nothing.

    ``rxrl.run(plan)`` runs it. ``str(plan)`` prints its graph.
    """

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        if node.shards is not None:
            raise PlanError(
                node.label, node.site, "this node is sharded, not a driver stream",
                "wrap it in Shards, or collect it with ops.barrier()/ops.gather()",
            )
        self.node = node

    def __or__(self, op: Op[T_co, U]) -> Plan[U]:
        given: object = op  # checked at runtime too: callers may bypass the types
        if isinstance(given, Collect):
            raise _misuse(self.node, given.name, f"{given.name}() collects Shards, but this is a Plan",
                          f"remove {given.name}(): a Plan is already a single driver stream")
        if not isinstance(op, Op):
            raise TypeError(f"a Plan can only be piped into an rxrl operator, got {op!r}")
        return Plan(op.attach(self.node))

    def __repr__(self) -> str:
        from rxrl.show import render

        return render(self.node)


class Shards(Generic[T_co]):
    """N streams of ``T``, one per actor (or iterable), each running where its actor lives.

    Shard-local operators keep it sharded; ``ops.barrier()`` / ``ops.gather()`` collect it
    into a driver ``Plan``.
    """

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def num_shards(self) -> int:
        """How many parallel streams this is."""
        n = self.node.shards
        assert n is not None
        return n

    def subset(self, indices: Sequence[int]) -> Shards[T_co]:
        """Shards ``indices`` of these, in that order (each index at most once).

        Tags (``gather(tagged=True)``) keep naming the actors' own indices, so ``ops.call``
        still routes an item back to the actor that made it.

        >>> import rxrl
        >>> from rxrl import ops
        >>> shards = rxrl.from_iterables([["a"], ["b"], ["c"]])
        >>> list(rxrl.run(shards.subset([2, 0]) | ops.barrier()))
        [['c', 'a']]
        """
        from rxrl.errors import call_site

        site = call_site()
        n = self.num_shards
        picked = tuple(indices) if isinstance(indices, Sequence) else None
        if (picked is None or not picked
                or any(isinstance(i, bool) or not isinstance(i, int) for i in picked)):
            raise PlanError("subset()", site,
                            f"indices must be a non-empty sequence of ints, got {indices!r}")
        bad = [i for i in picked if not 0 <= i < n]
        if bad:
            raise PlanError(f"subset({list(picked)})", site,
                            f"index {bad[0]} is out of range: these shards are 0..{n - 1}")
        if len(set(picked)) < len(picked):
            raise PlanError(f"subset({list(picked)})", site, "an index appears twice: a shard has one reader")
        from rxrl.graph import Subset

        return Shards(Subset(input=self.node, indices=picked, site=site))

    def subset_on(self, placement: Placement | str) -> Shards[T_co]:
        """The shards whose actors a distributed backend places only on nodes with
        ``placement``'s labels (``"zone=a"``), in order: those whose group, or own actor, was
        `ActorGroup.placed` with at least these labels. A subset by placement is decided
        when the plan is built, so every backend (the in-process ones too) runs the same one.

        >>> import rxrl
        >>> from rxrl import ops
        >>> class Worker:
        ...     def __init__(self, index: int) -> None:
        ...         self.index = index
        ...     def sample(self) -> int:
        ...         return self.index
        >>> group = rxrl.indexed_actors(Worker, 4).placed(["zone=a", "zone=b", "zone=a", "zone=b"])
        >>> list(rxrl.run(rxrl.from_actors(group, Worker.sample).subset_on("zone=b")
        ...               | ops.barrier() | ops.take(1)))
        [[1, 3]]
        """
        from rxrl.errors import call_site
        from rxrl.graph import actor_indices, indices_on

        site = call_site()
        name = f"subset_on({placement!r})"
        try:
            where = as_placement(placement)
        except ValueError as e:
            raise PlanError(name, site, str(e)) from None
        if where.strategy != "any" or not where.labels:
            raise PlanError(name, site, f"takes node labels (KEY=VALUE), got {str(where)!r}",
                            "name the labels the actors were placed with, e.g. 'zone=a'")
        found = actor_indices(self.node)
        if found is None:
            raise PlanError(name, site, f"these shards are not one actor group's ({self.node.label})",
                            "take the subset of rxrl.from_actors(...) shards")
        group, actors = found
        picked = list(indices_on(group, actors, where))
        if not picked:
            placed = sorted({str(group.placement_of(i)) or "any" for i in actors})
            raise PlanError(name, site, f"no actor of {group!r} behind these shards is placed on {where} "
                            f"(their placements: {', '.join(placed)})",
                            "place the group with ActorGroup.placed, one placement per actor if need be")
        return self.subset(picked)

    @overload
    def __or__(self, op: LocalOp[T_co, U]) -> Shards[U]: ...

    @overload
    def __or__(self, op: Collect[T_co, U]) -> Plan[U]: ...

    def __or__(self, op: LocalOp[T_co, U] | Collect[T_co, U]) -> Shards[U] | Plan[U]:
        given: object = op  # checked at runtime too: callers may bypass the types
        if isinstance(given, Collect):
            return Plan(given.attach(self.node))
        if isinstance(given, LocalOp):
            return Shards(given.attach(self.node))
        if isinstance(given, Op):
            raise _misuse(self.node, given.name, f"{given.name} runs on the driver and cannot read Shards",
                          "collect the shards first with ops.barrier() or ops.gather()")
        raise TypeError(f"Shards can only be piped into an rxrl operator, got {given!r}")

    def __repr__(self) -> str:
        from rxrl.show import render

        return render(self.node)


def _misuse(node: Node, name: str, problem: str, fix: str) -> PlanError:
    from rxrl.errors import call_site

    return PlanError(f"{name}()", call_site(), f"{problem} (input: {node.label})", fix)


def as_node(stream: Plan[Any] | Shards[Any], *, where: str, site: str) -> Node:
    """The node behind a driver Plan, or a PlanError naming ``where`` if it is sharded/invalid."""
    if isinstance(stream, Plan):
        return stream.node
    if isinstance(stream, Shards):
        raise PlanError(where, site, f"expects driver Plans, got Shards ({stream.node.label})",
                        "collect the shards first with ops.barrier() or ops.gather()")
    raise PlanError(where, site, f"expects Plans, got {type(stream).__name__}: {stream!r}")
