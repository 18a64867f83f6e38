"""Where streams come from: iterables on the driver, iterables per shard, and actors."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from rxrl.actors import A, ActorGroup
from rxrl.errors import PlanError, call_site
from rxrl.graph import FromActors, FromIterable, FromIterables
from rxrl.plan import Plan, Shards
from rxrl.ready import NotReady

T = TypeVar("T")


def from_iterable(xs: Iterable[T]) -> Plan[T]:
    """A driver stream over ``xs``; each run iterates ``xs`` afresh.

    >>> import rxrl
    >>> list(rxrl.run(rxrl.from_iterable(range(3))))
    [0, 1, 2]
    """
    site = call_site()
    if not isinstance(xs, Iterable):
        raise PlanError("from_iterable()", site, f"expects an iterable, got {type(xs).__name__}")
    return Plan(FromIterable(iterable=xs, site=site))


def from_iterables(xss: Iterable[Iterable[T]]) -> Shards[T]:
    """``Shards[T]`` with one shard per iterable (handy for tests and for data-parallel input).

    >>> import rxrl
    >>> from rxrl import ops
    >>> list(rxrl.run(rxrl.from_iterables([[1, 2], [3, 4, 5]]) | ops.barrier()))
    [[1, 3], [2, 4], [5]]
    """
    site = call_site()
    iterables = tuple(xss)
    if not iterables:
        raise PlanError("from_iterables()", site, "needs at least one iterable (one per shard)")
    for i, xs in enumerate(iterables):
        if not isinstance(xs, Iterable):
            raise PlanError("from_iterables()", site,
                            f"shard {i} is not iterable: {type(xs).__name__}")
    return Shards(FromIterables(iterables=iterables, site=site))


def from_actors(group: ActorGroup[A], fn: Callable[[A], T | NotReady]) -> Shards[T]:
    """Shard ``i`` yields ``fn(actor_i)`` each time it is pulled: an infinite stream per actor.

    ``fn`` is typically an unbound method, e.g. ``from_actors(workers, RolloutWorker.sample)``.
    It may return ``rxrl.NOT_READY`` to say it has nothing to give yet (a replay buffer below
    ``learning_starts``): the shard is then asked again only once its actor has been sent a
    call or a broadcast, and nothing downstream sees the value (docs/semantics.md,
    "Readiness"); ``NotReady`` is not part of the item type.

    >>> import rxrl
    >>> from rxrl import ops
    >>> class Counter:
    ...     def __init__(self) -> None:
    ...         self.n = 0
    ...     def next(self) -> int:
    ...         self.n += 1
    ...         return self.n
    >>> counters = rxrl.actors(Counter, 2)
    >>> list(rxrl.run(rxrl.from_actors(counters, Counter.next) | ops.barrier() | ops.take(2)))
    [[1, 1], [2, 2]]
    """
    site = call_site()
    if not isinstance(group, ActorGroup):
        raise PlanError("from_actors()", site,
                        f"expects an actor group from rxrl.actors(...), got {type(group).__name__}")
    if not callable(fn):
        raise PlanError(f"from_actors({group!r})", site, f"fn is not callable: {fn!r}")
    return Shards(FromActors(group=group, fn=fn, site=site))
