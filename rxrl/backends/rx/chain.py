"""Shard-local operators as a pipeline of Rx operators, fed one pulled item at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reactivex import Observable

from rxrl.backends.rx.stream import END, NOT_READY, Push, Sink, Stream

Operator = Callable[[Observable[Any]], Observable[Any]]


class Chain(Stream):
    """``source`` piped through Rx ``operators``; each pull pushes upstream items until one comes out.

    Rx operators are push-based and have no notion of demand; feeding them by hand from a
    pull keeps the contract's laziness: ``filter`` pulls until an item passes, ``window(n)``
    pulls ``n``, ``take(n)`` completes on its n-th item so item n+1 is never pulled, and
    ``take(0)`` completes before anything is pulled. Consecutive local operators fuse into one
    chain (``then``) until the chain is first pulled. A source that is not ready makes the
    chain not ready, without pushing anything (a window half full stays half full).
    """

    def __init__(self, source: Stream, operators: tuple[Operator, ...]) -> None:
        self._source = source
        self.feeds = [source]
        self._operators = operators
        self._head: Push | None = None
        self._sink = Sink()

    def then(self, operator: Operator) -> Chain:
        """This chain with one more operator (before it is first pulled)."""
        assert self._head is None, "a chain is extended only while lowering"
        return Chain(self._source, (*self._operators, operator))

    def _start(self) -> Push:
        head = Push()
        sink = self._sink
        head.observable.pipe(*self._operators).subscribe(sink.on_next, sink.on_error,
                                                         sink.on_completed)
        self._head = head
        return head

    def pull(self) -> Any:
        head = self._head or self._start()
        sink = self._sink
        while not sink.items and not sink.done:
            try:
                x = self._source.pull()
            except BaseException:
                sink.done = True  # a source that raised is finished, like a generator
                raise
            if x is NOT_READY:
                return x
            if x is END:
                head.on_completed()
            else:
                head.on_next(x)
        x = sink.take()
        if x is END:
            self._source.cancel()  # take is done: nothing more is read
        return x

    def ready(self) -> bool:
        return bool(self._sink.items) or self._sink.done or self._source.ready()

    def pending(self) -> bool:
        return not self.ready() and self._source.pending()


def extend(stream: Stream, operator: Operator) -> Chain:
    """``stream`` followed by ``operator``, fused into ``stream`` if it is a chain."""
    if isinstance(stream, Chain):
        return stream.then(operator)
    return Chain(stream, (operator,))
