"""Actor groups (the stateful participants of a plan) and `Tagged` items that remember their shard."""

from __future__ import annotations

import pickle
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
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


#: what `Placement.strategy` may be
STRATEGIES = ("any", "pack", "spread")


@attrs.frozen
class Placement:
    """Where a distributed backend puts a group's actors (`ActorGroup.placed`).

    ``strategy``: ``"any"`` (wherever the backend finds room), ``"pack"`` (on as few nodes as
    possible) or ``"spread"`` (across as many nodes as possible) — on Ray, a placement group of
    one bundle per actor with the ``PACK`` or ``SPREAD`` strategy; ``labels``: only on nodes
    with these labels (Ray's ``label_selector``; nodes are labelled with ``ray start --labels``).
    Written as text: ``"spread"``, ``"pack"``, ``"zone=a,disk=ssd"`` (`parse`).

    >>> Placement.parse("spread")
    Placement(strategy='spread', labels={})
    >>> Placement.parse("zone=a,disk=ssd")
    Placement(strategy='any', labels={'zone': 'a', 'disk': 'ssd'})
    """

    strategy: str = "any"
    labels: Mapping[str, str] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown placement {self.strategy!r}: any, pack, spread, or node "
                             "labels as KEY=VALUE (e.g. 'zone=a')")
        if self.strategy != "any" and self.labels:
            raise ValueError(f"placement {self.strategy!r} takes no node labels: a placement "
                             "group within labelled nodes is not supported; use one or the other")

    @staticmethod
    def parse(text: str) -> Placement:
        """``"any"``, ``"pack"``, ``"spread"``, then ``KEY=VALUE`` labels, comma separated."""
        strategy, labels = "any", {}
        for part in (p.strip() for p in text.split(",")):
            key, eq, value = part.partition("=")
            if eq:
                if not key or not value:
                    raise ValueError(f"bad node label {part!r} in placement {text!r}: KEY=VALUE")
                labels[key] = value
            elif part in STRATEGIES and strategy == "any":
                strategy = part
            else:
                raise ValueError(f"unknown placement {part!r} in {text!r}: any, pack, spread, or "
                                 "node labels as KEY=VALUE (e.g. 'zone=a')")
        return Placement(strategy, labels)

    def __str__(self) -> str:
        return ",".join([*([self.strategy] if self.strategy != "any" or not self.labels else []),
                         *(f"{k}={v}" for k, v in self.labels.items())])

    def within(self, other: Placement) -> bool:
        """Whether an actor placed as ``self`` lands only where ``other``'s labels hold: it
        asks for every label ``other`` names (``other`` is labels only).

        >>> Placement.parse("zone=a,disk=ssd").within(Placement.parse("zone=a"))
        True
        >>> Placement.parse("spread").within(Placement.parse("zone=a"))
        False
        """
        return all(self.labels.get(k) == v for k, v in other.labels.items())


