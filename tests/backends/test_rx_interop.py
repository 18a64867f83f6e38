"""Interop with reactivex in both directions: Observables as plan sources, runs as Observables."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
import reactivex as rx
from reactivex import Observable, abc
from reactivex import operators as rx_ops
from reactivex.disposable import Disposable
from reactivex.scheduler import CurrentThreadScheduler
from reactivex.subject import ReplaySubject
from reactivex.testing import ReactiveTest, TestScheduler

import rxrl
from rxrl import ops
from tests.conformance.harness import Adder, Counter, CountingIterable

pytestmark = pytest.mark.timeout(60)
BACKENDS = ["reference", "rx"]
on_next, on_completed = ReactiveTest.on_next, ReactiveTest.on_completed


class Received:
    """An observer that records notifications and lets a test wait for the terminal one."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.error: Exception | None = None
        self.completed = False
        self.done = threading.Event()

    def subscribe(self, observable: Observable[Any]) -> Any:
        return observable.subscribe(self.items.append, self._on_error, self._on_completed)

    def _on_error(self, error: Exception) -> None:
        self.error = error
        self.done.set()

    def _on_completed(self) -> None:
        self.completed = True
        self.done.set()

    def wait(self) -> Received:
        assert self.done.wait(20), "no terminal notification"
        return self


def endless(source: CountingIterable, stopped: threading.Event) -> Observable[int]:
    """A cold observable that emits ``source`` synchronously while it is being subscribed to
    (like ``rx.from_iterable``); ``stopped`` is set when its emission loop has ended."""
    def subscribe(observer: abc.ObserverBase[int], scheduler: abc.SchedulerBase | None = None
                  ) -> abc.DisposableBase:
        try:
            for x in source:
                observer.on_next(x)
        except Exception as e:  # as rx.from_iterable does: an on_next that raises ends it
            observer.on_error(e)
        finally:
            stopped.set()
        return Disposable()

    return Observable(subscribe)


# ------------------------------------------------------------------ Observable -> Plan


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cold_observable_is_a_plan_source(backend: str) -> None:
    plan = rxrl.from_observable(rx.of(1, 2, 3)) | ops.map(lambda x: x * 10)
    assert list(rxrl.run(plan, backend)) == [10, 20, 30]
    assert list(rxrl.run(plan, backend)) == [10, 20, 30]  # each run subscribes afresh


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_observable_error_is_raised_where_it_sits_in_the_stream(backend: str) -> None:
    failing = rx.concat(rx.of(1, 2), rx.throw(LookupError("sensor gone")))
    with rxrl.run(rxrl.from_observable(failing), backend) as run:
        assert [next(run), next(run)] == [1, 2]
        with pytest.raises(LookupError, match="sensor gone"):
            next(run)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_endless_observable_is_held_back_by_the_buffer_and_stopped_by_close(backend: str) -> None:
    source, stopped = CountingIterable(), threading.Event()
    observable = endless(source, stopped)
    with rxrl.run(rxrl.from_observable(observable, buffer=2) | ops.take(3), backend) as run:
        assert list(run) == [0, 1, 2]
        # 3 taken, at most 2 buffered, at most 1 held in the producer's on_next
        assert source.pulled <= 3 + 2 + 1
    assert stopped.wait(10), "the producer kept running after the run closed"
    assert source.pulled <= 3 + 2 + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_endless_rx_from_iterable_does_not_flood(backend: str) -> None:
    source = CountingIterable()
    with rxrl.run(rxrl.from_observable(rx.from_iterable(source), buffer=4), backend) as run:
        assert list(itertools.islice(run, 10)) == list(range(10))
        assert source.pulled <= 10 + 4 + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subject_fed_from_another_thread_feeds_a_plan_from_another_thread(backend: str) -> None:
    subject: ReplaySubject[int] = ReplaySubject()  # replays what came before the subscription
    plan = rxrl.from_observable(subject)

    def produce() -> None:
        for x in range(5):
            subject.on_next(x)
        subject.on_completed()

    producer = threading.Thread(target=produce)
    producer.start()
    with rxrl.run(plan | ops.window(2), backend) as run:
        assert list(run) == [[0, 1], [2, 3], [4]]
    producer.join(10)


def test_observable_sources_join_an_async_union_and_replay() -> None:
    left = rxrl.from_observable(rx.of(*[("l", i) for i in range(5)]))
    right = rxrl.from_iterables([[("r", i) for i in range(5)]]) | ops.gather()
    plan = ops.union(left, right, mode="async")
    with rxrl.run(plan, "rx") as run:
        out = list(run)
        trace = run.trace
    assert sorted(out) == sorted([("l", i) for i in range(5)] + [("r", i) for i in range(5)])
    assert list(rxrl.run(plan, "reference", schedule=trace)) == out


def test_from_observable_checks_its_arguments() -> None:
    with pytest.raises(rxrl.PlanError, match=r"from_observable\(\) \(built at .*test_rx_interop"):
        rxrl.from_observable([1, 2])  # type: ignore[arg-type]
    with pytest.raises(rxrl.PlanError, match="buffer must be an integer >= 1"):
        rxrl.from_observable(rx.of(1), buffer=0)


def test_a_from_observable_plan_prints() -> None:
    assert "from_observable(<Observable>, buffer=16)" in rxrl.show(rxrl.from_observable(rx.of(1)))


