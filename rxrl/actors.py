"""Actor groups (the stateful participants of a plan) and `Tagged` items that remember their shard."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar

import attrs

from rxrl.errors import PlanError, call_site

A = TypeVar("A")
T = TypeVar("T")
U = TypeVar("U")
P = ParamSpec("P")


@attrs.frozen
class _Construct:
    """Picklable ``index -> cls(*args, **kwargs)`` (the same arguments for every actor)."""

    cls: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]

    def __call__(self, index: int) -> Any:
        return self.cls(*self.args, **self.kwargs)


@attrs.frozen(eq=False)
class ActorGroup(Generic[A]):
    """``size`` actors made by ``make(index)``; a plan names the group, a backend creates it.

    The group is a description: the reference backend makes in-process instances, the Ray
    backend makes one Ray actor per index. Identity matters: every operator that names the
    same group talks to the same actors within one run.
    """

    make: Callable[[int], A]
    size: int
    name: str
    site: str
    options: Mapping[str, Any] = attrs.field(factory=dict)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"{self.name}×{self.size}"

    def with_options(self, **options: Any) -> ActorGroup[A]:
        """A new group with backend options (e.g. Ray resources ``num_cpus=1``) merged in."""
        return attrs.evolve(self, options={**self.options, **options})


def _check_size(n: int, name: str, site: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise PlanError(
            f"actors({name}, {n!r})",
            site,
            f"an actor group needs a positive integer number of actors, got {n!r}",
            "pass n >= 1",
        )


def actors(cls: Callable[P, A], n: int, /, *args: P.args, **kwargs: P.kwargs) -> ActorGroup[A]:
    """A group of ``n`` actors, each constructed as ``cls(*args, **kwargs)``.

    >>> class Counter:
    ...     def __init__(self, start: int) -> None:
    ...         self.n = start
    >>> group = actors(Counter, 2, start=10)
    >>> group, len(group)
    (Counter×2, 2)
    """
    site = call_site()
    name = str(getattr(cls, "__name__", type(cls).__name__))
    _check_size(n, name, site)
    return ActorGroup(_Construct(cls, args, dict(kwargs)), n, name, site)


def indexed_actors(make: Callable[[int], A], n: int, /, name: str | None = None) -> ActorGroup[A]:
    """A group of ``n`` actors, actor ``i`` constructed as ``make(i)`` (e.g. a per-worker seed).

    >>> group = indexed_actors(lambda i: {"seed": 100 + i}, 3, name="Env")
    >>> group
    Env×3
    """
    site = call_site()
    label = name or str(getattr(make, "__name__", "actor"))
    _check_size(n, label, site)
    return ActorGroup(make, n, label, site)


@attrs.frozen
class Tagged(Generic[T]):
    """An item together with the shard it came from (``gather(tagged=True)``).

    ``ops.call(group, fn)`` sends a ``Tagged`` item that came from ``group`` back to the
    actor that produced it.
    """

    value: T
    shard: int
    group: ActorGroup[Any] | None = attrs.field(default=None, eq=False, repr=False)

    def with_value(self, value: U) -> Tagged[U]:
        """The same tag around a new value (keeps the route back to the source actor)."""
        return Tagged(value, self.shard, self.group)
