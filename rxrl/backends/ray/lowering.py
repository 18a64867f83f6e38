"""The Ray lowering table: the engine's driver operators, sources, and shard chains on actors.

A shard chain (``from_actors(...) | map | window ...``) is registered on its actors and run
there, one request per item that leaves the shard. Driver streams carry, where they can,
handles on values that stay in Ray's object store (``members.Ref``, a barrier's ``Round``, a
``Tagged`` ``Ref``): ``take``, unions, ``split``, ``broadcast`` and ``call`` pass them on
untouched, so a batch goes from a rollout actor to a learner without visiting the driver;
operators that look at items (``map``, ``zip``, a route function, the run's output) fetch
them (``RayRuntime.value``), and the requests feeding them return status and value in one
object, saving a fetch.
"""

from __future__ import annotations

from typing import Any

from rxrl import graph as g
from rxrl.backends.engine.lowering import DRIVER, STEPS, Sharded
from rxrl.backends.engine.stream import Stream
from rxrl.backends.ray.runtime import RayRuntime
from rxrl.compile import Lowerer, takes_steps
from rxrl.interop import ObservableQueue
from rxrl.ready import END


class Items(Stream):
    """A driver stream over an iterator of plain items (``from_iterable``, ``from_observable``)."""

    def __init__(self, items: Any) -> None:
        self._items = items

    def pull(self) -> Any:
        return next(self._items, END)


def _from_iterable(rt: RayRuntime, node: g.FromIterable, nid: int, ins: list[Any]) -> Stream:
    return Items(node.open())


def _from_observable(rt: RayRuntime, node: g.FromObservable, nid: int, ins: list[Any]) -> Stream:
    # a push source on the driver: the shared bounded queue, closed with the run (its pulls
    # wait on the queue, so an async union treats it as idle rather than pending)
    queue = ObservableQueue(node)
    rt.closers.append(queue.close)
    return Items(iter(queue.take, END))


@takes_steps
def _shard_chain(rt: RayRuntime, node: g.ShardChain, nid: int, ins: list[Any]) -> Sharded:
    if isinstance(node.source, g.Aggregate):  # ins: the sub-plans, each run on an aggregator
        return Sharded(node, rt.aggregate(node, nid, ins))
    return Sharded(node, rt.shards(node, nid))


TABLE: dict[type[g.Node], Lowerer[RayRuntime, Any]] = {
    **DRIVER, **STEPS,
    g.FromIterable: _from_iterable, g.FromObservable: _from_observable, g.ShardChain: _shard_chain,
}
