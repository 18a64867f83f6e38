"""The plan IR: small frozen nodes that describe a dataflow graph; backends give them meaning."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from rxrl.actors import ActorGroup, Placement
from rxrl.errors import PlanError

if TYPE_CHECKING:
    from reactivex import Observable

UnionMode = Literal["round_robin", "async"]


def fn_name(fn: object) -> str:
    """A short readable name for a user function (``<lambda>`` keeps its call site in labels;
    a ``functools.partial`` shows its arguments)."""
    if isinstance(fn, functools.partial):
        bound = [repr(a) for a in fn.args] + [f"{k}={v!r}" for k, v in fn.keywords.items()]
        return f"{fn_name(fn.func)}({', '.join(bound)}, ...)"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not name:
        return repr(fn)
    return str(name).rpartition("<locals>.")[2]  # `outer.<locals>.<lambda>` -> `<lambda>`


@attrs.frozen(eq=False, kw_only=True)
class Node:
    """A graph node. Identity-hashed: the same node object may appear in several plans."""

    site: str
    #: the operator's name as users write it (``map``, ``barrier``, ...)
    op: ClassVar[str] = "node"
    #: True for operators that may run inside a shard (per-stream, no driver state)
    local: ClassVar[bool] = False
    #: True for operators that turn shards into a driver stream (``barrier``, ``gather``)
    collects: ClassVar[bool] = False

    @property
    def inputs(self) -> tuple[Node, ...]:
        """The nodes this node reads from, in argument order."""
        return ()

    @property
    def shards(self) -> int | None:
        """Number of parallel streams this node produces, or None for a driver stream."""
        return None

    def params(self) -> str:
        """The operator's arguments as shown in a printed plan."""
        return ""

    @property
    def label(self) -> str:
        """``op(params)``, e.g. ``window(4)``."""
        return f"{self.op}({self.params()})"

    def describe(self) -> str:
        """The label with its call site, for error messages."""
        return f"{self.label} at {self.site}"

    def groups(self) -> tuple[ActorGroup[Any], ...]:
        """The actor groups this operator talks to (a run creates their actors)."""
        return ()


# ---------------------------------------------------------------------------------- sources


@attrs.frozen(eq=False)
class _OneShotGuard:
    """Remembers whether a one-shot iterator source was consumed by an earlier run."""

    used: list[bool] = attrs.field(factory=lambda: [False])


@attrs.frozen(eq=False, kw_only=True)
class FromIterable(Node):
    """A driver stream over an iterable."""

    op: ClassVar[str] = "from_iterable"
    iterable: Iterable[Any]
    _guard: _OneShotGuard = attrs.field(factory=_OneShotGuard)

    def params(self) -> str:
        return _describe_iterable(self.iterable)

    def open(self) -> Iterator[Any]:
        """A fresh iterator; a one-shot iterator source refuses a second run clearly."""
        return _open_once(self, self.iterable, self._guard)


@attrs.frozen(eq=False, kw_only=True)
class FromIterables(Node):
    """One shard per iterable."""

    op: ClassVar[str] = "from_iterables"
    iterables: tuple[Iterable[Any], ...]
    _guards: tuple[_OneShotGuard, ...] = attrs.field()

    @_guards.default
    def _make_guards(self) -> tuple[_OneShotGuard, ...]:
        return tuple(_OneShotGuard() for _ in self.iterables)

    @property
    def shards(self) -> int:
        return len(self.iterables)

    def params(self) -> str:
        return f"{len(self.iterables)} iterables"

    def open(self, shard: int) -> Iterator[Any]:
        """A fresh iterator over shard ``shard``'s iterable."""
        return _open_once(self, self.iterables[shard], self._guards[shard])