# ------------------------------------------------------------------ Plan -> Observable


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_is_an_observable_for_plain_rx_operators(backend: str) -> None:
    def even(x: int) -> bool:
        return x % 2 == 0

    plan = rxrl.from_iterable(range(10)) | ops.map(lambda x: x * x)
    metrics = rxrl.to_observable(plan, backend).pipe(rx_ops.filter(even),
                                                     rx_ops.buffer_with_count(2))
    received = Received()
    received.subscribe(metrics)
    assert received.wait().items == [[0, 4], [16, 36], [64]] and received.completed


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_subscription_starts_its_own_run(backend: str) -> None:
    adder = rxrl.actors(Adder, 1)
    observable = rxrl.to_observable(rxrl.from_iterable([1, 2, 3]) | ops.call(adder, Adder.add),
                                    backend)
    first, second = Received(), Received()
    first.subscribe(observable)
    second.subscribe(observable)
    assert first.wait().items == second.wait().items == [1, 3, 6]  # fresh actors per run


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_errors_arrive_as_on_error(backend: str) -> None:
    plan = rxrl.from_iterable([1, 0]) | ops.map(lambda x: 1 // x)
    received = Received()
    received.subscribe(rxrl.to_observable(plan, backend))
    received.wait()
    assert received.items == [1] and not received.completed
    assert isinstance(received.error, rxrl.OperatorError)
    assert isinstance(received.error.__cause__, ZeroDivisionError)


def test_start_up_errors_arrive_as_on_error() -> None:
    def broken(i: int) -> Counter:
        raise RuntimeError("no GPU")

    group = rxrl.indexed_actors(broken, 1, name="Broken")
    received = Received()
    received.subscribe(rxrl.to_observable(rxrl.from_actors(group, Counter.next) | ops.barrier(),
                                          "rx"))
    assert isinstance(received.wait().error, rxrl.ActorError)


def test_bad_plans_and_backends_fail_when_the_observable_is_made() -> None:
    with pytest.raises(ValueError, match="unknown backend 'spark'"):
        rxrl.to_observable(rxrl.from_iterable([1]), "spark")
    with pytest.raises(rxrl.PlanError, match="expects a Plan, got Shards"):
        rxrl.to_observable(rxrl.from_iterables([[1]]))  # type: ignore[arg-type]


def test_disposing_the_subscription_stops_the_run_and_its_actors() -> None:
    class Sampler:
        def __init__(self) -> None:
            self.samples = 0

        def sample(self) -> int:
            self.samples += 1
            return self.samples

    made: list[Sampler] = []

    def make(index: int) -> Sampler:
        made.append(Sampler())
        return made[-1]

    group = rxrl.indexed_actors(make, 2, name="Disposed")
    plan = rxrl.from_actors(group, Sampler.sample) | ops.gather(2)  # endless
    received = Received()
    received.subscribe(rxrl.to_observable(plan, "rx").pipe(rx_ops.take(5)))
    assert len(received.wait().items) == 5 and received.completed
    threads = [t for t in threading.enumerate() if t.name.startswith("rxrl-rx Disposed")]
    for thread in threads:
        thread.join(10)
    assert not any(t.is_alive() for t in threads)
    # the run stopped: at most the 5 items taken plus the 2 requests in flight per actor
    assert sum(s.samples for s in made) <= 5 + 2 * 2


def test_disposal_in_virtual_time_stops_pulling() -> None:
    """On a TestScheduler the whole drain happens at subscription time (t=200); ``take(2)``
    disposes after the second item, and the source is never pulled a third time."""
    scheduler = TestScheduler()
    source = CountingIterable()
    plan = rxrl.from_iterable(source) | ops.map(lambda x: x * 10)
    result = scheduler.start(lambda: rxrl.to_observable(plan, "rx", scheduler=scheduler).pipe(
        rx_ops.take(2)))
    assert result.messages == [on_next(200, 0), on_next(200, 10), on_completed(200)]
    assert source.pulled == 2


def test_a_finite_run_in_virtual_time() -> None:
    scheduler = TestScheduler()
    plan = rxrl.from_iterables([[1, 2], [3]]) | ops.barrier()
    result = scheduler.start(lambda: rxrl.to_observable(plan, "rx", scheduler=scheduler))
    assert result.messages == [on_next(200, [1, 3]), on_next(200, [2]), on_completed(200)]


def test_a_started_run_has_one_subscriber() -> None:
    run = rxrl.run(rxrl.from_iterable([1, 2, 3]), "rx")
    observable = run.as_observable(CurrentThreadScheduler())
    first, second = Received(), Received()
    first.subscribe(observable)
    second.subscribe(observable)
    assert first.wait().items == [1, 2, 3]
    assert isinstance(second.wait().error, RuntimeError)
    assert "already subscribed" in str(second.error)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_round_trip_through_an_observable_keeps_the_stream(backend: str) -> None:
    plan = rxrl.from_iterable(itertools.islice(itertools.count(), 50)) | ops.window(7)
    again = rxrl.from_observable(rxrl.to_observable(plan, backend), buffer=3)
    assert list(rxrl.run(again, backend)) == [list(range(i, min(i + 7, 50)))
                                             for i in range(0, 50, 7)]
