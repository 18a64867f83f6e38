"""The Ray backend: ``rxrl.run(plan, backend="ray")`` runs a plan on Ray actors.

- Every actor group becomes one Ray actor per index (a generic ``Host`` that constructs
  ``make(i)``), created when the run starts and killed when it ends; a group's options
  (``group.with_options(num_cpus=1, num_gpus=..., resources={...}, ...)``) are Ray actor
  options, and ``group.with_restarts(n, on_restart=...)`` makes Ray restart dead actors. A
  group made with ``on_driver()`` is hosted in the driver's process instead, each actor
  running its calls in order on a thread of its own.
- A shard-local chain (``from_actors(...) | map | window ...``) runs inside its actor, one
  call per output item; ``from_iterables`` shards run the same way on a small pool of generic
  host actors reused across runs (``iterable_hosts`` of them; an iterable that cannot be
  pickled, e.g. a generator, runs on the driver instead).
- Driver operators are the engine's (``rxrl.backends.engine``, shared with the rx backend),
  run by the one driver thread: ``gather``/``barrier``/``call`` wait with ``ray.wait``;
  ``broadcast`` submits its effects and moves on (Ray keeps each actor's calls in order); an
  async ``union``/``concurrently`` chooses an input that can deliver, and sleeps in
  ``ray.wait`` only when every input waits on Ray (or on a driver-hosted actor's thread).
  Values made by actors stay in the object store until a driver operator looks at them.
- Every choice (gather, async union) is recorded; ``rxrl.run(plan, "reference",
  schedule=ray_run.trace)`` replays the run, even when async branches share actors. A Ray
  run cannot follow a given schedule.

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

from rxrl.backends.engine.lowering import observing
from rxrl.backends.engine.stream import Stream, outputs
from rxrl.backends.ray.connect import connect as join
from rxrl.backends.ray.host import RemoteError
from rxrl.backends.ray.lowering import TABLE
from rxrl.backends.ray.runtime import Options, RayRuntime, RayTimeoutError
from rxrl.compile import Compiled, lower
from rxrl.events import EventSink
from rxrl.run import Execution
from rxrl.schedule import Recorder, Schedule

__all__ = ["BACKEND", "Options", "RayBackend", "RayTimeoutError", "RemoteError"]

log = logging.getLogger(__name__)


class RayBackend:
    """``rxrl.run(plan, backend="ray")``: actors on Ray, coordination on the driver."""

    name = "ray"
    follows_schedule = False

    def execute(self, plan: Compiled, *, schedule: Schedule | None, recorder: Recorder,
                on_event: EventSink | None, options: dict[str, Any]) -> Execution:
        """Start Ray if needed, create the plan's actors, and return its output stream."""
        parsed = Options.parse(self.name, options)
        connect(parsed.address, parsed.init_options)
        rt = RayRuntime(recorder, on_event, parsed)
        try:
            out = lower(plan, TABLE if on_event is None else observing(TABLE), rt, self.name)
            assert isinstance(out, Stream), "compile guarantees a driver root"
            out.want()  # the run's outputs are values: known before any request goes out
            rt.start()
        except BaseException:
            rt.close()
            raise
        return Execution(_outputs(rt, out), rt.close)


def connect(address: str | None, init_options: dict[str, Any] | None) -> None:
    """Initialise Ray unless it already is (see `rxrl.backends.ray.connect`: the driver's
    import path reaches the workers, an address where no Ray answers fails promptly)."""
    join(address, init_options)


def _outputs(rt: RayRuntime, stream: Stream) -> Iterator[Any]:
    try:
        yield from outputs(rt, stream)
    finally:
        rt.close()


BACKEND = RayBackend()
