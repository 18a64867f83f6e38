"""The rx backend's pieces of the pull protocol: held failures, and Rx pipelines fed by hand.

Streams themselves are the engine's (``rxrl.backends.engine.stream.Stream``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs
from reactivex import Observable
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable

from rxrl.backends.engine.stream import Stream
from rxrl.ready import END, NOT_READY

__all__ = ["END", "NOT_READY", "Closed", "Failure", "Push", "Sink", "Stream"]


class Closed(Exception):
    """The run was closed while the driver waited; the stream ends quietly."""


@attrs.frozen
class Failure:
    """An exception raised by work on an actor thread, held until its result is taken."""

    error: BaseException

    def reraise(self) -> None:
        """Raise the held exception where the result is taken (as ``ray.get`` would)."""
        raise self.error


class Sink:
    """Collects what an Rx pipeline emits, so that a pull can hand it out one item at a time."""

    __slots__ = ("done", "error", "items")

    def __init__(self) -> None:
        self.items: deque[Any] = deque()
        self.done = False
        self.error: Exception | None = None

    def on_next(self, item: Any) -> None:
        """An item of the pipeline."""
        self.items.append(item)

    def on_error(self, error: Exception) -> None:
        """The pipeline failed; the error is raised by the pull that reaches it."""
        self.error = error
        self.done = True

    def on_completed(self) -> None:
        """The pipeline ended."""
        self.done = True

    def take(self) -> Any:
        """The next collected item, the pending error (raised once), or ``END``."""
        if self.items:
            return self.items.popleft()
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return END


class Push:
    """An Observable fed by hand, one subscriber at a time: the head of a pulled Rx pipeline.

    A ``Subject`` would do, but it locks and copies its observer list on every item; a
    pipeline here has exactly one subscriber, on the one thread that pulls it.
    """

    __slots__ = ("_observer", "observable")

    def __init__(self) -> None:
        self._observer: rx_abc.ObserverBase[Any] | None = None
        self.observable: Observable[Any] = Observable(self._subscribe)

    def _subscribe(self, observer: rx_abc.ObserverBase[Any],
                   scheduler: rx_abc.SchedulerBase | None = None) -> rx_abc.DisposableBase:
        self._observer = observer
        return Disposable(self._unsubscribe)

    def _unsubscribe(self) -> None:
        self._observer = None

    def on_next(self, item: Any) -> None:
        """Push an item (dropped once the pipeline has unsubscribed, e.g. after ``take``)."""
        if self._observer is not None:
            self._observer.on_next(item)

    def on_completed(self) -> None:
        """Push the end of the stream."""
        if self._observer is not None:
            self._observer.on_completed()
