"""The sequential reference interpreter: plain generators, in-process actors; the semantics.

Every node lowers to a list of iterators: one per shard for a shard chain, a single one for a
driver stream. An iterator yields items and, when it has nothing to give *now*, ``NOT_READY``
(see docs/semantics.md, "Readiness"); ``union``/``concurrently`` skip such an input, the root
of the run raises ``DeadlockError`` (single-threaded, nothing else could ever move).

Actor calls happen at the moment a concurrent backend would *submit* them (a ``gather`` keeps
``k`` requests performed per shard, a pipelined ``call`` performs up to ``k`` calls ahead),
so every actor sees its calls in the order a replayed trace gives on every backend.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rxrl import graph as g
from rxrl.actors import ActorGroup, Tagged
from rxrl.backends.common import Blocked, Reporter, creation_error, operator_error, route_of
from rxrl.backends.kernels import Clock, Tee, Tried, Turns, round_robin_next
from rxrl.backends.local import LOCAL, actor_stream, chain, close, fed
from rxrl.compile import Compiled, Lowerer, lower
from rxrl.errors import DeadlockError
from rxrl.events import Event, EventSink
from rxrl.interop import ObservableQueue
from rxrl.ready import END, NOT_READY
from rxrl.run import Execution
from rxrl.schedule import Recorder, Schedule

Streams = list[Iterator[Any]]


class _Shards(list[Iterator[Any]]):
    """A shard chain's iterators (one per shard), with the chain they run."""

    def __init__(self, node: g.ShardChain, its: list[Iterator[Any]]) -> None:
        super().__init__(its)
        self.node = node


class _Context:
    def __init__(self, schedule: Schedule, recorder: Recorder, on_event: EventSink | None):
        self.schedule = schedule
        self.report = Reporter(recorder, on_event)
        self.blocked = Blocked()
        self.clock = Clock()  # what may make a not-ready stream ready
        self.instances: dict[int, list[Any]] = {}
        #: calls and broadcasts sent to each actor (key, index): what may make a not-ready
        #: actor source ready again
        self.effects: dict[tuple[str, int], int] = {}
        #: what closing the run releases (observable subscriptions)
        self.closers: list[Callable[[], None]] = []
        #: set when a non-blocking call deferred its result (answered NOT_READY by choice)
        #: during the pull an async union is making: that input is pending, not tried
        self.deferred = False

    def close(self) -> None:
        while self.closers:
            self.closers.pop()()

    def choose(self, nid: int, node: g.Node, ready: list[int]) -> int:
        choice = self.schedule.choose(nid, ready)
        self.report.choice(nid, node, choice, ready)
        return choice

    def actors(self, group: ActorGroup[Any]) -> list[Any]:
        return self.instances[id(group)]

    def start_actors(self, groups: tuple[ActorGroup[Any], ...]) -> None:
        for group in groups:
            made = []
            for i in range(group.size):
                try:
                    made.append(group.make(i))
                except Exception as e:
                    raise creation_error(group, i, e) from e
            self.instances[id(group)] = made

    def effect(self, nid: int, node: g.Broadcast | g.Call | g.CallAll, index: int, item: Any) -> None:
        self.report.call(nid, node, index, item)
        key = (node.group.key, index)
        self.effects[key] = self.effects.get(key, 0) + 1
        self.clock.tick()

    def effects_on(self, group: ActorGroup[Any] | None, index: int) -> int:
        return 0 if group is None else self.effects.get((group.key, index), 0)


def _observed(ctx: _Context, nid: int, node: g.Node, shard: int | None,
              src: Iterator[Any]) -> Iterator[Any]:
    return fed(_observing_items(ctx, nid, node, shard, src), src)


def _observing_items(ctx: _Context, nid: int, node: g.Node, shard: int | None,
                     src: Iterator[Any]) -> Iterator[Any]:
    emit, label = ctx.report.event, node.label
    while True:
        emit(Event("pull", nid, label, shard))
        x = next(src, END)
        if x is END:
            emit(Event("end", nid, label, shard))
            return
        emit(Event("not_ready" if x is NOT_READY else "emit", nid, label, shard,
                   None if x is NOT_READY else x))
        yield x


