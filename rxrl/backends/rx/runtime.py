"""One run's machinery: the driver's condition and deadlines, actor threads, choices, close.

The driver is whichever thread pulls the run (the consumer of ``rxrl.run``, or the thread that
drains ``to_observable``); it makes every submission to an actor, in the order the reference
interpreter would, and waits on one condition that every completion signals. Each actor (and
each iterable shard) owns an Rx ``EventLoopScheduler``: one thread that runs its calls in
submission order, so an actor sees its samples, broadcasts and calls in the reference order.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import reactivex as rx
from reactivex import Observable, abc
from reactivex.internal.exceptions import DisposedException
from reactivex.scheduler import EventLoopScheduler
from reactivex.scheduler.scheduleditem import ScheduledItem

from rxrl import graph as g
from rxrl.actors import ActorGroup
from rxrl.backends.rx.stream import Closed, Failure
from rxrl.errors import ActorError
from rxrl.events import Event, EventSink
from rxrl.schedule import Recorder


@attrs.frozen
class Options:
    """The rx backend's options (keyword arguments of ``rxrl.run(plan, "rx", ...)``)."""

    #: seconds the driver waits for any one result (an actor's, an observable's) before it
    #: raises; None waits forever
    timeout: float | None = 600.0
    #: broadcasts that may still be running on the actors while the stream moves on
    max_pending_broadcasts: int = 4
    #: seconds ``close()`` waits for actor threads to finish the call they are in
    close_timeout: float = 5.0

    @classmethod
    def parse(cls, options: dict[str, Any]) -> Options:
        """Check the options of one run; unknown names are a TypeError that lists the known ones."""
        known = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"the rx backend has no option(s) {unknown}; it takes {sorted(known)}")
        made = cls(**options)
        if made.timeout is not None and not made.timeout > 0:
            raise ValueError(f"timeout must be positive seconds or None, got {made.timeout!r}")
        if made.max_pending_broadcasts < 1:
            raise ValueError("max_pending_broadcasts must be >= 1, got "
                             f"{made.max_pending_broadcasts!r}")
        return made


class _ActorScheduler(EventLoopScheduler):
    """Rx's ``EventLoopScheduler`` whose ``dispose`` always ends the thread.

    reactivex 6.1's event loop checks for disposal only at the top of its loop, and waits on
    its condition without checking again: a ``dispose`` that arrives while the thread runs an
    action notifies nobody, and the thread then waits forever (a lost wakeup). Queueing an
    inert item with the disposal makes the loop go round once more and see it.
    """

    def dispose(self) -> None:
        with self._condition:
            if not self._is_disposed:
                self._is_disposed = True
                self._ready_list.append(ScheduledItem(self, None, _inert, self.now))
                self._condition.notify()


def _inert(scheduler: abc.SchedulerBase, state: Any = None) -> None:
    """Never runs: a disposed loop exits before running what it finds queued."""


class Executor:
    """One thread, an Rx ``EventLoopScheduler``, that runs submitted work in order."""

    def __init__(self, runtime: Runtime, name: str) -> None:
        self.name = name
        self.thread: threading.Thread | None = None
        self._runtime = runtime
        self.scheduler = _ActorScheduler(thread_factory=self._make_thread)

    def _make_thread(self, target: Callable[[], None]) -> threading.Thread:
        self.thread = threading.Thread(target=target, name=f"rxrl-rx {self.name}", daemon=True)
        return self.thread

    def submit(self, fn: Callable[[], Any]) -> Observable[Any]:
        """Run ``fn`` on this thread; the observable emits its result (or a ``Failure``) once."""
        runtime = self._runtime

        def task() -> Any:
            if runtime.closed:  # queued before close: run no more user code
                return Failure(Closed())
            try:
                return fn()
            except BaseException as e:  # an escaping exception would kill the event loop
                return Failure(e)

        if runtime.closed:
            raise Closed()
        try:
            return rx.start(task, self.scheduler)
        except DisposedException:
            raise Closed() from None


@attrs.frozen
class Actor:
    """An in-process actor: its instance and the thread that runs every call to it."""

    instance: Any
    executor: Executor

    def submit(self, fn: Callable[[Any], Any]) -> Observable[Any]:
        """Run ``fn(instance)`` on the actor's thread, after every call submitted before."""
        return self.executor.submit(functools.partial(fn, self.instance))


