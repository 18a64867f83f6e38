"""Synchronization, back-pressure and laziness guarantees, observed from inside the actors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rxrl
from rxrl import ops
from tests.conformance.harness import EXAMPLES, CountingIterable, Journal, output_and_replay


def journals(n: int) -> rxrl.ActorGroup[Journal]:
    return rxrl.indexed_actors(Journal, n, name="Journal")


def test_a_broadcast_after_a_barrier_precedes_the_next_round(backend: str) -> None:
    """Every sample of round r is taken after exactly r broadcasts reached that actor."""
    group = journals(3)
    plan = (rxrl.from_actors(group, Journal.sample) | ops.barrier()
            | ops.broadcast(group, lambda j, batch: j.set_weights(len(batch))) | ops.take(5))
    with rxrl.run(plan, backend) as run:
        rounds = list(run)
    assert rounds == [[(i, r, r) for i in range(3)] for r in range(5)]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_gather_keeps_k_requests_in_flight_and_broadcasts_land_in_order(backend: str, k: int) -> None:
    """Law: sample j of a shard was submitted when its sample j-k was taken, before that item's
    broadcast; so it saw exactly as many broadcasts as items preceded sample j-k in the output
    (and none for j < k). This pins both the in-flight bound and the effect ordering."""
    def law(seed: int) -> None:
        group = journals(2)
        plan = (rxrl.from_actors(group, Journal.sample) | ops.take(4) | ops.gather(k)
                | ops.broadcast(group, lambda j, item: j.set_weights(item[1])))
        out, replayed = output_and_replay(plan, backend, seed)
        assert replayed == out and len(out) == 8
        position = {(shard, j): p for p, (shard, j, _) in enumerate(out)}
        for shard, j, seen in out:
            assert seen == (0 if j < k else position[(shard, j - k)])

    settings(max_examples=EXAMPLES[backend] // 3 + 1)(given(st.integers(0, 10_000))(law))()


def test_take_pulls_exactly_n_items_from_an_infinite_source(backend: str) -> None:
    source = CountingIterable()
    plan = rxrl.from_iterable(source) | ops.map(lambda x: x + 1) | ops.take(3)
    with rxrl.run(plan, backend) as run:
        assert list(run) == [1, 2, 3]
    if backend != "ray":  # Ray may run the source elsewhere; its counters are not ours
        assert source.pulled == 3


def test_window_reads_ahead_only_one_window(backend: str) -> None:
    source = CountingIterable()
    plan = rxrl.from_iterable(source) | ops.window(4) | ops.take(2)
    with rxrl.run(plan, backend) as run:
        assert list(run) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    if backend != "ray":
        assert source.pulled == 8


def test_nothing_runs_before_the_first_pull(backend: str) -> None:
    source = CountingIterable()
    with rxrl.run(rxrl.from_iterable(source) | ops.map(str), backend) as run:
        assert source.pulled == 0
        assert next(run) == "0"


def test_barrier_requests_the_next_round_only_when_pulled(backend: str) -> None:
    group = journals(2)
    with rxrl.run(rxrl.from_actors(group, Journal.sample) | ops.barrier(), backend) as run:
        first = next(run)
        second = next(run)
    assert [j for _, j, _ in first] == [0, 0] and [j for _, j, _ in second] == [1, 1]