# ---------------------------------------------------------------------------------- sources


def _from_iterable(ctx: _Context, node: g.FromIterable, nid: int, ins: list[Streams]) -> Streams:
    return [node.open()]


def _shard_chain(ctx: _Context, node: g.ShardChain, nid: int, ins: list[Streams]) -> Streams:
    source = node.source
    picked = [node.index(j) for j in range(node.shards)]
    if isinstance(source, g.FromActors):
        actors = ctx.actors(source.group)
        roots = [actor_stream(source, actors[i]) for i in picked]
    elif isinstance(source, g.Aggregate):  # the sub-plans, in-process
        roots = [ins[i][0] for i in picked]
    else:
        roots = [source.open(i) for i in picked]
    if not ctx.report.observing:
        return _Shards(node, [chain(node, it) for it in roots])
    out = []
    for shard, it in enumerate(roots):  # events name every step of the chain
        it = _observed(ctx, node.source_id, source, shard, it)
        for step_id, step in node.steps:
            it = _observed(ctx, step_id, step, shard, LOCAL[type(step)](step, it))
        out.append(it)
    return _Shards(node, out)


def _from_observable(ctx: _Context, node: g.FromObservable, nid: int, ins: list[Streams]
                     ) -> Streams:
    queue = ObservableQueue(node)  # subscribed at the first pull; a blocking, bounded buffer
    ctx.closers.append(queue.close)
    return [iter(queue.take, END)]


def _local(ctx: _Context, node: g.Node, nid: int, ins: list[Streams]) -> Streams:
    src = ins[0][0]
    return [fed(LOCAL[type(node)](node, src), src)]


# ------------------------------------------------------------------------------ collectors


class _Shard:
    """One shard of a collector: its stream, its actor, and whether it waits to be asked again."""

    def __init__(self, it: Iterator[Any], group: ActorGroup[Any] | None, index: int,
                 aggregated: bool = False) -> None:
        self.it, self.group, self.index, self.aggregated = it, group, index, aggregated
        #: the effect count when it answered NOT_READY; None while it is not parked
        self.parked_at: int | None = None

    def effects(self, ctx: _Context) -> int:
        """What may make its answer change: calls and broadcasts to its actor, or, for a
        sub-plan, to any actor."""
        return ctx.clock.ticks if self.aggregated else ctx.effects_on(self.group, self.index)

    def ask(self, ctx: _Context) -> tuple[Any, int]:
        """Perform a request now: ``(outcome, effect count)``; an exception is the outcome."""
        seq = self.effects(ctx)
        try:
            return next(self.it, END), seq
        except Exception as e:
            return e, seq

    def askable(self, ctx: _Context) -> bool:
        """Not parked, or its actor was sent a call or broadcast since it answered NOT_READY."""
        return self.parked_at is None or self.effects(ctx) > self.parked_at


def _shards(ctx: _Context, nid: int, node: g.Node, its: Streams) -> list[_Shard]:
    assert isinstance(its, _Shards), "compile fuses every collector's input"
    chain = its.node
    aggregated = isinstance(chain.source, g.Aggregate)
    shards = [_Shard(it, chain.group, chain.index(i), aggregated) for i, it in enumerate(its)]
    for shard in shards:
        ctx.blocked.watch(nid, shard.index, functools.partial(_why_parked, ctx, node, shard))
    return shards


def _why_parked(ctx: _Context, node: g.Node, shard: _Shard) -> str | None:
    if shard.parked_at is None or shard.askable(ctx):
        return None
    who = f"{shard.group.name}[{shard.index}]" if shard.group else f"shard {shard.index}"
    return (f"{node.describe()}: {who} answered NOT_READY and has been sent no call or "
            "broadcast since")


