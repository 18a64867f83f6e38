"""The Ray backend: ``rxrl.run(plan, backend="ray")`` runs a plan on Ray actors.

- Every actor group becomes one Ray actor per index (a generic ``Host`` that constructs
  ``make(i)``), created when the run starts and killed when it ends; a group's options
  (``group.with_options(num_cpus=1, num_gpus=..., resources={...}, ...)``) are Ray actor
  options, and ``group.with_restarts(n, on_restart=...)`` makes Ray restart dead actors.
- A shard-local chain (``from_actors(...) | map | window ...``) runs inside its actor, one
  call per output item; ``from_iterables`` shards run the same way on a small pool of generic
  host actors reused across runs (``iterable_hosts`` of them; an iterable that cannot be
  pickled, e.g. a generator, runs on the driver instead).
- Driver operators run on the driver; ``gather``/``barrier``/``call`` wait with ``ray.wait``;
  ``broadcast`` submits its effects and moves on (Ray keeps each actor's calls in order);
  async ``union``/``concurrently`` run each input in a driver thread with a one-item buffer.
  Values made by actors stay in the object store until a driver operator looks at them.
- Every choice (gather, async union) is recorded; ``rxrl.run(plan, "reference",
  schedule=ray_run.trace)`` replays the run. A Ray run cannot follow a given schedule.

Options of ``rxrl.run(plan, backend="ray", **options)``:

- ``address``: the cluster to connect to when Ray is not initialised yet (``"auto"``,
  ``"ray://head:10001"``); ``init_options``: more ``ray.init`` keyword arguments. An
  initialised Ray is reused as is (and a Ray this backend started is left running).
- ``timeout_s`` (default 300): the longest any wait may last (an actor's reply, a shard's
  item, an input of an async union); ``None`` waits forever.
- ``start_timeout_s`` (default 300): the longest the run waits for its actors to be placed
  and constructed.
- ``iterable_hosts`` (default 4): how many pooled hosts run ``from_iterables`` shards.
- ``max_pending_broadcasts`` (default 4): how many broadcasts may still be running on the
  actors while the stream moves on; a failed one is raised at a later pull of the stream
  (at the latest this many pulls later, or when the stream ends).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from rxrl.backends.ray.connect import connect as join
from rxrl.backends.ray.host import RemoteError
from rxrl.backends.ray.lowering import TABLE, Stream, materialize
from rxrl.backends.ray.runtime import RayTimeoutError, RunContext
from rxrl.events import EventSink
from rxrl.graph import Node
from rxrl.run import Execution
from rxrl.schedule import Recorder, Schedule
from rxrl.walk import lower

__all__ = ["BACKEND", "RayBackend", "RayTimeoutError", "RemoteError"]

_OPTIONS = frozenset({"address", "init_options", "timeout_s", "start_timeout_s", "iterable_hosts",
                      "max_pending_broadcasts"})
log = logging.getLogger(__name__)


class RayBackend:
    """``rxrl.run(plan, backend="ray")``: actors on Ray, coordination on the driver."""

    name = "ray"
    follows_schedule = False

    def execute(self, root: Node, *, schedule: Schedule | None, recorder: Recorder,
                on_event: EventSink | None, options: dict[str, Any]) -> Execution:
        """Start Ray if needed, create the plan's actors, and return its output stream."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for the ray backend; it takes "
                            f"{sorted(_OPTIONS)}")
        timeout_s = _seconds(options, "timeout_s")
        start_timeout_s = _seconds(options, "start_timeout_s")
        iterable_hosts = options.get("iterable_hosts", 4)
        if isinstance(iterable_hosts, bool) or not isinstance(iterable_hosts, int) or iterable_hosts < 1:
            raise ValueError(f"iterable_hosts must be an integer >= 1, got {iterable_hosts!r}")
        pending = options.get("max_pending_broadcasts", 4)
        if isinstance(pending, bool) or not isinstance(pending, int) or pending < 1:
            raise ValueError(f"max_pending_broadcasts must be an integer >= 1, got {pending!r}")
        connect(options.get("address"), options.get("init_options"))
        ctx = RunContext(recorder, on_event, timeout_s, start_timeout_s, iterable_hosts, pending)
        try:
            out = lower(root, TABLE, ctx, self.name)
            assert isinstance(out, Stream), "validate() guarantees a driver root"
            out.want()  # the run's outputs are values
            ctx.start()
        except BaseException:
            ctx.close()
            raise
        return Execution(_outputs(out, ctx), ctx.close)


def _seconds(options: dict[str, Any], name: str) -> float | None:
    value = options.get(name, 300.0)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                              or not value > 0):
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return None if value is None else float(value)


def connect(address: str | None, init_options: dict[str, Any] | None) -> None:
    """Initialise Ray unless it already is (see `rxrl.backends.ray.connect`: the driver's
    import path reaches the workers, an address where no Ray answers fails promptly)."""
    join(address, init_options)


def _outputs(stream: Stream, ctx: RunContext) -> Iterator[Any]:
    form = stream.form
    try:
        if form == "value":
            yield from stream.items
        else:
            for x in stream.items:
                yield materialize(form, x)
    finally:
        ctx.close()


BACKEND = RayBackend()
