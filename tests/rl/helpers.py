"""Builders shared by the rl tests."""

from __future__ import annotations

import numpy as np

from rxrl.rl.data.batch import SampleBatch


def make_batch(n: int, obs_dim: int = 3, start: int = 0, episodes: int = 0) -> SampleBatch:
    """A batch whose every column encodes the row number `start + row` (to trace rows)."""
    rows = np.arange(start, start + n, dtype=np.float32)
    return SampleBatch(
        obs=np.repeat(rows[:, None], obs_dim, axis=1),
        actions=np.arange(start, start + n, dtype=np.int64),
        rewards=rows.copy(),
        terminateds=(np.arange(start, start + n) % 5 == 4),
        truncateds=np.zeros(n, dtype=np.bool_),
        logp=-rows,
        values=rows * 2,
        advantages=rows * 3,
        value_targets=rows * 5,
        episode_returns=np.arange(episodes, dtype=np.float32) + start,
        episode_lengths=np.arange(episodes, dtype=np.int64) + 1,
    )
