"""Replay buffers: wrap-around, uniform and prioritized sampling, priorities, checkpoints."""

from __future__ import annotations

import io

import attrs
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rxrl.rl.config import ReplayConfig
from rxrl.rl.replay.buffers import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer
from rxrl.rl.replay.shard import ReplayShard
from rxrl.rl.schedules import LinearSchedule
from rxrl.training.checkpoint import tensors_of
from tests.rl.replay_helpers import assert_rows_are_their_ids, numbered

KINDS = [pytest.param(ReplayBuffer, id="uniform"), pytest.param(PrioritizedReplayBuffer, id="prioritized")]


def fill(buffer: ReplayBuffer, sizes: list[int]) -> int:
    added = 0
    for n in sizes:
        buffer.add(numbered(added, n))
        added += n
    return added


@given(st.integers(1, 40), st.lists(st.integers(0, 60), max_size=8), st.booleans())
def test_wrap_around_keeps_exactly_the_last_capacity_transitions(
    capacity: int, sizes: list[int], prioritized: bool
) -> None:
    """Law: after adds of any sizes (some larger than the buffer), it holds exactly the last
    `min(added, capacity)` transitions, oldest first in its state, under their own ids."""
    buffer = PrioritizedReplayBuffer(capacity) if prioritized else ReplayBuffer(capacity)
    added = fill(buffer, sizes)
    assert buffer.num_added == added and len(buffer) == min(added, capacity)
    if added:
        stored = buffer.state_dict()["columns"]["rewards"]
        np.testing.assert_array_equal(stored, np.arange(max(added - capacity, 0), added))


@pytest.mark.parametrize("kind", KINDS)
@given(
    capacity=st.integers(1, 30),
    sizes=st.lists(st.integers(1, 25), min_size=1, max_size=6),
    seed=st.integers(0, 2**32),
)
def test_samples_are_only_stored_rows_and_carry_their_ids(
    kind: type[ReplayBuffer], capacity: int, sizes: list[int], seed: int
) -> None:
    """Law: every sampled row is a transition still stored (id in the last `capacity`
    added), and its columns are that transition's."""
    buffer = kind(capacity, seed=seed)
    added = fill(buffer, sizes)
    batch = buffer.sample(min(capacity, 16))
    assert batch.indices is not None
    assert (batch.indices >= added - len(buffer)).all() and (batch.indices < added).all()
    assert_rows_are_their_ids(batch)
    assert (batch.weights is None) == (kind is ReplayBuffer)


def test_uniform_sampling_covers_the_stored_rows_evenly() -> None:
    buffer = ReplayBuffer(10, seed=0)
    fill(buffer, [25])
    ids = np.concatenate([buffer.sample(10).indices for _ in range(2000)])
    counts = np.bincount(ids - 15, minlength=10) / len(ids)
    np.testing.assert_allclose(counts, 0.1, atol=0.01)


@given(
    priorities=st.lists(st.floats(0.0, 1e6), min_size=1, max_size=40),
    alpha=st.floats(0.0, 2.0),
    beta=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32),
)
def test_importance_weights_lie_in_zero_one_and_the_rarest_row_has_one(
    priorities: list[float], alpha: float, beta: float, seed: int
) -> None:
    """Law: w_i = (N P(i))^-beta / max_batch w lies in (0, 1], with 1 for the batch's
    lowest-probability row, for any priorities, alpha and beta."""
    buffer = PrioritizedReplayBuffer(len(priorities), alpha=alpha, beta=beta, seed=seed)
    fill(buffer, [len(priorities)])
    buffer.update_priorities(np.arange(len(priorities)), np.array(priorities))
    batch = buffer.sample(len(priorities))
    assert batch.weights is not None and batch.indices is not None
    assert (batch.weights > 0).all() and (batch.weights <= 1).all()
    p = (np.array(priorities)[batch.indices] + buffer.eps) ** alpha
    expected = (len(priorities) * p / buffer.tree.total) ** -beta
    np.testing.assert_allclose(batch.weights, expected / expected.max(), rtol=1e-5)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.0])
def test_sampling_frequencies_are_proportional_to_priority_to_the_alpha(alpha: float) -> None:
    """At seed 0, 200k draws over 10 transitions with priorities 1..10: each frequency is
    within 0.003 of p_i^alpha / sum p^alpha (about 3 standard errors of independent draws;
    stratified draws are tighter still)."""
    buffer = PrioritizedReplayBuffer(10, alpha=alpha, seed=0)
    fill(buffer, [10])
    p = np.arange(1.0, 11.0)
    buffer.update_priorities(np.arange(10), p - buffer.eps)  # stored exactly as p^alpha
    ids = np.concatenate([buffer.sample(10).indices for _ in range(20_000)])
    freq = np.bincount(ids, minlength=10) / len(ids)
    np.testing.assert_allclose(freq, p**alpha / (p**alpha).sum(), atol=0.003)