@attrs.frozen(eq=False, kw_only=True)
class FromActors(Node):
    """Shard ``i`` yields ``fn(actor_i)`` each time it is pulled (an infinite stream)."""

    op: ClassVar[str] = "from_actors"
    group: ActorGroup[Any]
    fn: Callable[[Any], Any]

    @property
    def shards(self) -> int:
        return self.group.size

    def params(self) -> str:
        return f"{self.group!r}, {fn_name(self.fn)}"

    def groups(self) -> tuple[ActorGroup[Any], ...]:
        return (self.group,)


@attrs.frozen(eq=False, kw_only=True)
class FromObservable(Node):
    """A driver stream over a reactivex ``Observable``, subscribed when first pulled.

    At most ``buffer`` items wait unpulled; a source that emits faster is held back (its
    emitting thread waits), which is the only back-pressure a push source allows.
    """

    op: ClassVar[str] = "from_observable"
    observable: Observable[Any]
    buffer: int

    def params(self) -> str:
        return f"<{type(self.observable).__name__}>, buffer={self.buffer}"


def _describe_iterable(xs: Iterable[Any]) -> str:
    if isinstance(xs, range | list | tuple | str) and len(xs) <= 6:
        return repr(xs)
    if isinstance(xs, Sequence):
        return f"<{type(xs).__name__} of {len(xs)}>"
    return f"<{type(xs).__name__}>"


def _open_once(node: Node, xs: Iterable[Any], guard: _OneShotGuard) -> Iterator[Any]:
    it = iter(xs)
    if it is xs:  # a one-shot iterator: a second run would silently see nothing
        if guard.used[0]:
            raise PlanError(
                node.label,
                node.site,
                "this source is a one-shot iterator that an earlier run already consumed",
                "pass a list (or another re-iterable collection) to run the plan again",
            )
        guard.used[0] = True
    return it


# ------------------------------------------------------------------ unary, shard-local operators


@attrs.frozen(eq=False, kw_only=True)
class Unary(Node):
    """An operator with one input."""

    input: Node

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    @property
    def shards(self) -> int | None:
        return self.input.shards if self.local else None


@attrs.frozen(eq=False, kw_only=True)
class Map(Unary):
    """``fn(x)`` for each item."""

    op: ClassVar[str] = "map"
    local: ClassVar[bool] = True
    fn: Callable[[Any], Any]

    def params(self) -> str:
        return fn_name(self.fn)


@attrs.frozen(eq=False, kw_only=True)
class Filter(Unary):
    """Items for which ``pred(x)`` is true."""

    op: ClassVar[str] = "filter"
    local: ClassVar[bool] = True
    pred: Callable[[Any], bool]

    def params(self) -> str:
        return fn_name(self.pred)


@attrs.frozen(eq=False, kw_only=True)
class FlatMap(Unary):
    """The items of ``fn(x)`` for each item."""

    op: ClassVar[str] = "flat_map"
    local: ClassVar[bool] = True
    fn: Callable[[Any], Iterable[Any]]

    def params(self) -> str:
        return fn_name(self.fn)


@attrs.frozen(eq=False, kw_only=True)
class Window(Unary):
    """Lists of ``count`` consecutive items; a short final list at end of stream."""

    op: ClassVar[str] = "window"
    local: ClassVar[bool] = True
    count: int

    def params(self) -> str:
        return str(self.count)


@attrs.frozen(eq=False, kw_only=True)
class SizeWindow(Unary):
    """``combine(items)`` once the summed ``size`` of buffered items reaches ``min_size``."""

    op: ClassVar[str] = "window"
    local: ClassVar[bool] = True
    min_size: int
    size: Callable[[Any], int]
    combine: Callable[[list[Any]], Any]

    def params(self) -> str:
        return f"min_size={self.min_size}, size={fn_name(self.size)}, combine={fn_name(self.combine)}"


@attrs.frozen(eq=False, kw_only=True)
class Take(Unary):
    """The first ``count`` items, then the end (without pulling item ``count + 1``)."""

    op: ClassVar[str] = "take"
    local: ClassVar[bool] = True
    count: int

    def params(self) -> str:
        return str(self.count)


