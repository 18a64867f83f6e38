"""Hypothesis properties: the operator laws of docs/semantics.md, on every backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import rxrl
from rxrl import ops
from tests.conformance.harness import (
    EXAMPLES,
    FUNCTIONS,
    PREDICATES,
    ints,
    is_merge,
    outcome_and_replay,
    plans,
    run_on,
)

small_lists = st.lists(ints, max_size=12)


def check(backend: str, strategy: st.SearchStrategy[Any], law: Callable[..., None]) -> None:
    """Run ``law`` over ``strategy`` with the example budget of ``backend``."""
    settings(max_examples=EXAMPLES[backend])(given(strategy)(law))()


def collect(plan: rxrl.Plan[Any], backend: str, seed: int = 0) -> list[Any]:
    with run_on(plan, backend, seed) as run:
        return list(run)


def test_replaying_the_trace_of_a_run_reproduces_its_output(backend: str) -> None:
    """For any plan: run(plan, backend) == run(plan, reference, schedule=that run's trace),
    its items and, if it ends in an error (a split's branches deadlocked), the error's type.
    Plans are drawn from every operator: splits, pipelined calls, not-ready sources included."""
    def law(args: tuple[rxrl.Plan[int], int]) -> None:
        plan, seed = args
        out, replayed = outcome_and_replay(plan, backend, seed)
        assert replayed == out

    check(backend, st.tuples(plans(), st.integers(0, 2**16)), law)


def test_map_fusion(backend: str) -> None:
    """map(f) | map(g) == map(g ∘ f)."""
    def law(args: tuple[list[int], int, int]) -> None:
        xs, i, j = args
        f, g = FUNCTIONS[i], FUNCTIONS[j]
        src = rxrl.from_iterable(xs)
        assert collect(src | ops.map(f) | ops.map(g), backend) == collect(
            src | ops.map(lambda x: g(f(x))), backend)

    idx = st.integers(0, len(FUNCTIONS) - 1)
    check(backend, st.tuples(small_lists, idx, idx), law)


def test_map_filter_flat_map_preserve_order_and_call_once_per_item(backend: str) -> None:
    """Element-wise operators equal their list-comprehension meaning, in order."""
    def law(args: tuple[list[int], int, int]) -> None:
        xs, i, j = args
        f, p = FUNCTIONS[i], PREDICATES[j]
        calls: list[int] = []
        plan = (rxrl.from_iterable(xs) | ops.tap(calls.append) | ops.map(f) | ops.filter(p)
                | ops.flat_map(lambda y: [y, y]))
        out = collect(plan, backend)
        assert out == [z for x in xs if p(f(x)) for z in (f(x), f(x))]
        if backend != "ray":  # Ray runs the tap in another process
            assert calls == xs

    check(backend, st.tuples(small_lists, st.integers(0, 3), st.integers(0, 2)), law)


def test_window_partition(backend: str) -> None:
    """Concatenated windows == the input; all windows but the last are full."""
    def law(args: tuple[list[int], int]) -> None:
        xs, n = args
        windows = collect(rxrl.from_iterable(xs) | ops.window(n), backend)
        assert [x for w in windows for x in w] == xs
        assert all(len(w) == n for w in windows[:-1])
        assert all(0 < len(w) <= n for w in windows)

    check(backend, st.tuples(small_lists, st.integers(1, 5)), law)


def test_size_window_partition(backend: str) -> None:
    """Size windows partition the input; each closes at the first item reaching min_size."""
    def law(args: tuple[list[int], int]) -> None:
        xs, m = args
        windows = collect(rxrl.from_iterable(xs) | ops.window(min_size=m, size=abs, combine=list),
                          backend)
        assert [x for w in windows for x in w] == xs
        for w in windows[:-1]:
            assert sum(map(abs, w)) >= m > sum(map(abs, w[:-1]))

    check(backend, st.tuples(small_lists, st.integers(1, 30)), law)


def test_zip_is_lockstep_and_unzips(backend: str) -> None:
    """zip(a, b) pairs k-th items up to the shorter input; its columns are prefixes of a, b."""
    def law(args: tuple[list[int], list[int]]) -> None:
        a, b = args
        out = collect(ops.zip(rxrl.from_iterable(a), rxrl.from_iterable(b)), backend)
        assert out == list(zip(a, b, strict=False))
        assert [x for x, _ in out] == a[:len(out)] and [y for _, y in out] == b[:len(out)]

    check(backend, st.tuples(small_lists, small_lists), law)


def round_robin_model(inputs: list[list[Any]], weights: list[int]) -> list[Any]:
    """The exact interleave of docs/semantics.md: w[i] items from input i in turn."""
    queues = [list(xs) for xs in inputs]
    out: list[Any] = []
    live = [i for i in range(len(queues))]
    while live:
        for i in list(live):
            for _ in range(weights[i]):
                if not queues[i]:
                    live.remove(i)
                    break
                out.append(queues[i].pop(0))
    return out


def test_round_robin_interleave_is_exact(backend: str) -> None:
    """union(mode='round_robin', weights=w) interleaves exactly as the model says."""
    def law(args: tuple[list[list[int]], list[int]]) -> None:
        inputs, weights = args
        weights = weights[:len(inputs)]
        plan = ops.union(*map(rxrl.from_iterable, inputs), weights=weights)
        assert collect(plan, backend) == round_robin_model(inputs, weights)

    check(backend, st.tuples(st.lists(small_lists, min_size=1, max_size=4),
                             st.lists(st.integers(1, 3), min_size=4, max_size=4)), law)


def test_async_union_and_gather_deliver_every_item_exactly_once_in_input_order(backend: str) -> None:
    """Async union and gather outputs are merges of their inputs (each input's order kept)."""
    def law(args: tuple[list[list[int]], int, int]) -> None:
        inputs, k, seed = args
        tagged = [[(i, x) for x in xs] for i, xs in enumerate(inputs)]
        union = ops.union(*map(rxrl.from_iterable, tagged), mode="async")
        assert is_merge(collect(union, backend, seed), tagged)
        gathered = rxrl.from_iterables(tagged) | ops.gather(k)
        assert is_merge(collect(gathered, backend, seed), tagged)

    check(backend, st.tuples(st.lists(small_lists, min_size=1, max_size=4), st.integers(1, 3),
                             st.integers(0, 1000)), law)


def test_barrier_round_structure(backend: str) -> None:
    """Round r holds item r of every shard that has one, in shard order."""
    def law(shards: list[list[int]]) -> None:
        rounds = collect(rxrl.from_iterables(shards) | ops.barrier(), backend)
        longest = max(map(len, shards))
        assert rounds == [[xs[r] for xs in shards if r < len(xs)] for r in range(longest)]

    check(backend, st.lists(small_lists, min_size=1, max_size=4), law)


def test_concurrently_emits_the_listed_inputs_merged(backend: str) -> None:
    """concurrently(..., emit=E) == the union's output restricted to the inputs in E."""
    def law(args: tuple[list[list[int]], list[int], int]) -> None:
        inputs, emit, seed = args
        emit = [i for i in emit if i < len(inputs)]
        tagged = [[(i, x) for x in xs] for i, xs in enumerate(inputs)]
        plan = ops.concurrently(*map(rxrl.from_iterable, tagged), mode="async", emit=emit)
        assert is_merge(collect(plan, backend, seed), [tagged[i] for i in sorted(set(emit))])

    check(backend, st.tuples(st.lists(small_lists, min_size=1, max_size=3),
                             st.lists(st.integers(0, 2), unique=True), st.integers(0, 99)), law)