def _barrier(ctx: _Context, node: g.Barrier, nid: int, ins: list[Streams]) -> Streams:
    shards = _shards(ctx, nid, node, ins[0])

    def rounds() -> Iterator[Any]:
        live = list(range(len(shards)))
        while live:
            got: dict[int, Any] = {}
            while len(got) < len(live):
                for i in live:  # shard order: the first failing shard's error wins
                    shard = shards[i]
                    if i in got or not shard.askable(ctx):
                        continue
                    x, seq = shard.ask(ctx)
                    if isinstance(x, Exception):
                        raise x
                    if x is NOT_READY:
                        shard.parked_at = seq
                    else:
                        shard.parked_at = None
                        got[i] = x
                if len(got) < len(live):
                    yield NOT_READY
            items = [got[i] for i in live if got[i] is not END]
            live = [i for i in live if got[i] is not END]
            if items:
                yield items

    return [rounds()]


def _gather(ctx: _Context, node: g.Gather, nid: int, ins: list[Streams]) -> Streams:
    shards = _shards(ctx, nid, node, ins[0])
    group = shards[0].group if shards else None
    k = node.max_in_flight

    def completions() -> Iterator[Any]:
        # per shard: the outcomes of requests performed and not yet taken (their effect counts)
        queues: list[deque[tuple[Any, int]]] = [deque() for _ in shards]
        missing = [k] * len(shards)  # requests to perform when the shard may be asked
        ended = [False] * len(shards)
        while True:
            for i, shard in enumerate(shards):  # submit: the first pull, and parked slots
                while missing[i] and not ended[i] and shard.askable(ctx):
                    missing[i] -= 1
                    queues[i].append(shard.ask(ctx))
                    ended[i] = queues[i][-1][0] is END
            ready = [i for i, q in enumerate(queues) if q]
            if not ready:
                if all(ended):
                    return
                yield NOT_READY
                continue
            i = ctx.choose(nid, node, ready)
            result, seq = queues[i].popleft()
            if result is END:
                queues[i].clear()
                continue
            if isinstance(result, Exception):
                raise result
            if result is NOT_READY:  # ask again only once the actor has been sent something
                missing[i] += 1
                shards[i].parked_at = seq
                continue
            shards[i].parked_at = None
            missing[i] += 1  # the next request is performed before the item goes downstream
            if not ended[i]:
                missing[i] -= 1
                queues[i].append(shards[i].ask(ctx))
                ended[i] = queues[i][-1][0] is END
            yield Tagged(result, shards[i].index, group) if node.tagged else result

    return [completions()]


# --------------------------------------------------------------------------- actor effects


def _broadcast(ctx: _Context, node: g.Broadcast, nid: int, ins: list[Streams]) -> Streams:
    def effects(src: Iterator[Any]) -> Iterator[Any]:
        targets = ctx.actors(node.group)
        for x in src:
            if x is not NOT_READY:
                for i, actor in enumerate(targets):
                    ctx.effect(nid, node, i, x)
                    try:
                        node.fn(actor, x)
                    except Exception as e:
                        raise operator_error(node, e) from e
            yield x

    return [fed(effects(ins[0][0]), ins[0][0])]


def _pipelined(src: Iterator[Any], k: int, perform: Callable[[Any], tuple[bool, Any]],
               defer: Callable[[], bool] | None = None) -> Iterator[Any]:
    """What `_call` and `_call_all` share: each item performed when a concurrent backend would
    submit it (``k`` items ahead of what was emitted), its result ``(ok, value)`` emitted (or
    raised) in input order; ``defer()`` true: the oldest result is held back (``NOT_READY``)."""
    results: deque[tuple[bool, Any]] = deque()  # performed, not yet emitted
    ended = False
    while True:
        while len(results) < k and not ended:
            x = next(src, END)
            if x is END:
                ended = True
            elif x is NOT_READY:
                break
            else:
                results.append(perform(x))
        if results and defer is not None and defer():
            yield NOT_READY
        elif results:
            ok, y = results.popleft()
            if not ok:
                raise y
            yield y
        elif ended:
            return
        else:
            yield NOT_READY


