"""Interop with reactivex: Observables as plan sources, and runs as Observables.

``from_observable(obs)`` makes any ``Observable[T]`` a ``Plan[T]``; ``to_observable(plan)``
and ``Run.as_observable()`` turn a run into an ``Observable[T]`` that plain Rx operators can
consume (``ops.sample``, ``ops.throttle_first``, ...). Errors arrive as ``on_error``, the end
of the stream as ``on_completed``; disposing the subscription closes the run and its actors.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import reactivex as rx
from reactivex import Observable, abc
from reactivex.disposable import CompositeDisposable, Disposable
from reactivex.scheduler import NewThreadScheduler

from rxrl.compile import compile_plan
from rxrl.errors import PlanError, call_site
from rxrl.events import EventSink
from rxrl.graph import FromObservable
from rxrl.plan import Plan
from rxrl.ready import END as _END
from rxrl.run import Backend, Run, get_backend, run
from rxrl.schedule import Schedule, Trace

T = TypeVar("T")

__all__ = ["ObservableQueue", "from_observable", "run_as_observable", "to_observable"]

#: what ``ObservableQueue.take`` returns at the end of the observable (every backend's marker)
END: Any = _END



def from_observable(observable: Observable[T], *, buffer: int = 16) -> Plan[T]:
    """A driver stream over the items of ``observable``, subscribed when the plan is first pulled.

    Each run subscribes afresh (a cold observable replays; a hot one is joined where it is).
    At most ``buffer`` items wait unpulled: a source that emits faster is held back, its
    emitting thread waiting until the plan pulls. ``on_error`` is raised from the run where
    the error sits in the stream; ``on_completed`` ends the stream. Closing the run disposes
    the subscription.

    >>> import reactivex as rx
    >>> import rxrl
    >>> from rxrl import ops
    >>> plan = rxrl.from_observable(rx.of(1, 2, 3)) | ops.map(lambda x: x * 10)
    >>> list(rxrl.run(plan))
    [10, 20, 30]
    """
    site = call_site()
    if not isinstance(observable, Observable):
        raise PlanError("from_observable()", site,
                        f"expects a reactivex Observable, got {type(observable).__name__}",
                        "wrap iterables with rxrl.from_iterable instead")
    if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
        raise PlanError("from_observable()", site, f"buffer must be an integer >= 1, got {buffer!r}")
    return Plan(FromObservable(observable=observable, buffer=buffer, site=site))


class _Stop(Exception):
    """Raised into a source that keeps emitting synchronously after the run closed."""


class ObservableQueue:
    """A bounded, blocking queue fed by one subscription to a ``FromObservable`` source.

    The subscription is made on a thread of its own, so that a source that emits
    synchronously while being subscribed (``rx.of``, ``rx.from_iterable``) does so on that
    thread, where waiting for room in the queue holds it back without blocking the consumer.
    ``on_change`` (if given) is called after every arrival, for consumers that wait elsewhere.
    Backends share this class; ``close()`` releases a waiting producer and disposes the
    subscription.
    """

    def __init__(self, node: FromObservable, on_change: Callable[[], None] | None = None) -> None:
        self._node = node
        self._on_change = on_change
        self._cond = threading.Condition()
        self._items: deque[tuple[str, Any]] = deque()
        self._closed = False
        self._started = False
        self._subscription: abc.DisposableBase | None = None

    @property
    def started(self) -> bool:
        """Whether the observable has been subscribed to."""
        return self._started

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    @property
    def ended(self) -> bool:
        """Whether the observable completed or failed (nothing more will arrive)."""
        with self._cond:
            return bool(self._items) and self._items[-1][0] != "next"

    def start(self) -> None:
        """Subscribe to the observable (once), on a new thread."""
        with self._cond:
            if self._started or self._closed:
                return
            self._started = True
        NewThreadScheduler().schedule(self._subscribe)

    def _subscribe(self, _: abc.SchedulerBase, __: Any = None) -> None:
        try:
            subscription = self._node.observable.subscribe(
                self._on_next, self._on_error, self._on_completed)
        except _Stop:  # a synchronous source that did not catch it: it has stopped
            return
        with self._cond:
            self._subscription = subscription
        if self.closed:  # closed while subscribing: close() found no subscription to dispose
            subscription.dispose()

    def ready(self) -> bool:
        """Whether ``take`` would return without waiting."""
        return bool(self._items)

    def take(self, wait: Callable[[Callable[[], bool]], None] | None = None) -> Any:
        """The next item, ``END`` at completion; raises the error of ``on_error``.

        Waits for an arrival on this queue's own condition, or with ``wait(predicate)`` if
        given (a backend's own waiting, which must return once ``predicate()`` is true).
        """
        self.start()
        if wait is not None:
            wait(self.ready)
        with self._cond:
            while not self._items:
                if self._closed:
                    return END
                self._cond.wait()
            kind, value = self._items[0]
            if kind == "next":
                self._items.popleft()
                self._cond.notify_all()  # room for a waiting producer
                return value
        # a terminal notification stays in place: every later take sees it again
        if kind == "error":
            raise value
        return END

    def close(self) -> None:
        """Stop: release a waiting producer, drop buffered items, dispose the subscription."""
        with self._cond:
            self._closed = True
            subscription, self._subscription = self._subscription, None
            self._cond.notify_all()
        if subscription is not None:
            subscription.dispose()

    def _put(self, kind: str, value: Any) -> None:
        with self._cond:
            while (kind == "next" and len(self._items) >= self._node.buffer
                   and not self._closed):
                self._cond.wait()
            if self._closed:
                if kind == "next" and self._subscription is None:
                    # Still inside subscribe(): a synchronous source (rx.from_iterable on the
                    # current-thread scheduler) that no disposable can reach yet. Rx sources
                    # turn an exception of on_next into their end; that is the only way out.
                    raise _Stop()
                return  # an emission that raced with dispose(): drop it
            self._items.append((kind, value))
            self._cond.notify_all()
        if self._on_change is not None:
            self._on_change()

    def _on_next(self, value: Any) -> None:
        self._put("next", value)

    def _on_error(self, error: Exception) -> None:
        self._put("error", error)

    def _on_completed(self) -> None:
        self._put("completed", None)


def run_as_observable(source: Run[T], scheduler: abc.SchedulerBase | None = None) -> Observable[T]:
    """The items of a started run as an ``Observable`` (see ``Run.as_observable``).

    A run is one stream, so the observable accepts one subscription; a second one receives
    ``on_error``. The run is drained on ``scheduler`` (default: a new thread), one item per
    ``on_next``: a slow observer slows the run down rather than making it buffer.
    """
    claimed = threading.Lock()

    def subscribe(observer: abc.ObserverBase[T], default: abc.SchedulerBase | None = None
                  ) -> abc.DisposableBase:
        if not claimed.acquire(blocking=False):
            observer.on_error(RuntimeError(
                "this run is already subscribed to: a run is one stream and has one consumer "
                "(rxrl.to_observable(plan) makes an observable that starts a run per subscriber)"))
            return Disposable()
        disposed = threading.Event()

        def drain(_: abc.SchedulerBase, __: Any = None) -> None:
            try:
                for item in source:
                    if disposed.is_set():
                        return
                    observer.on_next(item)
            except Exception as error:
                if not disposed.is_set():
                    observer.on_error(error)
                return
            finally:
                source.close()
            if not disposed.is_set():
                observer.on_completed()

        def dispose() -> None:
            disposed.set()
            source.close()

        scheduled = (scheduler or default or NewThreadScheduler()).schedule(drain)
        return CompositeDisposable(scheduled, Disposable(dispose))

    return Observable(subscribe)


def to_observable(
    plan: Plan[T],
    backend: str | Backend = "reference",
    *,
    scheduler: abc.SchedulerBase | None = None,
    schedule: Schedule | Trace | None = None,
    on_event: EventSink | None = None,
    **options: Any,
) -> Observable[T]:
    """A cold ``Observable`` of the plan's outputs: each subscription starts its own run.

    The plan is checked now (a bad plan or unknown backend raises here, not on subscribe).
    Each subscriber's run is drained on ``scheduler`` (default: a new thread per
    subscription), so ``subscribe`` returns at once even for an endless training run.
    Errors of the run arrive as ``on_error``, its end as ``on_completed``; disposing the
    subscription closes the run and stops its actors. Other arguments are ``rxrl.run``'s.

    >>> import rxrl
    >>> from reactivex import operators as rx_ops
    >>> from reactivex.scheduler import CurrentThreadScheduler
    >>> plan = rxrl.from_iterable(range(10))
    >>> seen: list[int] = []
    >>> obs = rxrl.to_observable(plan, scheduler=CurrentThreadScheduler())
    >>> _ = obs.pipe(rx_ops.filter(lambda x: x % 3 == 0)).subscribe(seen.append)
    >>> seen
    [0, 3, 6, 9]
    """
    given: object = plan
    if not isinstance(given, Plan):
        raise PlanError("to_observable()", call_site(), f"expects a Plan, got {type(given).__name__}")
    compile_plan(plan.node)  # a plan that cannot run fails here, not at subscription
    get_backend(backend)

    def start(_: abc.SchedulerBase | None) -> Observable[T]:
        started = run(plan, backend, schedule=schedule, on_event=on_event, **options)
        return run_as_observable(started, scheduler)

    return rx.defer(start)
