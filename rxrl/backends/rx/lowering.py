"""The rx backend's lowering table: the engine's driver operators, plus sources and Rx chains."""

from __future__ import annotations

from typing import Any

from rxrl import graph as g
from rxrl.backends.engine.aggregate import inline_shards
from rxrl.backends.engine.lowering import DRIVER, Sharded, driver
from rxrl.backends.engine.lowering import observing as observing_driver
from rxrl.backends.engine.stream import Shard as EngineShard
from rxrl.backends.engine.stream import Stream
from rxrl.backends.rx.chain import extend
from rxrl.backends.rx.local import LOCAL
from rxrl.backends.rx.runtime import Runtime, Shard
from rxrl.backends.rx.sources import ActorSource, IterSource, ObservableSource
from rxrl.compile import Lowerer
from rxrl.events import Event
from rxrl.ready import END, NOT_READY


def _local(rt: Runtime, node: g.Node, nid: int, ins: list[Any]) -> Stream:
    return extend(driver(ins[0]), LOCAL[type(node)](node))


def _from_iterable(rt: Runtime, node: g.FromIterable, nid: int, ins: list[Any]) -> Stream:
    return IterSource(node.open())


def _from_observable(rt: Runtime, node: g.FromObservable, nid: int, ins: list[Any]) -> Stream:
    return ObservableSource(rt, node)


def _shard_chain(rt: Runtime, node: g.ShardChain, nid: int, ins: list[Any]) -> Sharded:
    source = node.source
    if isinstance(source, g.Aggregate):
        return inline_shards(rt, node, ins)
    shards: list[EngineShard] = []
    for j in range(node.shards):
        i = node.index(j)
        stream: Stream
        if isinstance(source, g.FromActors):
            actor = rt.actors(source.group)[i]
            executor, stream = actor.executor, ActorSource(source, actor.instance)
            where = f"{source.group.name}[{i}]"
        else:
            executor = rt.executor(f"{source.op}[{i}]")
            stream, where = IterSource(source.open(i)), f"shard {i} of {source.describe()}"
        if rt.report.observing:
            stream = _Observed(rt, node.source_id, source, j, stream)
        for step_id, step in node.steps:
            stream = extend(stream, LOCAL[type(step)](step))
            if rt.report.observing:
                stream = _Observed(rt, step_id, step, j, stream)
        shards.append(Shard(rt, executor, stream, where, node.group, i))
    return Sharded(node, shards)


TABLE: dict[type[g.Node], Lowerer[Runtime, Any]] = {
    **DRIVER,
    **{t: _local for t in LOCAL},
    g.FromIterable: _from_iterable, g.FromObservable: _from_observable, g.ShardChain: _shard_chain,
}


class _Observed(Stream):
    """Reports a shard stream's ``pull``/``emit``/``not_ready``/``end`` events (on its thread)."""

    def __init__(self, rt: Runtime, nid: int, node: g.Node, shard: int, inner: Stream) -> None:
        self._rt, self._nid, self._label, self._shard, self._inner = rt, nid, node.label, shard, inner

    def pull(self) -> Any:
        report = self._rt.report.event
        report(Event("pull", self._nid, self._label, self._shard))
        x = self._inner.pull()
        if x is END:
            report(Event("end", self._nid, self._label, self._shard))
        elif x is NOT_READY:
            report(Event("not_ready", self._nid, self._label, self._shard))
        else:
            report(Event("emit", self._nid, self._label, self._shard, x))
        return x


def observing(table: dict[type[g.Node], Lowerer[Runtime, Any]]) -> dict[type[g.Node], Lowerer[Runtime, Any]]:
    """``table`` with every driver stream observed (shard chains observe themselves)."""
    return observing_driver(table)