def _call(ctx: _Context, node: g.Call, nid: int, ins: list[Streams]) -> Streams:
    positions = itertools.count()

    def deferred() -> bool:  # block=False: whether the result was there is a schedule choice
        if ctx.choose(nid, node, [0, 1]) == 1:
            ctx.deferred = True  # the result is held back, as if its call still ran
            return True
        return False

    src = ins[0][0]
    calls = _pipelined(src, node.max_in_flight,
                       lambda x: _perform(ctx, nid, node, ctx.actors(node.group), x, next(positions)),
                       None if node.block else deferred)
    return [fed(calls, src)]


def _perform(ctx: _Context, nid: int, node: g.Call, targets: list[Any], x: Any,
             position: int) -> tuple[bool, Any]:
    try:
        i = route_of(node, x, position)
        ctx.effect(nid, node, i, x)
        return True, node.fn(targets[i], x)
    except Exception as e:
        error = operator_error(node, e)
        error.__cause__ = e
        return False, error


def _call_all(ctx: _Context, node: g.CallAll, nid: int, ins: list[Streams]) -> Streams:
    """Each item's calls run at once, one thread per actor: the actors may meet in a
    collective (a learner group's allreduce), which calls made one after another would never
    complete. Calls are made when a concurrent backend would submit them (``max_in_flight``
    items ahead, as `_call`'s); results are those of the same calls made in index order."""
    pool: list[ThreadPoolExecutor] = []

    def perform(x: Any) -> tuple[bool, Any]:
        targets = ctx.actors(node.group)  # made once the run starts, after lowering
        for i in range(len(targets)):
            ctx.effect(nid, node, i, x)
        if len(targets) == 1:
            outcomes = [_attempt(node, targets[0], x)]
        else:
            if not pool:
                pool.append(ThreadPoolExecutor(len(targets), thread_name_prefix=node.group.name))
                ctx.closers.append(lambda: pool[0].shutdown(wait=False, cancel_futures=True))
            outcomes = [f.result() for f in [pool[0].submit(_attempt, node, a, x) for a in targets]]
        failed = [y for ok, y in outcomes if not ok]  # index order: the first failure wins
        return (False, failed[0]) if failed else (True, [y for _, y in outcomes])

    src = ins[0][0]
    return [fed(_pipelined(src, node.max_in_flight, perform), src)]


def _attempt(node: g.CallAll, actor: Any, x: Any) -> tuple[bool, Any]:
    try:
        return True, node.fn(actor, x)
    except Exception as e:
        error = operator_error(node, e)
        error.__cause__ = e
        return False, error


# ------------------------------------------------------------------------------ combinators


def _zip(ctx: _Context, node: g.Zip, nid: int, ins: list[Streams]) -> Streams:
    def lockstep(its: list[Iterator[Any]]) -> Iterator[Any]:
        row: list[Any] = []
        while True:
            x = next(its[len(row)], END)
            if x is END:
                for it in its:  # done with every input: split branches stop waiting for it
                    close(it)
                return
            if x is NOT_READY:
                yield x  # the row so far waits for this input
                continue
            row.append(x)
            if len(row) == len(its):
                yield tuple(row)
                row = []

    its = [s[0] for s in ins]
    return [fed(lockstep(its), *its)]


def _union(ctx: _Context, node: g.Union, nid: int, ins: list[Streams]) -> Streams:
    its = [s[0] for s in ins]

    def round_robin() -> Iterator[Any]:
        turns = Turns(node.weights)
        pull: Callable[[int], Any] = lambda i: next(its[i], END)
        while (x := round_robin_next(turns, pull, node.emits, ctx.clock)) is not END:
            yield x

    def as_ready() -> Iterator[Any]:
        live = list(range(len(its)))
        tried = Tried(ctx.clock)  # not ready since the clock last moved
        while live:
            candidates = [i for i in live if i not in tried]
            if not candidates:
                yield NOT_READY
                continue
            i = ctx.choose(nid, node, candidates)
            ctx.deferred = False
            x = next(its[i], END)
            if x is NOT_READY:
                if not ctx.deferred:  # a deferred result: pending, not tried
                    tried.add(i)
            elif x is END:
                live.remove(i)
            elif node.emits(i):
                yield x

    return [fed(round_robin() if node.mode == "round_robin" else as_ready(), *its)]


