"""``barrier`` and ``gather``: from shards on actor threads to one driver stream (custom)."""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

import reactivex as rx

from rxrl import graph as g
from rxrl.actors import ActorGroup, Tagged
from rxrl.backends.rx.runtime import Runtime
from rxrl.backends.rx.sources import Shard
from rxrl.backends.rx.stream import END, Failure, Stream


class Barrier(Stream):
    """Rounds of one item per live shard, in shard order.

    Custom, around Rx's ``fork_join``: a round is requested from every live shard at once
    (each runs on its own actor thread) and joined with ``fork_join``; the next round is
    requested only by the next pull, which is the contract's synchronization. Rx's ``zip``
    would subscribe to endless shards and run them ahead without bound.
    """

    def __init__(self, runtime: Runtime, node: g.Barrier, shards: list[Shard]) -> None:
        self._runtime = runtime
        self._what = node.describe()
        self._shards = shards
        self._live = list(range(len(shards)))

    def pull(self) -> Any:
        while self._live:
            requests = [self._shards[i].request() for i in self._live]
            outcomes = self._runtime.await_(rx.fork_join(*requests), self._what)
            items, still = [], []
            for i, outcome in zip(self._live, outcomes, strict=True):
                if outcome is END:
                    continue
                if isinstance(outcome, Failure):
                    self._live = []
                    outcome.reraise()  # the first failing shard in shard order, as the reference
                items.append(outcome)
                still.append(i)
            self._live = still
            if items:
                return items
        return END

    def ready(self) -> bool:
        return not self._live


class _Request:
    """A submitted shard request; ``outcome`` is set (under the run's lock) when it completes."""

    __slots__ = ("outcome", "stamp")

    def __init__(self) -> None:
        self.outcome: Any = _PENDING
        self.stamp = 0


_PENDING: Any = object()


class Gather(Stream):
    """Items of all shards in completion order, ``max_in_flight`` requests outstanding per shard.

    Custom: Rx's ``merge`` has no per-source demand (``merge(max_concurrent)`` bounds
    subscriptions, not requests) and makes no replayable choice. As in the reference: the
    first pull submits ``k`` requests to every shard; taking an item of shard i submits the
    next request to shard i before the item is returned; an end or an exception is taken like
    an item. The choice recorded is the shard whose oldest request completed first.
    """

    def __init__(self, runtime: Runtime, nid: int, node: g.Gather, shards: list[Shard],
                 group: ActorGroup[Any] | None) -> None:
        self._runtime = runtime
        self._nid = nid
        self._node = node
        self._shards = shards
        self._group = group
        self._queues: list[deque[_Request]] = [deque() for _ in shards]
        self._clock = itertools.count(1)
        self._started = False
        self._failed = False

    def _submit(self, i: int) -> None:
        request = _Request()
        self._queues[i].append(request)

        def complete(outcome: Any) -> None:
            def land() -> None:
                request.outcome = outcome
                request.stamp = next(self._clock)
            self._runtime.signal(land)

        self._shards[i].request().subscribe(complete)

    def _completed(self) -> list[int]:
        return [i for i, q in enumerate(self._queues) if q and q[0].outcome is not _PENDING]

    def pull(self) -> Any:
        if self._failed:
            return END
        if not self._started:
            self._started = True
            for i in range(len(self._shards)):
                for _ in range(self._node.max_in_flight):
                    self._submit(i)
        queues = self._queues
        while any(queues):
            self._runtime.wait_until(lambda: bool(self._completed()), self._node.describe())
            ready = self._completed()
            i = min(ready, key=lambda j: queues[j][0].stamp)
            self._runtime.choose(self._nid, self._node, i, ready)
            outcome = queues[i].popleft().outcome
            if outcome is END:
                queues[i].clear()  # requests still in flight to an ended shard also end
                continue
            if isinstance(outcome, Failure):
                self._failed = True
                outcome.reraise()
            if not any(r.outcome is END for r in queues[i]):
                self._submit(i)  # before the item goes downstream: the staleness bound
            return Tagged(outcome, i, self._group) if self._node.tagged else outcome
        return END

    def ready(self) -> bool:
        return self._started and (bool(self._completed()) or not any(self._queues))

    def pending(self) -> bool:
        return not self.ready() and self._started and any(self._queues)
