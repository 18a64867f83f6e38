"""Sources: iterables (on the driver or one thread per shard), actors, and observables."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rxrl import graph as g
from rxrl.backends.rx.runtime import Runtime
from rxrl.backends.rx.stream import END, Stream
from rxrl.errors import OperatorError
from rxrl.interop import ObservableQueue


class IterSource(Stream):
    """The items of an iterator; once it has ended or raised, it stays ended."""

    def __init__(self, items: Iterator[Any]) -> None:
        self._items: Iterator[Any] | None = items

    def pull(self) -> Any:
        if self._items is None:
            return END
        try:
            return next(self._items)
        except StopIteration:
            self._items = None
            return END
        except BaseException:
            self._items = None
            raise


class ActorSource(Stream):
    """``fn(actor)`` per pull, forever (until ``fn`` raises): a ``from_actors`` shard."""

    def __init__(self, node: g.FromActors, actor: Any) -> None:
        self._node = node
        self._actor = actor
        self._failed = False

    def pull(self) -> Any:
        if self._failed:
            return END
        try:
            return self._node.fn(self._actor)
        except Exception as e:
            self._failed = True
            raise OperatorError(self._node.label, self._node.site, e) from e


class ObservableSource(Stream):
    """The items of a ``from_observable`` source, through the shared bounded queue."""

    def __init__(self, runtime: Runtime, node: g.FromObservable) -> None:
        self._runtime = runtime
        self._what = node.describe()
        self._queue = ObservableQueue(node, on_change=runtime.signal)
        runtime.closers.append(self._queue.close)
        runtime.open_sources.append(self._open)

    def _open(self) -> bool:
        """Whether the observable may still emit (it is work in flight for deadlock checks)."""
        return self._queue.started and not self._queue.closed and not self._queue.ended

    def pull(self) -> Any:
        return self._queue.take(wait=self._wait)

    def _wait(self, arrived: Any) -> None:
        self._runtime.wait_until(arrived, self._what)

    def ready(self) -> bool:
        return self._queue.ready()

    def pending(self) -> bool:
        return self._queue.started and not self._queue.ready()
