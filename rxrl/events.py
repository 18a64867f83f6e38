"""Run events: what each operator pulled and emitted, each schedule choice, each actor effect."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Literal

import attrs

EventKind = Literal["pull", "emit", "end", "not_ready", "choice", "call", "sent", "done", "wait",
                    "waited"]


@attrs.frozen
class Event:
    """One step of a run, reported to ``rxrl.run(..., on_event=callback)``.

    - ``pull``: operator ``node`` was asked for its next item (on ``shard``, if sharded);
    - ``emit``: it produced ``item``; ``end``: it is exhausted; ``not_ready``: it has nothing
      to give now (see docs/semantics.md, "Readiness");
    - ``choice``: choice point ``node`` picked input ``item`` among ``detail`` (the ready inputs);
    - ``call``: it called ``detail`` on actor ``shard`` with ``item``;
    - ``sent`` / ``done`` (concurrent backends): a request of operator ``node`` (a call, a
      broadcast's effect, a collector's next shard item) went to actor ``detail``, and the
      driver saw it complete; ``item`` identifies the request in both;
    - ``wait`` / ``waited`` (concurrent backends): the driver blocked waiting for actor
      results (``detail`` says for what), and went on.

    ``node`` is the operator's occurrence number in the plan (as printed by ``str(plan)``
    with ``ids=True``) and ``op`` its label, e.g. ``window(4)``.

    Events made in another process — the operators of an ``ops.aggregate`` sub-plan, which
    run on aggregator actors on Ray — are reported by the driver when it reads that
    aggregator's next item, with ``origin`` naming the aggregator (``aggregator[0]``) and
    ``at`` the ``time.time()`` at which the event happened there; their ``item``, unless an
    int, a float, a bool, a string or None, is replaced by its ``repr`` (at most 200
    characters): batches stay where they are. Events of the driver have ``origin == ""``
    and ``at is None`` (they happen when reported).
    """

    kind: EventKind
    node: int
    op: str
    shard: int | None = None
    item: Any = None
    detail: str = ""
    origin: str = ""
    at: float | None = None

    def __str__(self) -> str:
        if self.kind in ("wait", "waited"):
            return f"{self.origin or 'driver'} {self.kind}: {self.detail}"
        return f"{self.origin}: {self._text()}" if self.origin else self._text()

    def _text(self) -> str:
        where = f"#{self.node} {self.op}" + (f"[{self.shard}]" if self.shard is not None else "")
        if self.kind == "pull":
            return f"{where} pull"
        if self.kind == "end":
            return f"{where} end"
        if self.kind == "not_ready":
            return f"{where} not ready"
        if self.kind == "choice":
            return f"{where} choose input {self.item} of ready {self.detail}"
        if self.kind == "call":
            return f"{where} call {self.detail}({self.item!r})"
        if self.kind in ("sent", "done"):
            return f"{where} request {self.item} {self.kind} ({self.detail})"
        return f"{where} emit {self.item!r}"


EventSink = Callable[[Event], None]


def portable(event: Event, origin: str) -> Event:
    """``event``, made in process ``origin``, as it is sent to the driver (`Event`)."""
    item = event.item
    if not (item is None or type(item) in (int, float, bool, str)):
        item = repr(item)[:200]
    return attrs.evolve(event, item=item, origin=origin, at=time.time())


def log_events(logger: logging.Logger | None = None, level: int = logging.DEBUG) -> EventSink:
    r"""An ``on_event`` callback that writes each event as one line to ``logger``.

    >>> import rxrl
    >>> from rxrl import ops
    >>> lines: list[str] = []
    >>> run = rxrl.run(rxrl.from_iterable([1]) | ops.map(str), on_event=lambda e: lines.append(str(e)))
    >>> list(run)
    ['1']
    >>> print(*lines, sep="\n")
    #0 map(str) pull
    #1 from_iterable([1]) pull
    #1 from_iterable([1]) emit 1
    #0 map(str) emit '1'
    #0 map(str) pull
    #1 from_iterable([1]) pull
    #1 from_iterable([1]) end
    #0 map(str) end
    """
    log = logger or logging.getLogger("rxrl.events")

    def sink(event: Event) -> None:
        log.log(level, "%s", event)

    return sink
