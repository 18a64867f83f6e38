"""Per-operator timings of a run: an ``on_event`` sink (`Timings`) that times every operator
and actor, for a table (`Timings.stats`, ``rxrl show RUN --stats``) and a Chrome trace /
Perfetto timeline (`Timings.chrome_trace`, ``rxrl train --profile``).

What it measures, from the events every backend reports when ``on_event`` is given (none
are made otherwise, so timings cost nothing when off):

- per operator (its occurrence number in the plan, ``#n`` of ``rxrl.show(plan, ids=True)``):
  ``pulls``, ``items`` out, ``not_ready`` answers; ``busy_s``, the driver's own time in its
  pulls (its inputs' pulls and its waits excluded); ``waiting_s``, the time its pulls blocked
  waiting for actor results; for operators that send work to actors (calls, broadcasts, the
  collectors of shards on actors): requests ``sent`` and ``done``, ``max_in_flight`` and
  ``mean_in_flight`` (the time average over the run);
- per actor: ``requests``, ``busy_s`` (each request's time from when the actor could start it
  — its sending, or the actor's previous completion — to when the driver saw it done: an
  upper bound of the actor's own time, as the driver sees it), and ``utilization``
  (``busy_s`` over the wall time).

Every pull's time lands in exactly one operator's ``busy_s`` or ``waiting_s``, so over all
operators they add up to the time spent pulling the plan, ``pulling_s`` (per thread in
``threads``: the driver's, on the rx backend the actor threads that pull shard chains, and on
Ray each aggregator, ``aggregator[k]``, that runs an ``ops.aggregate`` sub-plan: its events
come with its items, stamped with the time they happened, `rxrl.events.Event`). An operator
of a sub-plan counts the pulls, items and times of all its aggregators; its
``max_in_flight`` is the most in flight from one of them, its ``mean_in_flight`` their sum.
The wall time runs from the first event to `Timings.stop` (actor creation before the first
pull is not in it).

The trace holds one complete event (``"ph": "X"``) per pull (driver operators nest: an
operator's span holds its inputs' pulls) and per wait, on the thread that pulled, and one per
actor request, on a row per actor. Spans beyond ``max_spans`` are counted, not kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import attrs

from rxrl.events import Event


@attrs.define
class _Flight:
    """Requests of one operator in flight from one process (events in time order)."""

    now: int = 0
    max: int = 0
    #: the integral of ``now`` over time, up to ``since``
    area: float = 0.0
    since: float = 0.0

    def move(self, at: float, delta: int) -> None:
        self.area += self.now * (at - self.since)
        self.since = at
        self.now += delta
        self.max = max(self.max, self.now)


@attrs.define
class OperatorTimes:
    """One operator's counts and times (see the module docstring)."""

    label: str
    pulls: int = 0
    items: int = 0
    not_ready: int = 0
    busy_s: float = 0.0
    waiting_s: float = 0.0
    sent: int = 0
    done: int = 0
    #: in-flight requests per process that sends them ("" for the driver): an aggregate's
    #: sub-plan runs in one aggregator per part, each with its own clock of events
    _flights: dict[str, _Flight] = attrs.Factory(dict)
    _since: float = 0.0

    def flight(self, now: float, delta: int, origin: str = "") -> None:
        """``delta`` more (or fewer) requests in flight from ``now``, sent by ``origin``."""
        flight = self._flights.get(origin)
        if flight is None:
            flight = self._flights[origin] = _Flight(since=self._since)
        flight.move(now, delta)

    @property
    def in_flight(self) -> int:
        """Requests in flight now (from every process)."""
        return sum(f.now for f in self._flights.values())

    @property
    def max_in_flight(self) -> int:
        """The most requests in flight at once from one process."""
        return max((f.max for f in self._flights.values()), default=0)

    def as_dict(self, wall_s: float, now: float) -> dict[str, Any]:
        """A JSON-ready dict (``mean_in_flight`` over ``wall_s``, summed over processes)."""
        area = sum(f.area + f.now * (now - f.since) for f in self._flights.values())
        return {"label": self.label, "pulls": self.pulls, "items": self.items,
                "not_ready": self.not_ready, "busy_s": round(self.busy_s, 6),
                "waiting_s": round(self.waiting_s, 6), "sent": self.sent, "done": self.done,
                "max_in_flight": self.max_in_flight,
                "mean_in_flight": round(area / wall_s, 4) if wall_s > 0 else 0.0}


