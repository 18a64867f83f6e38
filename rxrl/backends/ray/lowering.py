"""The Ray lowering table: shard chains fuse into actor calls, driver operators run on the driver.

A sharded node lowers to ``Sharded`` (its source and the shard-local steps so far, run later
inside the actor); a driver node lowers to a ``Stream`` of items in one of four forms, so that
values produced by actors stay in Ray's object store until a driver operator looks at them:

- ``value``: plain items;
- ``ref``: ``Ref`` items (a gather or a call result);
- ``tagged``: ``Tagged(Ref, shard, group)`` items (``gather(tagged=True)``);
- ``list``: ``list[Ref]`` items (a barrier round).

Operators that look at items (``map``, ``zip``, the output of the run, ...) materialize them
with one ``ray.get``; ``take``, ``broadcast``, unions of same-form inputs and ``call`` pass
them on untouched, and ``call``/``broadcast`` hand object refs to the target actor, so a batch
goes from a rollout actor to a learner without visiting the driver.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from functools import partial
from typing import Any, Literal, cast

import attrs
import ray

from rxrl import graph as g
from rxrl.actors import ActorGroup, Tagged
from rxrl.backends import reference
from rxrl.backends.ray.host import END, Failure
from rxrl.backends.ray.members import Encoded, Pending, Ref, item_of, raise_failure
from rxrl.backends.ray.merge import Merge
from rxrl.backends.ray.runtime import RunContext, describe_shards
from rxrl.backends.reference import local_table, route_of
from rxrl.errors import OperatorError
from rxrl.walk import Lowerer

Form = Literal["value", "ref", "tagged", "list"]

#: stands in for a shard-local node's input once the node is shipped to an actor
_SHIPPED = g.FromIterable(iterable=(), site="(the shard's input)")


@attrs.frozen
class Sharded:
    """A shard chain under construction: its source and local steps, fused into one call."""

    source: g.FromActors | g.FromIterables
    steps: tuple[g.Node, ...] = ()

    @property
    def group(self) -> ActorGroup[Any] | None:
        """The actor group behind the shards, if any."""
        return self.source.group if isinstance(self.source, g.FromActors) else None


@attrs.define(eq=False)
class Stream:
    """A driver stream and the form of its items (see the module docstring).

    ``wanted`` is set (while lowering, before any item flows) when the stream's consumer
    reads its values: its actor results then come back as one object each, saving a fetch;
    ``feeds`` are the streams whose items this one passes on untouched.
    """

    items: Iterator[Any]
    form: Form = "value"
    feeds: list[Stream] = attrs.field(factory=list)
    wanted: bool = False

    def want(self) -> None:
        """Note that the consumer reads the values (and so of the streams it passes on)."""
        self.wanted = True
        for feed in self.feeds:
            feed.want()


Lowered = Sharded | Stream


def ship(node: g.Node) -> g.Node:
    """``node`` without its input graph, ready to be pickled to an actor."""
    return attrs.evolve(node, input=_SHIPPED) if isinstance(node, g.Unary) else node


def materialize(form: Form, x: Any) -> Any:
    """The plain value of item ``x`` of a stream of ``form``."""
    if form == "value":
        return x
    if form == "ref":
        return x.local if x.ref is None else ray.get(x.ref)
    if form == "tagged":
        return Tagged(materialize("ref", x.value), x.shard, x.group)
    refs = [r.ref for r in x if r.ref is not None]
    fetched = iter(ray.get(refs)) if refs else iter(())
    return [r.local if r.ref is None else next(fetched) for r in x]


def values(stream: Lowered) -> Iterator[Any]:
    """The plain values of a driver stream."""
    assert isinstance(stream, Stream), "validate() guarantees driver inputs"
    stream.want()
    if stream.form == "value":
        return stream.items
    form = stream.form
    return (materialize(form, x) for x in stream.items)


def encode(form: Form, x: Any) -> Encoded:
    """Item ``x`` as ``Host.apply`` takes it: object refs travel as refs, not as values."""
    if form == "ref" and x.ref is not None:
        return "ref", None, None, (x.ref,)
    if form == "tagged" and x.value.ref is not None:
        return "tagged", x.shard, x.group, (x.value.ref,)
    if form == "list" and all(r.ref is not None for r in x):
        return "list", None, None, tuple(r.ref for r in x)
    return "value", None, None, ((materialize(form, x),),)


# ---------------------------------------------------------------------- sources, local ops


def _from_iterable(ctx: RunContext, node: g.FromIterable, nid: int, ins: list[Lowered]) -> Lowered:
    return Stream(node.open())


def _from_observable(ctx: RunContext, node: g.FromObservable, nid: int,
                     ins: list[Lowered]) -> Lowered:
    # a push source on the driver: the reference's bounded queue, closed with the run
    lowerer = cast(Lowerer[Any, list[Iterator[Any]]], reference._TABLE[g.FromObservable])
    return Stream(lowerer(ctx, node, nid, [])[0])


def _shard_source(ctx: RunContext, node: g.FromActors | g.FromIterables, nid: int,
                  ins: list[Lowered]) -> Lowered:
    return Sharded(node)


def _local(ctx: RunContext, node: g.Node, nid: int, ins: list[Lowered]) -> Lowered:
    (src,) = ins
    if isinstance(src, Sharded):
        return attrs.evolve(src, steps=(*src.steps, ship(node)))
    if isinstance(node, g.Take):  # take does not look at items: keep them in the store
        return Stream(local_table[g.Take](node, src.items), src.form, [src])
    return Stream(local_table[type(node)](node, values(src)))


# ---------------------------------------------------------------------------- collectors


def _barrier(ctx: RunContext, node: g.Barrier, nid: int, ins: list[Lowered]) -> Lowered:
    (src,) = ins
    assert isinstance(src, Sharded)
    shards = ctx.open_shards(src.source, src.steps, nid)
    out = Stream(iter(()), "list")

    def rounds() -> Iterator[list[Ref]]:
        live = list(range(len(shards)))
        both = out.wanted
        while live:
            pending = {i: shards[i].request(both) for i in live}
            results: dict[int, tuple[Any, Pending]] = {}
            while len(results) < len(pending):
                todo = [i for i in live if i not in results]
                ctx.wait_all([pending[i] for i in todo], node,
                             partial(describe_shards, shards, todo))
                for i in todo:
                    status = ctx.settle(pending[i], shards[i], node)
                    if status is None:  # the actor was restarted: ask again
                        pending[i] = shards[i].request(both)
                    else:
                        results[i] = status, pending[i]
            items: list[Ref] = []
            still: list[int] = []
            for i in live:  # shard order: the first failing shard's error wins
                status, p = results[i]
                if status == END:
                    continue
                if isinstance(status, Failure):
                    raise_failure(status)
                items.append(item_of(p, status))
                still.append(i)
            live = still
            if items:
                yield items

    out.items = rounds()
    return out


def _gather(ctx: RunContext, node: g.Gather, nid: int, ins: list[Lowered]) -> Lowered:
    (src,) = ins
    assert isinstance(src, Sharded)
    shards = ctx.open_shards(src.source, src.steps, nid)
    group = src.group
    k = node.max_in_flight
    out = Stream(iter(()), "tagged" if node.tagged else "ref")

    def completions() -> Iterator[Any]:
        both = out.wanted
        queues = [deque(s.request(both) for _ in range(k)) for s in shards]
        live = list(range(len(shards)))
        start = 0
        while live:
            order = live[start:] + live[:start]  # rotate, so that no ready shard waits forever
            j = ctx.wait_any([queues[i][0] for i in order], node,
                             partial(describe_shards, shards, order))
            i = order[j]
            p = queues[i][0]
            status = ctx.settle(p, shards[i], node)
            if status is None:
                # the actor was restarted: requests sent to its old life failed or were refused;
                # those sent since its refresh stand (they were executed, in order), so keep
                # them and ask again for the others
                kept = deque(q for q in queues[i] if shards[i].current(q))
                kept.extend(shards[i].request(both) for _ in range(len(queues[i]) - len(kept)))
                queues[i] = kept
                continue
            ctx.record(nid, node, i, live)
            queues[i].popleft()
            if status == END:
                queues[i].clear()  # requests past the end also answer END: drop them
                start = live.index(i)
                live.remove(i)
                start = start % len(live) if live else 0
                continue
            if isinstance(status, Failure):
                raise_failure(status)
            queues[i].append(shards[i].request(both))  # before the item flows downstream
            start = (live.index(i) + 1) % len(live)
            item = item_of(p, status)
            yield Tagged(item, i, group) if node.tagged else item

    out.items = completions()
    return out


# ------------------------------------------------------------------------- actor effects


def _broadcast(ctx: RunContext, node: g.Broadcast, nid: int, ins: list[Lowered]) -> Lowered:
    (src,) = ins
    assert isinstance(src, Stream)
    state = ctx.state(node.group)
    state.effects[nid] = cast(g.Broadcast, ship(node))
    # the broadcasts submitted and not yet settled, oldest first: Ray runs one caller's calls
    # to an actor in submission order, so the effect of x lands before any later request to
    # that actor without the driver waiting for its reply (which would cost a round trip)
    running: deque[tuple[Encoded, list[Pending]]] = deque()

    def settle(keep: int) -> None:
        """Settle landed broadcasts, and the oldest until ``keep`` are left; raise failures."""
        while running and (len(running) > keep or ctx.landed(running[0][1])):
            item, pending = running.popleft()
            ctx.wait_all(pending, node, partial(repr, node.group))
            for member, p in zip(state.members, pending, strict=True):
                status = ctx.settle(p, member, node)
                # None: the actor was restarted, and its refresh re-applied the latest item —
                # this one, unless a recovery from another thread refreshed it before this
                # was the latest; a newer item of this broadcast supersedes it either way
                while (status is None and state.latest.get(nid) is item
                       and member.refreshed.get(nid) is not item):
                    status = ctx.settle(member.effect(nid, item), member, node, wait=True)
                if isinstance(status, Failure):
                    raise_failure(status)

    def effects() -> Iterator[Any]:
        for x in src.items:
            item = encode(src.form, x)
            with state.lock:  # a restarted actor is brought up to date with this item
                state.latest[nid] = item
                state.latest.move_to_end(nid)
            pending = []
            for i, member in enumerate(state.members):
                ctx.effect(nid, node, i, x)
                pending.append(member.effect(nid, item))  # its status alone
            running.append((item, pending))
            yield x
            settle(ctx.max_pending_broadcasts - 1)
        settle(0)  # the stream ends once every effect landed

    return Stream(effects(), src.form)


def _call(ctx: RunContext, node: g.Call, nid: int, ins: list[Lowered]) -> Lowered:
    (src,) = ins
    assert isinstance(src, Stream)
    state = ctx.state(node.group)
    state.effects[nid] = cast(g.Call, ship(node))
    form: Form = "value" if node.route is not None else src.form
    items = values(src) if node.route is not None else src.items
    out = Stream(iter(()), "ref")

    def calls() -> Iterator[Ref]:
        both = out.wanted
        for position, x in enumerate(items):
            try:
                i = route_of(node, x.tag if form == "ref" else x, position)
            except Exception as e:
                raise OperatorError(node.label, node.site, e) from e
            member = state.members[i]
            item = encode(form, x)
            ctx.effect(nid, node, i, x)
            while True:
                p = member.apply(nid, item, both)
                status = ctx.settle(p, member, node, wait=True)
                if status is not None:
                    break
            if isinstance(status, Failure):
                raise_failure(status)
            yield item_of(p, status)

    out.items = calls()
    return out


# ---------------------------------------------------------------------------- combinators


def _sequential(ctx: RunContext, node: g.Node, nid: int, ins: list[Lowered]) -> Lowered:
    # zip and round-robin union pull their inputs in a fixed order: exactly the reference's
    # generators, which never consult a schedule for them
    lowerer = cast(Lowerer[Any, list[Iterator[Any]]], reference._TABLE[type(node)])
    if isinstance(node, g.Union):
        form = _common_form(ins)
        if form is not None:
            return Stream(lowerer(None, node, nid, [[s.items] for s in _streams(ins)])[0], form,
                          _streams(ins))
    return Stream(lowerer(None, node, nid, [[values(s)] for s in ins])[0])


def _union(ctx: RunContext, node: g.Union, nid: int, ins: list[Lowered]) -> Lowered:
    if node.mode == "round_robin":
        return _sequential(ctx, node, nid, ins)
    form = _common_form(ins)
    inputs = [s.items for s in _streams(ins)] if form is not None else [values(s) for s in ins]
    label = node.describe()

    def as_ready() -> Iterator[Any]:
        # a little longer than the inputs' own deadlines, so that theirs (which name the
        # actors) surface first
        deadline = None if ctx.timeout_s is None else ctx.timeout_s * 1.25 + 1
        merge = Merge(inputs, name=node.op, capacity=1, timeout_s=deadline,
                      on_timeout=lambda busy: ctx.timeout(node, f"inputs {busy} of {label}"))
        ctx.closers.append(merge.close)
        for i, kind, x in merge:
            ctx.record(nid, node, i, [i])
            if kind == "error":
                raise x
            if kind == "item" and node.emits(i):
                yield x

    return Stream(as_ready(), form or "value", _streams(ins) if form is not None else [])


def _streams(ins: list[Lowered]) -> list[Stream]:
    return [s for s in ins if isinstance(s, Stream)]


def _common_form(ins: list[Lowered]) -> Form | None:
    forms = {s.form for s in _streams(ins)}
    return forms.pop() if len(forms) == 1 else None


TABLE: dict[type[g.Node], Lowerer[RunContext, Lowered]] = {
    **{t: _local for t in local_table},
    g.FromIterable: _from_iterable, g.FromObservable: _from_observable,
    g.FromIterables: _shard_source, g.FromActors: _shard_source,
    g.Barrier: _barrier, g.Gather: _gather, g.Broadcast: _broadcast, g.Call: _call,
    g.Zip: _sequential, g.Union: _union, g.Concurrently: _union,
}
