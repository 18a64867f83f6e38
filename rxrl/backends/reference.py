"""The sequential reference interpreter: plain generators, in-process actors; the semantics.

Every node lowers to a list of iterators: one per shard for a sharded node, a single one for
a driver stream. Shard-local operators (`local_table`) are pure generator functions reused by
the other backends to run a fused shard chain inside an actor.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from rxrl import graph as g
from rxrl.actors import ActorGroup, Tagged
from rxrl.errors import ActorError, OperatorError
from rxrl.events import Event, EventSink
from rxrl.interop import END, ObservableQueue
from rxrl.run import Execution
from rxrl.schedule import Recorder, Schedule
from rxrl.walk import Lowerer, actor_groups, lower

Streams = list[Iterator[Any]]
_END = object()  # a shard's "no more items" result in gather's queues


def _fail(node: g.Node, e: Exception) -> OperatorError:
    return OperatorError(node.label, node.site, e)


# ------------------------------------------------------------- shard-local operators


def run_map(node: g.Map, src: Iterator[Any]) -> Iterator[Any]:
    fn = node.fn
    for x in src:
        try:
            y = fn(x)
        except Exception as e:
            raise _fail(node, e) from e
        yield y


def run_filter(node: g.Filter, src: Iterator[Any]) -> Iterator[Any]:
    pred = node.pred
    for x in src:
        try:
            keep = pred(x)
        except Exception as e:
            raise _fail(node, e) from e
        if keep:
            yield x


def run_flat_map(node: g.FlatMap, src: Iterator[Any]) -> Iterator[Any]:
    for x in src:
        try:
            ys = list(node.fn(x))
        except Exception as e:
            raise _fail(node, e) from e
        yield from ys


def run_window(node: g.Window, src: Iterator[Any]) -> Iterator[Any]:
    buf: list[Any] = []
    for x in src:
        buf.append(x)
        if len(buf) == node.count:
            yield buf
            buf = []
    if buf:
        yield buf


def run_size_window(node: g.SizeWindow, src: Iterator[Any]) -> Iterator[Any]:
    buf: list[Any] = []
    total = 0
    for x in src:
        buf.append(x)
        try:
            total += node.size(x)
        except Exception as e:
            raise _fail(node, e) from e
        if total >= node.min_size:
            yield _combine(node, buf)
            buf, total = [], 0
    if buf:
        yield _combine(node, buf)


def _combine(node: g.SizeWindow, buf: list[Any]) -> Any:
    try:
        return node.combine(buf)
    except Exception as e:
        raise _fail(node, e) from e


def run_take(node: g.Take, src: Iterator[Any]) -> Iterator[Any]:
    if node.count == 0:
        return
    for taken, x in enumerate(src, 1):
        yield x
        if taken == node.count:
            return


def run_scan(node: g.Scan, src: Iterator[Any]) -> Iterator[Any]:
    acc = node.init
    for x in src:
        try:
            acc = node.fn(acc, x)
        except Exception as e:
            raise _fail(node, e) from e
        yield acc


def run_tap(node: g.Tap, src: Iterator[Any]) -> Iterator[Any]:
    for x in src:
        try:
            node.fn(x)
        except Exception as e:
            raise _fail(node, e) from e
        yield x


#: node type -> generator over one stream; shared with the backends that run shard chains
local_table: dict[type[g.Node], Callable[[Any, Iterator[Any]], Iterator[Any]]] = {
    g.Map: run_map, g.Filter: run_filter, g.FlatMap: run_flat_map, g.Window: run_window,
    g.SizeWindow: run_size_window, g.Take: run_take, g.Scan: run_scan, g.Tap: run_tap,
}


def actor_stream(node: g.FromActors, actor: Any) -> Iterator[Any]:
    """Shard stream of ``from_actors``: ``fn(actor)`` per pull, forever."""
    fn = node.fn
    while True:
        try:
            y = fn(actor)
        except Exception as e:
            raise _fail(node, e) from e
        yield y


# ---------------------------------------------------------------------- the interpreter


class _Context:
    def __init__(self, schedule: Schedule, recorder: Recorder, on_event: EventSink | None):
        self.schedule = schedule
        self.recorder = recorder
        self.on_event = on_event
        self.instances: dict[int, list[Any]] = {}
        #: what closing the run releases (observable subscriptions)
        self.closers: list[Callable[[], None]] = []

    def close(self) -> None:
        while self.closers:
            self.closers.pop()()

    def choose(self, nid: int, node: g.Node, ready: list[int]) -> int:
        choice = self.schedule.choose(nid, ready)
        self.recorder.record(nid, choice)
        if self.on_event:
            self.on_event(Event("choice", nid, node.label, None, choice, str(ready)))
        return choice

    def actors(self, group: ActorGroup[Any]) -> list[Any]:
        return self.instances[id(group)]

    def start_actors(self, groups: list[ActorGroup[Any]]) -> None:
        for group in groups:
            made = []
            for i in range(group.size):
                try:
                    made.append(group.make(i))
                except Exception as e:
                    raise ActorError(
                        f"creating actor {group.name}[{i}] (group built at {group.site}) "
                        f"raised {type(e).__name__}: {e}"
                    ) from e
            self.instances[id(group)] = made

    def effect(self, nid: int, node: g.Node, index: int, item: Any) -> None:
        if self.on_event:
            fn = getattr(node, "fn", None)
            self.on_event(Event("call", nid, node.label, index, item,
                                f"{node.group.name}[{index}].{g.fn_name(fn)}"))  # type: ignore[attr-defined]


def _observed(ctx: _Context, nid: int, node: g.Node, shard: int | None,
              src: Iterator[Any]) -> Iterator[Any]:
    assert ctx.on_event is not None
    emit, label = ctx.on_event, node.label
    while True:
        emit(Event("pull", nid, label, shard))
        try:
            x = next(src)
        except StopIteration:
            emit(Event("end", nid, label, shard))
            return
        emit(Event("emit", nid, label, shard, x))
        yield x


def _local(ctx: _Context, node: g.Node, nid: int, ins: list[Streams]) -> Streams:
    run = local_table[type(node)]
    return [run(node, s) for s in ins[0]]


def _from_iterable(ctx: _Context, node: g.FromIterable, nid: int, ins: list[Streams]) -> Streams:
    return [node.open()]


def _from_iterables(ctx: _Context, node: g.FromIterables, nid: int, ins: list[Streams]) -> Streams:
    return [node.open(i) for i in range(node.shards)]


def _from_actors(ctx: _Context, node: g.FromActors, nid: int, ins: list[Streams]) -> Streams:
    return [actor_stream(node, a) for a in ctx.actors(node.group)]


def _from_observable(ctx: _Context, node: g.FromObservable, nid: int, ins: list[Streams]
                     ) -> Streams:
    queue = ObservableQueue(node)  # subscribed at the first pull; a blocking, bounded buffer
    ctx.closers.append(queue.close)

    def items() -> Iterator[Any]:
        while (x := queue.take()) is not END:
            yield x

    return [items()]


def _barrier(ctx: _Context, node: g.Barrier, nid: int, ins: list[Streams]) -> Streams:
    def rounds(live: list[Iterator[Any]]) -> Iterator[list[Any]]:
        while live:
            items, still = [], []
            for shard in live:
                for x in shard:  # at most one item: break after it
                    items.append(x)
                    still.append(shard)
                    break
            live = still
            if items:
                yield items

    return [rounds(list(ins[0]))]


def _gather(ctx: _Context, node: g.Gather, nid: int, ins: list[Streams]) -> Streams:
    shards = ins[0]
    group = _source_group(node.input)

    def submit(i: int, queue: deque[Any]) -> None:
        # Performing the request now (not when it is taken) is what a distributed backend
        # does when it submits; exceptions are kept and raised when the result is taken.
        try:
            queue.append(next(shards[i]))
        except StopIteration:
            queue.append(_END)
        except Exception as e:
            queue.append(e)

    def completions() -> Iterator[Any]:
        queues: list[deque[Any]] = [deque() for _ in shards]
        for i, q in enumerate(queues):
            for _ in range(node.max_in_flight):
                submit(i, q)
                if q[-1] is _END:
                    break
        while True:
            ready = [i for i, q in enumerate(queues) if q]
            if not ready:
                return
            i = ctx.choose(nid, node, ready)
            result = queues[i].popleft()
            if result is _END:
                queues[i].clear()
                continue
            if isinstance(result, Exception):
                raise result
            if _END not in queues[i]:
                submit(i, queues[i])
            yield Tagged(result, i, group) if node.tagged else result

    return [completions()]


def _source_group(node: g.Node) -> ActorGroup[Any] | None:
    while not isinstance(node, g.FromActors | g.FromIterables):
        node = node.inputs[0]
    return node.group if isinstance(node, g.FromActors) else None


def _broadcast(ctx: _Context, node: g.Broadcast, nid: int, ins: list[Streams]) -> Streams:
    def effects(src: Iterator[Any]) -> Iterator[Any]:
        targets = ctx.actors(node.group)
        for x in src:
            for i, actor in enumerate(targets):
                ctx.effect(nid, node, i, x)
                try:
                    node.fn(actor, x)
                except Exception as e:
                    raise _fail(node, e) from e
            yield x

    return [effects(ins[0][0])]


def route_of(node: g.Call, item: Any, position: int) -> int:
    """Which actor of ``node.group`` handles the ``position``-th item (see ``ops.call``)."""
    n = node.group.size
    if node.route is not None:
        index = node.route(item)
    elif isinstance(item, Tagged) and item.group is node.group:
        index = item.shard
    else:
        index = 0 if n == 1 else position % n
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
        raise ValueError(f"route chose actor {index!r}, but {node.group!r} has actors 0..{n - 1}")
    return index


def _call(ctx: _Context, node: g.Call, nid: int, ins: list[Streams]) -> Streams:
    def calls(src: Iterator[Any]) -> Iterator[Any]:
        targets = ctx.actors(node.group)
        for position, x in enumerate(src):
            try:
                i = route_of(node, x, position)
                ctx.effect(nid, node, i, x)
                y = node.fn(targets[i], x)
            except Exception as e:
                raise _fail(node, e) from e
            yield y

    return [calls(ins[0][0])]


def _zip(ctx: _Context, node: g.Zip, nid: int, ins: list[Streams]) -> Streams:
    def lockstep(its: list[Iterator[Any]]) -> Iterator[tuple[Any, ...]]:
        while True:
            row = []
            for it in its:
                for x in it:
                    row.append(x)
                    break
                else:
                    return
            yield tuple(row)

    return [lockstep([s[0] for s in ins])]


def _union(ctx: _Context, node: g.Union, nid: int, ins: list[Streams]) -> Streams:
    its = [s[0] for s in ins]

    def round_robin() -> Iterator[Any]:
        live = list(range(len(its)))
        while live:
            for i in list(live):
                for _ in range(node.weights[i]):
                    try:
                        x = next(its[i])
                    except StopIteration:
                        live.remove(i)
                        break
                    if node.emits(i):
                        yield x

    def as_ready() -> Iterator[Any]:
        live = list(range(len(its)))
        while live:
            i = ctx.choose(nid, node, live)
            try:
                x = next(its[i])
            except StopIteration:
                live.remove(i)
                continue
            if node.emits(i):
                yield x

    return [round_robin() if node.mode == "round_robin" else as_ready()]


_TABLE: dict[type[g.Node], Lowerer[_Context, Streams]] = {
    **{t: _local for t in local_table},
    g.FromIterable: _from_iterable, g.FromIterables: _from_iterables,
    g.FromActors: _from_actors, g.FromObservable: _from_observable,
    g.Barrier: _barrier, g.Gather: _gather, g.Broadcast: _broadcast, g.Call: _call,
    g.Zip: _zip, g.Union: _union, g.Concurrently: _union,
}


class ReferenceBackend:
    """``rxrl.run(plan, backend="reference")``: deterministic, single-threaded, in-process."""

    name = "reference"
    follows_schedule = True

    def execute(self, root: g.Node, *, schedule: Schedule | None, recorder: Recorder,
                on_event: EventSink | None, options: dict[str, Any]) -> Execution:
        """Create the plan's actors and return its (lazy) output stream."""
        if options:
            raise TypeError(f"the reference backend takes no options, got {sorted(options)}")
        ctx = _Context(schedule or Schedule.round_robin(), recorder, on_event)
        ctx.start_actors(actor_groups(root))
        table = _TABLE if on_event is None else _observing(_TABLE)
        (stream,) = lower(root, table, ctx, self.name)
        return Execution(stream, ctx.close)


def _observing(table: dict[type[g.Node], Lowerer[_Context, Streams]]
               ) -> dict[type[g.Node], Lowerer[_Context, Streams]]:
    def wrap(lowerer: Lowerer[_Context, Streams]) -> Lowerer[_Context, Streams]:
        def observed(ctx: _Context, node: g.Node, nid: int, ins: list[Streams]) -> Streams:
            out = lowerer(ctx, node, nid, ins)
            shards: list[int | None] = list(range(len(out))) if node.shards else [None]
            return [_observed(ctx, nid, node, s, it) for s, it in zip(shards, out, strict=True)]
        return observed

    return {t: wrap(f) for t, f in table.items()}


BACKEND = ReferenceBackend()
