"""`rxrl.run`: validate a plan, hand it to a backend, and iterate its outputs as a `Run`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import attrs

from rxrl.compile import Compiled, compile_plan
from rxrl.errors import PlanError, ScheduleError, call_site
from rxrl.events import EventSink
from rxrl.plan import Plan
from rxrl.schedule import Recorder, Schedule, Trace

if TYPE_CHECKING:
    from reactivex import Observable, abc

T = TypeVar("T")


@attrs.define
class Execution:
    """What a backend returns: the output stream and how to stop everything it started."""

    stream: Iterator[Any]
    close: Callable[[], None]


class Backend(Protocol):
    """An interpreter of plan graphs (see ``rxrl/backends/``)."""

    name: str
    #: False for backends that make their own choices (and record them) instead of asking
    #: a schedule; ``rxrl.run`` refuses a ``schedule=`` for those
    follows_schedule: bool

    def execute(self, plan: Compiled, *, schedule: Schedule | None, recorder: Recorder,
                on_event: EventSink | None, options: dict[str, Any]) -> Execution:
        """Start running the compiled ``plan``; record nondeterministic choices in ``recorder``."""
        ...


_BACKENDS: dict[str, str | Backend] = {
    "reference": "rxrl.backends.reference",
    "rx": "rxrl.backends.rx",
    "ray": "rxrl.backends.ray",
}


def register_backend(name: str, backend: Backend) -> None:
    """Make ``backend`` available as ``rxrl.run(plan, backend=name)``."""
    _BACKENDS[name] = backend


def get_backend(name: str | Backend) -> Backend:
    """The backend called ``name`` (imported on first use), or ``name`` itself if a Backend."""
    if not isinstance(name, str):
        return name
    entry = _BACKENDS.get(name)
    if entry is None:
        raise ValueError(f"unknown backend {name!r}; choose one of {sorted(_BACKENDS)}")
    if isinstance(entry, str):
        try:
            module = importlib.import_module(entry)
        except ModuleNotFoundError as e:
            raise ValueError(f"backend {name!r} is not available: {e}") from e
        backend: Backend = module.BACKEND
        _BACKENDS[name] = entry = backend
    return entry


class Run(Generic[T]):
    """A running plan: iterate it for the outputs; ``trace`` holds the choices made so far.

    Use it as a context manager (or call ``close()``) to stop a run early and release its
    actors; exhausting it or an error closes it too.
    """

    def __init__(self, execution: Execution, recorder: Recorder, backend: str) -> None:
        self._execution = execution
        self._recorder = recorder
        self._closed = False
        self.backend = backend

    def __iter__(self) -> Run[T]:
        return self

    def __next__(self) -> T:
        if self._closed:
            raise StopIteration
        try:
            item: T = next(self._execution.stream)
        except BaseException:
            self.close()
            raise
        return item

    @property
    def trace(self) -> Trace:
        """The nondeterministic choices made so far; ``run(plan, schedule=trace)`` replays them."""
        return self._recorder.trace()

    def close(self) -> None:
        """Stop the run and release what the backend started (idempotent)."""
        if not self._closed:
            self._closed = True
            self._execution.close()

    def as_observable(self, scheduler: abc.SchedulerBase | None = None) -> Observable[T]:
        """This run's items as a reactivex ``Observable`` (one subscriber), drained on ``scheduler``.

        ``on_error`` carries the run's error, ``on_completed`` its end; disposing the
        subscription closes the run. See ``rxrl.to_observable`` for a cold observable that
        starts a run per subscriber.

        >>> import rxrl
        >>> from reactivex import operators as rx_ops
        >>> from reactivex.scheduler import CurrentThreadScheduler
        >>> run = rxrl.run(rxrl.from_iterable([1, 2, 3, 4]))
        >>> seen: list[int] = []
        >>> _ = run.as_observable(CurrentThreadScheduler()).pipe(rx_ops.take(2)).subscribe(seen.append)
        >>> seen
        [1, 2]
        """
        from rxrl.interop import run_as_observable

        return run_as_observable(self, scheduler)

    def __enter__(self) -> Run[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def run(
    plan: Plan[T],
    backend: str | Backend = "reference",
    *,
    schedule: Schedule | Trace | None = None,
    on_event: EventSink | None = None,
    **options: Any,
) -> Run[T]:
    """Run ``plan`` on ``backend`` and return its outputs as an iterator.

    ``schedule`` decides nondeterministic choices (reference backend): a ``Schedule`` or a
    ``Trace`` to replay. ``on_event`` receives every ``Event`` (reference backend). Other
    keyword arguments are backend options (e.g. Ray's ``address``).

    >>> import rxrl
    >>> from rxrl import ops
    >>> shards = rxrl.from_iterables([[1, 2], [3, 4]])
    >>> first = rxrl.run(shards | ops.gather(), schedule=rxrl.Schedule.random(7))
    >>> out = list(first)
    >>> list(rxrl.run(shards | ops.gather(), schedule=first.trace)) == out
    True
    """
    given: object = plan  # checked at runtime too: callers may bypass the types
    if not isinstance(given, Plan):
        kind = type(given).__name__
        raise PlanError("run()", call_site(), f"expects a Plan, got {kind}",
                        "collect Shards with ops.barrier() or ops.gather() first"
                        if kind == "Shards" else "build one with rxrl.from_iterable/from_actors")
    compiled = compile_plan(plan.node)
    impl = get_backend(backend)
    shape = compiled.fingerprint
    if isinstance(schedule, Trace):
        schedule = Schedule.replay(schedule)
    if schedule is not None and not impl.follows_schedule:
        raise ScheduleError(
            f"the {impl.name} backend cannot follow a schedule: it makes its choices as results "
            "arrive and records them in run.trace; replay a trace with "
            "rxrl.run(plan, 'reference', schedule=trace)")
    if schedule is not None:
        schedule.check_plan(shape)
    recorder = Recorder(shape, impl.name)
    execution = impl.execute(compiled, schedule=schedule, recorder=recorder, on_event=on_event,
                             options=options)
    return Run(execution, recorder, impl.name)
