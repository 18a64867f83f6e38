"""Per-operator examples, identical on every backend (plans here have no schedule choices)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

import rxrl
from rxrl import ops
from tests.conformance.harness import Adder, Counter, output_and_replay


def collect(plan: rxrl.Plan[object], backend: str) -> list[object]:
    with rxrl.run(plan, backend) as run:
        return list(run)


def test_map_filter_flat_map(backend: str) -> None:
    plan = (rxrl.from_iterable(range(6)) | ops.map(lambda x: x * 10)
            | ops.filter(lambda x: x % 20 == 0) | ops.flat_map(lambda x: [x, -x]))
    assert collect(plan, backend) == [0, 0, 20, -20, 40, -40]


def test_window_emits_a_short_final_window(backend: str) -> None:
    assert collect(rxrl.from_iterable(range(7)) | ops.window(3), backend) == [
        [0, 1, 2], [3, 4, 5], [6]]


def test_size_window_combines_until_min_size(backend: str) -> None:
    words = rxrl.from_iterable(["ab", "c", "defg", "h", "i"])
    plan = words | ops.window(min_size=3, combine="".join)
    assert collect(plan, backend) == ["abc", "defg", "hi"]


def test_take_scan_tap(backend: str) -> None:
    plan = (rxrl.from_iterable(itertools.count(1)) | ops.scan(lambda a, x: a + x, 0)
            | ops.tap(lambda x: None) | ops.take(4))
    assert collect(plan, backend) == [1, 3, 6, 10]


def test_take_zero_emits_nothing(backend: str) -> None:
    assert collect(rxrl.from_iterable(itertools.count()) | ops.take(0), backend) == []


def test_zip_ends_with_the_shortest_input(backend: str) -> None:
    plan = ops.zip(rxrl.from_iterable([1, 2, 3]), rxrl.from_iterable("ab"),
                   rxrl.from_iterable([True, False, True]))
    assert collect(plan, backend) == [(1, "a", True), (2, "b", False)]


def test_round_robin_union_pulls_weights_in_turn_and_skips_exhausted(backend: str) -> None:
    a = rxrl.from_iterable([1, 2, 3, 4, 5])
    b = rxrl.from_iterable(["x"])
    c = rxrl.from_iterable([10.0, 20.0])
    assert collect(ops.union(a, b, c, weights=[2, 1, 1]), backend) == [
        1, 2, "x", 10.0, 3, 4, 20.0, 5]


def test_concurrently_drops_unlisted_outputs_but_runs_them(backend: str) -> None:
    counter = rxrl.actors(Adder, 1)
    side = rxrl.from_iterable([1, 2, 3]) | ops.call(counter, Adder.add)
    main = rxrl.from_iterable([0, 0, 0]) | ops.call(counter, Adder.add)
    # main reads the adder's running total, so it sees the side flow's effects
    assert collect(ops.concurrently(side, main, emit=[1]), backend) == [1, 3, 6]


def test_barrier_rounds_drop_exhausted_shards(backend: str) -> None:
    plan = rxrl.from_iterables([[1, 2, 3], [10], [100, 200]]) | ops.barrier()
    assert collect(plan, backend) == [[1, 10, 100], [2, 200], [3]]


def test_from_actors_with_shard_local_ops(backend: str) -> None:
    group = rxrl.indexed_actors(lambda i: Counter(start=100 * i), 2, name="Counter")
    shards = rxrl.from_actors(group, Counter.next) | ops.map(lambda x: x + 1) | ops.window(2)
    plan = shards | ops.barrier() | ops.take(2)
    assert collect(plan, backend) == [[[1, 2], [101, 102]], [[3, 4], [103, 104]]]


def test_call_routes_tagged_items_back_to_their_shard(backend: str) -> None:
    group = rxrl.indexed_actors(lambda i: Counter(start=1000 * i), 3, name="Counter")
    shards = rxrl.from_actors(group, Counter.next) | ops.take(2)
    routed = shards | ops.gather(tagged=True) | ops.call(group, lambda c, t: (t.shard, c.value // 1000))
    out, _ = output_and_replay(routed, backend)
    assert sorted(out) == [(0, 0), (0, 0), (1, 1), (1, 1), (2, 2), (2, 2)]


def test_call_round_robins_untagged_items_over_a_group(backend: str) -> None:
    adders = rxrl.actors(Adder, 2)
    plan = rxrl.from_iterable([1, 2, 3, 4, 5]) | ops.call(adders, Adder.add)
    assert collect(plan, backend) == [1, 2, 4, 6, 9]


def test_call_with_route(backend: str) -> None:
    adders = rxrl.actors(Adder, 2)
    plan = rxrl.from_iterable([1, 2, 3, 4]) | ops.call(adders, Adder.add, route=lambda x: x % 2)
    assert collect(plan, backend) == [1, 2, 4, 6]


def test_running_a_plan_twice_runs_it_from_its_sources(backend: str) -> None:
    plan = rxrl.from_iterable([1, 2]) | ops.call(rxrl.actors(Adder, 1), Adder.add)
    assert collect(plan, backend) == collect(plan, backend) == [1, 3]


def test_a_one_shot_iterator_source_refuses_a_second_run(backend: str) -> None:
    plan = rxrl.from_iterable(iter([1, 2]))
    assert collect(plan, backend) == [1, 2]
    with pytest.raises(rxrl.PlanError, match="one-shot iterator"):
        collect(plan, backend)


def test_user_function_errors_name_the_operator(backend: str) -> None:
    plan = rxrl.from_iterable([1, 0]) | ops.map(lambda x: 1 // x)
    with pytest.raises(rxrl.OperatorError, match=r"map\(<lambda>\) \(built at .*test_operators.py") as e:
        collect(plan, backend)
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def refuse_three(adder: Adder, x: int) -> None:
    """A broadcast effect that fails on item 3."""
    if x == 3:
        raise ValueError("bad weights")


@pytest.mark.parametrize("pending", [1, 4])
def test_a_failed_broadcast_is_raised_within_max_pending_broadcasts_items(
        backend: str, pending: int) -> None:
    """Law: an exception in a broadcast's effect on item x is raised by the run, naming the
    broadcast, before the stream ends; the reference raises it before x passes on, the
    concurrent backends (which do not wait for effects) at most ``max_pending_broadcasts``
    pulls later — so the output is 1..k with 2 <= k <= 2 + pending."""
    plan = rxrl.from_iterable([1, 2, 3, 4, 5, 6, 7, 8]) | ops.broadcast(rxrl.actors(Adder, 2),
                                                                        refuse_three)
    options: dict[str, Any] = {} if backend == "reference" else {"max_pending_broadcasts": pending}
    out: list[int] = []
    with rxrl.run(plan, backend, **options) as run, pytest.raises(
            rxrl.OperatorError, match=r"broadcast\(Adder×2, refuse_three\)") as e:
        out.extend(run)
    assert isinstance(e.value.__cause__, ValueError)
    assert out == list(range(1, len(out) + 1))
    assert 2 <= len(out) <= (2 if backend == "reference" else 2 + pending)


def test_errors_inside_shards_name_the_operator(backend: str) -> None:
    group = rxrl.actors(Counter, 2)
    plan = rxrl.from_actors(group, Counter.next) | ops.map(lambda x: 1 // (x - 1)) | ops.barrier()
    with pytest.raises(rxrl.OperatorError, match=r"map\(<lambda>\)") as e:
        collect(plan, backend)
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def test_operator_segments_compose(backend: str) -> None:
    def double(x: int) -> int:
        return x * 2

    double_then_pairs = ops.map(double) | ops.window(2)
    assert collect(rxrl.from_iterable(range(5)) | double_then_pairs, backend) == [[0, 2], [4, 6], [8]]
    shards = rxrl.from_iterables([[1, 2], [3]]) | (ops.map(str) | ops.map(len))
    assert collect(shards | ops.barrier(), backend) == [[1, 1], [1]]


class Summer:
    """A learner-group stand-in: rank ``index`` of a group that sums numbers with a gloo
    allreduce (`rxrl.rl.learners.collective`), which returns only once every rank called it."""

    def __init__(self, rendezvous: Any, index: int) -> None:
        from rxrl.rl.learners.collective import Collective

        self.collective, self.seen = Collective(rendezvous, index), 0

    def total(self, x: int) -> tuple[int, float]:
        """(calls seen, the group's sum of ``x * (rank + 1)``)."""
        import torch

        self.seen += 1
        t = torch.tensor([float(x * (self.collective.rank + 1))])
        self.collective.allreduce_(t)
        return self.seen, float(t.item())


def test_call_all_emits_every_actors_result_in_index_order(backend: str) -> None:
    """Law: one list per item, actor i's result at i; each actor sees the items in order."""
    counters = rxrl.indexed_actors(Counter, 3)
    plan = rxrl.from_iterable([1, 2, 3]) | ops.call_all(counters, Counter.bump) | ops.map(len)
    after = plan | ops.call_all(counters, lambda c, _: c.next())
    assert collect(after, backend) == [[1, 2, 3], [4, 5, 6], [8, 9, 10]]


def test_call_all_runs_the_calls_of_an_item_at_once(backend: str) -> None:
    """The members may meet in a collective (each call returns only once all of them were
    made): every backend makes an item's calls concurrently, so the sums complete."""
    from functools import partial

    from rxrl.rl.learners.collective import Rendezvous

    group = rxrl.indexed_actors(partial(Summer, Rendezvous.open(3, timeout_s=30.0)), 3, name="Summer")
    out = collect(rxrl.from_iterable([1, 10]) | ops.call_all(group, Summer.total), backend)
    assert out == [[(1, 6.0)] * 3, [(2, 60.0)] * 3]


def test_a_failed_call_all_raises_the_first_members_error(backend: str) -> None:
    adders = rxrl.actors(Adder, 2)
    plan = rxrl.from_iterable([1, 3]) | ops.call_all(adders, refuse_three)
    with pytest.raises(rxrl.OperatorError, match=r"call_all\(Adder×2, refuse_three\)"):
        collect(plan, backend)


def test_a_pipelined_call_all_keeps_input_order(backend: str) -> None:
    """``max_in_flight=k``: results in input order, each actor's calls in stream order."""
    adders = rxrl.actors(Adder, 2)
    plan = rxrl.from_iterable([1, 2, 3, 4]) | ops.call_all(adders, Adder.add, max_in_flight=3)
    out = collect(plan, backend)
    assert out == [[1, 1], [3, 3], [6, 6], [10, 10]]
