"""Fan-out (split), pipelined calls and readiness: the laws of docs/semantics.md, every backend."""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rxrl
from rxrl import ops
from tests.conformance.harness import (
    EXAMPLES,
    Adder,
    Counter,
    Gate,
    ints,
    outcome_and_replay,
    run_on,
)

pytestmark = pytest.mark.timeout(240)


def check(backend: str, strategy: st.SearchStrategy[Any], law: Callable[..., None],
          scale: float = 1.0) -> None:
    """Run ``law`` over ``strategy`` with (a share of) the example budget of ``backend``."""
    settings(max_examples=max(3, int(EXAMPLES[backend] * scale)))(given(strategy)(law))()


def collect(plan: rxrl.Plan[Any], backend: str, seed: int = 0) -> list[Any]:
    with run_on(plan, backend, seed) as run:
        return list(run)


class Counted:
    """An iterable that counts the items pulled from it."""

    def __init__(self, items: list[int]) -> None:
        self.items, self.pulled = items, 0

    def __iter__(self) -> Iterator[int]:
        for x in self.items:
            self.pulled += 1
            yield x


def tag(i: int, x: int) -> tuple[int, int]:
    return i, x


def note(log: list[int], i: int, x: object) -> None:
    log.append(i)


modes: st.SearchStrategy[Literal["round_robin", "async"]] = st.sampled_from(["round_robin", "async"])


# ------------------------------------------------------------------------------------ split


def test_every_branch_yields_every_item_in_order_and_the_source_is_pulled_once(backend: str) -> None:
    """split(p, n): branch i yields exactly p's items, in order; p is pulled once per item."""
    def law(args: tuple[list[int], int, int, str, int]) -> None:
        xs, n, lag, mode, seed = args
        source = Counted(xs)
        branches = ops.split(rxrl.from_iterable(source), n, max_lag=lag)
        tagged = [b | ops.map(functools.partial(tag, i)) for i, b in enumerate(branches)]
        out = collect(ops.union(*tagged, mode=mode), backend, seed)  # type: ignore[arg-type]
        assert [[x for j, x in out if j == i] for i in range(n)] == [xs] * n
        assert source.pulled == len(xs)

    check(backend, st.tuples(st.lists(ints, max_size=12), st.integers(2, 4), st.integers(1, 5),
                             modes, st.integers(0, 999)), law)


def test_no_branch_is_ever_more_than_max_lag_items_ahead_of_the_slowest(backend: str) -> None:
    """At every prefix of a run, items taken by branch i - by the slowest branch <= max_lag."""
    def law(args: tuple[int, int, int, int]) -> None:
        n, lag, skew, seed = args
        skew = min(skew, lag)  # a window wider than max_lag would deadlock the split
        taken: list[int] = []
        branches = ops.split(rxrl.from_iterable(range(30)), n, max_lag=lag)
        # branch 0 is read in windows of `skew` items, so the branches do not move in step
        reads = [b | ops.tap(functools.partial(note, taken, i)) for i, b in enumerate(branches)]
        reads[0] = reads[0] | ops.window(skew) | ops.flat_map(lambda w: w)
        out = collect(ops.union(*reads, mode="async"), backend, seed)
        assert sorted(out) == sorted(list(range(30)) * n)
        counts = [0] * n
        for i in taken:
            counts[i] += 1
            assert counts[i] - min(counts) <= lag

    check(backend, st.tuples(st.integers(2, 3), st.integers(1, 4), st.integers(1, 4),
                             st.integers(0, 999)), law, scale=0.5)


