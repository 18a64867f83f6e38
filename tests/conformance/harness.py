"""Shared machinery of the conformance suite: backends, test actors, a plan generator."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

from hypothesis import strategies as st

import rxrl
from rxrl import ops

T = TypeVar("T")
A = TypeVar("A")

#: every backend module that ships with rxrl; a broken one fails the suite rather than vanishing
BACKENDS = [
    name for name in ("reference", "rx", "ray")
    if importlib.util.find_spec(f"rxrl.backends.{name}") is not None
]

#: hypothesis examples per backend: Ray runs cost tens of milliseconds each on 2 cores
EXAMPLES = {"reference": 200, "rx": 60, "ray": 15}


def run_on(plan: rxrl.Plan[T], backend: str, seed: int = 0) -> rxrl.Run[T]:
    """Run ``plan`` on ``backend``; the reference backend gets a seeded random schedule."""
    if backend == "reference":
        return rxrl.run(plan, schedule=rxrl.Schedule.random(seed))
    return rxrl.run(plan, backend)


def output_and_replay(plan: rxrl.Plan[T], backend: str, seed: int = 0) -> tuple[list[T], list[T]]:
    """The output of a run on ``backend`` and of the reference replaying that run's trace."""
    with run_on(plan, backend, seed) as first:
        out = list(first)
        trace = first.trace
    return out, list(rxrl.run(plan, "reference", schedule=trace))


def outcome(run: rxrl.Run[T]) -> tuple[list[T], str | None]:
    """Every item of ``run`` and the type of the error that ended it, if one did."""
    out: list[T] = []
    with run:
        try:
            out.extend(run)
        except rxrl.RxrlError as e:  # a generated plan may deadlock (a split's max_lag)
            return out, type(e).__name__
    return out, None


def outcome_and_replay(plan: rxrl.Plan[T], backend: str, seed: int = 0
                       ) -> tuple[tuple[list[T], str | None], tuple[list[T], str | None]]:
    """``outcome`` of a run on ``backend`` and of the reference replaying its trace."""
    first = run_on(plan, backend, seed)
    result = outcome(first)
    return result, outcome(rxrl.run(plan, "reference", schedule=first.trace))


def is_merge(out: list[Any], inputs: list[list[Any]]) -> bool:
    """True if ``out`` interleaves ``inputs``, each exactly once and in its own order."""
    positions = [0] * len(inputs)
    for x in out:
        for i, xs in enumerate(inputs):
            if positions[i] < len(xs) and xs[positions[i]] == x:
                positions[i] += 1
                break
        else:
            return False
    return positions == [len(xs) for xs in inputs]


class CountingIterable:
    """An endless (or bounded) iterable that counts how many items were pulled from it."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.pulled = 0

    def __iter__(self) -> Iterator[int]:
        while self.limit is None or self.pulled < self.limit:
            self.pulled += 1
            yield self.pulled - 1


# ------------------------------------------------------------------------------- test actors


class Counter:
    """A stateful actor: ``next`` returns start, start+step, ...; ``bump`` shifts the sequence."""

    def __init__(self, start: int = 0, step: int = 1) -> None:
        self.value = start
        self.step = step

    def next(self) -> int:
        """The current value, then advance."""
        v = self.value
        self.value += self.step
        return v

    def bump(self, by: int) -> None:
        """Shift all later values by ``by`` (a stand-in for a weight update)."""
        self.value += by % 7


class Journal:
    """An actor that logs every call it receives; samples carry the log so tests can read it."""

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.samples = 0
        self.sets_seen = 0
        self.weights = 0

    def sample(self) -> tuple[int, int, int]:
        """(actor index, sample number, broadcasts seen so far)."""
        self.samples += 1
        return (self.index, self.samples - 1, self.sets_seen)

    def set_weights(self, w: int) -> None:
        """Record a broadcast."""
        self.sets_seen += 1
        self.weights = w


class Gate:
    """A replay-like actor: ``next`` answers NOT_READY until ``feed`` has given it credit.

    Its readiness changes only through the calls it is sent, as readiness must.
    """

    def __init__(self, start: int = 0) -> None:
        self.credit = 0
        self.value = start
        self.log: list[str] = []

    def feed(self, x: int) -> int:
        """Give one item of credit; returns ``x``."""
        self.credit += 1
        self.log.append(f"feed {x}")
        return x

    def next(self) -> int | rxrl.NotReady:
        """The next value if there is credit, else NOT_READY."""
        if self.credit == 0:
            self.log.append("not ready")
            return rxrl.NOT_READY
        self.credit -= 1
        self.value += 1
        self.log.append(f"next {self.value}")
        return self.value


class Adder:
    """A stateful 'learner': adds its running total to each item."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, x: int) -> int:
        """Accumulate ``x`` and return the running total."""
        self.total += x
        return self.total