@attrs.frozen(eq=False, kw_only=True)
class Scan(Unary):
    """Each accumulated ``acc = fn(acc, x)``, starting from ``init`` (which is not emitted)."""

    op: ClassVar[str] = "scan"
    local: ClassVar[bool] = True
    fn: Callable[[Any, Any], Any]
    init: Any

    def params(self) -> str:
        return f"{fn_name(self.fn)}, {self.init!r}"


@attrs.frozen(eq=False, kw_only=True)
class Tap(Unary):
    """Calls ``fn(x)`` for its side effect; the item passes on unchanged."""

    op: ClassVar[str] = "tap"
    local: ClassVar[bool] = True
    fn: Callable[[Any], object]

    def params(self) -> str:
        return fn_name(self.fn)


# --------------------------------------------------------------- shards -> driver collectors


@attrs.frozen(eq=False, kw_only=True)
class Barrier(Unary):
    """Rounds of one item per live shard, in shard order."""

    op: ClassVar[str] = "barrier"
    collects: ClassVar[bool] = True


@attrs.frozen(eq=False, kw_only=True)
class Gather(Unary):
    """Items of all shards in completion order, at most ``max_in_flight`` requests per shard."""

    op: ClassVar[str] = "gather"
    collects: ClassVar[bool] = True
    max_in_flight: int
    tagged: bool

    def params(self) -> str:
        return f"max_in_flight={self.max_in_flight}" + (", tagged=True" if self.tagged else "")


# ------------------------------------------------------------------ driver actor effects


@attrs.frozen(eq=False, kw_only=True)
class Broadcast(Unary):
    """``fn(actor, x)`` on every actor of ``group``, in index order; ``x`` passes on."""

    op: ClassVar[str] = "broadcast"
    group: ActorGroup[Any]
    fn: Callable[[Any, Any], object]

    def params(self) -> str:
        return f"{self.group!r}, {fn_name(self.fn)}"

    def groups(self) -> tuple[ActorGroup[Any], ...]:
        return (self.group,)


@attrs.frozen(eq=False, kw_only=True)
class Call(Unary):
    """``fn(actor, x)`` on one actor of ``group`` (see ``ops.call`` for which); emits the result.

    Up to ``max_in_flight`` calls are submitted ahead of the one whose result is emitted next.
    With ``block=False`` a pull whose oldest call is still running answers ``NOT_READY``
    instead of waiting for it: whether it did is the node's recorded choice (0: the result,
    1: not ready), so a replay reproduces it.
    """

    op: ClassVar[str] = "call"
    group: ActorGroup[Any]
    fn: Callable[[Any, Any], Any]
    route: Callable[[Any], int] | None
    max_in_flight: int = 1
    block: bool = True

    def params(self) -> str:
        route = f", route={fn_name(self.route)}" if self.route is not None else ""
        ahead = f", max_in_flight={self.max_in_flight}" if self.max_in_flight != 1 else ""
        block = ", block=False" if not self.block else ""
        return f"{self.group!r}, {fn_name(self.fn)}{route}{ahead}{block}"

    def groups(self) -> tuple[ActorGroup[Any], ...]:
        return (self.group,)


@attrs.frozen(eq=False, kw_only=True)
class CallAll(Unary):
    """``fn(actor, x)`` on every actor of ``group`` at once; emits their results as a list in
    index order, once all of them returned (the members may meet in a collective, such as a
    learner group's gradient allreduce, so no backend runs one of the calls after another).
    Up to ``max_in_flight`` items' calls are submitted ahead of the one emitted next."""

    op: ClassVar[str] = "call_all"
    group: ActorGroup[Any]
    fn: Callable[[Any, Any], Any]
    max_in_flight: int = 1

    def params(self) -> str:
        ahead = f", max_in_flight={self.max_in_flight}" if self.max_in_flight != 1 else ""
        return f"{self.group!r}, {fn_name(self.fn)}{ahead}"

    def groups(self) -> tuple[ActorGroup[Any], ...]:
        return (self.group,)


