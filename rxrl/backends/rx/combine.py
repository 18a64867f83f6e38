"""Driver combinators: ``zip`` (Rx's), round-robin and async ``union``/``concurrently`` (custom)."""

from __future__ import annotations

from typing import Any

import reactivex as rx

from rxrl import graph as g
from rxrl.backends.rx.runtime import Runtime
from rxrl.backends.rx.stream import END, Push, Sink, Stream


class Zip(Stream):
    """Rx's ``zip``, fed in lockstep: one item from each input in turn, left to right.

    Rx's ``zip`` completes as soon as an input completes with nothing queued, which is the
    contract's "ends with the shortest input" when inputs are pushed one row at a time; later
    inputs of that last row are then never pulled.
    """

    def __init__(self, inputs: list[Stream]) -> None:
        self._inputs = inputs
        self._heads = [Push() for _ in inputs]
        self._sink = Sink()
        rx.zip(*(h.observable for h in self._heads)).subscribe(
            self._sink.on_next, self._sink.on_error, self._sink.on_completed)

    def pull(self) -> Any:
        sink = self._sink
        while not sink.items and not sink.done:
            for stream, head in zip(self._inputs, self._heads, strict=True):
                try:
                    x = stream.pull()
                except BaseException:
                    sink.done = True
                    raise
                if x is END:
                    head.on_completed()
                    break
                head.on_next(x)
        return sink.take()

    def ready(self) -> bool:
        return self._sink.done or all(s.ready() for s in self._inputs)

    def pending(self) -> bool:  # an idle input needs a pull: then so does the zip
        return not self.ready() and all(s.ready() or s.pending() for s in self._inputs)


class RoundRobin(Stream):
    """``weights[i]`` items from input i in turn; an ended input is skipped from then on.

    Custom: Rx's ``merge`` interleaves by arrival, and the contract's interleave is an exact
    pull order, which is all this operator is.
    """

    def __init__(self, node: g.Union, inputs: list[Stream]) -> None:
        self._node = node
        self._inputs = inputs
        self._live = list(range(len(inputs)))
        self._at = 0  # position in _live of the input whose turn it is
        self._taken = 0  # items taken from it in this turn

    def pull(self) -> Any:
        live = self._live
        while live:
            i = live[self._at]
            x = self._inputs[i].pull()
            if x is END:
                live.pop(self._at)
                self._taken = 0
                if self._at == len(live):
                    self._at = 0
                continue
            self._taken += 1
            if self._taken == self._node.weights[i]:  # the turn passes now: _at is always next
                self._at, self._taken = (self._at + 1) % len(live), 0
            if self._node.emits(i):
                return x
        return END

    def ready(self) -> bool:
        return not self._live or self._inputs[self._live[self._at]].ready()

    def pending(self) -> bool:  # only the input whose turn it is matters
        return bool(self._live) and self._inputs[self._live[self._at]].pending()


class AsyncUnion(Stream):
    """Items of its inputs as they become ready; which input goes next is a recorded choice.

    Custom: Rx's ``merge`` subscribes to every input and forwards whatever arrives, so it would
    run inputs ahead without demand, and the interleaving of their work on shared actors could
    not be replayed. Here each pull first *chooses* an input, records it, then pulls that one
    input to its next item — exactly the reference's step, so a replay issues the same actor
    calls in the same order. The choice prefers, in rotation after the last one, an input that
    can deliver without waiting (or is idle, so that only pulling it makes progress); if every
    input is waiting on its actors, the driver sleeps until a result lands.
    """

    def __init__(self, runtime: Runtime, nid: int, node: g.Union, inputs: list[Stream]) -> None:
        self._runtime = runtime
        self._nid = nid
        self._node = node
        self._inputs = inputs
        self._live = list(range(len(inputs)))
        self._last = -1

    def _pick(self) -> int:
        while True:
            seen = self._runtime.generation
            rotation = sorted(self._live, key=lambda i: (i <= self._last, i))
            for i in rotation:
                stream = self._inputs[i]
                if stream.ready() or not stream.pending():
                    return i
            self._runtime.wait_for_change(seen, self._node.describe())

    def pull(self) -> Any:
        while self._live:
            i = self._pick()
            self._runtime.choose(self._nid, self._node, i, list(self._live))
            self._last = i
            x = self._inputs[i].pull()
            if x is END:
                self._live.remove(i)
                continue
            if self._node.emits(i):
                return x
        return END

    def ready(self) -> bool:
        return not self._live or any(self._inputs[i].ready() for i in self._live)

    def pending(self) -> bool:
        return not self.ready() and any(self._inputs[i].pending() for i in self._live)