class Runtime:
    """The state one rx run shares between its driver, its actor threads and ``close``."""

    def __init__(self, recorder: Recorder, on_event: EventSink | None, options: Options) -> None:
        self.recorder = recorder
        self.options = options
        self.closed = False
        #: bumped on every completion; an async union waits for it to change
        self.generation = 0
        #: what closing releases besides threads (observable subscriptions)
        self.closers: list[Callable[[], None]] = []
        self._cond = threading.Condition()
        self._close_lock = threading.Lock()
        self._executors: list[Executor] = []
        self._actors: dict[int, list[Actor]] = {}
        self._on_event = on_event
        self._event_lock = threading.Lock()

    # ---------------------------------------------------------------- waking and waiting

    def signal(self, update: Callable[[], None] | None = None) -> None:
        """Apply ``update`` (a completion) under the driver's lock and wake the driver."""
        with self._cond:
            if update is not None:
                update()
            self.generation += 1
            self._cond.notify_all()

    def wait_until(self, done: Callable[[], bool], what: str,
                   error: Callable[[str], Exception] = ActorError) -> None:
        """Wait until ``done()`` (checked under the lock) or raise ``error`` at the deadline."""
        timeout = self.options.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not done():
                if self.closed:
                    raise Closed()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise error(f"{what}: nothing arrived within {timeout} s (the rx backend's "
                                "timeout= option; pass timeout=None to wait forever)")
                self._cond.wait(left)

    def wait_for_change(self, seen: int, what: str) -> None:
        """Wait until some completion arrives after generation ``seen``."""
        self.wait_until(lambda: self.generation != seen, what, TimeoutError)

    def await_(self, result: Observable[Any], what: str) -> Any:
        """The first item of ``result`` (an actor's outcome), waiting for it on the driver."""
        box: list[Any] = []
        result.subscribe(lambda value: self.signal(lambda: box.append(value)))
        self.wait_until(lambda: bool(box), what)
        return box[0]

    # ---------------------------------------------------------------- threads and actors

    def executor(self, name: str) -> Executor:
        """A new thread of this run (an actor's or an iterable shard's)."""
        if self.closed:
            raise Closed()
        made = Executor(self, name)
        self._executors.append(made)
        return made

    def start_actors(self, groups: list[ActorGroup[Any]]) -> None:
        """Make every actor on its own thread (all in parallel) and wait for them."""
        started = []
        for group in groups:
            executors = [self.executor(f"{group.name}[{i}]") for i in range(group.size)]
            made = [ex.submit(functools.partial(group.make, i)) for i, ex in enumerate(executors)]
            started.append((group, executors, rx.fork_join(*made)))
        for group, executors, outcome in started:
            instances = self.await_(outcome, f"creating the actors of {group!r}")
            for i, instance in enumerate(instances):
                if isinstance(instance, Failure):
                    e = instance.error
                    raise ActorError(
                        f"creating actor {group.name}[{i}] (group built at {group.site}) "
                        f"raised {type(e).__name__}: {e}"
                    ) from e
            self._actors[id(group)] = [Actor(x, ex) for x, ex in zip(instances, executors,
                                                                      strict=True)]

    def actors(self, group: ActorGroup[Any]) -> list[Actor]:
        """The actors of ``group`` in this run."""
        return self._actors[id(group)]

    # ---------------------------------------------------------------- choices and events

    def choose(self, nid: int, node: g.Node, choice: int, ready: list[int]) -> None:
        """Record that input ``choice`` went next at choice point ``nid`` (among ``ready``)."""
        self.recorder.record(nid, choice)
        if self._on_event is not None:
            self.event(Event("choice", nid, node.label, None, choice, str(ready)))

    def effect(self, nid: int, node: g.Broadcast | g.Call, index: int, item: Any) -> None:
        """Report an actor effect (as the reference interpreter does)."""
        if self._on_event is not None:
            self.event(Event("call", nid, node.label, index, item,
                             f"{node.group.name}[{index}].{g.fn_name(node.fn)}"))

    @property
    def observing(self) -> bool:
        """Whether events are reported."""
        return self._on_event is not None

    def event(self, event: Event) -> None:
        """Report ``event``; actor threads and the driver report one at a time."""
        if self._on_event is not None:
            with self._event_lock:
                self._on_event(event)

    # ---------------------------------------------------------------- closing

    def close(self) -> None:
        """Stop everything: wake the driver, stop actor threads (after the call they are in).

        Idempotent and callable from any thread (a disposing subscriber's, a finalizer's).
        """
        with self._close_lock:
            if self.closed:
                return
            self.signal(lambda: setattr(self, "closed", True))
        while self.closers:
            self.closers.pop()()
        for ex in self._executors:
            ex.scheduler.dispose()
        deadline = time.monotonic() + self.options.close_timeout
        current = threading.current_thread()
        for ex in self._executors:
            if ex.thread is not None and ex.thread is not current and ex.thread.is_alive():
                ex.thread.join(max(0.0, deadline - time.monotonic()))

    def threads(self) -> list[threading.Thread]:
        """The threads this run started (for tests and diagnostics)."""
        return [ex.thread for ex in self._executors if ex.thread is not None]
