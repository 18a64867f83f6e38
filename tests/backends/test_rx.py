"""The rx backend beyond the conformance suite: threads, ordering across branches, back-pressure,
errors, deadlines and closing. Sleeps inside actors only vary timing; no assertion waits on one."""

from __future__ import annotations

import gc
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rxrl
from rxrl import ops
from rxrl.errors import WaitTimeoutError
from tests.conformance.harness import Adder, Counter, CountingIterable

pytestmark = pytest.mark.timeout(60)


def run_threads(prefix: str) -> list[threading.Thread]:
    """Live threads of rx runs whose actor names start with ``prefix``."""
    return [t for t in threading.enumerate() if t.name.startswith(f"rxrl-rx {prefix}")]


def assert_threads_end(prefix: str) -> None:
    for thread in run_threads(prefix):
        thread.join(10)
    assert run_threads(prefix) == []


class Log:
    """An actor that logs every call it receives, taking a little (seeded, varying) time."""

    def __init__(self, index: int, registry: list[Log]) -> None:
        self.index = index
        self.calls: list[tuple[str, Any]] = []
        self.threads: set[str] = set()
        self._rng = random.Random(index)
        registry.append(self)

    def _work(self, kind: str, arg: Any) -> int:
        time.sleep(self._rng.random() * 0.0005)  # vary the interleaving, nothing else
        self.threads.add(threading.current_thread().name)
        self.calls.append((kind, arg))
        return len(self.calls)

    def sample(self) -> tuple[int, int]:
        return self.index, self._work("sample", None)

    def poke(self, x: Any) -> tuple[int, int]:
        return self.index, self._work("poke", x)


class Registry:
    """Collects the actors a group makes, per run."""

    def __init__(self) -> None:
        self.current: list[Log] = []

    def group(self, n: int, name: str = "Log") -> rxrl.ActorGroup[Log]:
        return rxrl.indexed_actors(lambda i: Log(i, self.current), n, name=name)

    def fresh(self) -> list[Log]:
        """The actors of the last run, by index (the rx backend makes them in parallel)."""
        made, self.current = self.current, []
        return sorted(made, key=lambda a: a.index)


# ----------------------------------------------------------------------------- the options


def test_a_schedule_is_refused_with_a_clear_error() -> None:
    with pytest.raises(rxrl.ScheduleError, match=r"cannot follow a schedule.*'reference'"):
        rxrl.run(rxrl.from_iterable([1]), "rx", schedule=rxrl.Schedule.round_robin())


def test_unknown_and_invalid_options_are_refused() -> None:
    with pytest.raises(TypeError, match=r"no option\(s\) \['adress'\].*'timeout_s'"):
        rxrl.run(rxrl.from_iterable([1]), "rx", adress="x")
    with pytest.raises(ValueError, match="timeout_s must be a positive"):
        rxrl.run(rxrl.from_iterable([1]), "rx", timeout=0)
    with pytest.raises(ValueError, match="max_pending_broadcasts must be an integer >= 1"):
        rxrl.run(rxrl.from_iterable([1]), "rx", max_pending_broadcasts=0)


# ------------------------------------------------------------------------- threads, order


def test_each_actor_runs_on_one_thread_of_its_own() -> None:
    registry = Registry()
    group = registry.group(3, name="OwnThread")
    plan = (rxrl.from_actors(group, Log.sample) | ops.gather(2) | ops.take(12)
            | ops.broadcast(group, Log.poke) | ops.call(group, lambda a, x: a.poke(x)))
    with rxrl.run(plan, "rx") as run:
        assert len(list(run)) == 12
    actors = registry.fresh()
    threads = [a.threads for a in actors]
    assert all(len(t) == 1 for t in threads)
    assert len(set.union(*threads)) == 3
    assert threading.current_thread().name not in set.union(*threads)


