"""The rx backend's lowering table: one entry per graph node type (see ``rxrl.walk.lower``)."""

from __future__ import annotations

from typing import Any

from rxrl import graph as g
from rxrl.backends.rx.chain import extend
from rxrl.backends.rx.collect import Barrier, Gather
from rxrl.backends.rx.combine import AsyncUnion, RoundRobin, Zip
from rxrl.backends.rx.effects import Broadcast, Call
from rxrl.backends.rx.local import LOCAL
from rxrl.backends.rx.runtime import Runtime
from rxrl.backends.rx.sources import ActorSource, IterSource, ObservableSource, Shard
from rxrl.backends.rx.stream import END, Stream
from rxrl.events import Event
from rxrl.walk import Lowerer

#: a lowered node: one driver stream, or one ``Shard`` per shard of a sharded node
Lowered = Stream | list[Shard]


def _driver(x: Lowered) -> Stream:
    assert isinstance(x, Stream), "validate() keeps shards out of driver operators"
    return x


def _sharded(x: Lowered) -> list[Shard]:
    assert isinstance(x, list), "validate() feeds collectors with shards"
    return x


def _local(rt: Runtime, node: g.Node, nid: int, ins: list[Lowered]) -> Lowered:
    (source,) = ins
    operator = LOCAL[type(node)](node)
    if isinstance(source, list):
        return [Shard(s.executor, extend(s.stream, operator)) for s in source]
    return extend(source, operator)


def _from_iterable(rt: Runtime, node: g.FromIterable, nid: int, ins: list[Lowered]) -> Lowered:
    return IterSource(node.open())


def _from_iterables(rt: Runtime, node: g.FromIterables, nid: int, ins: list[Lowered]) -> Lowered:
    return [Shard(rt.executor(f"{node.op}[{i}]"), IterSource(node.open(i)))
            for i in range(node.shards)]


def _from_actors(rt: Runtime, node: g.FromActors, nid: int, ins: list[Lowered]) -> Lowered:
    return [Shard(a.executor, ActorSource(node, a.instance)) for a in rt.actors(node.group)]


def _from_observable(rt: Runtime, node: g.FromObservable, nid: int, ins: list[Lowered]
                     ) -> Lowered:
    return ObservableSource(rt, node)


def _barrier(rt: Runtime, node: g.Barrier, nid: int, ins: list[Lowered]) -> Lowered:
    return Barrier(rt, node, _sharded(ins[0]))


def _gather(rt: Runtime, node: g.Gather, nid: int, ins: list[Lowered]) -> Lowered:
    return Gather(rt, nid, node, _sharded(ins[0]), _source_group(node.input))


def _source_group(node: g.Node) -> Any:
    while not isinstance(node, g.FromActors | g.FromIterables):
        node = node.inputs[0]
    return node.group if isinstance(node, g.FromActors) else None


def _broadcast(rt: Runtime, node: g.Broadcast, nid: int, ins: list[Lowered]) -> Lowered:
    return Broadcast(rt, nid, node, _driver(ins[0]))


def _call(rt: Runtime, node: g.Call, nid: int, ins: list[Lowered]) -> Lowered:
    return Call(rt, nid, node, _driver(ins[0]))


def _zip(rt: Runtime, node: g.Zip, nid: int, ins: list[Lowered]) -> Lowered:
    return Zip([_driver(x) for x in ins])


def _union(rt: Runtime, node: g.Union, nid: int, ins: list[Lowered]) -> Lowered:
    inputs = [_driver(x) for x in ins]
    if node.mode == "round_robin":
        return RoundRobin(node, inputs)
    return AsyncUnion(rt, nid, node, inputs)


TABLE: dict[type[g.Node], Lowerer[Runtime, Lowered]] = {
    **{t: _local for t in LOCAL},
    g.FromIterable: _from_iterable, g.FromIterables: _from_iterables,
    g.FromActors: _from_actors, g.FromObservable: _from_observable,
    g.Barrier: _barrier, g.Gather: _gather, g.Broadcast: _broadcast, g.Call: _call,
    g.Zip: _zip, g.Union: _union, g.Concurrently: _union,
}


class Observed(Stream):
    """Reports ``pull``, ``emit`` and ``end`` events around a stream (``on_event``)."""

    def __init__(self, rt: Runtime, nid: int, node: g.Node, shard: int | None, inner: Stream
                 ) -> None:
        self._rt, self._nid, self._label, self._shard, self._inner = rt, nid, node.label, shard, inner

    def pull(self) -> Any:
        self._rt.event(Event("pull", self._nid, self._label, self._shard))
        x = self._inner.pull()
        if x is END:
            self._rt.event(Event("end", self._nid, self._label, self._shard))
        else:
            self._rt.event(Event("emit", self._nid, self._label, self._shard, x))
        return x

    def ready(self) -> bool:
        return self._inner.ready()

    def pending(self) -> bool:
        return self._inner.pending()


def observing(table: dict[type[g.Node], Lowerer[Runtime, Lowered]]
              ) -> dict[type[g.Node], Lowerer[Runtime, Lowered]]:
    """``table`` with every lowered stream (driver or shard) wrapped in ``Observed``."""
    def wrap(lowerer: Lowerer[Runtime, Lowered]) -> Lowerer[Runtime, Lowered]:
        def observed(rt: Runtime, node: g.Node, nid: int, ins: list[Lowered]) -> Lowered:
            out = lowerer(rt, node, nid, ins)
            if isinstance(out, list):
                return [Shard(s.executor, Observed(rt, nid, node, i, s.stream))
                        for i, s in enumerate(out)]
            return Observed(rt, nid, node, None, out)
        return observed

    return {t: wrap(f) for t, f in table.items()}


