"""What every backend shares besides the kernels: routing, errors, events, options, blocked reports."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Literal, TypeVar

import attrs

from rxrl import graph as g
from rxrl.actors import ActorGroup, Tagged
from rxrl.errors import ActorError, OperatorError
from rxrl.events import Event, EventSink
from rxrl.schedule import Recorder

OptionsT = TypeVar("OptionsT", bound="Options")


def route_of(node: g.Call, item: Any, position: int) -> int:
    """Which actor of ``node.group`` handles the ``position``-th item (see ``ops.call``)."""
    n = node.group.size
    if node.route is not None:
        index = node.route(item)
    elif isinstance(item, Tagged) and item.group is node.group:
        index = item.shard
    else:
        index = 0 if n == 1 else position % n
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
        raise ValueError(f"route chose actor {index!r}, but {node.group!r} has actors 0..{n - 1}")
    return index


def operator_error(node: g.Node, e: Exception) -> OperatorError:
    """``e`` raised by the user function of ``node``, as the error a run raises."""
    return OperatorError(node.label, node.site, e)


def creation_message(where: str, site: str, e: BaseException) -> str:
    """What every backend says when the constructor of actor ``where`` raised ``e``."""
    return f"creating actor {where} (group built at {site}) raised {type(e).__name__}: {e}"


def creation_error(group: ActorGroup[Any], index: int, e: BaseException) -> ActorError:
    """The error of an actor constructor that raised."""
    return ActorError(creation_message(f"{group.name}[{index}]", group.site, e))


class Reporter:
    """Records a run's choices and reports its events (``on_event``), for every backend.

    Thread-safe: concurrent backends report from actor threads too, one event at a time.
    """

    def __init__(self, recorder: Recorder, on_event: EventSink | None) -> None:
        self.recorder = recorder
        self.on_event = on_event
        self._lock = threading.Lock()

    @property
    def observing(self) -> bool:
        """Whether events are reported at all."""
        return self.on_event is not None

    def choice(self, nid: int, node: g.Node, choice: int, ready: list[int]) -> None:
        """Input ``choice`` of choice point ``nid`` went next (among ``ready``)."""
        self.recorder.record(nid, choice)
        if self.on_event is not None:
            self.event(Event("choice", nid, node.label, None, choice, str(ready)))

    def call(self, nid: int, node: g.Node, index: int, item: Any) -> None:
        """Actor ``index`` of the node's group is sent ``item``."""
        if self.on_event is not None:
            group: ActorGroup[Any] = getattr(node, "group")  # noqa: B009 - Call and Broadcast
            fn = getattr(node, "fn")  # noqa: B009
            self.event(Event("call", nid, node.label, index, item,
                             f"{group.name}[{index}].{g.fn_name(fn)}"))

    def event(self, event: Event) -> None:
        """Report ``event``."""
        if self.on_event is not None:
            with self._lock:
                self.on_event(event)

    def request(self, kind: Literal["sent", "done"], nid: int, node: g.Node | None, request: object,
                where: str) -> None:
        """A request to actor ``where`` of operator ``nid`` was sent, or seen done."""
        if self.on_event is not None:
            self.event(Event(kind, nid, node.label if node is not None else "", None, id(request), where))

    @contextlib.contextmanager
    def waiting(self, what: str) -> Iterator[None]:
        """Within the block the driver waits for actor results (``wait`` / ``waited`` events)."""
        if self.on_event is None:
            yield
            return
        self.event(Event("wait", -1, "", None, None, what))
        try:
            yield
        finally:
            self.event(Event("waited", -1, "", None, None, what))


class Blocked:
    """What is not ready in a run, and why: the report of a ``DeadlockError``.

    Operators that can be not ready on their own account (a split branch at ``max_lag``, a
    collector whose actor sources answered ``NOT_READY``) register, once, a function that
    says why they are blocked now (or None); the report asks them all when it is needed.
    """

    def __init__(self) -> None:
        self._why: dict[tuple[int, int], Callable[[], str | None]] = {}

    def watch(self, nid: int, part: int, why: Callable[[], str | None]) -> None:
        """Part ``part`` (a branch, a shard) of operator ``nid`` says why it is blocked."""
        self._why[nid, part] = why

    def report(self) -> list[str]:
        """Every part blocked now, in plan order."""
        return [w for _, why in sorted(self._why.items()) if (w := why()) is not None]


def effect_count(counts: dict[tuple[str, int], int], group: ActorGroup[Any] | None,
                 index: int) -> int:
    """How many calls and broadcasts actor ``index`` of ``group`` has been sent so far."""
    return 0 if group is None else counts.get((group.key, index), 0)


@attrs.frozen(kw_only=True)
class Options:
    """Options of ``rxrl.run(plan, backend, **options)``: the same names on every backend.

    Subclasses add their own; ``ALIASES`` maps old names to current ones.
    """

    ALIASES: ClassVar[Mapping[str, str]] = {}

    #: seconds any one wait may last (an actor's reply, a shard's item); None waits forever
    timeout_s: float | None = 300.0
    #: broadcasts whose effects may still be unsettled while the stream moves on
    max_pending_broadcasts: int = 4

    @classmethod
    def parse(cls: type[OptionsT], backend: str, options: Mapping[str, Any]) -> OptionsT:
        """Check one run's options; an unknown name is a TypeError listing the known ones."""
        known = {a.name for a in attrs.fields(cls)}
        given = {cls.ALIASES.get(k, k): v for k, v in options.items()}
        unknown = sorted(set(given) - known)
        if unknown:
            raise TypeError(f"the {backend} backend has no option(s) {unknown}; it takes "
                            f"{sorted(known)}")
        made = cls(**given)
        made.check()
        return made

    def check(self) -> None:
        """Raise ValueError naming the first bad option."""
        seconds("timeout_s", self.timeout_s)
        at_least("max_pending_broadcasts", self.max_pending_broadcasts, 1)


def seconds(name: str, value: Any) -> None:
    """``value`` must be positive seconds or None."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                              or not value > 0 or math.isnan(value)):
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")


def at_least(name: str, value: Any, minimum: int) -> None:
    """``value`` must be an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
