"""Actor effects on the driver stream: ``call`` (pipelined up to ``max_in_flight``), ``call_all``
and ``broadcast``."""

from __future__ import annotations

from collections import deque
from typing import Any, Generic, TypeVar

from rxrl import graph as g
from rxrl.backends.common import operator_error, route_of
from rxrl.backends.engine.stream import Request, Runtime, Stream
from rxrl.ready import END, NOT_READY


class _Refused(Request):
    """A call that could not be routed: it fails in its place in the output order."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def done(self) -> bool:
        return True

    def outcome(self) -> Any:
        raise self.error


Q = TypeVar("Q")


class _Pipeline(Stream, Generic[Q]):
    """What `Call` and `CallAll` share: up to ``max_in_flight`` items' submissions (a ``Q``
    each) out at once, results in input order. A pull first fills the pipeline: while fewer
    than ``max_in_flight`` are out, it pulls an item and submits it (stopping at the end or a
    not-ready input); the subclass then emits the oldest one's result. So the upstream is read
    at most ``k`` items ahead of what was emitted, and every actor receives its calls in
    stream order."""

    def __init__(self, rt: Runtime, nid: int, node: g.Call | g.CallAll, source: Stream) -> None:
        self._rt, self._nid, self._source = rt, nid, source
        self._k = node.max_in_flight
        self._calls: deque[Q] = deque()
        self._ended = False
        rt.register(nid, node)

    def inputs(self) -> list[Stream]:
        return [self._source]

    def _submit(self, x: Any) -> Q:
        raise NotImplementedError

    def _landed(self, submitted: Q) -> bool:
        """Whether a submission's results are all in."""
        raise NotImplementedError

    def _fill(self) -> Any:
        """Fill the pipeline; ``END`` / ``NOT_READY`` when nothing is out, else None."""
        calls = self._calls
        while len(calls) < self._k and not self._ended:
            x = self._source.pull()
            if x is END:
                self._ended = True
            elif x is NOT_READY:
                break
            else:
                calls.append(self._submit(x))
        if not calls:
            return END if self._ended else NOT_READY
        return None

    def ready(self) -> bool:
        calls = self._calls
        if not calls:
            return False  # a pull submits and waits
        return self._landed(calls[0]) and (len(calls) >= self._k or self._ended or self._source.ready())

    def pending(self) -> bool:
        calls = self._calls
        return (bool(calls) and not self._landed(calls[0])) or (not calls and self._source.pending())


class Call(_Pipeline[Request]):
    """``fn(actor, x)`` on the routed actor; results in input order, ``k`` calls ahead
    (`_Pipeline`)."""

    def __init__(self, rt: Runtime, nid: int, node: g.Call, source: Stream) -> None:
        super().__init__(rt, nid, node, source)
        self._node = node
        self._called = f"the actor it called ({node.group!r})"  # made once, read per item
        self._position = 0
        self._by_value = node.route is not None  # a route function reads the item's value
        if self._by_value:
            source.want()

    def _landed(self, submitted: Request) -> bool:
        return submitted.done()

    def _submit(self, x: Any) -> Request:
        rt, node = self._rt, self._node
        if self._by_value:
            x = rt.value(x)
        try:
            i = route_of(node, x if self._by_value else rt.route_key(x), self._position)
        except Exception as e:
            error = operator_error(node, e)
            error.__cause__ = e
            return _Refused(error)
        finally:
            self._position += 1
        rt.report.call(self._nid, node, i, x)
        rt.count_effect(node.group, i)
        return rt.apply(self._nid, node, i, x, self.wanted)

    def pull(self) -> Any:
        nothing = self._fill()
        if nothing is not None:
            return nothing
        calls = self._calls
        if not self._node.block:  # not ready rather than wait: a recorded choice
            self._rt.poll(calls)
            waiting = not calls[0].done()
            self._rt.report.choice(self._nid, self._node, int(waiting), [0, 1])
            if waiting:
                return NOT_READY
        head = calls.popleft()
        return self._rt.result(head, self._node, self._called)

    def ready(self) -> bool:
        if self._calls and not self._node.block:  # nobody waits on it: has its result landed?
            self._rt.poll([self._calls[0]])
        return super().ready()

    def deferred(self) -> bool:
        return not self._node.block and bool(self._calls) and not self._calls[0].done()


class CallAll(_Pipeline[list[Request]]):
    """``fn(actor, x)`` on every actor of the group at once; emits the round of their results
    (index order) once all of them are done; the first failure in index order is raised.
    Pipelined as `Call` (`_Pipeline`)."""

    def __init__(self, rt: Runtime, nid: int, node: g.CallAll, source: Stream) -> None:
        super().__init__(rt, nid, node, source)
        self._node = node

    def _landed(self, submitted: list[Request]) -> bool:
        return all(r.done() for r in submitted)

    def _submit(self, x: Any) -> list[Request]:
        rt, node = self._rt, self._node
        requests = []
        for i in range(node.group.size):
            rt.report.call(self._nid, node, i, x)
            rt.count_effect(node.group, i)
            requests.append(rt.apply(self._nid, node, i, x, self.wanted))
        return requests

    def pull(self) -> Any:
        nothing = self._fill()
        if nothing is not None:
            return nothing
        head = self._calls.popleft()
        self._rt.wait_all(head, self._node, repr(self._node.group))
        return self._rt.collect([r.outcome() for r in head])


class Broadcast(Stream):
    """``fn(actor, x)`` on every actor of the group; ``x`` passes on without waiting for it.

    Each effect is submitted to its actor before ``x`` passes on, so it lands before any
    later request to that actor (the contract) while the driver moves on. At most
    ``max_pending_broadcasts`` broadcasts may be unsettled; each pull settles those that
    landed and raises the first failure; the stream ends only after every effect landed.
    """

    def __init__(self, rt: Runtime, nid: int, node: g.Broadcast, source: Stream) -> None:
        self._rt, self._nid, self._node, self._source = rt, nid, node, source
        self.feeds = [source]
        self._running: deque[list[Request]] = deque()
        self._size = node.group.size
        rt.register(nid, node)

    def _settle(self, keep: int) -> None:
        rt, running = self._rt, self._running
        while running:
            oldest = running[0]
            rt.poll(oldest)
            if len(running) <= keep and not all(r.done() for r in oldest):
                return
            rt.wait_all(oldest, self._node, repr(self._node.group))
            running.popleft()
            for r in oldest:
                r.outcome()  # raises the first failure, in actor order

    def pull(self) -> Any:
        self._settle(self._rt.options.max_pending_broadcasts - 1)
        x = self._source.pull()
        if x is END:
            self._settle(0)
            return END
        if x is NOT_READY:
            return x
        rt = self._rt
        requests = []
        for i in range(self._size):
            rt.report.call(self._nid, self._node, i, x)
            rt.count_effect(self._node.group, i)
            requests.append(rt.effect(self._nid, self._node, i, x))
        self._running.append(requests)
        return x

    def ready(self) -> bool:
        return self._source.ready()

    def pending(self) -> bool:
        return self._source.pending()
