"""Operator constructors: ``plan | ops.map(f) | ops.window(4) | ...``.

Every operator's contract is in docs/semantics.md; each docstring shows it on a tiny example
(the tests run these examples). Shard-local operators (map, filter, flat_map, window, take,
scan, tap) work on both ``Plan`` and ``Shards``; the others run on the driver.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Iterable, Sequence, Sized
from typing import Any, Literal, TypeVar, overload

from rxrl import graph as g
from rxrl.actors import A, ActorGroup, Placement, Tagged, as_placement
from rxrl.errors import PlanError, call_site
from rxrl.plan import Collect, LocalOp, Op, Plan, Shards, as_node

T = TypeVar("T")
U = TypeVar("U")
V = TypeVar("V")
W = TypeVar("W")
S = TypeVar("S", bound=Sized)

__all__ = [
    "aggregate", "alongside", "barrier", "broadcast", "call", "call_all", "concurrently", "filter",
    "flat_map", "gather", "map", "scan", "split", "take", "tap", "union", "window", "zip",
]


def _callable(op: str, site: str, **fns: object) -> None:
    for arg, fn in fns.items():
        if not callable(fn):
            raise PlanError(op, site, f"{arg} must be callable, got {fn!r}")


def _positive_int(op: str, site: str, arg: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlanError(op, site, f"{arg} must be an integer >= {minimum}, got {value!r}")
    return value


# ------------------------------------------------------------------------ shard-local operators


def map(fn: Callable[[T], U]) -> LocalOp[T, U]:  # noqa: A001 - the operator's name
    """``fn(x)`` for every item, in order, exactly once each.

    >>> import rxrl
    >>> from rxrl import ops
    >>> list(rxrl.run(rxrl.from_iterable([1, 2, 3]) | ops.map(lambda x: x * 10)))
    [10, 20, 30]
    """
    site = call_site()
    _callable(f"map({g.fn_name(fn)})", site, fn=fn)
    return LocalOp(lambda src: g.Map(input=src, fn=fn, site=site), "map")


def filter(pred: Callable[[T], bool]) -> LocalOp[T, T]:  # noqa: A001 - the operator's name
    """The items for which ``pred(x)`` is true, in order.

    >>> import rxrl
    >>> from rxrl import ops
    >>> list(rxrl.run(rxrl.from_iterable(range(6)) | ops.filter(lambda x: x % 2 == 0)))
    [0, 2, 4]
    """
    site = call_site()
    _callable(f"filter({g.fn_name(pred)})", site, pred=pred)
    return LocalOp(lambda src: g.Filter(input=src, pred=pred, site=site), "filter")


def flat_map(fn: Callable[[T], Iterable[U]]) -> LocalOp[T, U]:
    """The items of ``fn(x)`` for every item, in order.

    >>> import rxrl
    >>> from rxrl import ops
    >>> list(rxrl.run(rxrl.from_iterable([1, 2, 3]) | ops.flat_map(lambda x: [x] * x)))
    [1, 2, 2, 3, 3, 3]
    """
    site = call_site()
    _callable(f"flat_map({g.fn_name(fn)})", site, fn=fn)
    return LocalOp(lambda src: g.FlatMap(input=src, fn=fn, site=site), "flat_map")


@overload
def window(count: int, /) -> LocalOp[T, list[T]]: ...


@overload
def window(*, min_size: int, combine: Callable[[list[S]], U]) -> LocalOp[S, U]: ...


@overload
def window(*, min_size: int, size: Callable[[T], int], combine: Callable[[list[T]], U]) -> LocalOp[T, U]: ...


def window(
    count: int | None = None,
    /,
    *,
    min_size: int | None = None,
    size: Callable[[Any], int] | None = None,
    combine: Callable[[list[Any]], Any] | None = None,
) -> LocalOp[Any, Any]:
    """Batches consecutive items. Each item lands in exactly one window, in order.

    ``window(n)`` emits lists of ``n`` items. ``window(min_size=m, combine=f, size=len)``
    buffers items until their summed ``size`` reaches ``m`` and emits ``f(buffer)``: RL's
    "concatenate sample batches up to at least m steps". At end of stream a short final
    window (the leftover items, if any) is emitted.

    >>> import rxrl
    >>> from rxrl import ops
    >>> list(rxrl.run(rxrl.from_iterable(range(5)) | ops.window(2)))
    [[0, 1], [2, 3], [4]]
    >>> words = rxrl.from_iterable(["ab", "c", "def", "g"])
    >>> list(rxrl.run(words | ops.window(min_size=3, combine="".join)))
    ['abc', 'def', 'g']
    """
    site = call_site()
    if count is not None:
        if min_size is not None or size is not None or combine is not None:
            raise PlanError(f"window({count!r})", site,
                            "give either a count or min_size=/combine=, not both")
        n = _positive_int(f"window({count!r})", site, "count", count)
        return LocalOp(lambda src: g.Window(input=src, count=n, site=site), "window")
    label = f"window(min_size={min_size!r})"
    if min_size is None or combine is None:
        raise PlanError(label, site, "a size window needs min_size= and combine=",
                        "or use window(n) for windows of n items")
    m = _positive_int(label, site, "min_size", min_size)
    measure: Callable[[Any], int] = builtins.len if size is None else size
    _callable(label, site, size=measure, combine=combine)
    return LocalOp(
        lambda src: g.SizeWindow(input=src, min_size=m, size=measure, combine=combine, site=site),
        "window",
    )


def take(count: int) -> LocalOp[T, T]:
    """The first ``count`` items; item ``count + 1`` is never pulled from upstream.

    >>> import itertools, rxrl
    >>> from rxrl import ops
    >>> list(rxrl.run(rxrl.from_iterable(itertools.count()) | ops.take(3)))
    [0, 1, 2]
    """
    site = call_site()
    n = _positive_int(f"take({count!r})", site, "count", count, minimum=0)
    return LocalOp(lambda src: g.Take(input=src, count=n, site=site), "take")


def scan(fn: Callable[[U, T], U], init: U) -> LocalOp[T, U]:
    """Each accumulated value ``acc = fn(acc, x)``; ``init`` itself is not emitted.

    ``init`` is shared by every run of the plan: use an immutable value.

    >>> import rxrl
    >>> from rxrl import ops
    >>> list(rxrl.run(rxrl.from_iterable([1, 2, 3]) | ops.scan(lambda acc, x: acc + x, 0)))
    [1, 3, 6]
    """
    site = call_site()
    _callable(f"scan({g.fn_name(fn)})", site, fn=fn)
    return LocalOp(lambda src: g.Scan(input=src, fn=fn, init=init, site=site), "scan")


def tap(fn: Callable[[T], object]) -> LocalOp[T, T]:
    """Calls ``fn(x)`` for its side effect (logging, metrics); the item passes on.

    >>> import rxrl
    >>> from rxrl import ops
    >>> seen: list[int] = []
    >>> list(rxrl.run(rxrl.from_iterable([1, 2]) | ops.tap(seen.append))), seen
    ([1, 2], [1, 2])
    """
    site = call_site()
    _callable(f"tap({g.fn_name(fn)})", site, fn=fn)
    return LocalOp(lambda src: g.Tap(input=src, fn=fn, site=site), "tap")


# ----------------------------------------------------------------------------- collectors


def barrier() -> Collect[T, list[T]]:
    """Rounds of one item from every live shard, in shard order (synchronous sampling).

    Round r+1 is not requested from any shard until round r has been pulled downstream, so an
    effect placed after the barrier (e.g. a weight broadcast) precedes the next round. An
    exhausted shard drops out; the stream ends when every shard is exhausted.

    >>> import rxrl
    >>> from rxrl import ops
    >>> list(rxrl.run(rxrl.from_iterables([[1, 2, 3], [10]]) | ops.barrier()))
    [[1, 10], [2], [3]]
    """
    site = call_site()
    return Collect(lambda src: g.Barrier(input=src, site=site), "barrier")


@overload
def gather(max_in_flight: int = 1, *, tagged: Literal[False] = False) -> Collect[T, T]: ...


@overload
def gather(max_in_flight: int = 1, *, tagged: Literal[True]) -> Collect[T, Tagged[T]]: ...


def gather(max_in_flight: int = 1, *, tagged: bool = False) -> Collect[T, Any]:
    """Items of every shard in completion order (asynchronous sampling).

    Keeps ``max_in_flight`` requests outstanding per shard (the staleness bound); a shard's
    next request is submitted as soon as one of its items is taken. Each shard's order is
    preserved; which shard goes next is a schedule choice. ``tagged=True`` wraps items in
    ``Tagged`` so that ``ops.call`` can route work back to the shard that produced them.

    >>> import rxrl
    >>> from rxrl import ops
    >>> shards = rxrl.from_iterables([["a1", "a2"], ["b1"]])
    >>> list(rxrl.run(shards | ops.gather(), schedule=rxrl.Schedule.round_robin()))
    ['a1', 'b1', 'a2']
    """
    site = call_site()
    k = _positive_int(f"gather(max_in_flight={max_in_flight!r})", site, "max_in_flight",
                      max_in_flight)
    return Collect(
        lambda src: g.Gather(input=src, max_in_flight=k, tagged=tagged, site=site), "gather"
    )


# --------------------------------------------------------------------------- actor effects


def broadcast(group: ActorGroup[A], fn: Callable[[A, T], object]) -> Op[T, T]:
    """``fn(actor, x)`` on every actor of ``group`` (index order); ``x`` passes on.

    The effect reaches each actor before any later request to that actor (e.g. new weights
    before the next ``sample``). The reference interpreter applies it before ``x`` passes
    on; the rx and Ray backends queue it on the actors and move on, so an exception in
    ``fn`` is raised at a later pull (at most ``max_pending_broadcasts`` items later).

    >>> import rxrl
    >>> from rxrl import ops
    >>> class Box:
    ...     def __init__(self) -> None:
    ...         self.value = 0
    >>> boxes = rxrl.actors(Box, 2)
    >>> plan = rxrl.from_iterable([7]) | ops.broadcast(boxes, lambda b, x: setattr(b, "value", x))
    >>> list(rxrl.run(plan | ops.call(boxes, lambda b, x: b.value)))
    [7]
    """
    site = call_site()
    _check_group("broadcast", site, group)
    _callable(f"broadcast({group!r})", site, fn=fn)
    return Op(lambda src: g.Broadcast(input=src, group=group, fn=fn, site=site), "broadcast")


def call(
    group: ActorGroup[A], fn: Callable[[A, T], U], *, route: Callable[[T], int] | None = None,
    max_in_flight: int = 1, block: bool = True,
) -> Op[T, U]:
    """``fn(actor, x)`` on one actor of ``group``; the result flows on.

    Which actor: ``route(x)`` if given; else, for a ``Tagged`` item gathered from this same
    group, the actor that produced it; else actor 0 of a one-actor group (a learner); else
    round robin over the group in stream order (e.g. replay shards).

    ``max_in_flight=k`` pipelines the calls: a pull reads up to k items ahead of what has
    been emitted and submits their calls, then emits the oldest result; results flow on in
    input order, and each actor still receives its calls in stream order. With ``k = 2`` a
    learner trains on batch i + 1 while batch i's result (new weights) goes downstream.

    ``block=False`` (for a side branch under an asynchronous ``union``): once its calls are
    submitted, a pull whose oldest call is still running answers ``NOT_READY`` rather than
    waiting for it, so the union serves its other inputs meanwhile and comes back when the
    result has landed. Whether the result was there is a recorded choice of the node (the
    reference interpreter makes it by its schedule), so a run's trace replays exactly.

    >>> import rxrl
    >>> from rxrl import ops
    >>> class Adder:
    ...     def __init__(self, k: int) -> None:
    ...         self.k = k
    ...     def add(self, x: int) -> int:
    ...         return x + self.k
    >>> adder = rxrl.actors(Adder, 1, k=100)
    >>> list(rxrl.run(rxrl.from_iterable([1, 2]) | ops.call(adder, Adder.add)))
    [101, 102]
    >>> list(rxrl.run(rxrl.from_iterable([1, 2, 3]) | ops.call(adder, Adder.add, max_in_flight=2)))
    [101, 102, 103]
    """
    site = call_site()
    _check_group("call", site, group)
    _callable(f"call({group!r})", site, fn=fn)
    if route is not None:
        _callable(f"call({group!r})", site, route=route)
    k = _positive_int(f"call({group!r}, max_in_flight={max_in_flight!r})", site, "max_in_flight",
                      max_in_flight)
    if not isinstance(block, bool):
        raise PlanError(f"call({group!r})", site, f"block must be True or False, got {block!r}")
    return Op(lambda src: g.Call(input=src, group=group, fn=fn, route=route, max_in_flight=k,
                                 block=block, site=site), "call")


def call_all(group: ActorGroup[A], fn: Callable[[A, T], U], *, max_in_flight: int = 1) -> Op[T, list[U]]:
    """``fn(actor, x)`` on every actor of ``group`` at once; emits their results as a list,
    in index order, once all of them returned.

    The calls of one item run concurrently on every backend (the reference interpreter runs
    them on a thread per actor), so the actors may meet in a collective inside ``fn`` — a
    learner group's gradient allreduce (`rxrl.rl.learners.collective`). Each actor receives
    its calls in stream order, like ``call``'s; the first failure in index order is raised.
    ``max_in_flight=k`` pipelines as ``call``'s does: up to k items' calls are out at once.

    >>> import rxrl
    >>> from rxrl import ops
    >>> class Adder:
    ...     def __init__(self, k: int) -> None:
    ...         self.k = k
    ...     def add(self, x: int) -> int:
    ...         return x + self.k
    >>> adders = rxrl.indexed_actors(Adder, 3)
    >>> list(rxrl.run(rxrl.from_iterable([10, 20]) | ops.call_all(adders, Adder.add)))
    [[10, 11, 12], [20, 21, 22]]
    """
    site = call_site()
    _check_group("call_all", site, group)
    _callable(f"call_all({group!r})", site, fn=fn)
    k = _positive_int(f"call_all({group!r}, max_in_flight={max_in_flight!r})", site, "max_in_flight",
                      max_in_flight)
    return Op(lambda src: g.CallAll(input=src, group=group, fn=fn, max_in_flight=k, site=site), "call_all")


def _check_group(op: str, site: str, group: object) -> None:
    if not isinstance(group, ActorGroup):
        raise PlanError(f"{op}()", site,
                        f"expects an actor group from rxrl.actors(...), got {type(group).__name__}")


# ------------------------------------------------------------------------------- fan-out


# ----------------------------------------------------------------------- sub-plans on actors


def aggregate(shards: Shards[T], body: Callable[[Shards[T]], Plan[U]], /, *,
              num_aggregators: int | None = None,
              placements: Sequence[Placement | str] | None = None) -> Shards[U]:
    """One shard per aggregator, shard ``i`` being ``body`` run over the ``i``-th part of
    ``shards`` (tree aggregation).

    The parts are either ``num_aggregators`` contiguous runs of the shards, of sizes as equal
    as they can be, or, with ``placements`` (node labels: ``["zone=a", "zone=b"]``), one part
    per placement: the shards `Shards.subset_on` that placement, every shard in exactly one
    part (the actors placed per node with `ActorGroup.placed`). ``body`` builds, once per
    part, the sub-plan that turns that part into one stream (typically ``sub |
    ops.gather(...) | ops.window(...) | ops.map(concat)``). The Ray backend runs each
    sub-plan on an aggregator actor: with ``placements`` on a node with that placement's
    labels, else on the node of its part's first actor; so the driver coordinates
    aggregators, not every actor. The reference runs them in-process.

    A sub-plan may ``call`` the actors of its own part (items it gathered tagged are routed
    back to their actor); it may not call other groups, nor broadcast (each aggregator runs
    on its own, so their calls to a shared actor would land in an order nobody chose). The
    driver may still call and broadcast to the aggregated actors: on Ray its requests go
    through the actor's aggregator, behind what that aggregator asked before.

    >>> import rxrl
    >>> from rxrl import ops
    >>> shards = rxrl.from_iterables([[1, 2], [10, 20], [100], [1000]])
    >>> sums = ops.aggregate(shards, lambda part: part | ops.barrier() | ops.map(sum),
    ...                      num_aggregators=2)
    >>> list(rxrl.run(sums | ops.barrier()))
    [[11, 1100], [22]]
    """
    site = call_site()
    if placements is None:
        name = f"aggregate(num_aggregators={num_aggregators!r})"
    else:
        shown = [str(p) for p in placements] if isinstance(placements, Sequence) else placements
        name = f"aggregate(placements={shown!r})"
    if not isinstance(shards, Shards):
        raise PlanError(name, site, f"aggregates Shards, got {type(shards).__name__}",
                        "build the shards with rxrl.from_actors or rxrl.from_iterables")
    _callable(name, site, body=body)
    n = shards.num_shards
    group = _source_group(shards.node, name, site)
    if (num_aggregators is None) == (placements is None):
        raise PlanError(name, site, "give exactly one of num_aggregators and placements")
    where: tuple[Placement, ...] | None = None
    if placements is None:
        k = _positive_int(name, site, "num_aggregators", num_aggregators)
        if k > n:
            raise PlanError(name, site, f"more aggregators ({k}) than shards ({n}): one would aggregate "
                            "nothing", f"use at most {n} aggregators")
        parts = tuple(tuple(range(i * n // k, (i + 1) * n // k)) for i in range(k))
    else:
        where, parts = _parts_by_placement(shards, placements, name, site)
    plans: list[g.Node] = []
    for part in parts:
        sub = shards.subset(part)
        plan: object = body(sub)
        if not isinstance(plan, Plan):
            raise PlanError(name, site,
                            f"body must return a Plan (a driver stream), got {type(plan).__name__}",
                            "end the sub-plan with ops.gather() or ops.barrier()")
        _check_sub_plan(plan.node, sub.node, group, name, site)
        plans.append(plan.node)
    return Shards(g.Aggregate(source=shards.node, body=body, plans=tuple(plans), parts=parts,
                              placements=where, site=site))


def _parts_by_placement(shards: Shards[Any], placements: object, name: str, site: str
                        ) -> tuple[tuple[Placement, ...], tuple[tuple[int, ...], ...]]:
    """The placements and, for each, the indices of the shards placed there (every shard in
    exactly one part), or a PlanError saying which shard is in none or in two."""
    if isinstance(placements, str) or not isinstance(placements, Sequence) or not placements:
        raise PlanError(name, site, "placements must be a non-empty sequence of node labels, got "
                        f"{placements!r}", "e.g. placements=['zone=a', 'zone=b']")
    try:
        where = tuple(as_placement(p) for p in placements)
    except ValueError as e:
        raise PlanError(name, site, str(e)) from None
    found = g.actor_indices(shards.node)
    if found is None:
        raise PlanError(name, site, "aggregates by placement the shards of one actor group, got "
                        f"{shards.node.label}", "use num_aggregators")
    group, actors = found
    parts: list[tuple[int, ...]] = []
    for p in where:
        if p.strategy != "any" or not p.labels:
            raise PlanError(name, site, f"a placement of an aggregator is node labels (KEY=VALUE), got "
                            f"{str(p)!r}")
        parts.append(g.indices_on(group, actors, p))
        if not parts[-1]:
            raise PlanError(name, site, f"no shard's actor is placed on {p}: its aggregator would "
                            "aggregate nothing", "drop that placement, or place actors there")
    for j, i in enumerate(actors):
        homes = [str(p) for p, part in builtins.zip(where, parts, strict=True) if j in part]
        if len(homes) != 1:
            raise PlanError(name, site, f"shard {j} ({group.name}[{i}], placed "
                            f"{str(group.placement_of(i)) or 'anywhere'}) is on "
                            f"{'none' if not homes else 'more than one'} of the placements"
                            + (f" ({', '.join(homes)})" if homes else ""),
                            "every shard must be placed on exactly one of them: ActorGroup.placed "
                            "with one placement per actor")
    return where, tuple(parts)


def _source_group(node: g.Node, name: str, site: str) -> ActorGroup[Any] | None:
    while isinstance(node, g.Unary) and node.local:
        node = node.input
    if isinstance(node, g.Aggregate):
        raise PlanError(name, site, "its shards are aggregated already",
                        "aggregate the original shards into fewer parts instead")
    return node.group if isinstance(node, g.FromActors) else None


def _check_sub_plan(root: g.Node, start: g.Node, group: ActorGroup[Any] | None, name: str,
                    site: str) -> None:
    """Refuse in a sub-plan what its aggregator cannot run on its own (see ``aggregate``)."""
    seen: set[int] = set()
    stack, reached = [root], False
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node is start:
            reached = True
            continue
        if isinstance(node, g.Aggregate):
            raise PlanError(name, site, f"its sub-plan aggregates again ({node.describe()})",
                            "aggregate once, into more parts")
        if isinstance(node, g.Broadcast | g.CallAll):
            raise PlanError(name, site, f"its sub-plan has {node.describe()}, which reaches every "
                            "actor of the group, also those of other aggregators",
                            f"move the {node.op} after the aggregate, onto the driver")
        if isinstance(node, g.Call) and node.group is not group:
            raise PlanError(name, site, f"its sub-plan calls {node.group!r} ({node.describe()}), "
                            "which is not the aggregated actors' group: aggregators would call "
                            "it concurrently, in an order nobody chose",
                            "move the call after the aggregate, onto the driver")
        stack.extend(node.inputs)
    if not reached:
        raise PlanError(name, site, "body did not read the shards it was given",
                        "build the sub-plan from body's argument")


@overload
def split(plan: Plan[T], n: Literal[2], /, *, max_lag: int = 16) -> tuple[Plan[T], Plan[T]]: ...


@overload
def split(plan: Plan[T], n: Literal[3], /, *, max_lag: int = 16
          ) -> tuple[Plan[T], Plan[T], Plan[T]]: ...


@overload
def split(plan: Plan[T], n: Literal[4], /, *, max_lag: int = 16
          ) -> tuple[Plan[T], Plan[T], Plan[T], Plan[T]]: ...


@overload
def split(plan: Plan[T], n: int, /, *, max_lag: int = 16) -> tuple[Plan[T], ...]: ...


def split(plan: Plan[T], n: int, /, *, max_lag: int = 16) -> tuple[Plan[T], ...]:
    """``n`` branches that each yield every item of ``plan``, which runs once (explicit fan-out).

    Each item is pulled from ``plan`` once and buffered for the branches that have not taken
    it yet. No branch runs more than ``max_lag`` items ahead of the slowest one: a branch
    pulled while that far ahead is *not ready* (a union skips it until the slow branch
    catches up), so memory stays bounded at ``max_lag`` items per branch. The source's end
    ends every branch after its buffered items; a source error is raised by the branch whose
    pull met it, and by each other branch when it reaches that point. Every branch must be
    read by the plan, exactly once. See docs/semantics.md, "Fan-out".

    >>> import rxrl
    >>> from rxrl import ops
    >>> evens, squares = ops.split(rxrl.from_iterable(range(6)), 2)
    >>> plan = ops.zip(evens | ops.filter(lambda x: x % 2 == 0), squares | ops.map(lambda x: x * x))
    >>> list(rxrl.run(plan))
    [(0, 0), (2, 1), (4, 4)]
    """
    site = call_site()
    label = f"split({type(plan).__name__}, {n!r})"
    node = as_node(plan, where=label, site=site)
    count = _positive_int(label, site, "n", n, minimum=2)
    lag = _positive_int(label, site, "max_lag", max_lag)
    shared = g.Split(input=node, n=count, max_lag=lag, site=site)
    return tuple(Plan(g.Branch(split=shared, index=i, site=site)) for i in range(count))


# ---------------------------------------------------------------------------- combinators


@overload
def zip(a: Plan[T], b: Plan[U], /) -> Plan[tuple[T, U]]: ...  # noqa: A001


@overload
def zip(a: Plan[T], b: Plan[U], c: Plan[V], /) -> Plan[tuple[T, U, V]]: ...  # noqa: A001


@overload
def zip(a: Plan[T], b: Plan[U], c: Plan[V], d: Plan[W], /) -> Plan[tuple[T, U, V, W]]: ...  # noqa: A001


@overload
def zip(*plans: Plan[Any]) -> Plan[tuple[Any, ...]]: ...  # noqa: A001


def zip(*plans: Plan[Any]) -> Plan[tuple[Any, ...]]:  # noqa: A001 - the operator's name
    """Tuples of the k-th items of every input, pulled in lockstep; ends with the shortest.

    >>> import rxrl
    >>> from rxrl import ops
    >>> a, b = rxrl.from_iterable([1, 2, 3]), rxrl.from_iterable("xy")
    >>> list(rxrl.run(ops.zip(a, b)))
    [(1, 'x'), (2, 'y')]
    """
    site = call_site()
    nodes = _inputs("zip", site, plans)
    return Plan(g.Zip(streams=nodes, site=site))


def union(
    *plans: Plan[T],
    mode: Literal["round_robin", "async"] = "round_robin",
    weights: Sequence[float] | None = None,
) -> Plan[T]:
    """Merges its inputs; each input's order is kept and every item appears exactly once.

    ``round_robin`` takes ``weights[i]`` items from input i in turn (exhausted inputs are
    skipped); a real weight such as 2.5 takes turns of 2 and 3 items so that the counts keep
    the exact ratio. ``async`` takes items as they become ready (a schedule choice). An input
    that is *not ready* (see docs/semantics.md, "Readiness") is skipped and returned to; in
    round robin its turn continues when the union comes back to it, and only items taken
    count towards the weights. The union ends when all inputs are exhausted.

    >>> import rxrl
    >>> from rxrl import ops
    >>> a, b = rxrl.from_iterable([1, 2, 3, 4]), rxrl.from_iterable(["x", "y"])
    >>> list(rxrl.run(ops.union(a, b, weights=[2, 1])))
    [1, 2, 'x', 3, 4, 'y']
    """
    site = call_site()
    nodes, mode, w = _union_args("union", site, plans, mode, weights)
    return Plan(g.Union(streams=nodes, mode=mode, weights=w, site=site))


def concurrently(
    *plans: Plan[T],
    mode: Literal["round_robin", "async"] = "round_robin",
    emit: Sequence[int] | None = None,
    weights: Sequence[float] | None = None,
) -> Plan[T]:
    """Runs every input like ``union`` but emits only the items of the inputs listed in ``emit``.

    The other inputs still run (side-effect flows such as storing to a replay buffer). For
    inputs of different item types, ``alongside(main, *side)`` keeps ``main``'s type.

    >>> import rxrl
    >>> from rxrl import ops
    >>> stored: list[int] = []
    >>> store = rxrl.from_iterable([1, 2]) | ops.tap(stored.append)
    >>> train = rxrl.from_iterable(["t1", "t2"])
    >>> list(rxrl.run(ops.concurrently(store, train, emit=[1]))), stored
    (['t1', 't2'], [1, 2])
    """
    site = call_site()
    nodes, mode, w = _union_args("concurrently", site, plans, mode, weights)
    chosen = frozenset(range(len(nodes))) if emit is None else frozenset(emit)
    bad = [i for i in chosen if isinstance(i, bool) or not isinstance(i, int)
           or not 0 <= i < len(nodes)]
    if bad:
        raise PlanError("concurrently()", site,
                        f"emit names inputs {sorted(bad, key=repr)} but there are "
                        f"{len(nodes)} inputs (indices 0..{len(nodes) - 1})")
    return Plan(g.Concurrently(streams=nodes, mode=mode, weights=w, emit=chosen, site=site))


def alongside(
    main: Plan[T],
    *side: Plan[Any],
    mode: Literal["round_robin", "async"] = "round_robin",
    weights: Sequence[float] | None = None,
) -> Plan[T]:
    """``concurrently(main, *side, emit=[0])``, typed as ``main``: side flows run, main is emitted.

    >>> import rxrl
    >>> from rxrl import ops
    >>> log: list[str] = []
    >>> side = rxrl.from_iterable(["s"]) | ops.tap(log.append)
    >>> list(rxrl.run(ops.alongside(rxrl.from_iterable([1, 2]), side))), log
    ([1, 2], ['s'])
    """
    site = call_site()
    nodes, mode, w = _union_args("alongside", site, (main, *side), mode, weights)
    return Plan(g.Concurrently(streams=nodes, mode=mode, weights=w, emit=frozenset({0}),
                               site=site))


def _inputs(op: str, site: str, plans: Sequence[Plan[Any]]) -> tuple[g.Node, ...]:
    if not plans:
        raise PlanError(f"{op}()", site, "needs at least one input plan")
    return tuple(as_node(p, where=f"{op}()", site=site) for p in plans)


def _union_args(
    op: str, site: str, plans: Sequence[Plan[Any]], mode: str, weights: Sequence[float] | None
) -> tuple[tuple[g.Node, ...], g.UnionMode, tuple[float, ...]]:
    nodes = _inputs(op, site, plans)
    if mode not in ("round_robin", "async"):
        raise PlanError(f"{op}()", site, f"mode must be 'round_robin' or 'async', got {mode!r}")
    checked: g.UnionMode = "async" if mode == "async" else "round_robin"
    if weights is None:
        return nodes, checked, (1,) * len(nodes)
    if mode == "async":
        raise PlanError(f"{op}(mode='async')", site,
                        "weights only apply to mode='round_robin' (async takes items as ready)")
    w = tuple(weights)
    if len(w) != len(nodes):
        raise PlanError(f"{op}()", site,
                        f"got {len(w)} weights for {len(nodes)} inputs", "give one weight per input")
    for i, wi in enumerate(w):
        if (isinstance(wi, bool) or not isinstance(wi, int | float) or not math.isfinite(wi)
                or wi <= 0):
            raise PlanError(f"{op}()", site, f"weights[{i}] must be a positive finite number, "
                            f"got {wi!r}")
    return nodes, checked, w

