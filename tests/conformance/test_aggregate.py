"""``ops.aggregate`` and ``Shards.subset`` on every backend: sub-plans over parts of a Shards.

The reference runs each sub-plan in-process; Ray runs it on an aggregator actor, which ships
the choices it made with each item, so that a Ray run's trace replays on the reference.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rxrl
from rxrl import ops
from rxrl.timings import Timings
from tests.conformance.harness import (
    EXAMPLES,
    Counter,
    Gate,
    Journal,
    ints,
    local_ops,
    outcome_and_replay,
    output_and_replay,
    sub_plans,
)


def collect(plan: rxrl.Plan[Any], backend: str) -> list[Any]:
    with rxrl.run(plan, backend) as run:
        return list(run)


def test_each_aggregator_runs_the_body_over_its_part(backend: str) -> None:
    shards = rxrl.from_iterables([[1, 2], [10, 20], [100], [1000], [5]])
    sums = ops.aggregate(shards, lambda part: part | ops.barrier() | ops.map(sum), num_aggregators=2)
    # parts as equal as they can be, contiguous: shards 0-1 and 2-4
    assert collect(sums | ops.barrier(), backend) == [[11, 1105], [22]]


def test_a_subset_keeps_the_actors_own_indices_in_tags(backend: str) -> None:
    group = rxrl.indexed_actors(lambda i: Counter(start=100 * i), 4, name="Counter")
    picked = rxrl.from_actors(group, Counter.next).subset([3, 1]) | ops.take(2)
    routed = picked | ops.gather(tagged=True) | ops.call(
        group, lambda c, t: (t.shard, t.value, c.value // 100))
    out, replayed = output_and_replay(routed, backend)
    assert replayed == out  # and each item went back to the actor that made it:
    assert sorted(out) == [(1, 100, 1), (1, 101, 1), (3, 300, 3), (3, 301, 3)]


def test_a_subset_of_a_subset_composes(backend: str) -> None:
    shards = rxrl.from_iterables([["a"], ["b"], ["c"], ["d"]])
    assert collect(shards.subset([3, 2, 0]).subset([2, 0]) | ops.barrier(), backend) == [["a", "d"]]


#: one placement per actor, by labels that the test session's Ray node has both of
#: (tests/conftest.py ``NODE_LABELS``), so every backend runs it
BY_LABEL = ["rack=r1", "disk=ssd", "rack=r1", "disk=ssd"]


def test_a_subset_on_a_placement_is_the_actors_placed_there(backend: str) -> None:
    group = rxrl.indexed_actors(lambda i: Counter(start=100 * i), 4, name="Counter").placed(BY_LABEL)
    shards = rxrl.from_actors(group, Counter.next)
    assert collect(shards.subset_on("disk=ssd") | ops.barrier() | ops.take(1), backend) == [[100, 300]]
    # through a subset by index: the placements of the actors behind it
    assert collect(shards.subset([2, 1, 0]).subset_on("rack=r1") | ops.barrier() | ops.take(1),
                   backend) == [[200, 0]]


def test_aggregating_by_placement_gives_each_aggregator_the_actors_placed_there(backend: str) -> None:
    """Law: ``aggregate(placements=[p, q])`` runs the sub-plans that ``aggregate`` over the
    parts ``subset_on(p)`` and ``subset_on(q)`` would, and its trace replays."""
    group = rxrl.indexed_actors(lambda i: Counter(start=100 * i), 4, name="Counter").placed(BY_LABEL)
    shards = rxrl.from_actors(group, Counter.next) | ops.take(3)
    agg = ops.aggregate(
        shards, lambda part: part | ops.gather(2, tagged=True) | ops.call(group, tag_back) | ops.window(2),
        placements=["disk=ssd", "rack=r1"])
    out, replayed = output_and_replay(agg | ops.gather(tagged=True), backend)
    assert replayed == out
    assert sum(len(t.value) for t in out) == 12
    for t in out:  # aggregator 0 reads the odd actors (disk=ssd), aggregator 1 the even ones
        assert {shard % 2 for shard, _, _ in t.value} == {1 - t.shard}
    assert "placements=[disk=ssd, rack=r1]" in rxrl.show(agg | ops.gather())


def tag_back(counter: Counter, t: rxrl.Tagged[int]) -> tuple[int, int, int]:
    """Sent back to the actor an item came from: (that actor, the item, its value now)."""
    counter.bump(1)
    return (t.shard, t.value, counter.value)


def test_a_sub_plan_calls_the_actor_each_item_came_from(backend: str) -> None:
    group = rxrl.indexed_actors(lambda i: Counter(start=100 * i), 4, name="Counter")
    shards = rxrl.from_actors(group, Counter.next) | ops.take(3)
    agg = ops.aggregate(
        shards, lambda part: part | ops.gather(2, tagged=True) | ops.call(group, tag_back) | ops.window(2),
        num_aggregators=2)
    plan = agg | ops.gather(tagged=True)
    out, replayed = output_and_replay(plan, backend)
    assert replayed == out
    assert sum(len(t.value) for t in out) == 12
    for t in out:  # aggregator 0 reads actors 0 and 1, aggregator 1 actors 2 and 3
        assert {shard // 2 for shard, _, _ in t.value} == {t.shard}


def test_the_drivers_broadcasts_reach_aggregated_actors_in_plan_order(backend: str) -> None:
    journals = rxrl.indexed_actors(Journal, 4, name="Journal")
    agg = ops.aggregate(rxrl.from_actors(journals, Journal.sample), lambda part: part | ops.barrier(),
                        num_aggregators=2)
    plan = agg | ops.barrier() | ops.take(3) | ops.broadcast(journals, lambda j, r: j.set_weights(1))
    out, replayed = output_and_replay(plan, backend)
    assert replayed == out
    # round r is sampled before the r-th broadcast is sent: each sample saw r broadcasts
    assert [[[s[2] for s in part] for part in r] for r in out] == [[[0, 0], [0, 0]], [[1, 1], [1, 1]],
                                                                    [[2, 2], [2, 2]]]


def test_a_not_ready_sub_plan_is_asked_again_after_the_driver_feeds_its_actors(backend: str) -> None:
    gates = rxrl.actors(Gate, 2)
    agg = ops.aggregate(rxrl.from_actors(gates, Gate.next) | ops.take(2),
                        lambda part: part | ops.gather(), num_aggregators=2)
    feeder = rxrl.from_iterable(range(4)) | ops.call(gates, Gate.feed)
    plan = ops.concurrently(agg | ops.gather(), feeder, mode="async", emit=[0])
    out, replayed = outcome_and_replay(plan, backend)
    assert replayed == out
    assert out[1] is None and sorted(out[0]) == [1, 1, 2, 2]


def test_an_error_in_a_sub_plan_names_its_operator(backend: str) -> None:
    shards = rxrl.from_iterables([[1, 0], [2]])
    agg = ops.aggregate(shards, lambda part: part | ops.gather() | ops.map(lambda x: 1 // x),
                        num_aggregators=2)
    with pytest.raises(rxrl.OperatorError, match=r"map\(<lambda>\)") as e:
        collect(agg | ops.gather(), backend)
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def test_the_timings_of_a_sub_plan_are_those_of_the_reference(backend: str) -> None:
    """Law: the operators of an aggregated plan that a backend reports to ``on_event``, those of
    its sub-plans included, have the reference's items; on Ray each aggregator's events come
    with its items, on a row of their own (``threads``); the operators' busy and waiting
    times add up to the pulling time of all rows."""
    def timed(on: str) -> dict[str, Any]:
        group = rxrl.indexed_actors(lambda i: Counter(start=100 * i), 4, name="Counter")
        shards = rxrl.from_actors(group, Counter.next) | ops.take(3)
        agg = ops.aggregate(shards, lambda part: part | ops.gather(2, tagged=True)
                            | ops.call(group, tag_back) | ops.window(2), num_aggregators=2)
        timings = Timings()
        with rxrl.run(agg | ops.gather(tagged=True), on, on_event=timings) as run:
            assert sum(len(t.value) for t in run) == 12
        timings.stop()
        return timings.stats()

    stats, reference = timed(backend), timed("reference")
    operators = stats["operators"]
    assert all(s["items"] == reference["operators"][nid]["items"] for nid, s in operators.items())
    # the driver's gather, and each sub-plan's gather, call and window (shard-local steps run
    # inside the actors on Ray, and are not reported there)
    labels = sorted(s["label"].split("(")[0] for s in operators.values()
                    if not s["label"].startswith(("from_actors", "take", "aggregate")))
    assert labels == ["call", "call", "gather", "gather", "gather", "window", "window"]
    total = sum(s["busy_s"] + s["waiting_s"] for s in stats["operators"].values())
    assert total == pytest.approx(stats["pulling_s"], abs=1e-4)
    if backend == "ray":
        assert {"aggregator[0]", "aggregator[1]"} <= set(stats["threads"])


@st.composite
def aggregated_plans(draw: st.DrawFn) -> rxrl.Plan[int]:
    """Actors or iterables, maybe a subset, aggregated by a drawn body, collected; maybe the
    driver broadcasts to the aggregated actors."""
    n = draw(st.integers(1, 5))
    group: rxrl.ActorGroup[Counter] | None = None
    if draw(st.booleans()):
        shards: rxrl.Shards[int] = rxrl.from_iterables(
            draw(st.lists(st.lists(ints, max_size=5), min_size=n, max_size=n)))
    else:
        group = rxrl.actors(Counter, n, start=draw(ints))
        shards = rxrl.from_actors(group, Counter.next) | ops.take(draw(st.integers(0, 4)))
    if draw(st.booleans()):
        shards = shards.subset(draw(st.permutations(range(n)))[:draw(st.integers(1, n))])
    for op in draw(local_ops()):
        shards = shards | op
    agg = ops.aggregate(shards, draw(sub_plans(group)),
                        num_aggregators=draw(st.integers(1, shards.num_shards)))
    plan = (agg | ops.barrier() | ops.map(sum) if draw(st.booleans())
            else agg | ops.gather(draw(st.integers(1, 2))))
    if group is not None and draw(st.booleans()):
        plan = plan | ops.broadcast(group, Counter.bump)
    return plan


def test_replaying_the_trace_of_an_aggregated_run_reproduces_it(backend: str) -> None:
    """For any aggregated plan: its run on ``backend`` == the reference replaying that run's
    trace (the sub-plans' choices included), items and error type alike."""
    @settings(max_examples=EXAMPLES[backend])
    @given(aggregated_plans(), st.integers(0, 2**16))
    def law(plan: rxrl.Plan[int], seed: int) -> None:
        out, replayed = outcome_and_replay(plan, backend, seed)
        assert replayed == out

    law()


def test_aggregating_iterables_keeps_every_item_once(backend: str) -> None:
    """The items of gather-aggregated iterables are those of the iterables, each once, in each
    iterable's own order (a merge)."""
    @settings(max_examples=EXAMPLES[backend])
    @given(st.lists(st.lists(ints, max_size=5), min_size=1, max_size=5), st.data())
    def law(xss: list[list[int]], data: st.DataObject) -> None:
        k = data.draw(st.integers(1, len(xss)))
        agg = ops.aggregate(rxrl.from_iterables(xss), lambda part: part | ops.gather(tagged=True),
                            num_aggregators=k)
        out = collect(agg | ops.gather(), backend)
        for i, xs in enumerate(xss):
            assert [t.value for t in out if t.shard == i] == xs
        assert len(out) == sum(map(len, xss))

    law()


# --------------------------------------------------------------------- bad input, one line each

shards4 = rxrl.from_iterables([[1], [2], [3], [4]])
others = rxrl.actors(Counter, 2)
by_label = rxrl.from_actors(rxrl.indexed_actors(Counter, 4, name="Counter").placed(BY_LABEL), Counter.next)
overlapping = rxrl.from_actors(
    rxrl.indexed_actors(Counter, 2, name="Counter").placed(["rack=r1,disk=ssd", "rack=r1"]), Counter.next)


def gathered(part: rxrl.Shards[int]) -> rxrl.Plan[int]:
    return part | ops.gather()


@pytest.mark.parametrize(("build", "message"), [
    (lambda: ops.aggregate(shards4, gathered, num_aggregators=0), "num_aggregators must be an integer >= 1"),
    (lambda: ops.aggregate(shards4, gathered, num_aggregators=5),
     r"more aggregators \(5\) than shards \(4\)"),
    (lambda: ops.aggregate(shards4, lambda part: part, num_aggregators=2),  # type: ignore[arg-type, return-value]
     "body must return a Plan"),
    (lambda: ops.aggregate(shards4, lambda part: rxrl.from_iterable([1]), num_aggregators=2),
     "body did not read the shards it was given"),
    (lambda: ops.aggregate(shards4, lambda part: part | ops.gather() | ops.call(others, Counter.bump),
                           num_aggregators=2), "which is not the aggregated actors' group"),
    (lambda: ops.aggregate(shards4, lambda part: part | ops.gather() | ops.broadcast(others, Counter.bump),
                           num_aggregators=2), "reaches every actor of the group"),
    (lambda: ops.aggregate(ops.aggregate(shards4, gathered, num_aggregators=2), gathered, num_aggregators=1),
     "its shards are aggregated already"),
    (lambda: ops.aggregate([1, 2], gathered, num_aggregators=1),  # type: ignore[arg-type]
     "aggregates Shards, got list"),
    (lambda: shards4.subset([]), "indices must be a non-empty sequence of ints"),
    (lambda: shards4.subset([0, 4]), r"index 4 is out of range: these shards are 0..3"),
    (lambda: shards4.subset([1, 1]), "an index appears twice"),
    (lambda: ops.aggregate(shards4, gathered), "give exactly one of num_aggregators and placements"),
    (lambda: ops.aggregate(shards4, gathered, num_aggregators=2, placements=["rack=r1"]),
     "give exactly one of num_aggregators and placements"),
    (lambda: ops.aggregate(shards4, gathered, placements=["zone=a"]),
     "aggregates by placement the shards of one actor group"),
    (lambda: ops.aggregate(by_label, gathered, placements="rack=r1"),
     "placements must be a non-empty sequence of node labels"),
    (lambda: ops.aggregate(by_label, gathered, placements=["spread"]),
     "a placement of an aggregator is node labels"),
    (lambda: ops.aggregate(by_label, gathered, placements=["rack=r1"]),
     r"shard 1 \(Counter\[1\], placed disk=ssd\) is on none of the placements"),
    (lambda: ops.aggregate(by_label, gathered, placements=["rack=r1", "disk=ssd", "zone=x"]),
     "no shard's actor is placed on zone=x"),
    (lambda: ops.aggregate(overlapping, gathered, placements=["rack=r1", "disk=ssd"]),
     r"shard 0 \(Counter\[0\], placed rack=r1,disk=ssd\) is on more than one of the placements"),
    (lambda: by_label.subset_on("zone=x"), r"no actor of Counter×4 behind these shards is placed on zone=x"),
    (lambda: by_label.subset_on("pack"), "takes node labels"),
    (lambda: shards4.subset_on("rack=r1"), "these shards are not one actor group's"),
    (lambda: rxrl.indexed_actors(Counter, 2).placed(["rack=r1"]), "1 placements for 2 actors"),
    (lambda: rxrl.indexed_actors(Counter, 2).placed(["rack=r1", "spread"]),
     "a placement per actor takes node labels only"),
])
def test_bad_input_is_refused_in_one_line(build: Any, message: str) -> None:
    with pytest.raises(rxrl.PlanError, match=message) as e:
        build()
    assert "test_aggregate.py" in str(e.value)  # it names the line that built it


def test_a_subset_of_aggregated_shards_is_refused_when_the_plan_is_compiled() -> None:
    agg = ops.aggregate(shards4, gathered, num_aggregators=2).subset([0])
    with pytest.raises(rxrl.PlanError, match="a subset of aggregated shards"):
        list(rxrl.run(agg | ops.gather()))


def test_two_aggregates_in_one_plan_each_run_their_own_aggregators(backend: str) -> None:
    def sums(part: rxrl.Shards[int]) -> rxrl.Plan[int]:
        return part | ops.barrier() | ops.map(sum)

    a = ops.aggregate(rxrl.from_iterables([[1], [2]]), sums, num_aggregators=2) | ops.barrier()
    b = ops.aggregate(rxrl.from_iterables([[10], [20]]), sums, num_aggregators=2) | ops.barrier()
    assert collect(ops.zip(a, b), backend) == [([1, 2], [10, 20])]
