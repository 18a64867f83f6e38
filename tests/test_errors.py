"""Bad plans fail before running, with messages that name the operator and the call site."""

from __future__ import annotations

from typing import Any

import pytest

import rxrl
from rxrl import ops
from tests.conformance.harness import Counter

HERE = "tests/test_errors.py"


def test_empty_union_and_zip() -> None:
    with pytest.raises(rxrl.PlanError, match=rf"union\(\) \(built at {HERE}:\d+\): needs at least one"):
        ops.union()
    with pytest.raises(rxrl.PlanError, match=rf"zip\(\) \(built at {HERE}"):
        ops.zip()
    with pytest.raises(rxrl.PlanError, match="concurrently"):
        ops.concurrently()


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_window_and_take_sizes(n: Any) -> None:
    with pytest.raises(rxrl.PlanError, match=rf"window\({n!r}\) \(built at {HERE}.*count must be"):
        ops.window(n)
    with pytest.raises(rxrl.PlanError, match="min_size must be"):
        ops.window(min_size=n, combine=list)
    if n != 0:
        with pytest.raises(rxrl.PlanError, match=rf"take\({n!r}\)"):
            ops.take(n)


def test_window_needs_count_or_min_size_and_combine() -> None:
    with pytest.raises(rxrl.PlanError, match="needs min_size= and combine="):
        ops.window()  # type: ignore[call-overload]
    with pytest.raises(rxrl.PlanError, match="either a count or"):
        ops.window(3, min_size=2, combine=list)  # type: ignore[call-overload]


def test_union_weights() -> None:
    a, b = rxrl.from_iterable([1]), rxrl.from_iterable([2])
    with pytest.raises(rxrl.PlanError, match="got 1 weights for 2 inputs"):
        ops.union(a, b, weights=[1])
    with pytest.raises(rxrl.PlanError, match=r"weights\[1\] must be a positive finite number, got 0"):
        ops.union(a, b, weights=[1, 0])
    with pytest.raises(rxrl.PlanError, match="weights only apply to mode='round_robin'"):
        ops.union(a, b, mode="async", weights=[1, 2])
    with pytest.raises(rxrl.PlanError, match="mode must be"):
        ops.union(a, b, mode="fast")  # type: ignore[arg-type]
    with pytest.raises(rxrl.PlanError, match=r"emit names inputs \[2\] but there are 2 inputs"):
        ops.concurrently(a, b, emit=[2])


def test_gather_in_flight_bound() -> None:
    with pytest.raises(rxrl.PlanError, match="max_in_flight must be an integer >= 1"):
        ops.gather(0)


def test_empty_actor_group() -> None:
    with pytest.raises(rxrl.PlanError, match=rf"actors\(Counter, 0\) \(built at {HERE}.*positive"):
        rxrl.actors(Counter, 0)
    with pytest.raises(rxrl.PlanError, match="positive"):
        rxrl.indexed_actors(Counter, -2)


def test_shards_piped_into_a_driver_op_when_types_are_bypassed() -> None:
    group = rxrl.actors(Counter, 2)
    shards: Any = rxrl.from_actors(group, Counter.next)
    with pytest.raises(rxrl.PlanError, match=rf"broadcast\(\) \(built at {HERE}.*runs on the driver"):
        shards | ops.broadcast(group, Counter.bump)
    with pytest.raises(rxrl.PlanError, match="expects driver Plans, got Shards"):
        ops.union(rxrl.from_iterable([1]), shards)
    with pytest.raises(rxrl.PlanError, match="expects a Plan, got Shards"):
        rxrl.run(shards)


def test_a_plan_piped_into_a_collector_when_types_are_bypassed() -> None:
    plan: Any = rxrl.from_iterable([1, 2])
    with pytest.raises(rxrl.PlanError, match=r"barrier\(\) collects Shards, but this is a Plan"):
        plan | ops.barrier()


def test_a_hand_built_graph_with_a_sharded_input_to_a_driver_op_fails_before_running() -> None:
    from rxrl import graph as g

    shards = rxrl.from_iterables([[1], [2]])
    bad = g.Zip(streams=(shards.node,), site="handmade.py:1")
    with pytest.raises(rxrl.PlanError, match=r"zip\(\) \(built at handmade.py:1\).*sharded"):
        plan = rxrl.Plan.__new__(rxrl.Plan)
        plan.node = bad
        rxrl.run(plan)


def test_non_callables_are_rejected_where_they_are_passed() -> None:
    with pytest.raises(rxrl.PlanError, match=rf"map\(3\) \(built at {HERE}:\d+\): fn must be callable"):
        ops.map(3)  # type: ignore[arg-type]
    with pytest.raises(rxrl.PlanError, match="expects an actor group"):
        ops.broadcast("workers", lambda a, x: None)  # type: ignore[arg-type]


def test_actor_constructor_errors_name_the_actor() -> None:
    def broken(i: int) -> Counter:
        if i == 1:
            raise RuntimeError("no GPU")
        return Counter()

    group = rxrl.indexed_actors(broken, 2, name="Worker")
    plan = rxrl.from_actors(group, Counter.next) | ops.barrier()
    with pytest.raises(rxrl.ActorError, match=r"creating actor Worker\[1\] .*RuntimeError: no GPU") as e:
        rxrl.run(plan)
    assert isinstance(e.value.__cause__, RuntimeError)


def test_call_route_out_of_range_names_the_operator() -> None:
    group = rxrl.actors(Counter, 2)
    plan = rxrl.from_iterable([5]) | ops.call(group, lambda c, x: x, route=lambda x: x)
    with pytest.raises(rxrl.OperatorError, match=r"call\(Counter×2.*route chose actor 5"):
        list(rxrl.run(plan))


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="unknown backend 'spark'"):
        rxrl.run(rxrl.from_iterable([1]), "spark")
    with pytest.raises(TypeError, match="reference backend takes no options"):
        rxrl.run(rxrl.from_iterable([1]), "reference", address="auto")
