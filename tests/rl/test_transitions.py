"""TransitionBatch: column checks, concat, take."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from rxrl.rl.data.transitions import TransitionBatch
from tests.rl.replay_helpers import numbered


def test_defaults_one_step_rows_and_env_steps_equal_to_length() -> None:
    batch = numbered(0, 5)
    plain = TransitionBatch(
        obs=batch.obs,
        actions=batch.actions,
        rewards=batch.rewards,
        next_obs=batch.next_obs,
        terminateds=batch.terminateds,
        truncateds=batch.truncateds,
    )
    assert len(plain) == plain.env_steps == 5
    np.testing.assert_array_equal(plain.n_steps, np.ones(5))
    assert plain.weights is None and plain.indices is None


def test_ragged_or_misshapen_columns_are_refused_by_name() -> None:
    batch = numbered(0, 4)
    with pytest.raises(ValueError, match=r"\['actions'\] have a leading dimension other than 4"):
        attrs.evolve(batch, actions=np.zeros(3, np.int64))
    with pytest.raises(ValueError, match=r"'rewards' must be"):
        attrs.evolve(batch, rewards=np.zeros((4, 1), np.float32))
    with pytest.raises(ValueError, match=r"obs .* and next_obs .* differ"):
        attrs.evolve(batch, next_obs=np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match=r"\['weights'\]"):
        attrs.evolve(batch, weights=np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"episode_returns and episode_lengths differ"):
        attrs.evolve(batch, episode_returns=np.zeros(1, np.float32))


def test_concat_joins_rows_and_batch_statistics_and_keeps_sampled_columns_only_if_all_have_them() -> None:
    a, b = numbered(0, 3, episodes=1), numbered(3, 4, episodes=2)
    joined = TransitionBatch.concat([a, b])
    np.testing.assert_array_equal(joined.rewards, np.arange(7))
    assert joined.env_steps == 7 and len(joined.episode_returns) == 3 and joined.indices is None
    ids = [attrs.evolve(x, indices=np.arange(len(x)), weights=np.ones(len(x), np.float32)) for x in (a, b)]
    both = TransitionBatch.concat(ids)
    assert both.indices is not None and both.weights is not None and len(both.indices) == 7
    assert TransitionBatch.concat([ids[0], b]).indices is None
    with pytest.raises(ValueError, match=r"at least one batch"):
        TransitionBatch.concat([])
    with pytest.raises(ValueError, match=r"'obs' has per-row shapes"):
        TransitionBatch.concat([a, numbered(0, 2, obs_dim=3)])


def test_take_selects_rows_without_episode_statistics() -> None:
    batch = attrs.evolve(numbered(0, 6, episodes=2), indices=np.arange(10, 16))
    part = batch.take(np.array([5, 0]))
    np.testing.assert_array_equal(part.rewards, [5, 0])
    assert part.indices is not None and part.indices.tolist() == [15, 10]
    assert len(part.episode_returns) == 0 and part.env_steps == 2
    assert len(batch.take(slice(1, 3))) == 2
