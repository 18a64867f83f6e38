"""Builders for the replay tests: transitions whose every column encodes their global number."""

from __future__ import annotations

import numpy as np

from rxrl.rl.data.transitions import TransitionBatch


def numbered(start: int, n: int, obs_dim: int = 2, episodes: int = 0) -> TransitionBatch:
    """Transitions `start .. start + n - 1`: transition k has reward k, obs k, next obs k + 1,
    action k % 3 and ends its episode when k % 7 == 6 (terminated) or k % 11 == 10
    (truncated), so a sampled row tells which transition it is."""
    k = np.arange(start, start + n)
    obs = np.repeat(k[:, None].astype(np.float32), obs_dim, axis=1)
    return TransitionBatch(
        obs=obs,
        actions=(k % 3).astype(np.int64),
        rewards=k.astype(np.float32),
        next_obs=obs + 1,
        terminateds=k % 7 == 6,
        truncateds=(k % 11 == 10) & (k % 7 != 6),
        n_steps=(k % 2 + 1).astype(np.int64),
        episode_returns=np.arange(episodes, dtype=np.float32),
        episode_lengths=np.ones(episodes, dtype=np.int64),
    )


def assert_rows_are_their_ids(batch: TransitionBatch) -> None:
    """Every sampled row is the transition its id names, in every column."""
    assert batch.indices is not None
    k = batch.indices
    np.testing.assert_array_equal(batch.rewards, k.astype(np.float32))
    np.testing.assert_array_equal(batch.obs[:, 0], k.astype(np.float32))
    np.testing.assert_array_equal(batch.next_obs[:, 0], (k + 1).astype(np.float32))
    np.testing.assert_array_equal(batch.actions, k % 3)
    np.testing.assert_array_equal(batch.terminateds, k % 7 == 6)
    np.testing.assert_array_equal(batch.n_steps, k % 2 + 1)