def test_actors_shared_by_async_branches_see_the_replayed_call_order() -> None:
    """Three async branches make samples, calls and broadcasts on the same three actors; each
    actor's log in the rx run equals its log when the reference replays the run's trace."""
    registry = Registry()
    group = registry.group(3)
    sampled = (rxrl.from_actors(group, Log.sample) | ops.take(4) | ops.gather(2, tagged=True)
               | ops.call(group, lambda a, t: a.poke(t.value)))
    called = rxrl.from_iterable(range(6)) | ops.call(group, Log.poke)
    rounds = (rxrl.from_actors(group, Log.sample) | ops.take(2) | ops.barrier()
              | ops.broadcast(group, lambda a, r: a.poke(len(r))))
    plan = ops.union(sampled, called, rounds, mode="async")
    for _ in range(15):
        assert len(assert_replays(plan, registry)) == 12 + 6 + 2


def assert_replays(plan: rxrl.Plan[Any], registry: Registry) -> list[Any]:
    """Run ``plan`` on rx, replay its trace on the reference, and check that the output and
    every actor's call log are reproduced; return the output."""
    registry.fresh()
    with rxrl.run(plan, "rx") as run:
        out = list(run)
        trace = run.trace
    logs = [a.calls for a in registry.fresh()]
    assert list(rxrl.run(plan, "reference", schedule=trace)) == out
    assert [a.calls for a in registry.fresh()] == logs
    return out


@st.composite
def shared_actor_plans(draw: st.DrawFn, group: rxrl.ActorGroup[Log]) -> rxrl.Plan[Any]:
    """Async/round-robin unions of branches that all sample, call and broadcast on ``group``."""
    def branch() -> rxrl.Plan[Any]:
        kind = draw(st.sampled_from(["gather", "barrier", "call"]))
        if kind == "call":
            return rxrl.from_iterable(range(draw(st.integers(0, 4)))) | ops.call(group, Log.poke)
        shards = rxrl.from_actors(group, Log.sample) | ops.take(draw(st.integers(0, 3)))
        if kind == "barrier":
            return shards | ops.barrier() | ops.broadcast(group, lambda a, r: a.poke(len(r)))
        k = draw(st.integers(1, 3))
        return (shards | ops.gather(k, tagged=True)
                | ops.call(group, lambda a, t: a.poke(t.value[1])))

    branches = [branch() for _ in range(draw(st.integers(1, 3)))]
    asynchronous = draw(st.booleans())
    if draw(st.booleans()):
        return ops.union(*branches, mode="async" if asynchronous else "round_robin")
    emit = draw(st.lists(st.integers(0, len(branches) - 1)))
    return ops.concurrently(*branches, mode="async" if asynchronous else "round_robin", emit=emit)


def test_the_replay_law_holds_for_actor_logs_too() -> None:
    """Law: for plans whose branches share actors, replaying an rx run's trace reproduces the
    output and every actor's sequence of calls."""
    registry = Registry()
    group = registry.group(2, name="Shared")

    @settings(max_examples=40)
    @given(shared_actor_plans(group))
    def law(plan: rxrl.Plan[Any]) -> None:
        assert_replays(plan, registry)

    law()


def test_iterable_shards_and_driver_operators_run_on_their_own_threads() -> None:
    seen: dict[str, set[str]] = {"shard": set(), "driver": set()}

    def note(where: str) -> Callable[[int], None]:
        return lambda x: seen[where].add(threading.current_thread().name)

    plan = (rxrl.from_iterables([[1, 2], [3]]) | ops.tap(note("shard")) | ops.gather()
            | ops.tap(note("driver")))
    assert sorted(rxrl.run(plan, "rx")) == [1, 2, 3]
    assert seen["driver"] == {threading.current_thread().name}
    assert len(seen["shard"]) == 2 and all(n.startswith("rxrl-rx from_iterables[")
                                           for n in seen["shard"])