def as_placement(where: Placement | str) -> Placement:
    """``where`` as a `Placement` (text is `Placement.parse`d)."""
    if isinstance(where, Placement):
        return where
    if not isinstance(where, str):
        raise ValueError(f"a placement is a Placement or its text ('spread', 'zone=a'), got {where!r}")
    return Placement.parse(where)


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
    #: identifies the group across processes: unpickling a group whose key this process
    #: already knows returns that same object, so identity (``Tagged`` routing) survives a
    #: trip through a Ray actor and back
    key: str = attrs.field(init=False, factory=lambda: uuid.uuid4().hex, repr=False)
    #: the factory and options serialized once (see ``FACTORY_PICKLER``), so that a group
    #: crossing processes again (inside every Tagged item) costs a copy of bytes
    _wire: list[bytes] = attrs.field(init=False, factory=list, repr=False)

    def __attrs_post_init__(self) -> None:
        with _KNOWN_LOCK:
            _KNOWN.setdefault(self.key, self)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        where = " on the driver" if self.driver_hosted else ""
        cores = self.options.get("own_cores")
        if cores and self.driver_hosted:
            where += f" ({cores} CPU{'s' if cores != 1 else ''} of its own)"
        return f"{self.name}×{self.size}{where}"

    def __reduce__(self) -> tuple[Any, ...]:
        if not self._wire:
            self._wire.append(FACTORY_PICKLER((self.make, dict(self.options))))
        return (_restore_group, (self.key, self._wire[0], self.size, self.name, self.site))

    def with_options(self, **options: Any) -> ActorGroup[A]:
        """A new group with backend options (e.g. Ray resources ``num_cpus=1``) merged in."""
        return attrs.evolve(self, options={**self.options, **options})

    def on_driver(self, own_cores: int = 0) -> ActorGroup[A]:
        """A new group whose actors a distributed backend hosts in the driver's own process.

        On Ray, each such actor runs its calls in the order the driver issues them, on a thread
        of its own, with the values they take fetched from the object store: no actor process,
        no import of the actor's modules in one, and its replies never cross a process. The
        driver routes the rest of the plan meanwhile, but the actor's Python shares the
        driver's interpreter (torch's kernels run beside it). ``own_cores=n`` (Linux) gives its
        thread the last ``n`` CPUs the driver may run on and keeps the rest of the run on that
        node off them until the run closes (docs/ray.md, "A learner's own cores"). The
        in-process backends ignore both. A plan's text names such a group ``Learner×1 on the
        driver`` (``Learner×1 on the driver (1 CPU of its own)``).

        >>> class Learner:
        ...     pass
        >>> actors(Learner, 1).on_driver().driver_hosted
        True
        >>> actors(Learner, 1).on_driver(own_cores=1)
        Learner×1 on the driver (1 CPU of its own)
        """
        if own_cores < 0:
            raise ValueError(f"on_driver: own_cores must be >= 0, got {own_cores}")
        return self.with_options(on_driver=True, **({"own_cores": own_cores} if own_cores else {}))

    def placed(self, placement: Placement | str | Sequence[Placement | str]) -> ActorGroup[A]:
        """A new group whose actors a distributed backend places as ``placement`` says: one
        `Placement` for all of them (or its text: ``"spread"``, ``"pack"``, ``"zone=a"``;
        ``"any"`` leaves the group as it is), or a sequence of node-label placements, one per
        actor (``["zone=a", "zone=a", "zone=b", "zone=b"]``: actor ``i`` on a node with the
        ``i``-th labels), which `rxrl.Shards.subset_on` and ``ops.aggregate(placements=...)``
        read. The in-process backends ignore it.

        >>> class Worker:
        ...     pass
        >>> actors(Worker, 4).placed("zone=a").placement
        Placement(strategy='any', labels={'zone': 'a'})
        >>> str(actors(Worker, 2).placed(["zone=a", "zone=b"]).placement_of(1))
        'zone=b'
        """
        site = call_site()
        if isinstance(placement, Placement | str):
            where = as_placement(placement)
            each: tuple[Placement, ...] | None = None
        elif isinstance(placement, Sequence):
            try:
                each = tuple(as_placement(p) for p in placement)
            except ValueError as e:
                raise PlanError(f"{self!r}.placed()", site, str(e)) from None
            if len(each) != self.size:
                raise PlanError(f"{self!r}.placed()", site, f"{len(each)} placements for {self.size} actors",
                                "give one placement per actor, or one for the whole group")
            spread = [str(p) for p in each if p.strategy != "any"]
            if spread:
                raise PlanError(f"{self!r}.placed()", site, f"a placement per actor takes node labels "
                                f"only, got {spread[0]!r}", "place the whole group with 'pack' or 'spread'")
            if len(set(map(str, each))) == 1:  # one placement after all
                where, each = each[0], None
            else:
                where = Placement()
        else:
            raise PlanError(f"{self!r}.placed()", site, "placement must be a Placement, its text, or "
                            f"a sequence of them (one per actor), got {placement!r}")
        if each is None and where == Placement():
            return self
        if self.driver_hosted:
            raise PlanError(repr(self), self.site, f"a group hosted on the driver cannot be placed "
                            f"({where if each is None else ', '.join(map(str, each))})")
        options = {k: v for k, v in self.options.items() if k not in ("placement", "placements")}
        if each is None:
            options["placement"] = where
        else:
            options["placements"] = each
        return attrs.evolve(self, options=options)

    @property
    def placement(self) -> Placement:
        """Where the group's actors go (`placed`; ``Placement()``: anywhere, or a placement
        per actor: `placement_of`)."""
        where = self.options.get("placement", Placement())
        assert isinstance(where, Placement)
        return where

    def placement_of(self, index: int) -> Placement:
        """Where actor ``index`` goes: its own placement (`placed` with one per actor), else
        the group's."""
        each = self.options.get("placements")
        return self.placement if each is None else each[index]

    @property
    def driver_hosted(self) -> bool:
        """Whether the group was made with `on_driver` (its ``on_driver`` option)."""
        return bool(self.options.get("on_driver"))

    def with_restarts(self, max_restarts: int = 3,
                      on_restart: Callable[[A], object] | None = None) -> ActorGroup[A]:
        """A new group whose actors a distributed backend restarts when they die.

        A restarted actor is constructed again with ``make(index)``; then ``on_restart(actor)``
        runs (if given); then the latest item of every ``broadcast`` to the group is applied
        again (so a rollout worker gets the current weights back). Items already emitted
        downstream are neither lost nor repeated; state inside the shard (window buffers,
        ``take`` counts) starts afresh. Without restarts (the default) a dead actor stops the
        run with an ``ActorError``. The reference backend never loses actors and ignores this.

        >>> class Worker:
        ...     pass
        >>> actors(Worker, 2).with_restarts(5).options["max_restarts"]
        5
        """
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
            raise PlanError(f"{self!r}.with_restarts({max_restarts!r})", call_site(),
                            "max_restarts must be an integer >= 0 (or -1 for no limit)")
        if on_restart is not None and not callable(on_restart):
            raise PlanError(f"{self!r}.with_restarts()", call_site(),
                            f"on_restart must be callable, got {on_restart!r}")
        return self.with_options(max_restarts=max_restarts, on_restart=on_restart)


