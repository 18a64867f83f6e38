"""The engine's half of a concurrent backend's lowering table: every driver operator.

A backend's table is ``{**DRIVER, ...its sources and shard-local operators}``; adding a driver
operator to the engine adds it to every concurrent backend at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rxrl import graph as g
from rxrl.backends.engine.collect import Barrier, Gather
from rxrl.backends.engine.combine import AsyncUnion, Branch, RoundRobin, Split, Zip
from rxrl.backends.engine.effects import Broadcast, Call, CallAll
from rxrl.backends.engine.stream import Runtime, Shard, Stream
from rxrl.backends.local import LOCAL
from rxrl.compile import Lowerer, takes_steps
from rxrl.events import Event
from rxrl.ready import END, NOT_READY


class Sharded(list[Shard]):
    """A lowered shard chain: one ``Shard`` per shard, and the chain they run."""

    def __init__(self, node: g.ShardChain, shards: list[Shard]) -> None:
        super().__init__(shards)
        self.node = node


def driver(x: Any) -> Stream:
    """A lowered driver input."""
    assert isinstance(x, Stream), "compile keeps shards out of driver operators"
    return x


def sharded(x: Any) -> Sharded:
    """A lowered collector input."""
    assert isinstance(x, Sharded), "compile fuses every collector's input into a chain"
    return x


def _barrier(rt: Runtime, node: g.Barrier, nid: int, ins: list[Any]) -> Stream:
    return Barrier(rt, nid, node, sharded(ins[0]))


def _gather(rt: Runtime, node: g.Gather, nid: int, ins: list[Any]) -> Stream:
    shards = sharded(ins[0])
    return Gather(rt, nid, node, shards, shards.node.group)


def _broadcast(rt: Runtime, node: g.Broadcast, nid: int, ins: list[Any]) -> Stream:
    return Broadcast(rt, nid, node, driver(ins[0]))


def _call(rt: Runtime, node: g.Call, nid: int, ins: list[Any]) -> Stream:
    return Call(rt, nid, node, driver(ins[0]))


def _call_all(rt: Runtime, node: g.CallAll, nid: int, ins: list[Any]) -> Stream:
    return CallAll(rt, nid, node, driver(ins[0]))


def _zip(rt: Runtime, node: g.Zip, nid: int, ins: list[Any]) -> Stream:
    return Zip(rt, [driver(x) for x in ins])


def _union(rt: Runtime, node: g.Union, nid: int, ins: list[Any]) -> Stream:
    inputs = [driver(x) for x in ins]
    if node.mode == "round_robin":
        return RoundRobin(rt, node, inputs)
    return AsyncUnion(rt, nid, node, inputs)


def _split(rt: Runtime, node: g.Split, nid: int, ins: list[Any]) -> Split:
    return Split(rt, nid, node, driver(ins[0]))


def _branch(rt: Runtime, node: g.Branch, nid: int, ins: list[Any]) -> Stream:
    (split,) = ins
    assert isinstance(split, Split)
    return Branch(split, node.index)


#: the driver operators, for every concurrent backend
DRIVER: dict[type[g.Node], Lowerer[Any, Any]] = {
    g.Barrier: _barrier, g.Gather: _gather, g.Broadcast: _broadcast, g.Call: _call, g.CallAll: _call_all,
    g.Zip: _zip, g.Union: _union, g.Split: _split, g.Branch: _branch,
}


class Steps(Stream):
    """A shard-local operator on a driver stream, run as the reference's generator over it.

    ``by_value``: the operator reads the items' values (all but ``take``, which passes the
    runtime's handles on untouched).
    """

    def __init__(self, rt: Runtime, node: g.Node, source: Stream) -> None:
        self._rt, self._source = rt, source
        by_value = not isinstance(node, g.Take)
        if by_value:
            source.want()
        else:
            self.feeds = [source]
        self._it = LOCAL[type(node)](node, self._items(by_value))

    def inputs(self) -> list[Stream]:
        return [self._source]

    def _items(self, by_value: bool) -> Iterator[Any]:
        while (x := self._source.pull()) is not END:
            yield x if not by_value or x is NOT_READY else self._rt.value(x)

    def pull(self) -> Any:
        x = next(self._it, END)
        if x is END:
            self._source.cancel()  # take is done: nothing more is read
        return x

    def ready(self) -> bool:
        return self._source.ready()

    def pending(self) -> bool:
        return self._source.pending()


def _steps(rt: Runtime, node: g.Node, nid: int, ins: list[Any]) -> Stream:
    return Steps(rt, node, driver(ins[0]))


#: shard-local operators on driver streams as generators (a backend may lower them its own way)
STEPS: dict[type[g.Node], Lowerer[Any, Any]] = {t: _steps for t in LOCAL}


class Observed(Stream):
    """Reports ``pull``, ``emit``, ``not_ready`` and ``end`` events around a stream."""

    def __init__(self, rt: Runtime, nid: int, node: g.Node, shard: int | None, inner: Stream
                 ) -> None:
        self._rt, self._nid, self._label, self._shard, self._inner = rt, nid, node.label, shard, inner
        self.feeds = [inner]

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

    def ready(self) -> bool:
        return self._inner.ready()

    def pending(self) -> bool:
        return self._inner.pending()


def observing(table: dict[type[g.Node], Lowerer[Any, Any]]) -> dict[type[g.Node], Lowerer[Any, Any]]:
    """``table`` with every lowered driver stream wrapped in ``Observed``."""
    def wrap(lowerer: Lowerer[Any, Any]) -> Lowerer[Any, Any]:
        def observed(rt: Runtime, node: g.Node, nid: int, ins: list[Any]) -> Any:
            out = lowerer(rt, node, nid, ins)
            return Observed(rt, nid, node, None, out) if isinstance(out, Stream) else out
        return takes_steps(observed) if getattr(lowerer, "takes_steps", False) else observed

    return {t: wrap(f) for t, f in table.items()}
