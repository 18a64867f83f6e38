"""One rx run's machinery: the driver's condition and deadlines, actor threads, requests, close.

The driver is whichever thread pulls the run (the consumer of ``rxrl.run``, or the thread that
drains ``to_observable``); it makes every submission to an actor, in the order the reference
interpreter would, and waits on one condition that every completion signals. Each actor (and
each iterable shard) owns an Rx ``EventLoopScheduler``: one thread that runs its calls in
submission order, so an actor sees its samples, broadcasts and calls in the reference order.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import reactivex as rx
from reactivex import Observable, abc
from reactivex.internal.exceptions import DisposedException
from reactivex.scheduler import EventLoopScheduler
from reactivex.scheduler.scheduleditem import ScheduledItem

from rxrl import graph as g
from rxrl.actors import ActorGroup
from rxrl.backends import common
from rxrl.backends.common import Blocked, Reporter, creation_error, operator_error
from rxrl.backends.engine.stream import Request
from rxrl.backends.engine.stream import Runtime as EngineRuntime
from rxrl.backends.engine.stream import Shard as EngineShard
from rxrl.backends.kernels import Clock
from rxrl.backends.rx.stream import Closed, Failure, Stream
from rxrl.errors import WaitTimeoutError
from rxrl.events import EventSink
from rxrl.schedule import Recorder


@attrs.frozen(kw_only=True)
class Options(common.Options):
    """The rx backend's options (keyword arguments of ``rxrl.run(plan, "rx", ...)``)."""

    ALIASES: ClassVar[Mapping[str, str]] = {"timeout": "timeout_s", "close_timeout": "close_timeout_s"}

    timeout_s: float | None = 600.0
    #: seconds ``close()`` waits for actor threads to finish the call they are in
    close_timeout_s: float = 5.0

    def check(self) -> None:
        super().check()
        common.seconds("close_timeout_s", self.close_timeout_s)


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


_PENDING: Any = object()


class RxRequest(Request):
    """Work on an actor thread; its outcome is set (under the run's lock) when it completes.

    ``node`` is the call or broadcast whose user function ran (its errors are raised as that
    operator's); None for a shard's pull, whose errors already name their operator.
    """

    __slots__ = ("_value", "node")

    def __init__(self, node: g.Node | None) -> None:
        self._value: Any = _PENDING
        self.node = node

    def done(self) -> bool:
        return self._value is not _PENDING

    def land(self, value: Any, stamp: int) -> None:
        """Completion (called under the run's lock)."""
        self._value = value
        self.stamp = stamp

    def outcome(self) -> Any:
        value = self._value
        if type(value) is Failure:
            error = value.error
            if self.node is not None and isinstance(error, Exception) and not isinstance(error, Closed):
                raise operator_error(self.node, error) from error
            raise error
        return value


class Shard(EngineShard):
    """One stream of a shard chain: pulled only on its executor's thread (its actor's)."""

    def __init__(self, runtime: Runtime, executor: Executor, stream: Stream, where: str,
                 group: ActorGroup[Any] | None, index: int) -> None:
        self.runtime, self.executor, self.stream = runtime, executor, stream
        self.where, self.group, self.index = where, group, index

    def request(self, want: bool) -> Request:
        """Pull one item on the shard's thread."""
        return self.runtime.submit(self.executor.submit(self.stream.pull), None, self.reader_id,
                                   self.where)


def _apply(fn: Any, x: Any, actor: Any) -> Any:
    return fn(actor, x)