# ------------------------------------------------------------------------ explicit fan-out


@attrs.frozen(eq=False, kw_only=True)
class Split(Unary):
    """The one node with several consumers: its ``n`` branches each yield every input item.

    No branch runs more than ``max_lag`` items ahead of the slowest one. A plan reaches a
    split through its ``Branch`` nodes; compiling the plan makes it one node with n outputs.
    """

    op: ClassVar[str] = "split"
    n: int
    max_lag: int

    def params(self) -> str:
        return f"{self.n}, max_lag={self.max_lag}"


@attrs.frozen(eq=False, kw_only=True)
class Branch(Node):
    """Output ``index`` of a ``Split``."""

    op: ClassVar[str] = "branch"
    split: Split
    index: int

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.split,)

    def params(self) -> str:
        return f"{self.index} of {self.split.n}"


# ------------------------------------------------------------------------ n-ary, driver only


@attrs.frozen(eq=False, kw_only=True)
class Nary(Node):
    """An operator over several driver streams."""

    streams: tuple[Node, ...]

    @property
    def inputs(self) -> tuple[Node, ...]:
        return self.streams


@attrs.frozen(eq=False, kw_only=True)
class Zip(Nary):
    """Tuples of the k-th items of every input; ends with the shortest input."""

    op: ClassVar[str] = "zip"


@attrs.frozen(eq=False, kw_only=True)
class Union(Nary):
    """Interleaves its inputs: round robin by ``weights``, or as ready (``mode="async"``)."""

    op: ClassVar[str] = "union"
    mode: UnionMode
    #: items taken from input i per turn, on average: a real weight w gives turns of
    #: floor(w) or ceil(w) items so that the counts keep the exact ratio (see ops.union)
    weights: tuple[float, ...]

    def params(self) -> str:
        parts = [f"mode={self.mode!r}"]
        if any(w != 1 for w in self.weights):
            parts.append(f"weights={list(self.weights)}")
        return ", ".join(parts)

    def emits(self, index: int) -> bool:
        """Whether items of input ``index`` appear in the output."""
        return True


@attrs.frozen(eq=False, kw_only=True)
class Concurrently(Union):
    """A union that runs every input but emits only the items of the inputs in ``emit``."""

    op: ClassVar[str] = "concurrently"
    emit: frozenset[int]

    def params(self) -> str:
        return f"{super().params()}, emit={sorted(self.emit)}"

    def emits(self, index: int) -> bool:
        return index in self.emit


# ------------------------------------------------------------- shard subsets and aggregators


def _spans(indices: tuple[int, ...]) -> str:
    """``0..3, 6`` for (0, 1, 2, 3, 6)."""
    out: list[str] = []
    start = prev = None
    for i in (*indices, None):
        if start is not None and (i is None or prev is None or i != prev + 1):
            out.append(str(start) if start == prev else f"{start}..{prev}")
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return ", ".join(out)


@attrs.frozen(eq=False, kw_only=True)
class Subset(Unary):
    """Shards ``indices`` of its input, in that order (``Shards.subset``).

    It commutes with every shard-local operator, so compiling folds it into the shard chain
    (``ShardChain.indices``): nothing runs for it.
    """

    op: ClassVar[str] = "subset"
    local: ClassVar[bool] = True
    indices: tuple[int, ...]

    @property
    def shards(self) -> int:
        return len(self.indices)

    def params(self) -> str:
        return _spans(self.indices)