def test_a_source_error_is_raised_by_the_branch_that_meets_it_first(backend: str) -> None:
    """The branch whose pull meets the source's error raises it; the others saw every item
    before it (and would raise it at the same point)."""
    seen: list[tuple[int, int]] = []
    a, b = ops.split(rxrl.from_iterable([1, 2, 0, 3]) | ops.map(lambda x: 10 // x), 2)
    plan = ops.union(a | ops.tap(lambda x: seen.append((0, x))),
                     b | ops.tap(lambda x: seen.append((1, x))))
    with pytest.raises(rxrl.OperatorError, match=r"map\(<lambda>\)") as e:
        collect(plan, backend)
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    assert seen == [(0, 10), (1, 10), (0, 5), (1, 5)]  # branch 0 met it: round robin's turn


def test_a_split_left_half_read_or_read_twice_is_refused_naming_the_split(backend: str) -> None:
    branches = ops.split(rxrl.from_iterable([1, 2]), 3)
    line = branches[0].node.site
    with pytest.raises(rxrl.PlanError, match=rf"split\(3, max_lag=16\) \(built at {line}\): "
                                             r"branch\(es\) \[1, 2\] of 3 are not read"):
        rxrl.run(branches[0], backend)
    a, b = ops.split(rxrl.from_iterable([1, 2]), 2)
    with pytest.raises(rxrl.PlanError, match=r"branch 0 is read twice"):
        rxrl.run(ops.zip(a, a, b), backend)


def test_a_split_plan_deadlocked_by_max_lag_fails_naming_the_split(backend: str) -> None:
    """zip(a, window(5) of b) cannot move once b is max_lag=3 ahead: a clear error, promptly."""
    a, b = ops.split(rxrl.from_iterable(itertools.count()), 2, max_lag=3)
    with pytest.raises(rxrl.DeadlockError, match=r"branch 1 of split\(2, max_lag=3\) at .* is 3 "
                                                 r"items ahead of branch 0"):
        collect(ops.zip(a, b | ops.window(5)), backend)


def test_replaying_a_split_under_an_async_union_reproduces_the_run(backend: str) -> None:
    """Stateful actors behind a split, the branches merged asynchronously with their own
    actor effects: the reference replaying the trace gives the same output."""
    def law(args: tuple[int, int, int, int]) -> None:
        shards, lag, k, seed = args
        counters = rxrl.actors(Counter, shards, start=seed % 7)
        adder = rxrl.actors(Adder, 1)
        source = rxrl.from_actors(counters, Counter.next) | ops.take(4) | ops.gather(k)
        a, b = ops.split(source, 2, max_lag=lag)
        plan = ops.union(a | ops.broadcast(counters, Counter.bump),
                         b | ops.call(adder, Adder.add), mode="async")
        out, replayed = outcome_and_replay(plan, backend, seed)
        assert replayed == out and out[1] is None
        assert len(out[0]) == 2 * 4 * shards

    check(backend, st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2),
                             st.integers(0, 999)), law, scale=0.5)


# ---------------------------------------------------------------------------- pipelined calls