class Runtime(EngineRuntime):
    """The state one rx run shares between its driver, its actor threads and ``close``."""

    def __init__(self, recorder: Recorder, on_event: EventSink | None, options: Options) -> None:
        self.report = Reporter(recorder, on_event)
        self.blocked = Blocked()
        self.clock = Clock()
        self.options: Options = options
        self.effects: dict[tuple[str, int], int] = {}
        self.closed = False
        #: what closing releases besides threads (observable subscriptions)
        self.closers: list[Callable[[], None]] = []
        #: observable sources that may still emit (they count as work in flight)
        self.open_sources: list[Callable[[], bool]] = []
        self._generation = 0
        self._running = 0  # requests submitted and not yet completed
        self._stamps = itertools.count(1)
        self._cond = threading.Condition()
        self._close_lock = threading.Lock()
        self._executors: list[Executor] = []
        self._actors: dict[int, list[Actor]] = {}

    # ---------------------------------------------------------------- waking and waiting

    def signal(self, update: Callable[[], None] | None = None) -> None:
        """Apply ``update`` (a completion) under the driver's lock and wake the driver."""
        with self._cond:
            if update is not None:
                update()
            self._generation += 1
            self._cond.notify_all()

    @property
    def generation(self) -> int:
        return self._generation

    def wait_until(self, done: Callable[[], bool], what: str) -> None:
        """Wait until ``done()`` (checked under the lock) or raise at the deadline."""
        timeout = self.options.timeout_s
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if done():
                return
        with self.report.waiting(what), self._cond:
            while not done():
                if self.closed:
                    raise Closed()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WaitTimeoutError(
                        f"{what}: nothing arrived within timeout_s={timeout} s (the rx backend's "
                        "timeout_s option; None waits forever)")
                self._cond.wait(left)

    def wait_any(self, requests: Sequence[Request], node: g.Node, where: str) -> None:
        self.wait_until(lambda: any(r.done() for r in requests),
                        f"{node.describe()}: waiting for {where}")

    def wait_all(self, requests: Sequence[Request], node: g.Node, where: str) -> None:
        self.wait_until(lambda: all(r.done() for r in requests),
                        f"{node.describe()}: waiting for {where}")

    def wait_for_change(self, seen: int, what: str) -> None:
        self.wait_until(lambda: self._generation != seen, f"{what}: waiting for any result")

    def in_flight(self) -> bool:
        return self._running > 0 or any(still() for still in self.open_sources)

    def stamp(self) -> int:
        with self._cond:
            return next(self._stamps)

    def submit(self, work: Observable[Any], node: g.Node | None, nid: int = -1,
               where: str = "") -> RxRequest:
        """A request for the outcome of ``work`` (an actor thread's ``submit``), for operator
        ``nid`` (``node``, or the collector of a shard) on ``where`` (for `Timings`)."""
        request = RxRequest(node)
        with self._cond:
            self._running += 1
        observing = self.report.on_event is not None and nid >= 0  # not an actor's creation
        if observing:
            self.report.request("sent", nid, node, request, where)

        def complete(value: Any) -> None:
            def land() -> None:
                self._running -= 1
                request.land(value, next(self._stamps))
            self.signal(land)
            if observing:
                self.report.request("done", nid, node, request, where)

        work.subscribe(complete)
        return request

    # ---------------------------------------------------------------- threads and actors

    def executor(self, name: str) -> Executor:
        """A new thread of this run (an actor's or an iterable shard's)."""
        if self.closed:
            raise Closed()
        made = Executor(self, name)
        self._executors.append(made)
        return made

    def start_actors(self, groups: Sequence[ActorGroup[Any]]) -> None:
        """Make every actor on its own thread (all in parallel) and wait for them."""
        started = []
        for group in groups:
            executors = [self.executor(f"{group.name}[{i}]") for i in range(group.size)]
            made = [ex.submit(functools.partial(group.make, i)) for i, ex in enumerate(executors)]
            started.append((group, executors, self.submit(rx.fork_join(*made), None)))
        for group, executors, request in started:
            self.wait_until(request.done, f"creating the actors of {group!r}")
            instances = request.outcome()
            for i, instance in enumerate(instances):
                if isinstance(instance, Failure):
                    raise creation_error(group, i, instance.error) from instance.error
            self._actors[id(group)] = [Actor(x, ex) for x, ex in zip(instances, executors,
                                                                      strict=True)]

    def actors(self, group: ActorGroup[Any]) -> list[Actor]:
        """The actors of ``group`` in this run."""
        return self._actors[id(group)]

    def shards(self, node: g.ShardChain, nid: int) -> list[EngineShard]:
        raise AssertionError("the rx lowering builds shard chains itself")

    def apply(self, nid: int, node: g.Call | g.CallAll, index: int, item: Any, want: bool) -> Request:
        actor = self.actors(node.group)[index]
        return self.submit(actor.submit(functools.partial(_apply, node.fn, item)), node, nid,
                           f"{node.group.name}[{index}]")

    def effect(self, nid: int, node: g.Broadcast, index: int, item: Any) -> Request:
        actor = self.actors(node.group)[index]
        return self.submit(actor.submit(functools.partial(_apply, node.fn, item)), node, nid,
                           f"{node.group.name}[{index}]")

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
        deadline = time.monotonic() + self.options.close_timeout_s
        current = threading.current_thread()
        for ex in self._executors:
            if ex.thread is not None and ex.thread is not current and ex.thread.is_alive():
                ex.thread.join(max(0.0, deadline - time.monotonic()))

    def threads(self) -> list[threading.Thread]:
        """The threads this run started (for tests and diagnostics)."""
        return [ex.thread for ex in self._executors if ex.thread is not None]