@attrs.frozen(eq=False, kw_only=True)
class Aggregate(Node):
    """``k`` shards, shard ``i`` being sub-plan ``plans[i]``: the aggregated input's shards
    ``parts[i]`` run through ``body`` (``ops.aggregate``). A backend may run each sub-plan on
    an aggregator actor (Ray does, placed beside its shards' actors); the reference runs
    them in-process."""

    op: ClassVar[str] = "aggregate"
    source: Node
    body: Callable[[Any], Any]
    plans: tuple[Node, ...]
    parts: tuple[tuple[int, ...], ...]
    #: where each aggregator goes (``ops.aggregate(placements=...)``, node labels); None:
    #: beside its part's first actor
    placements: tuple[Placement, ...] | None = None

    @property
    def inputs(self) -> tuple[Node, ...]:
        return self.plans

    @property
    def shards(self) -> int:
        return len(self.plans)

    def params(self) -> str:
        if self.placements is not None:
            return f"{fn_name(self.body)}, placements=[{', '.join(map(str, self.placements))}]"
        return f"{fn_name(self.body)}, num_aggregators={len(self.plans)}"


# ------------------------------------------------------------------ made by compiling a plan


@attrs.frozen(eq=False, kw_only=True)
class ShardChain(Node):
    """A fused shard chain: a sharded source and the shard-local steps after it, which a
    backend runs inside each actor (one request per item that leaves the shard).

    Made by ``rxrl.compile``, never by users; ``steps`` keep their occurrence ids, so events
    still name each operator.
    """

    op: ClassVar[str] = "shards"
    source: FromActors | FromIterables | Aggregate
    source_id: int
    steps: tuple[tuple[int, Node], ...]
    #: the source's shards this chain runs, in order (``Shards.subset``); None: all of them
    indices: tuple[int, ...] | None = None

    @property
    def shards(self) -> int:
        return self.source.shards if self.indices is None else len(self.indices)

    def index(self, shard: int) -> int:
        """The source's shard (its actor's index) behind shard ``shard`` of this chain."""
        return shard if self.indices is None else self.indices[shard]

    @property
    def group(self) -> ActorGroup[Any] | None:
        """The actor group behind the shards (None for iterables)."""
        return self.source.group if isinstance(self.source, FromActors) else None

    def params(self) -> str:
        subset = () if self.indices is None else (f"subset({_spans(self.indices)})",)
        return " | ".join([self.source.label, *subset, *(n.label for _, n in self.steps)])

    def groups(self) -> tuple[ActorGroup[Any], ...]:
        return self.source.groups()


def check_driver_inputs(node: Node) -> None:
    """Raise PlanError if a driver operator reads a sharded stream (types were bypassed)."""
    for child in node.inputs:
        if child.shards is not None and not node.collects and not node.local:
            raise PlanError(
                node.label,
                node.site,
                f"this operator runs on the driver but its input {child.label} is sharded "
                f"({child.shards} shards)",
                "collect the shards first with ops.barrier() or ops.gather()",
            )
        if node.collects and child.shards is None:
            raise PlanError(
                node.label,
                node.site,
                f"{node.op}() collects Shards, but its input {child.label} is a driver Plan",
                f"remove {node.op}(), or build the input with rxrl.from_actors/from_iterables",
            )


def actor_indices(node: Node) -> tuple[ActorGroup[Any], tuple[int, ...]] | None:
    """The actor group whose actors make ``node``'s shards, and the actor behind each shard
    (through shard-local steps and `Subset`); None if they are not one group's actors'."""
    if isinstance(node, FromActors):
        return node.group, tuple(range(node.group.size))
    if isinstance(node, Subset):
        inner = actor_indices(node.input)
        return None if inner is None else (inner[0], tuple(inner[1][i] for i in node.indices))
    if isinstance(node, Unary) and node.local:
        return actor_indices(node.input)
    return None


def indices_on(group: ActorGroup[Any], actors: tuple[int, ...], where: Placement) -> tuple[int, ...]:
    """The positions in ``actors`` (indices of ``group``) of the actors placed on ``where``'s
    labels (`Shards.subset_on`, ``ops.aggregate(placements=...)``)."""
    return tuple(j for j, i in enumerate(actors) if group.placement_of(i).within(where))