# ---------------------------------------------------------------------------- plan generator

ints = st.integers(-20, 20)

#: named pure functions, so that failing examples print readably
FUNCTIONS: list[Callable[[int], int]] = [abs, lambda x: x + 1, lambda x: x * 3, lambda x: -x // 2]
PREDICATES: list[Callable[[int], bool]] = [lambda x: x % 2 == 0, lambda x: x > 0, lambda x: True]


def _size(x: int) -> int:
    return abs(x) % 4 + 1


def _tagged_value(t: rxrl.Tagged[int]) -> int:
    return t.value * 10 + t.shard


@st.composite
def local_ops(draw: st.DrawFn) -> list[rxrl.LocalOp[int, int]]:
    """A short chain of shard-local int -> int operators."""
    chain: list[rxrl.LocalOp[int, int]] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(
            ["map", "filter", "flat_map", "window", "size_window", "take", "scan", "tap"]))
        if kind == "map":
            chain.append(ops.map(draw(st.sampled_from(FUNCTIONS))))
        elif kind == "filter":
            chain.append(ops.filter(draw(st.sampled_from(PREDICATES))))
        elif kind == "flat_map":
            chain.append(ops.flat_map(lambda x: [x, x + 100]))
        elif kind == "window":
            n = draw(st.integers(1, 3))
            chain.append(_then(ops.window(n), ops.map(sum)))
        elif kind == "size_window":
            m = draw(st.integers(1, 6))
            chain.append(ops.window(min_size=m, size=_size, combine=sum))
        elif kind == "take":
            chain.append(ops.take(draw(st.integers(0, 6))))
        elif kind == "scan":
            chain.append(ops.scan(lambda acc, x: acc + x, 0))
        else:
            chain.append(ops.tap(lambda x: None))
    return chain


def _then(first: rxrl.LocalOp[int, list[int]], second: rxrl.LocalOp[list[int], int]
          ) -> rxrl.LocalOp[int, int]:
    return rxrl.LocalOp(lambda node: second.attach(first.attach(node)), "window+sum")


def _apply(stream: Any, chain: list[rxrl.LocalOp[int, int]]) -> Any:
    for op in chain:
        stream = stream | op
    return stream


def placed(draw: st.DrawFn, group: rxrl.ActorGroup[A]) -> rxrl.ActorGroup[A]:
    """``group``, or ``group.on_driver()``: hosted in a distributed backend's driver process
    (the in-process backends ignore it), which must not change what a plan produces."""
    return group.on_driver() if draw(st.booleans()) else group


def _bump_tagged(counter: Counter, t: rxrl.Tagged[int]) -> int:
    """A call a sub-plan sends back to the actor an item came from: it changes the actor."""
    counter.bump(t.value)
    return t.value * 10 + t.shard


@st.composite
def sub_plans(draw: st.DrawFn, group: rxrl.ActorGroup[Counter] | None
              ) -> Callable[[rxrl.Shards[int]], rxrl.Plan[int]]:
    """The body of an ``ops.aggregate``: a local chain, a collector, maybe a call back to the
    actor each item came from, and a local chain on the sub-plan's output."""
    inner, outer = draw(local_ops()), draw(local_ops())
    collector = draw(st.sampled_from(["barrier", "gather"] + (["call"] if group is not None else [])))
    k = draw(st.integers(1, 2))

    def body(part: rxrl.Shards[int]) -> rxrl.Plan[int]:
        part = _apply(part, inner)
        if collector == "barrier":
            plan: rxrl.Plan[int] = part | ops.barrier() | ops.map(sum)
        elif collector == "gather":
            plan = part | ops.gather(k)
        else:
            assert group is not None
            plan = part | ops.gather(k, tagged=True) | ops.call(group, _bump_tagged)
        out: rxrl.Plan[int] = _apply(plan, outer)
        return out

    return body


