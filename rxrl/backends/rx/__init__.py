"""The reactivex backend: ``rxrl.run(plan, backend="rx")`` runs a plan concurrently in-process.

Every actor (and every iterable shard) gets a thread of its own, an Rx ``EventLoopScheduler``,
that runs its calls in order; the driver (the thread that pulls the run) makes every request
to an actor, in the order the reference interpreter would, and waits for results on one
condition (no polling). Sources stay demand-driven: nothing is computed before it is pulled,
a ``barrier`` requests round r+1 only when round r has been pulled, a ``gather`` keeps exactly
``max_in_flight`` requests per shard. Each choice (gather, async union) is recorded, so
``rxrl.run(plan, "reference", schedule=run.trace)`` reproduces the output.

Rx operators reused where their semantics match the contract: ``map``, ``filter``,
``concat_map`` (flat_map), ``buffer_with_count`` (window), ``take``, ``scan``, ``do_action``
(tap), ``fork_join`` (actor start-up), ``start`` on an ``EventLoopScheduler`` (every actor
call), ``subscribe_on`` (observable sources). Custom, and why, in each module:
``size_window`` (Rx buffers by count or time, not summed size), and the driver operators,
which the Ray backend shares (``rxrl.backends.engine``): round-robin and async ``union``
(Rx's ``merge`` has no demand and makes no replayable choice), ``barrier``/``gather``
(bounded, demand-driven requests to actors), ``call``/``broadcast`` (actors), ``zip`` and
``split`` (readiness: a row or a branch waits on a not-ready input).
Push-based Rx operators are fed one pulled item at a time (``chain.Chain``).

Options (``rxrl.run(plan, "rx", timeout_s=..., ...)``): see ``runtime.Options``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rxrl.backends.engine.stream import Stream, outputs
from rxrl.backends.rx.lowering import TABLE, observing
from rxrl.backends.rx.runtime import Options, Runtime
from rxrl.backends.rx.stream import Closed
from rxrl.compile import Compiled, lower
from rxrl.events import EventSink
from rxrl.run import Execution
from rxrl.schedule import Recorder, Schedule

__all__ = ["BACKEND", "Options", "RxBackend"]


class RxBackend:
    """``rxrl.run(plan, backend="rx")``: concurrent, in-process, on reactivex schedulers."""

    name = "rx"
    follows_schedule = False

    def execute(self, plan: Compiled, *, schedule: Schedule | None, recorder: Recorder,
                on_event: EventSink | None, options: dict[str, Any]) -> Execution:
        """Create the plan's actors (each on its own thread) and return its output stream."""
        runtime = Runtime(recorder, on_event, Options.parse(self.name, options))
        try:
            runtime.start_actors(plan.groups)
            table = TABLE if on_event is None else observing(TABLE)
            stream = lower(plan, table, runtime, self.name)
        except BaseException:
            runtime.close()
            raise
        assert isinstance(stream, Stream)
        return Execution(_items(runtime, stream), runtime.close)


def _items(runtime: Runtime, stream: Stream) -> Iterator[Any]:
    try:
        yield from outputs(runtime, stream)
    except Closed:
        return
    finally:  # exhausted, failed, or dropped unfinished (garbage-collected): stop the threads
        runtime.close()


BACKEND = RxBackend()
