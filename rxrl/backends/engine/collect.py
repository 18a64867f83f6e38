"""``barrier`` and ``gather``: shard requests in flight on the actors, collected on the driver.

Both ask a shard that answered ``NOT_READY`` again only once its actor has been sent a call or
a broadcast since (the only thing that can change a deterministic actor's answer): no
polling. A collector whose every shard waits so, with nothing in flight, is not ready itself.
"""

from __future__ import annotations

import bisect
import functools
from collections import deque
from typing import Any

from rxrl import graph as g
from rxrl.actors import ActorGroup, Tagged
from rxrl.backends.engine.stream import Request, Runtime, Shard, Stream
from rxrl.ready import END, NOT_READY


def why_parked(node: g.Node, shard: Shard) -> str:
    """The deadlock report of a shard that waits to be asked again."""
    return (f"{node.describe()}: {shard.where} answered NOT_READY and has been sent no call "
            "or broadcast since")


class _Collector(Stream):
    def __init__(self, rt: Runtime, nid: int, node: g.Node, shards: list[Shard]) -> None:
        self._rt, self._nid, self._node, self._shards = rt, nid, node, shards
        #: per shard: the effect count at which it answered NOT_READY (None: not parked)
        self._parked_at: list[int | None] = [None] * len(shards)
        #: the last set of shards waited on and its `_where` (`_waiting_on`)
        self._waited: tuple[frozenset[int], str] = (frozenset(), "")
        for i, shard in enumerate(shards):
            shard.reader, shard.reader_id = node, nid
            rt.blocked.watch(nid, i, functools.partial(self._why, i))

    def _why(self, i: int) -> str | None:
        if self._parked_at[i] is None or self._askable(i):
            return None
        return why_parked(self._node, self._shards[i])

    def _ask(self, i: int) -> Request:
        shard = self._shards[i]
        request = shard.request(self.wanted)
        request.effects_at = shard.effects(self._rt)
        return request

    def _askable(self, i: int) -> bool:
        at = self._parked_at[i]
        shard = self._shards[i]
        return at is None or shard.effects(self._rt) > at

    def _park(self, i: int, request: Request) -> None:
        self._parked_at[i] = request.effects_at

    def _unpark(self, i: int) -> None:
        self._parked_at[i] = None

    def _where(self, live: list[int]) -> str:
        return ", ".join(self._shards[i].where for i in live)

    def _waiting_on(self, live: list[int]) -> str:
        """`_where` of the shards waited on, in shard order: made again only when that set
        changes (a wait per item must not join N names)."""
        key = frozenset(live)
        if self._waited[0] != key:
            self._waited = (key, self._where(sorted(key)))
        return self._waited[1]


class Barrier(_Collector):
    """Rounds of one item per live shard, in shard order.

    A round is requested from every live shard at once; the next round only by the next pull
    (the contract's synchronization). A shard that answers ``NOT_READY`` holds the round
    back (its items so far are kept) until it is asked again and answers.
    """

    def __init__(self, rt: Runtime, nid: int, node: g.Barrier, shards: list[Shard]) -> None:
        super().__init__(rt, nid, node, shards)
        self._live = list(range(len(shards)))
        self._got: dict[int, Any] = {}

    def pull(self) -> Any:
        rt, got = self._rt, self._got
        while self._live:
            asked = {i: self._ask(i) for i in self._live
                     if i not in got and self._askable(i)}
            if asked:
                rt.wait_all(list(asked.values()), self._node, self._where(list(asked)))
                for i in sorted(asked):  # shard order: the first failing shard's error wins
                    try:
                        x = asked[i].outcome()
                    except BaseException:
                        self._live = []
                        raise
                    if x is NOT_READY:
                        self._park(i, asked[i])
                    else:
                        self._unpark(i)
                        got[i] = x
            if len(got) < len(self._live):
                return NOT_READY
            items = [got[i] for i in self._live if got[i] is not END]
            self._live = [i for i in self._live if got[i] is not END]
            got.clear()
            if items:
                return rt.collect(items)
        return END

    def ready(self) -> bool:
        return not self._live


class Gather(_Collector):
    """Items of all shards in completion order, ``max_in_flight`` requests per shard.

    As in the reference: the first pull submits ``k`` requests to every shard; taking an item
    of shard i submits the next request to shard i before the item is returned; an end, an
    exception or ``NOT_READY`` is taken like an item. The choice recorded is the shard whose
    oldest request the runtime saw complete first.
    """

    def __init__(self, rt: Runtime, nid: int, node: g.Gather, shards: list[Shard],
                 group: ActorGroup[Any] | None) -> None:
        super().__init__(rt, nid, node, shards)
        self._tagged = node.tagged
        self._group = group
        self._queues: list[deque[Request]] = [deque() for _ in shards]
        self._missing = [node.max_in_flight] * len(shards)  # to submit once askable
        self._ended = [False] * len(shards)
        self._failed = False
        self._last = -1

    def _submit(self) -> None:
        for i in range(len(self._shards)):
            while self._missing[i] and not self._ended[i] and self._askable(i):
                self._missing[i] -= 1
                self._queues[i].append(self._ask(i))

    def _heads(self) -> list[Request]:
        return [q[0] for q in self._queues if q]

    def pull(self) -> Any:
        if self._failed:
            return END
        rt, queues = self._rt, self._queues
        while True:
            self._submit()
            heads = self._heads()
            if not heads:
                return END if all(self._ended) else NOT_READY
            done = [i for i, q in enumerate(queues) if q and q[0].done()]
            if not done:  # wait for one, looking in rotation after the shard taken last
                live = [i for i, q in enumerate(queues) if q]
                after = bisect.bisect_right(live, self._last)
                live = live[after:] + live[:after]
                rt.wait_any([queues[i][0] for i in live], self._node, self._waiting_on(live))
                continue
            i = min(done, key=lambda j: queues[j][0].stamp)
            self._last = i
            rt.report.choice(self._nid, self._node, i, done)
            request = queues[i].popleft()
            try:
                x = request.outcome()
            except BaseException:
                self._failed = True
                raise
            self._missing[i] += 1
            if x is END:
                self._ended[i] = True
                queues[i].clear()  # requests sent past the end also answer END
            elif x is NOT_READY:
                self._park(i, request)
            else:
                self._unpark(i)
                if not self._ended[i]:  # the next request goes out before the item goes on
                    self._missing[i] -= 1
                    queues[i].append(self._ask(i))
                return Tagged(x, self._shards[i].index, self._group) if self._tagged else x

    def ready(self) -> bool:
        heads = self._heads()
        if not heads:
            return True  # a pull answers at once (END or NOT_READY), or submits: idle
        self._rt.poll(heads)
        return any(h.done() for h in heads)

    def pending(self) -> bool:
        return bool(self._heads()) and not self.ready()