def test_new_transitions_get_the_largest_priority_seen() -> None:
    buffer = PrioritizedReplayBuffer(8, alpha=1.0, eps=1e-6)
    fill(buffer, [4])
    buffer.update_priorities(np.arange(4), np.array([0.5, 5.0, 0.5, 0.5]))
    buffer.add(numbered(4, 2))
    np.testing.assert_allclose(buffer.tree.values[4:6], 5.0 + 1e-6)
    assert buffer.max_priority == pytest.approx(5.0 + 1e-6)


def test_priorities_of_overwritten_transitions_are_dropped() -> None:
    """Ape-X: workers add while the learner trains; an update for a transition that has
    been overwritten since it was sampled must not land on its slot's new occupant."""
    buffer = PrioritizedReplayBuffer(4, alpha=1.0)
    fill(buffer, [4])
    stale = buffer.sample(4).indices
    buffer.add(numbered(4, 2))  # overwrites ids 0 and 1 (slots 0 and 1)
    before = buffer.tree.values.copy()
    buffer.update_priorities(np.array([0, 1]), np.array([100.0, 100.0]))
    np.testing.assert_array_equal(buffer.tree.values, before)
    buffer.update_priorities(np.array([0, 3]), np.array([100.0, 7.0]))  # id 3 is still stored
    assert buffer.tree.values[3] == pytest.approx(7.0) and stale is not None


@pytest.mark.parametrize(
    ("ids", "priorities", "message"),
    [
        ([0, 1], [1.0], "equal 1-D shapes"),
        ([4], [1.0], r"ids must be in 0\.\.3"),
        ([-1], [1.0], r"ids must be in 0\.\.3"),
        ([0], [np.nan], "finite and >= 0"),
        ([0], [-1.0], "finite and >= 0"),
        ([0], [np.inf], "finite and >= 0"),
    ],
)
def test_bad_priority_updates_are_refused(ids: list[int], priorities: list[float], message: str) -> None:
    buffer = PrioritizedReplayBuffer(8)
    fill(buffer, [4])
    with pytest.raises(ValueError, match=message):
        buffer.update_priorities(np.array(ids), np.array(priorities))


def test_beta_follows_its_schedule_over_sample_calls() -> None:
    buffer = PrioritizedReplayBuffer(8, beta=LinearSchedule(0.4, 1.0, 4))
    fill(buffer, [8])
    betas = []
    for _ in range(6):
        betas.append(buffer.current_beta())
        buffer.sample(2)
    assert betas == pytest.approx([0.4, 0.55, 0.7, 0.85, 1.0, 1.0])


@pytest.mark.parametrize("kind", KINDS)
def test_state_dict_round_trip_gives_an_identical_buffer(kind: type[ReplayBuffer]) -> None:
    """Law: a buffer restored from `state_dict()` (through torch.save/load with
    weights_only=True, as checkpoints are written and read: `tensors_of`) holds the same rows
    under the same ids and draws the same next samples as the original."""
    original = kind(16, seed=3)
    fill(original, [10, 9])  # wrapped
    for _ in range(3):
        batch = original.sample(8)
        if isinstance(original, PrioritizedReplayBuffer):
            assert batch.indices is not None
            original.update_priorities(batch.indices, np.abs(np.sin(batch.indices)) * 3)
    blob = io.BytesIO()
    torch.save(tensors_of(original.state_dict()), blob)
    blob.seek(0)
    restored = kind(16, seed=99)
    restored.load_state_dict(torch.load(blob, weights_only=True))
    assert restored.num_added == original.num_added and len(restored) == len(original)
    for _ in range(3):
        a, b = original.sample(8), restored.sample(8)
        assert a.indices is not None and b.indices is not None
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.obs, b.obs)
        if a.weights is not None:
            np.testing.assert_array_equal(a.weights, b.weights)
    original.add(numbered(19, 3))
    restored.add(numbered(19, 3))
    np.testing.assert_array_equal(original.sample(8).indices, restored.sample(8).indices)


