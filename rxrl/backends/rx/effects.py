"""Actor effects on the driver stream: ``call`` (waits for the result) and ``broadcast`` (custom)."""

from __future__ import annotations

import functools
from collections import deque
from typing import Any

import reactivex as rx

from rxrl import graph as g
from rxrl.backends.reference import route_of
from rxrl.backends.rx.runtime import Actor, Runtime
from rxrl.backends.rx.stream import END, Closed, Failure, Stream
from rxrl.errors import OperatorError


def _raise(node: g.Node, failure: Failure) -> None:
    error = failure.error
    if isinstance(error, Exception) and not isinstance(error, Closed):
        raise OperatorError(node.label, node.site, error) from error
    raise error


class Call(Stream):
    """``fn(actor, x)`` on the routed actor's thread; the driver waits for the result.

    Queued behind earlier requests to that actor (its samples in flight), so the call lands
    in the reference order.
    """

    def __init__(self, runtime: Runtime, nid: int, node: g.Call, source: Stream) -> None:
        self._runtime = runtime
        self._nid = nid
        self._node = node
        self._source = source
        self._actors = runtime.actors(node.group)
        self._position = 0

    def pull(self) -> Any:
        x = self._source.pull()
        if x is END:
            return END
        node = self._node
        try:
            i = route_of(node, x, self._position)
        except Exception as e:
            raise OperatorError(node.label, node.site, e) from e
        self._position += 1
        self._runtime.effect(self._nid, node, i, x)
        request = self._actors[i].submit(functools.partial(_apply, node.fn, x))
        outcome = self._runtime.await_(request, f"{node.describe()} on actor {i}")
        if isinstance(outcome, Failure):
            _raise(node, outcome)
        return outcome

    def ready(self) -> bool:
        return self._source.ready()

    def pending(self) -> bool:
        return self._source.pending()


def _apply(fn: Any, x: Any, actor: Any) -> Any:
    return fn(actor, x)


class Broadcast(Stream):
    """``fn(actor, x)`` on every actor of the group; ``x`` passes on without waiting for it.

    Each effect is queued on its actor's thread before ``x`` passes on, so it lands before any
    later request to that actor (the contract's guarantee) while the driver moves on. At most
    ``max_pending_broadcasts`` broadcasts may still be running (memory stays bounded); a
    failed effect is raised at the next pull, and the stream ends only after every effect has
    landed. Custom: Rx has no notion of actors; each broadcast is a ``fork_join`` of one
    request per actor.
    """

    def __init__(self, runtime: Runtime, nid: int, node: g.Broadcast, source: Stream) -> None:
        self._runtime = runtime
        self._nid = nid
        self._node = node
        self._source = source
        self._actors: list[Actor] = runtime.actors(node.group)
        self._running: deque[list[Any]] = deque()  # each: [] until the outcomes land

    def _settle(self, keep: int) -> None:
        """Wait until at most ``keep`` broadcasts are running; raise the first failure."""
        running = self._running
        while running and (running[0] or len(running) > keep):
            if not running[0]:
                self._runtime.wait_until(lambda: bool(running[0]), self._node.describe())
            for outcome in running.popleft()[0]:
                if isinstance(outcome, Failure):
                    _raise(self._node, outcome)

    def pull(self) -> Any:
        self._settle(self._runtime.options.max_pending_broadcasts - 1)
        x = self._source.pull()
        if x is END:
            self._settle(0)
            return END
        requests = []
        for i, actor in enumerate(self._actors):
            self._runtime.effect(self._nid, self._node, i, x)
            requests.append(actor.submit(functools.partial(_apply, self._node.fn, x)))
        landed: list[Any] = []
        self._running.append(landed)
        rx.fork_join(*requests).subscribe(
            lambda outcomes: self._runtime.signal(lambda: landed.append(outcomes)))
        return x

    def ready(self) -> bool:
        return self._source.ready()

    def pending(self) -> bool:
        return self._source.pending()