@attrs.define
class ActorTimes:
    """One actor's requests and busy time (see the module docstring)."""

    requests: int = 0
    busy_s: float = 0.0
    last_done: float = 0.0

    def as_dict(self, wall_s: float) -> dict[str, Any]:
        """A JSON-ready dict with the actor's utilization over ``wall_s``."""
        return {"requests": self.requests, "busy_s": round(self.busy_s, 6),
                "utilization": round(self.busy_s / wall_s, 4) if wall_s > 0 else 0.0}


@attrs.define
class _Open:
    """A pull in progress: its operator, start, and the time of its inputs' pulls and waits."""

    nid: int
    start: float
    inner_s: float = 0.0
    waiting_s: float = 0.0
    wait_start: float | None = None


class Timings:
    """An ``on_event`` sink that times a run's operators and actors (module docstring).

    >>> import rxrl
    >>> from rxrl import ops
    >>> timings = Timings()
    >>> plan = rxrl.from_iterable(range(5)) | ops.map(lambda x: x * x)
    >>> list(rxrl.run(plan, on_event=timings))
    [0, 1, 4, 9, 16]
    >>> ops_ = timings.stats()["operators"]
    >>> ops_["0"]["label"], ops_["0"]["items"], ops_["1"]["pulls"]
    ('map(<lambda>)', 5, 6)
    """

    def __init__(self, max_spans: int = 200_000, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.began: float | None = None  # the first event's time
        self.ended: float | None = None
        self.max_spans = max_spans
        self.operators: dict[int, OperatorTimes] = {}
        self.actors: dict[str, ActorTimes] = {}
        #: (name, category, thread row, start, duration, args) of the spans kept
        self.spans: list[tuple[str, str, str, float, float, dict[str, Any]]] = []
        self.dropped = 0
        #: time spent pulling the plan, per thread row (top-level pulls only)
        self.threads: dict[str, float] = {}
        #: open pulls and waits outside any pull, by thread (or by origin, `Event.origin`)
        self._stacks: dict[int | str, list[_Open]] = {}
        self._waits: dict[int | str, float] = {}
        self._sent: dict[tuple[str, Any], tuple[float, int, str]] = {}
        self._lock = threading.Lock()
        #: this clock's reading less ``time.time()``: places the events of other processes
        self._offset = clock() - time.time()

    # ------------------------------------------------------------------------- events

    def __call__(self, event: Event) -> None:
        """Take one event (the ``on_event`` callback)."""
        now = self.clock() if event.at is None else event.at + self._offset
        with self._lock:
            if self.began is None:
                self.began = now
            handler = self._HANDLERS.get(event.kind)
            if handler is not None:
                handler(self, event, now)

    def _operator(self, event: Event) -> OperatorTimes:
        times = self.operators.get(event.node)
        if times is None:
            times = self.operators[event.node] = OperatorTimes(event.op, since=self._start())
        return times

    def _pull(self, event: Event, now: float) -> None:
        self._operator(event).pulls += 1
        self._stacks.setdefault(_thread(event), []).append(_Open(event.node, now))

    def _pulled(self, event: Event, now: float) -> None:
        stack = self._stacks.get(_thread(event))
        if not stack or stack[-1].nid != event.node:
            return  # a pull that began before the sink saw it
        top = stack.pop()
        total = now - top.start
        times = self._operator(event)
        times.busy_s += total - top.inner_s - top.waiting_s
        times.waiting_s += top.waiting_s
        if event.kind == "emit":
            times.items += 1
        elif event.kind == "not_ready":
            times.not_ready += 1
        row = _row(event)
        if stack:
            stack[-1].inner_s += total
        else:
            self.threads[row] = self.threads.get(row, 0.0) + total
        self._span(f"#{event.node} {event.op}", "operator", row, top.start, total,
                   {"result": event.kind})

    def _wait(self, event: Event, now: float) -> None:
        stack = self._stacks.get(_thread(event))
        if stack:
            stack[-1].wait_start = now
        else:
            self._waits[_thread(event)] = now

    def _waited(self, event: Event, now: float) -> None:
        stack = self._stacks.get(_thread(event))
        start = None
        if stack and stack[-1].wait_start is not None:
            start, stack[-1].wait_start = stack[-1].wait_start, None
            stack[-1].waiting_s += now - start
        else:
            start = self._waits.pop(_thread(event), None)
        if start is not None:
            self._span(f"wait: {event.detail}", "wait", _row(event), start, now - start, {})

    def _sent_event(self, event: Event, now: float) -> None:
        times = self._operator(event)
        key = (event.origin, event.item)
        if key not in self._sent:
            times.sent += 1
            times.flight(now, +1, event.origin)
        self._sent[key] = (now, event.node, event.detail)

    def _done(self, event: Event, now: float) -> None:
        sent = self._sent.pop((event.origin, event.item), None)
        if sent is None:
            return
        start, nid, where = sent
        times = self._operator(event)
        times.done += 1
        times.flight(now, -1, event.origin)
        actor = self.actors.setdefault(where, ActorTimes())
        begin = max(start, actor.last_done)
        actor.requests += 1
        actor.busy_s += max(0.0, now - begin)
        actor.last_done = max(actor.last_done, now)
        self._span(f"#{nid} {event.op}", "actor", where, begin, max(0.0, now - begin), {})

    def _span(self, name: str, category: str, row: str, start: float, duration: float,
              args: dict[str, Any]) -> None:
        if len(self.spans) < self.max_spans:
            self.spans.append((name, category, row, start, duration, args))
        else:
            self.dropped += 1

    _HANDLERS: ClassVar[dict[str, Callable[[Timings, Event, float], None]]] = {
        "pull": _pull, "emit": _pulled, "end": _pulled, "not_ready": _pulled,
        "wait": _wait, "waited": _waited, "sent": _sent_event, "done": _done,
    }

    # ------------------------------------------------------------------------ results

    def _start(self) -> float:
        return self.began if self.began is not None else self.clock()

    @property
    def pulling_s(self) -> float:
        """Time spent pulling the plan, over all threads."""
        return sum(self.threads.values())

    def stop(self) -> None:
        """The run ended: the wall time stops here (`stats` stops it if nobody did)."""
        if self.ended is None:
            self.ended = self.clock()

    def stats(self) -> dict[str, Any]:
        """The counts and times: ``wall_s``, ``pulling_s``, ``operators`` (by occurrence
        number, as strings: JSON keys) and ``actors`` (by name)."""
        with self._lock:
            now = self.ended if self.ended is not None else self.clock()
            wall = now - self._start()
            return {"wall_s": round(wall, 6), "pulling_s": round(self.pulling_s, 6),
                    "threads": {row: round(s, 6) for row, s in self.threads.items()},
                    "operators": {str(nid): t.as_dict(wall, now)
                                  for nid, t in sorted(self.operators.items())},
                    "actors": {name: a.as_dict(wall) for name, a in sorted(self.actors.items())},
                    "spans_dropped": self.dropped}

    def chrome_trace(self) -> dict[str, Any]:
        """The timeline as Chrome trace JSON (``chrome://tracing``, ui.perfetto.dev): times
        in microseconds from the sink's start, one thread row per driver thread and actor."""
        with self._lock:
            spans = list(self.spans)
        rows: dict[str, int] = {}
        events: list[dict[str, Any]] = []
        for name, category, row, start, duration, args in spans:
            tid = rows.setdefault(row, len(rows) + 1)
            events.append({"name": name, "cat": category, "ph": "X", "pid": 1, "tid": tid,
                           "ts": round((start - self._start()) * 1e6, 3),
                           "dur": round(duration * 1e6, 3), "args": args})
        meta = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": row}}
                for row, tid in rows.items()]
        meta.append({"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "rxrl run"}})
        return {"traceEvents": meta + events, "displayTimeUnit": "ms",
                "otherData": {"spans_dropped": self.dropped}}


def _thread(event: Event) -> int | str:
    """Where ``event``'s pulls nest: the reporting thread, or the process it came from."""
    return event.origin or threading.get_ident()


def _row(event: Event) -> str:
    if event.origin:
        return event.origin
    thread = threading.current_thread()
    return "driver" if thread is threading.main_thread() else f"thread {thread.name}"


def annotate(stats: dict[str, Any]) -> Callable[[int], str]:
    """For ``rxrl.show.render(..., annotate=)``: each operator's numbers as a short text."""
    operators: dict[str, dict[str, Any]] = stats.get("operators", {})

    def text(nid: int) -> str:
        s = operators.get(str(nid))
        if s is None:
            return "(no driver stream: runs inside the collector below it, on the actors)"
        parts = [f"{s['items']:,} out", f"busy {s['busy_s']:.3f} s"]
        if s["waiting_s"]:
            parts.append(f"waiting {s['waiting_s']:.3f} s")
        if s["not_ready"]:
            parts.append(f"{s['not_ready']:,} not ready")
        if s["sent"]:
            parts.append(f"{s['sent']:,} requests, in flight {s['mean_in_flight']:.2f} mean / "
                         f"{s['max_in_flight']} max")
        return "[" + ", ".join(parts) + "]"

    return text


__all__ = ["ActorTimes", "OperatorTimes", "Timings", "annotate"]
