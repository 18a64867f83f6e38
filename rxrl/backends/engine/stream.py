"""The pull protocol of the driver engine: streams, requests, and the runtime they run on."""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from rxrl import graph as g
from rxrl.actors import ActorGroup
from rxrl.backends.common import Blocked, Options, Reporter
from rxrl.backends.kernels import Clock
from rxrl.errors import DeadlockError
from rxrl.ready import END, NOT_READY


class Stream(abc.ABC):
    """A lowered driver stream, pulled by the driver thread.

    ``pull`` returns the next item, ``END``, or ``NOT_READY`` (nothing now, and nothing this
    stream itself has in flight will change that: see docs/semantics.md, "Readiness"); it may
    wait for work it has submitted. ``ready`` and ``pending`` let an async union choose
    without waiting: ``ready`` means a pull would not wait; ``pending`` means not ready, but
    work in flight will change that without a pull (and wake the driver when it lands). A
    stream that is neither is *idle*: only pulling it makes progress.
    """

    #: inputs whose items this stream passes on untouched (``want`` reaches them)
    feeds: Sequence[Stream] = ()
    #: whether the consumer reads the items' values (Ray then fetches results in one object)
    wanted = False

    @abc.abstractmethod
    def pull(self) -> Any:
        """The next item, ``END`` or ``NOT_READY``."""

    def ready(self) -> bool:
        """Whether a pull would return without waiting."""
        return True

    def pending(self) -> bool:
        """Whether, without being pulled, this stream will become ready (work is in flight)."""
        return False

    def deferred(self) -> bool:
        """Whether its last ``NOT_READY`` only deferred a result still under way (a
        non-blocking call): an async union comes back to it without waiting for the clock."""
        return any(feed.deferred() for feed in self.inputs())

    def want(self) -> None:
        """Note (while lowering) that the consumer reads values."""
        self.wanted = True
        for feed in self.feeds:
            feed.want()

    def cancel(self) -> None:
        """The consumer will not pull again (a split branch stops holding its siblings back)."""
        for feed in self.inputs():
            feed.cancel()

    def inputs(self) -> Sequence[Stream]:
        """The streams this one pulls."""
        return self.feeds


class Request(abc.ABC):
    """Work submitted to an actor (a shard's next item, a call, a broadcast's effect)."""

    #: the order in which the runtime saw requests complete (0 while it has not)
    stamp: int = 0
    #: calls and broadcasts its actor had been sent when it was submitted (see ``Shard``)
    effects_at: int = 0

    @abc.abstractmethod
    def done(self) -> bool:
        """Whether it has completed (never waits)."""

    @abc.abstractmethod
    def outcome(self) -> Any:
        """Once done: the item (a value, or a runtime's handle on one), ``END`` or
        ``NOT_READY``; raises the error the reference would raise."""


class Shard(abc.ABC):
    """Where one shard stream of a collector is computed."""

    where: str
    group: ActorGroup[Any] | None
    index: int
    #: the collector that reads it (errors and timeouts name it), and its occurrence number
    reader: g.Node | None = None
    reader_id: int = -1

    @abc.abstractmethod
    def request(self, want: bool) -> Request:
        """Submit a request for the shard's next item (``want``: its value will be read)."""

    def effects(self, rt: Runtime) -> int:
        """What may change its answer after a ``NOT_READY``: the calls and broadcasts its actor
        has been sent (see ``Runtime.effects_on``)."""
        return rt.effects_on(self.group, self.index)


class Runtime(abc.ABC):
    """What a concurrent backend provides the engine: actors, requests, waiting, values."""

    report: Reporter
    blocked: Blocked
    options: Options
    #: ticks at what may make a not-ready stream ready (split takes, calls and broadcasts)
    clock: Clock
    #: calls and broadcasts submitted per actor (group key, index)
    effects: dict[tuple[str, int], int]

    def effects_on(self, group: ActorGroup[Any] | None, index: int) -> int:
        """Calls and broadcasts actor ``index`` of ``group`` has been sent."""
        return 0 if group is None else self.effects.get((group.key, index), 0)

    def stamp(self) -> int:
        """The next completion stamp (for a request completed as it was submitted)."""
        raise NotImplementedError

    def count_effect(self, group: ActorGroup[Any], index: int) -> int:
        """Count one more call or broadcast to an actor; the new count."""
        key = (group.key, index)
        count = self.effects[key] = self.effects.get(key, 0) + 1
        self.clock.tick()
        return count

    @abc.abstractmethod
    def shards(self, node: g.ShardChain, nid: int) -> list[Shard]:
        """The shards of a fused chain, read by the collector ``nid``."""

    def register(self, nid: int, node: g.Call | g.CallAll | g.Broadcast) -> None:  # noqa: B027 - optional
        """A call/broadcast of the plan (while lowering, before actors start)."""

    @abc.abstractmethod
    def apply(self, nid: int, node: g.Call | g.CallAll, index: int, item: Any, want: bool) -> Request:
        """Submit ``node.fn(actor index, item)``; its outcome is the result."""

    @abc.abstractmethod
    def effect(self, nid: int, node: g.Broadcast, index: int, item: Any) -> Request:
        """Submit a broadcast's ``node.fn(actor index, item)``; its outcome is not used."""

    def poll(self, requests: Sequence[Request]) -> None:  # noqa: B027 - optional
        """Learn, without waiting, which of ``requests`` are done (a batch of ``done()``)."""

    @abc.abstractmethod
    def wait_any(self, requests: Sequence[Request], node: g.Node, where: str) -> None:
        """Return once one of ``requests`` is done; raise at the run's deadline."""

    def result(self, request: Request, node: g.Node, where: str) -> Any:
        """``request``'s outcome, waiting for it first (a runtime may do both in one step)."""
        if not request.done():
            self.wait_any([request], node, where)
        return request.outcome()

    def wait_all(self, requests: Sequence[Request], node: g.Node, where: str) -> None:
        """Return once all of ``requests`` are done."""
        for r in requests:
            if not r.done():
                self.wait_any([r], node, where)

    @property
    @abc.abstractmethod
    def generation(self) -> int:
        """Changes whenever a request completes (a snapshot for ``wait_for_change``)."""

    @abc.abstractmethod
    def wait_for_change(self, seen: int, what: str) -> None:
        """Return once some request completed after generation ``seen`` was read."""

    @abc.abstractmethod
    def in_flight(self) -> bool:
        """Whether any work is running that could still change what is ready."""

    def value(self, item: Any) -> Any:
        """The plain value of an item (a runtime may hand on references to values)."""
        return item

    def route_key(self, item: Any) -> Any:
        """What ``route_of`` reads of an item, without fetching its value."""
        return item

    def collect(self, items: list[Any]) -> Any:
        """A barrier round of items."""
        return items

    def fail(self, node: g.Node, error: BaseException) -> NoReturn:
        """Raise ``error`` (a runtime may translate it)."""
        raise error


def outputs(rt: Runtime, root: Stream) -> Iterator[Any]:
    """The plain values of the run's root stream; waits while work is in flight and the root
    is not ready, and raises ``DeadlockError`` when nothing is (no input can ever move)."""
    root.want()
    clock = rt.clock
    while True:
        seen, ticks = rt.generation, clock.ticks
        x = root.pull()
        if x is END:
            return
        if x is NOT_READY:
            if clock.ticks != ticks:
                continue  # something moved on the way (a side flow): ask again
            if rt.in_flight():
                rt.wait_for_change(seen, "the run's output")
                continue
            raise DeadlockError(rt.blocked.report())
        yield rt.value(x)