def _split(ctx: _Context, node: g.Split, nid: int, ins: list[Streams]) -> Tee:
    return _Split(ctx, node, nid, ins[0][0])


class _Split(Tee):
    """A split's tee over its (one) source iterator."""

    def __init__(self, ctx: _Context, node: g.Split, nid: int, source: Iterator[Any]) -> None:
        super().__init__(node.n, node.max_lag, ctx.clock)
        self.ctx, self.node, self.nid, self.source = ctx, node, nid, source
        for i in range(node.n):
            ctx.blocked.watch(nid, i, functools.partial(self.why, node, i))

    def pull(self) -> Any:
        return next(self.source, END)


class _Branch:
    """Output ``i`` of a split: an iterator whose ``close`` releases the branch, run or not."""

    def __init__(self, split: _Split, i: int) -> None:
        self.split, self.i = split, i

    def __iter__(self) -> _Branch:
        return self

    def __next__(self) -> Any:
        split, i = self.split, self.i
        x = split.next(i, split.pull)
        if x is END:
            raise StopIteration
        return x

    def close(self) -> None:
        split = self.split
        if split.close(self.i):
            close(split.source)


def _branch(ctx: _Context, node: g.Branch, nid: int, ins: list[Any]) -> Streams:
    (tee,) = ins
    return [_Branch(tee, node.index)]


_TABLE: dict[type[g.Node], Lowerer[_Context, Any]] = {
    **{t: _local for t in LOCAL},
    g.FromIterable: _from_iterable, g.ShardChain: _shard_chain, g.FromObservable: _from_observable,
    g.Barrier: _barrier, g.Gather: _gather, g.Broadcast: _broadcast, g.Call: _call, g.CallAll: _call_all,
    g.Zip: _zip, g.Union: _union, g.Split: _split, g.Branch: _branch,
}


def _root(ctx: _Context, stream: Iterator[Any]) -> Iterator[Any]:
    clock = ctx.clock
    try:
        while True:
            ticks = clock.ticks
            ctx.deferred = False
            x = next(stream, END)
            if x is END:
                return
            if x is NOT_READY:
                if clock.ticks != ticks or ctx.deferred:
                    continue  # something moved on the way (a side flow), or a result was held back
                # single-threaded, and nothing moved: nothing ever could
                raise DeadlockError(ctx.blocked.report())
            yield x
    finally:
        close(stream)


class ReferenceBackend:
    """``rxrl.run(plan, backend="reference")``: deterministic, single-threaded, in-process."""

    name = "reference"
    follows_schedule = True

    def execute(self, plan: Compiled, *, schedule: Schedule | None, recorder: Recorder,
                on_event: EventSink | None, options: dict[str, Any]) -> Execution:
        """Create the plan's actors and return its (lazy) output stream."""
        if options:
            raise TypeError(f"the reference backend takes no options, got {sorted(options)}")
        ctx = _Context(schedule or Schedule.round_robin(), recorder, on_event)
        ctx.start_actors(plan.groups)
        table = _TABLE if on_event is None else _observing(_TABLE)
        (stream,) = lower(plan, table, ctx, self.name)
        return Execution(_root(ctx, stream), ctx.close)


def _observing(table: dict[type[g.Node], Lowerer[_Context, Any]]
               ) -> dict[type[g.Node], Lowerer[_Context, Any]]:
    def wrap(lowerer: Lowerer[_Context, Any]) -> Lowerer[_Context, Any]:
        def observed(ctx: _Context, node: g.Node, nid: int, ins: list[Any]) -> Any:
            out = lowerer(ctx, node, nid, ins)
            if isinstance(node, g.Split | g.ShardChain):  # observed per branch / per step
                return out
            return [_observed(ctx, nid, node, None, it) for it in out]
        return observed

    return {t: wrap(f) for t, f in table.items()}


BACKEND = ReferenceBackend()