_KNOWN: weakref.WeakValueDictionary[str, ActorGroup[Any]] = weakref.WeakValueDictionary()
_KNOWN_LOCK = threading.Lock()
#: groups this process restored from bytes, the latest `RESTORED_KEPT` held strongly: a
#: process that receives the same foreign group in every item (a learner receiving `Tagged`
#: fragments of the workers' group) would otherwise load its factory again for each item,
#: once the previous item and with it the group were collected (~70 us per item for IMPALA's)
_RESTORED: OrderedDict[str, ActorGroup[Any]] = OrderedDict()
RESTORED_KEPT = 64

#: how a group's factory and options are serialized when the group crosses to another
#: process, once per group; a backend that ships closures sets it (the Ray backend: its
#: cloudpickle), the bytes load with ``pickle.loads``
FACTORY_PICKLER: Callable[[Any], bytes] = pickle.dumps


def serialize_factories_with(pickler: Callable[[Any], bytes]) -> None:
    """Serialize groups' factories with ``pickler`` from now on (see ``FACTORY_PICKLER``)."""
    global FACTORY_PICKLER
    FACTORY_PICKLER = pickler


def _restore_group(key: str, wire: bytes, size: int, name: str, site: str) -> ActorGroup[Any]:
    """Unpickle a group: the object this process already holds under ``key``, if any (then
    the factory is not even loaded)."""
    with _KNOWN_LOCK:
        known = _KNOWN.get(key)
        if known is not None:
            if key in _RESTORED:
                _RESTORED.move_to_end(key)
            return known
    make, options = pickle.loads(wire)
    group: ActorGroup[Any] = ActorGroup(make, size, name, site, options)
    group._wire.append(wire)
    with _KNOWN_LOCK:
        if _KNOWN.get(group.key) is group:
            del _KNOWN[group.key]
        object.__setattr__(group, "key", key)
        restored = _KNOWN.setdefault(key, group)
        _RESTORED[key] = restored
        _RESTORED.move_to_end(key)
        while len(_RESTORED) > RESTORED_KEPT:
            _RESTORED.popitem(last=False)
        return restored


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