@st.composite
def shard_plans(draw: st.DrawFn) -> rxrl.Plan[int]:
    """A sharded source (iterables or stateful actors), maybe a subset of its shards, a local
    chain, maybe an aggregate (sub-plans over parts of the shards), and a collector."""
    if draw(st.booleans()):
        shards: rxrl.Shards[int] = rxrl.from_iterables(
            draw(st.lists(st.lists(ints, max_size=6), min_size=1, max_size=4)))
        group = None
    else:
        group = placed(draw, rxrl.actors(Counter, draw(st.integers(1, 4)), start=draw(ints)))
        shards = rxrl.from_actors(group, Counter.next) | ops.take(draw(st.integers(0, 5)))
    if draw(st.integers(0, 3)) == 0:
        n = shards.num_shards
        shards = shards.subset(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))
    shards = _apply(shards, draw(local_ops()))
    if (group is None or not group.driver_hosted) and draw(st.integers(0, 4)) == 0:
        body = draw(sub_plans(group))
        shards = ops.aggregate(shards, body, num_aggregators=draw(st.integers(1, shards.num_shards)))
        shards = _apply(shards, draw(local_ops()))
    collector = draw(st.sampled_from(["barrier", "gather", "tagged"]))
    if collector == "barrier":
        plan: rxrl.Plan[int] = shards | ops.barrier() | ops.map(sum)
    elif collector == "gather":
        plan = shards | ops.gather(draw(st.integers(1, 3)))
    else:
        plan = shards | ops.gather(draw(st.integers(1, 3)), tagged=True) | ops.map(_tagged_value)
    if group is not None and draw(st.booleans()):
        plan = plan | ops.broadcast(group, Counter.bump)
    return plan


@st.composite
def gated_plans(draw: st.DrawFn) -> rxrl.Plan[int]:
    """A not-ready source: a Gate answers NOT_READY until a feeding flow, run beside it in a
    concurrently (either mode), has given it credit; it yields as many items as it is fed."""
    n = draw(st.integers(0, 5))
    gate = placed(draw, rxrl.actors(Gate, 1, start=draw(ints)))
    gated = rxrl.from_actors(gate, Gate.next) | ops.take(n)
    gated_plan = (gated | ops.gather(draw(st.integers(1, 2))) if draw(st.booleans())
                  else gated | ops.barrier() | ops.map(sum))
    feeder = rxrl.from_iterable(range(n)) | ops.call(gate, Gate.feed)
    mode: Literal["round_robin", "async"] = draw(st.sampled_from(["round_robin", "async"]))
    weights = [draw(st.sampled_from([1, 2, 0.5, 2.5])) for _ in range(2)] if mode == "round_robin" else None
    return ops.concurrently(gated_plan, feeder, mode=mode, weights=weights, emit=[0])


@st.composite
def plans(draw: st.DrawFn, depth: int = 2) -> rxrl.Plan[int]:
    """Random plans over ints built from every operator (the conformance suite's generator)."""
    kinds = ["iterable", "shards", "gated"] + (
        ["zip", "union", "concurrently", "split"] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "iterable":
        plan: rxrl.Plan[int] = rxrl.from_iterable(draw(st.lists(ints, max_size=8)))
    elif kind == "shards":
        plan = draw(shard_plans())
    elif kind == "gated":
        plan = draw(gated_plans())
    elif kind == "split":
        n = draw(st.integers(2, 3))
        branches = ops.split(draw(plans(depth - 1)), n, max_lag=draw(st.integers(1, 4)))
        inputs = [_apply(b, draw(local_ops())) for b in branches]
        combine = draw(st.sampled_from(["zip", "round_robin", "async"]))
        if combine == "zip":
            plan = ops.zip(*inputs) | ops.map(sum)
        else:
            plan = ops.union(*inputs, mode="async" if combine == "async" else "round_robin")
    elif kind == "zip":
        plan = ops.zip(draw(plans(depth - 1)), draw(plans(depth - 1))) | ops.map(sum)
    else:
        inputs = [draw(plans(depth - 1)) for _ in range(draw(st.integers(1, 3)))]
        mode: Literal["round_robin", "async"] = draw(st.sampled_from(["round_robin", "async"]))
        weights = (draw(st.lists(st.integers(1, 3), min_size=len(inputs), max_size=len(inputs)))
                   if mode == "round_robin" and draw(st.booleans()) else None)
        if kind == "union":
            plan = ops.union(*inputs, mode=mode, weights=weights)
        else:
            emit = draw(st.lists(st.integers(0, len(inputs) - 1), unique=True))
            plan = ops.concurrently(*inputs, mode=mode, emit=emit, weights=weights)
    plan = _apply(plan, draw(local_ops()))
    if draw(st.integers(0, 4)) == 0:
        plan = plan | ops.call(placed(draw, rxrl.actors(Adder, draw(st.integers(1, 2)))), Adder.add,
                               max_in_flight=draw(st.integers(1, 3)))
    return plan
