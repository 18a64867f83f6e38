"""Aggregated shards run in-process: each sub-plan of an ``aggregate`` is a driver stream
pulled when its shard is asked (as the reference does), for the backends without aggregator
actors of their own (rx)."""

from __future__ import annotations

from typing import Any

from rxrl import graph as g
from rxrl.backends.engine.lowering import Sharded, Steps, driver
from rxrl.backends.engine.stream import Request, Runtime, Shard, Stream


class Done(Request):
    """A request performed when it was submitted: its outcome is already known."""

    __slots__ = ("_error", "_value")

    def __init__(self, value: Any, error: BaseException | None, stamp: int) -> None:
        self._value, self._error = value, error
        self.stamp = stamp

    def done(self) -> bool:
        return True

    def outcome(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


class InlineShard(Shard):
    """Shard ``index`` of an aggregate: its sub-plan's stream, pulled on the driver thread."""

    def __init__(self, rt: Runtime, stream: Stream, where: str, index: int) -> None:
        self.rt, self.stream, self.where, self.index = rt, stream, where, index
        self.group = None

    def effects(self, rt: Runtime) -> int:
        return rt.clock.ticks  # a sub-plan may move after an effect on any of its actors

    def request(self, want: bool) -> Request:
        try:
            x, error = self.stream.pull(), None
        except Exception as e:
            x, error = None, e
        return Done(x, error, self.rt.stamp())


def inline_shards(rt: Runtime, node: g.ShardChain, ins: list[Any]) -> Sharded:
    """The shards of a chain whose source is an ``Aggregate``: its lowered sub-plans (``ins``),
    each followed by the chain's local steps."""
    assert isinstance(node.source, g.Aggregate) and node.indices is None
    shards: list[Shard] = []
    for i, sub in enumerate(ins):
        stream = driver(sub)
        for _, step in node.steps:
            stream = Steps(rt, step, stream)
        stream.want()
        shards.append(InlineShard(rt, stream, f"aggregator {i} of {node.source.describe()}", i))
    return Sharded(node, shards)