def test_bad_settings_and_calls_name_the_setting() -> None:
    with pytest.raises(ValueError, match=r"capacity must be an integer >= 1"):
        ReplayBuffer(0)
    with pytest.raises(ValueError, match=r"alpha must be >= 0"):
        PrioritizedReplayBuffer(4, alpha=-0.1)
    with pytest.raises(ValueError, match=r"beta must be in"):
        PrioritizedReplayBuffer(4, beta=1.5)
    with pytest.raises(ValueError, match=r"eps must be > 0"):
        PrioritizedReplayBuffer(4, eps=0.0)
    buffer = ReplayBuffer(4)
    with pytest.raises(ValueError, match=r"buffer is empty"):
        buffer.sample(1)
    fill(buffer, [2])
    with pytest.raises(ValueError, match=r"batch_size 5 is larger than the capacity 4"):
        buffer.sample(5)
    with pytest.raises(ValueError, match=r"batch_size must be an integer >= 1"):
        buffer.sample(0)
    with pytest.raises(
        ValueError, match=r"column 'obs' is float32\[3\] per row, but the buffer holds float32\[2\]"
    ):
        buffer.add(numbered(0, 1, obs_dim=3))
    with pytest.raises(ValueError, match=r"state has capacity 4, this buffer 8"):
        ReplayBuffer(8).load_state_dict(buffer.state_dict())


def test_make_replay_buffer_follows_the_config() -> None:
    assert (
        type(make_replay_buffer(ReplayConfig(capacity=10, batch_size=2, learning_starts=2))) is ReplayBuffer
    )
    config = ReplayConfig(
        capacity=10,
        batch_size=2,
        learning_starts=2,
        prioritized=True,
        alpha=0.5,
        beta=0.3,
        beta_annealing_samples=100,
    )
    buffer = make_replay_buffer(config)
    assert isinstance(buffer, PrioritizedReplayBuffer) and buffer.alpha == 0.5
    assert buffer.beta == LinearSchedule(0.3, 1.0, 100)
    constant = make_replay_buffer(
        ReplayConfig(capacity=10, batch_size=2, learning_starts=2, prioritized=True)
    )
    assert isinstance(constant, PrioritizedReplayBuffer) and constant.beta == 0.4


def test_replay_config_refuses_batches_or_learning_starts_beyond_capacity() -> None:
    with pytest.raises(
        ValueError, match=r"ReplayConfig.batch_size \(128\) must not exceed ReplayConfig.capacity \(32\)"
    ):
        ReplayConfig(capacity=32, learning_starts=32)
    with pytest.raises(ValueError, match=r"ReplayConfig.learning_starts \(200\) must not exceed"):
        ReplayConfig(capacity=128, learning_starts=200)
    with pytest.raises(ValueError, match=r"'alpha' must be >= 0"):
        ReplayConfig(alpha=-1.0)
    with pytest.raises(
        ValueError, match=r"ReplayConfig.beta_annealing_samples must be None or an integer >= 1"
    ):
        ReplayConfig(beta_annealing_samples=0)


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), min_size=1, max_size=30),
       st.sampled_from([0.5, 2.0, 8.0]), st.integers(0, 2))
def test_a_shard_held_to_an_intensity_hands_out_no_more_than_it_allows(
        steps: list[tuple[int, int]], intensity: float, lead: int) -> None:
    """The law of ``exact_intensity``: after any adds (with env steps beyond the rows, as a
    worker's held-back n-step rows give) and requests, the transitions a shard handed out never exceed
    ``intensity`` per env step added past ``learning_starts`` plus ``lead`` requests, and a
    request is refused only when granting it would; the count survives a checkpoint."""
    from rxrl.algos.qlearning.steps import sample_batches

    config = ReplayConfig(capacity=200, batch_size=4, learning_starts=20)
    shard, start = ReplayShard(config), 0
    for added, batches in steps:
        batch = attrs.evolve(numbered(start, added), env_steps=added + added // 10)
        start += added
        shard.add(batch)
        budget = intensity * max(0, shard.env_steps_added - 20) + lead * batches * 4
        before = shard.num_replayed
        assert before is not None
        got = sample_batches(batches, intensity, lead)(shard) if batches else []
        fits = len(shard) >= 20 and before + batches * 4 <= budget
        assert isinstance(got, list) is fits or not batches
        assert shard.num_replayed == before + (batches * 4 if fits else 0) <= max(budget, before)
    again = ReplayShard(config)
    again.load_state_dict(shard.state_dict())
    assert (again.env_steps_added, again.num_replayed) == (shard.env_steps_added, shard.num_replayed)
    old = shard.state_dict()
    del old["env_steps_added"], old["num_replayed"]
    again.load_state_dict(old)  # a checkpoint from before the counts: from its budget on
    assert again.env_steps_added == again.buffer.num_added and again.num_replayed is None
    assert not again.within(1, intensity)
    assert again.num_replayed == int(intensity * max(0, again.env_steps_added - 20))