def test_an_async_union_pulls_an_input_that_only_a_pull_can_advance() -> None:
    """Regression: the inner round robin's turn is an idle barrier while its gather still has
    requests in flight; waiting for the gather would never make the round robin ready."""
    inner = ops.union(rxrl.from_iterables([[1, 2], [3, 4]]) | ops.gather(),
                      rxrl.from_iterables([[10], [20]]) | ops.barrier() | ops.map(sum))
    plan = ops.union(inner, rxrl.from_iterable([100]), mode="async")
    with rxrl.run(plan, "rx", timeout=5) as run:
        out = list(run)
        trace = run.trace
    assert sorted(out) == [1, 2, 3, 4, 30, 100]
    assert list(rxrl.run(plan, "reference", schedule=trace)) == out


# ---------------------------------------------------------------------------- back-pressure


def test_gather_never_has_more_than_k_requests_ahead_of_the_consumer() -> None:
    for k in (1, 2, 3):
        sources = [CountingIterable(), CountingIterable()]
        taken = [0, 0]
        with rxrl.run(rxrl.from_iterables(sources) | ops.gather(k, tagged=True), "rx") as run:
            for _ in range(20):
                item = next(run)
                taken[item.shard] += 1
                # pulls happen on the shard threads; whenever we look, none is more than k ahead
                assert all(s.pulled <= t + k for s, t in zip(sources, taken, strict=True))
        assert sum(taken) == 20


def test_an_infinite_actor_source_behind_a_barrier_is_pulled_one_round_per_pull() -> None:
    registry = Registry()
    group = registry.group(3)
    with rxrl.run(rxrl.from_actors(group, Log.sample) | ops.barrier(), "rx") as run:
        for r in range(1, 6):
            assert [count for _, count in next(run)] == [r, r, r]
            # round r has been pulled and nothing else requested: exactly r samples each
            assert sorted(len(a.calls) for a in registry.current) == [r, r, r]


def test_taking_from_an_endless_gather_leaves_at_most_k_extra_samples() -> None:
    registry = Registry()
    group = registry.group(2, name="Endless")
    with rxrl.run(rxrl.from_actors(group, Log.sample) | ops.gather(3, tagged=True) | ops.take(10),
                  "rx") as run:
        out = list(run)
    assert len(out) == 10
    taken = [sum(1 for t in out if t.shard == i) for i in range(2)]
    assert_threads_end("Endless")
    assert all(len(a.calls) <= taken[a.index] + 3 for a in registry.fresh())


# ---------------------------------------------------------------------------- errors


def failing_sample(counter: Counter) -> int:
    value = counter.next()
    if value == 2:
        raise KeyError("no sample")
    return value


def test_a_failed_request_is_raised_when_it_is_taken() -> None:
    plan = rxrl.from_actors(rxrl.actors(Counter, 1), failing_sample) | ops.gather(3)
    with rxrl.run(plan, "rx") as run:
        assert [next(run), next(run)] == [0, 1]
        with pytest.raises(rxrl.OperatorError, match="from_actors") as e:
            next(run)
    assert isinstance(e.value.__cause__, KeyError)


def test_a_failed_broadcast_is_raised_by_the_stream() -> None:
    def refuse(adder: Adder, x: int) -> None:
        if x == 3:
            raise ValueError("bad weights")

    plan = rxrl.from_iterable([1, 2, 3, 4, 5]) | ops.broadcast(rxrl.actors(Adder, 2), refuse)
    with pytest.raises(rxrl.OperatorError, match=r"broadcast\(Adder×2") as e:
        list(rxrl.run(plan, "rx", max_pending_broadcasts=1))
    assert isinstance(e.value.__cause__, ValueError)


