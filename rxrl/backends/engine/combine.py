"""Driver combinators: ``zip``, round-robin and async ``union``/``concurrently``, ``split``."""

from __future__ import annotations

import functools
from typing import Any

from rxrl import graph as g
from rxrl.backends.engine.stream import Runtime, Stream
from rxrl.backends.kernels import Tee, Tried, Turns, round_robin_next
from rxrl.ready import END, NOT_READY


class Zip(Stream):
    """One item from each input in turn, left to right; a tuple once the row is complete.

    An input that is not ready leaves the row so far waiting; the row resumes at that input
    on the next pull. The first input to end ends the zip (the row so far is dropped).
    """

    def __init__(self, rt: Runtime, inputs: list[Stream]) -> None:
        self._rt = rt
        self._inputs = inputs
        self._row: list[Any] = []
        self._done = False
        for s in inputs:
            s.want()

    def inputs(self) -> list[Stream]:
        return self._inputs

    def pull(self) -> Any:
        if self._done:
            return END
        row = self._row
        while len(row) < len(self._inputs):
            x = self._inputs[len(row)].pull()
            if x is END:
                self._done = True
                self.cancel()
                return END
            if x is NOT_READY:
                return x
            row.append(self._rt.value(x))
        self._row = []
        return tuple(row)

    def ready(self) -> bool:
        return self._done or all(s.ready() for s in self._inputs[len(self._row):])

    def pending(self) -> bool:  # an idle input needs a pull: then so does the zip
        rest = self._inputs[len(self._row):]
        return not self.ready() and all(s.ready() or s.pending() for s in rest)


class RoundRobin(Stream):
    """``weights[i]`` items from input i in turn (see ``kernels.Turns``); ended inputs drop out."""

    def __init__(self, rt: Runtime, node: g.Union, inputs: list[Stream]) -> None:
        self._rt, self._node = rt, node
        self.feeds = inputs
        self._turns = Turns(node.weights)

    def _pull(self, i: int) -> Any:
        return self.feeds[i].pull()

    def pull(self) -> Any:
        return round_robin_next(self._turns, self._pull, self._node.emits, self._rt.clock)

    def ready(self) -> bool:
        return not self._turns.live or self.feeds[self._turns.current()].ready()

    def pending(self) -> bool:  # only the input whose turn it is matters
        return bool(self._turns.live) and self.feeds[self._turns.current()].pending()


class AsyncUnion(Stream):
    """Items of its inputs as they become ready; which input is pulled is a recorded choice.

    Each pull *chooses* an input, records it, then pulls that one input — exactly the
    reference's step, so a replay issues the same actor calls in the same order. The choice
    prefers, in rotation after the last one, an input that can deliver without waiting (or
    is idle, so that only pulling it makes progress); if every input is waiting on its
    actors, the driver sleeps until a result lands. An input that answers ``NOT_READY`` is
    passed over until some input makes progress; if every input is not ready, so is the union.
    """

    def __init__(self, rt: Runtime, nid: int, node: g.Union, inputs: list[Stream]) -> None:
        self._rt, self._nid, self._node = rt, nid, node
        self.feeds = inputs
        self._live = list(range(len(inputs)))
        self._last = -1
        #: inputs not ready since the clock last moved (kept across pulls, as the reference does)
        self._tried = Tried(rt.clock)

    def _pick(self, candidates: list[int]) -> int | None:
        for i in sorted(candidates, key=lambda i: (i <= self._last, i)):
            stream = self.feeds[i]
            if stream.ready() or not stream.pending():
                return i
        return None

    def pull(self) -> Any:
        rt, tried = self._rt, self._tried
        while self._live:
            seen = rt.generation
            candidates = [i for i in self._live if i not in tried]
            if not candidates:
                return NOT_READY
            i = self._pick(candidates)
            if i is None:
                rt.wait_for_change(seen, self._node.describe())
                continue
            rt.report.choice(self._nid, self._node, i, candidates)
            self._last = i
            x = self.feeds[i].pull()
            if x is NOT_READY:
                if not self.feeds[i].deferred():  # a deferred result: pending, not tried
                    tried.add(i)
            elif x is END:
                self._live.remove(i)
            elif self._node.emits(i):
                return x
        return END

    def ready(self) -> bool:
        return not self._live or any(self.feeds[i].ready() for i in self._live)

    def pending(self) -> bool:
        return not self.ready() and any(self.feeds[i].pending() for i in self._live)


class Split(Tee):
    """A split's tee over its source stream; ``Branch`` streams read it."""

    def __init__(self, rt: Runtime, nid: int, node: g.Split, source: Stream) -> None:
        super().__init__(node.n, node.max_lag, rt.clock)
        self.rt, self.nid, self.node, self.source = rt, nid, node, source
        self.wanted = [False] * node.n
        for i in range(node.n):
            rt.blocked.watch(nid, i, functools.partial(self.why, node, i))

    def want(self, i: int) -> None:
        """Branch ``i``'s consumer reads values: so does the source's, for that branch."""
        self.wanted[i] = True
        self.source.want()


class Branch(Stream):
    """Output ``index`` of a split: every item of the source, at most ``max_lag`` ahead."""

    def __init__(self, split: Split, index: int) -> None:
        self._split, self._i = split, index

    def pull(self) -> Any:
        split = self._split
        return split.next(self._i, split.source.pull)

    def ready(self) -> bool:
        split, i = self._split, self._i
        if split.buffers[i] or split.ended:
            return True
        return not split.lagging(i) and split.source.ready()

    def pending(self) -> bool:
        split, i = self._split, self._i
        return not self.ready() and not split.lagging(i) and split.source.pending()

    def want(self) -> None:
        self._split.want(self._i)

    def cancel(self) -> None:
        split = self._split
        if split.close(self._i):
            split.source.cancel()