class Recorder:
    """An actor that records the calls it receives and answers with their position."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.calls: list[int] = []

    def take(self, x: int) -> tuple[int, int, int]:
        self.calls.append(x)
        return self.index, len(self.calls), x


def test_a_pipelined_call_emits_results_in_input_order(backend: str) -> None:
    """call(group, fn, max_in_flight=k) == call(group, fn) for any k: results in input order,
    each actor receiving its calls in stream order (round robin over a group)."""
    def law(args: tuple[list[int], int, int]) -> None:
        xs, k, n = args
        adders = rxrl.actors(Adder, n)
        out = collect(rxrl.from_iterable(xs) | ops.call(adders, Adder.add, max_in_flight=k), backend)
        totals = [0] * n
        expected = []
        for position, x in enumerate(xs):
            totals[position % n] += x
            expected.append(totals[position % n])
        assert out == expected

    check(backend, st.tuples(st.lists(ints, max_size=12), st.integers(1, 4), st.integers(1, 3)), law,
          scale=0.4 if backend == "ray" else 1.0)  # each Ray example starts its actors: ~1 s


def test_a_pipelined_call_reads_at_most_max_in_flight_items_ahead(backend: str) -> None:
    """At every point, items read from upstream - results emitted <= k, and a pipelined call
    does read ahead (reaching k when the input is long enough)."""
    def law(args: tuple[int, int]) -> None:
        length, k = args
        log: list[str] = []
        recorders = rxrl.indexed_actors(Recorder, 2, name="Recorder")
        plan = (rxrl.from_iterable(range(length)) | ops.tap(lambda x: log.append("read"))
                | ops.call(recorders, Recorder.take, route=lambda x: x % 2, max_in_flight=k)
                | ops.tap(lambda r: log.append("emit")))
        out = collect(plan, backend)
        assert [x for _, _, x in out] == list(range(length))
        ahead = list(itertools.accumulate(1 if e == "read" else -1 for e in log))
        assert max(ahead, default=0) == min(k, length)
        assert all(0 <= a <= k for a in ahead)
        assert [n for i, n, _ in out if i == 0] == list(range(1, 1 + (length + 1) // 2))

    check(backend, st.tuples(st.integers(0, 10), st.integers(1, 4)), law,
          scale=0.4 if backend == "ray" else 1.0)


def test_replaying_pipelined_calls_to_stateful_actors_reproduces_the_run(backend: str) -> None:
    """gather from stateful workers | pipelined learner | broadcast back: replay law."""
    def law(args: tuple[int, int, int, int]) -> None:
        shards, k, calls_ahead, seed = args
        counters = rxrl.actors(Counter, shards, start=seed % 5)
        learner = rxrl.actors(Adder, 1)
        plan = (rxrl.from_actors(counters, Counter.next) | ops.take(5) | ops.gather(k)
                | ops.call(learner, Adder.add, max_in_flight=calls_ahead)
                | ops.broadcast(counters, Counter.bump))
        out, replayed = outcome_and_replay(plan, backend, seed)
        assert replayed == out and out[1] is None and len(out[0]) == 5 * shards

    check(backend, st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(1, 3),
                             st.integers(0, 999)), law, scale=0.5)


def test_a_non_blocking_call_under_an_async_union_replays_and_loses_nothing(backend: str) -> None:
    """A ``call(..., block=False)`` side branch under an async union: every item of both
    inputs comes out once, each input's in order, the call's actor sees its calls in stream
    order, and the reference replaying the run's trace (the union's choices and the call's
    deferrals) reproduces its output."""
    def law(args: tuple[list[int], list[int], int, int]) -> None:
        main, side, k, seed = args
        learner, adders = rxrl.actors(Adder, 1), rxrl.actors(Adder, 1)
        first = rxrl.from_iterable(main) | ops.call(learner, Adder.add) | ops.map(functools.partial(tag, 0))
        second = (rxrl.from_iterable(side) | ops.call(adders, Adder.add, max_in_flight=k, block=False)
                  | ops.map(functools.partial(tag, 1)))
        plan = ops.union(first, second, mode="async")
        out, replayed = outcome_and_replay(plan, backend, seed)
        assert replayed == out and out[1] is None
        assert [x for i, x in out[0] if i == 0] == list(itertools.accumulate(main))
        assert [x for i, x in out[0] if i == 1] == list(itertools.accumulate(side))

    check(backend, st.tuples(st.lists(ints, max_size=8), st.lists(ints, max_size=5), st.integers(1, 3),
                             st.integers(0, 999)), law, scale=0.25)


class Latch:
    """An actor whose ``wait`` returns only once ``release`` was called (rx: actors share the process)."""

    def __init__(self, event: Any) -> None:
        self.event = event

    def wait(self, x: int) -> int:
        """``x``, once released (10 s at most)."""
        assert self.event.wait(10), "never released: the driver waited for this call"
        return x

    def release(self, x: int) -> int:
        """Release the waiting calls; ``x``."""
        self.event.set()
        return x


def test_a_non_blocking_call_never_makes_the_driver_wait_for_it() -> None:
    """Law (rx: actors on threads of one process): the side branch's call can only finish
    after the main branch released it, so a driver that waited for it would never get to the
    main branch: with ``block=False`` the union serves the main branch meanwhile, the call
    finishes, and every item comes out."""
    import threading

    event = threading.Event()
    latch = rxrl.actors(Latch, 1, event)
    releaser = rxrl.actors(Latch, 1, event)
    side = rxrl.from_iterable([100]) | ops.call(latch, Latch.wait, block=False)
    main = rxrl.from_iterable(range(3)) | ops.call(releaser, Latch.release)
    with rxrl.run(ops.union(side, main, mode="async"), "rx", timeout_s=20) as run:
        out = list(run)
    assert sorted(out) == [0, 1, 2, 100] and out[0] != 100


def test_max_in_flight_below_one_is_a_plan_error_naming_it(backend: str) -> None:
    with pytest.raises(rxrl.PlanError, match=r"call\(Adder×1, max_in_flight=0\).*max_in_flight "
                                             r"must be an integer >= 1"):
        ops.call(rxrl.actors(Adder, 1), Adder.add, max_in_flight=0)


# ---------------------------------------------------------------------------------- readiness


def gated(n: int, k: int = 1, collector: str = "gather") -> tuple[rxrl.ActorGroup[Gate],
                                                                rxrl.Plan[int], rxrl.Plan[int]]:
    """A gate (not ready until fed), its source of ``n`` items, and the flow that feeds it."""
    gate = rxrl.actors(Gate, 1)
    source = rxrl.from_actors(gate, Gate.next) | ops.take(n)
    plan = source | ops.gather(k) if collector == "gather" else source | ops.barrier() | ops.map(sum)
    return gate, plan, rxrl.from_iterable(range(100, 100 + n)) | ops.call(gate, Gate.feed)


@pytest.mark.parametrize("mode", ["round_robin", "async"])
@pytest.mark.parametrize("collector", ["gather", "barrier"])
def test_unions_skip_a_not_ready_input_and_return_to_it(backend: str, mode: str, collector: str
                                                        ) -> None:
    """A not-ready source inside union/concurrently is passed over, never leaks a sentinel,
    and is asked again once its actor was fed: every fed item comes out, nothing else."""
    _, source, feeder = gated(4, collector=collector)
    out = collect(ops.concurrently(source, feeder, mode=mode, emit=[0]), backend)  # type: ignore[arg-type]
    assert out == [1, 2, 3, 4]
    _, source, feeder = gated(3, collector=collector)
    both = collect(ops.union(source, feeder, mode=mode), backend)  # type: ignore[arg-type]
    assert sorted(both) == [1, 2, 3, 100, 101, 102]


class Replay:
    """A replay-buffer-shaped actor: stores items, samples (without removing) once it holds
    ``learning_starts`` of them; answers NOT_READY before."""

    def __init__(self, learning_starts: int) -> None:
        self.learning_starts = learning_starts
        self.items: list[int] = []
        self.samples = 0

    def add(self, x: int) -> int:
        self.items.append(x)
        return len(self.items)

    def sample(self) -> tuple[int, int] | rxrl.NotReady:
        if len(self.items) < self.learning_starts:
            return rxrl.NOT_READY
        self.samples += 1
        return len(self.items), self.items[self.samples % len(self.items)]


@pytest.mark.parametrize("intensity", [1, 2.5, 0.4])
def test_a_replay_with_learning_starts_in_a_round_robin_with_its_store_flow(backend: str,
                                                                             intensity: float) -> None:
    """DQN's shape: store flow and replay flow in a round-robin concurrently with a real
    training intensity. No deadlock; no sample before learning_starts; after it, samples per
    stored item keep the ratio (within one turn); the run replays from its trace."""
    replay = rxrl.actors(Replay, 1, learning_starts=5)
    store = rxrl.from_iterable(range(40)) | ops.call(replay, Replay.add)
    samples = rxrl.from_actors(replay, Replay.sample) | ops.gather()
    plan = ops.alongside(samples | ops.take(int(35 * intensity)), store, weights=[intensity, 1])
    out, replayed = outcome_and_replay(plan, backend)
    assert replayed == out and out[1] is None
    assert min(stored for stored, _ in out[0]) == 5
    for stored in range(6, 40):  # by the time `stored` items are in, the ratio holds
        sampled = sum(1 for s, _ in out[0] if s <= stored)
        assert abs(sampled - intensity * (stored - 4)) <= math.ceil(intensity) + 1


def test_a_side_flow_that_catches_a_branch_up_unblocks_its_sibling(backend: str) -> None:
    """The two-trainer shape before learning_starts: one branch needs more items than
    max_lag allows ahead; the other branch's side flow (a store, inside an alongside whose
    main flow is not ready) catches up and the alongside answers not ready — the union must
    ask the first branch again, not declare a deadlock."""
    replay = rxrl.actors(Replay, 1, learning_starts=1000)  # never ready in this test
    a, b = ops.split(rxrl.from_iterable(range(40)), 2, max_lag=2)
    batches = a | ops.window(5)
    dqn = ops.alongside(rxrl.from_actors(replay, Replay.sample) | ops.gather(),
                        b | ops.call(replay, Replay.add) | ops.map(lambda n: (n, n)))
    plan = ops.union(batches, dqn, mode="async") | ops.take(3)
    assert collect(plan, backend) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]


def test_no_input_can_move_is_a_deadlock_error_naming_the_blocked_actor(backend: str) -> None:
    """A not-ready source that nothing feeds any more: the run ends with DeadlockError (on
    every backend, without waiting for a timeout) after the items that could flow."""
    _, source, _ = gated(3)
    plan = ops.union(source, rxrl.from_iterable([7, 8]), mode="async")
    out: list[int] = []
    started = time.monotonic()
    with pytest.raises(rxrl.DeadlockError, match=r"gather\(max_in_flight=1\) at .*: Gate\[0\] "
                                                 r"answered NOT_READY and has been sent no call"
                       ), rxrl.run(plan, backend) as run:
        out.extend(run)
    assert out == [7, 8]
    assert time.monotonic() - started < 60  # bounded: no timeout was needed to find it


class Slow:
    """A source that takes ``delay`` seconds (asleep) per item."""

    def __init__(self, delay: float) -> None:
        self.delay, self.n = delay, 0

    def produce(self) -> int:
        time.sleep(self.delay)
        self.n += 1
        return self.n


def test_waiting_on_a_not_ready_input_does_not_poll(backend: str) -> None:
    """While the only flow that could feed a not-ready replay takes 2 s for its next item, the
    driver sleeps: its CPU time stays under 10 % of the wall time."""
    replay = rxrl.actors(Replay, 1, learning_starts=1)
    slow = rxrl.actors(Slow, 1, delay=2.0)
    store = rxrl.from_actors(slow, Slow.produce) | ops.gather() | ops.call(replay, Replay.add)
    samples = rxrl.from_actors(replay, Replay.sample) | ops.gather()
    plan = ops.alongside(samples, store, mode="async") | ops.take(1)
    with rxrl.run(plan, backend) as run:
        wall, cpu = time.monotonic(), time.thread_time()
        assert next(run)[0] == 1
        wall, cpu = time.monotonic() - wall, time.thread_time() - cpu
    assert wall >= 1.9
    assert cpu < 0.1 * wall, f"the driver used {cpu:.2f} s of CPU in {wall:.2f} s"


def test_a_barrier_of_not_ready_shards_waits_for_each_to_be_fed(backend: str) -> None:
    """A barrier round holds the items it has while a shard is not ready; rounds stay whole."""
    gates = rxrl.actors(Gate, 2)
    rounds = rxrl.from_actors(gates, Gate.next) | ops.take(2) | ops.barrier()
    feeder = rxrl.from_iterable([0, 1, 1, 0]) | ops.call(gates, Gate.feed, route=lambda i: i)
    assert collect(ops.alongside(rounds, feeder), backend) == [[1, 1], [2, 2]]
