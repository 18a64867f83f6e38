"""ReplayShard: readiness below learning_starts, sampling after, priorities back, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from rxrl.ready import NOT_READY
from rxrl.rl.config import ReplayConfig
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.replay.shard import ReplayShard
from tests.rl.replay_helpers import assert_rows_are_their_ids, numbered


def config(prioritized: bool = False, **kw: int) -> ReplayConfig:
    return ReplayConfig(
        capacity=kw.get("capacity", 50), batch_size=8, learning_starts=20, prioritized=prioritized
    )


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_not_ready_below_learning_starts_and_batches_after(prioritized: bool) -> None:
    shard = ReplayShard(config(prioritized))
    assert shard.sample() is NOT_READY
    assert shard.add(numbered(0, 19)) == 19 and len(shard) == 19
    assert shard.sample() is NOT_READY
    assert shard.add(numbered(19, 1)) == 20
    batch = shard.sample()
    assert isinstance(batch, TransitionBatch) and len(batch) == 8
    assert_rows_are_their_ids(batch)
    assert (batch.weights is not None) == prioritized


def test_add_counts_every_transition_added_while_len_saturates_at_capacity() -> None:
    shard = ReplayShard(config(capacity=30))
    for k in range(5):
        assert shard.add(numbered(10 * k, 10)) == 10 * (k + 1)
    assert len(shard) == 30 and shard.num_added == 50


def test_priorities_sent_back_steer_a_prioritized_shard_and_a_uniform_one_ignores_them() -> None:
    for prioritized in (True, False):
        shard = ReplayShard(config(prioritized))
        shard.add(numbered(0, 20))
        priorities = np.zeros(20)
        priorities[7] = 1.0
        shard.update_priorities(np.arange(20), priorities)
        batch = shard.sample()
        assert isinstance(batch, TransitionBatch) and batch.indices is not None
        assert (batch.indices == 7).all() == prioritized


def test_shards_sample_differently_and_reproducibly_by_seed_and_index() -> None:
    def draws(seed: int, index: int) -> list[int]:
        shard = ReplayShard(config(), seed=seed, shard_index=index)
        shard.add(numbered(0, 40))
        batch = shard.sample()
        assert isinstance(batch, TransitionBatch) and batch.indices is not None
        return [int(i) for i in batch.indices]

    assert draws(0, 0) == draws(0, 0) != draws(0, 1)
    assert draws(0, 0) != draws(1, 0)


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_state_dict_round_trip_gives_the_same_next_samples(prioritized: bool) -> None:
    shard = ReplayShard(config(prioritized), seed=5)
    shard.add(numbered(0, 60))
    first = shard.sample()
    assert isinstance(first, TransitionBatch) and first.indices is not None
    shard.update_priorities(first.indices, np.arange(8.0))
    restored = ReplayShard(config(prioritized), seed=6)
    restored.load_state_dict(shard.state_dict())
    assert len(restored) == len(shard) and restored.num_added == 60
    a, b = shard.sample(), restored.sample()
    assert isinstance(a, TransitionBatch) and isinstance(b, TransitionBatch)
    np.testing.assert_array_equal(a.indices, b.indices)


def test_learning_starts_beyond_capacity_is_refused() -> None:
    with pytest.raises(ValueError, match=r"learning_starts .* must not exceed ReplayConfig.capacity"):
        ReplayShard(ReplayConfig(capacity=100, batch_size=8, learning_starts=101))