def test_a_failed_call_names_the_operator() -> None:
    plan = rxrl.from_iterable([1, 0]) | ops.call(rxrl.actors(Adder, 1), lambda a, x: 1 // x)
    with rxrl.run(plan, "rx") as run:
        assert next(run) == 1
        with pytest.raises(rxrl.OperatorError, match=r"call\(Adder×1") as e:
            next(run)
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def test_a_failing_actor_constructor_fails_the_run_and_stops_the_others() -> None:
    def make(i: int) -> Counter:
        if i == 1:
            raise RuntimeError("no GPU")
        return Counter()

    group = rxrl.indexed_actors(make, 3, name="Broken")
    with pytest.raises(rxrl.ActorError, match=r"creating actor Broken\[1\] .*RuntimeError: no GPU"):
        rxrl.run(rxrl.from_actors(group, Counter.next) | ops.barrier(), "rx")
    assert_threads_end("Broken")


def test_an_actor_that_never_answers_hits_the_deadline() -> None:
    release = threading.Event()

    class Stuck:
        def sample(self) -> int:
            release.wait(30)
            return 0

    group = rxrl.actors(Stuck, 1)
    try:
        with pytest.raises(WaitTimeoutError, match=r"gather\(.*Stuck\[0\].*nothing arrived within "
                                                   r"timeout_s=0.2 s"):
            list(rxrl.run(rxrl.from_actors(group, Stuck.sample) | ops.gather(), "rx", timeout=0.2,
                          close_timeout=0.1))
    finally:
        release.set()
    assert_threads_end("Stuck")


# ---------------------------------------------------------------------------- closing


def test_closing_a_run_stops_its_threads() -> None:
    registry = Registry()
    group = registry.group(2, name="Closing")
    run = rxrl.run(rxrl.from_actors(group, Log.sample) | ops.gather(2), "rx")
    next(run)
    assert len(run_threads("Closing")) == 2
    run.close()
    assert run_threads("Closing") == []  # close() joins them
    counts = sorted(len(a.calls) for a in registry.current)
    assert list(run) == []
    assert sorted(len(a.calls) for a in registry.fresh()) == counts


def test_closing_from_another_thread_ends_a_waiting_pull() -> None:
    release = threading.Event()

    class Slow:
        def sample(self) -> int:
            release.wait(30)
            return 1

    run = rxrl.run(rxrl.from_actors(rxrl.actors(Slow, 1), Slow.sample) | ops.barrier(), "rx")
    result: list[list[Any]] = []
    puller = threading.Thread(target=lambda: result.append(list(run)))
    closer = threading.Thread(target=run.close)
    try:
        puller.start()
        closer.start()
        puller.join(10)  # the pull waits on an actor that never answers: only close() ends it
        assert not puller.is_alive() and result == [[]]
    finally:
        release.set()  # now the actor's call returns and close() can join its thread
        closer.join(10)
    assert not closer.is_alive()
    assert_threads_end("Slow")


def test_an_unfinished_run_that_is_dropped_stops_its_threads() -> None:
    def start() -> None:
        run = rxrl.run(rxrl.from_actors(rxrl.actors(Counter, 2), Counter.next) | ops.gather(),
                       "rx")
        next(run)
        assert len(run_threads("Counter")) >= 2

    start()
    gc.collect()
    assert_threads_end("Counter")


# ---------------------------------------------------------------------------- events


def test_events_report_choices_calls_and_shard_emits() -> None:
    events: list[rxrl.Event] = []
    adder = rxrl.actors(Adder, 1)
    plan = (rxrl.from_iterables([[1], [2]]) | ops.map(lambda x: x * 10) | ops.gather()
            | ops.call(adder, Adder.add))
    with rxrl.run(plan, "rx", on_event=events.append) as run:
        out = list(run)
        trace = run.trace
    choices = [e.item for e in events if e.kind == "choice"]
    assert choices == list(trace.choices[1])  # gather is occurrence #1 (under the call)
    assert sorted((e.shard, e.item) for e in events if e.kind == "emit" and e.op.startswith("map")
                  ) == [(0, 10), (1, 20)]
    assert [(e.shard, e.detail) for e in events if e.kind == "call"] == [
        (0, "Adder[0].Adder.add"), (0, "Adder[0].Adder.add")]
    assert out == [e.item for e in events if e.kind == "emit" and e.node == 0]


def test_the_output_iterator_is_a_plain_generator_of_items() -> None:
    def items() -> Iterator[int]:
        yield from range(3)

    with rxrl.run(rxrl.from_iterable(items()), "rx") as run:
        assert list(run) == [0, 1, 2]
