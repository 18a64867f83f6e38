"""TransitionBatch: a frozen, column-checked batch of (n-step) transitions for Q-learning."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, Final

import attrs
import numpy as np
import numpy.typing as npt

from rxrl.rl.data.batch import BoolArray, FloatArray
from rxrl.rl.data.episode_metrics import EpisodeMetricsArrays, check_aligned, join

IntArray = npt.NDArray[np.int64]

#: Per-transition columns every batch has (same leading dimension, the batch length).
TRANSITION_COLUMNS: Final = ("obs", "actions", "rewards", "next_obs", "terminateds", "truncateds", "n_steps")
#: Per-transition columns only a batch sampled from a replay buffer has (else None).
SAMPLED_COLUMNS: Final = ("weights", "indices")
_CHECKED: Final = TRANSITION_COLUMNS + SAMPLED_COLUMNS
#: Columns whose rows may have a shape of their own (the rest hold a scalar per row).
_ROWS: Final = ("obs", "next_obs", "actions")


def _empty_floats() -> FloatArray:
    return np.zeros(0, dtype=np.float32)


def _ones_like_rewards(batch: TransitionBatch) -> IntArray:
    return np.ones(len(batch.rewards), dtype=np.int64)


def _default_env_steps(batch: TransitionBatch) -> int:
    return len(batch.rewards)


@attrs.frozen(eq=False)
class TransitionBatch:
    """A batch of `B` transitions `(obs, action, reward, next_obs)`; rows of all columns correspond.

    Columns (see `TRANSITION_COLUMNS`): `obs` and `next_obs` `[B, *obs_shape]`, `actions`
    `[B]` int64 (discrete) or `[B, act_dim]` float32 (continuous: SAC),
    `rewards` `[B]` float32, `terminateds` / `truncateds` `[B]` bool, and
    `n_steps` `[B]` int64 (default all 1). A row may fold `n_steps` env steps into one
    (see `rxrl.rl.replay.nstep`): `rewards` is then the discounted sum `sum_k gamma^k r_{t+k}`,
    `next_obs` the observation `n_steps` steps later, and the flags say how the last of
    them ended. A learner bootstraps with `gamma ** n_steps` unless `terminateds`; after a
    truncation `next_obs` is the real final observation, so bootstrapping from it is right.

    Sampled from a replay buffer, a batch also has `indices` (int64 `[B]`: the buffer's
    ids of the rows, what `update_priorities` takes back) and, from a prioritized buffer,
    `weights` (float32 `[B]`, importance weights in (0, 1]); otherwise these are None.

    Batch-level extras, as in `SampleBatch`: `episode_returns` / `episode_lengths` of the
    episodes that ended while the batch was sampled and `env_steps`, the env transitions
    stepped to produce it (defaults to `B`). A worker folding n-step returns holds a few
    transitions back until their window closes, so `env_steps` may differ from `B` either
    way; summed over a run they agree up to the held-back few. Equality is identity.
    """

    obs: npt.NDArray[Any]
    actions: npt.NDArray[Any]
    rewards: FloatArray
    next_obs: npt.NDArray[Any]
    terminateds: BoolArray
    truncateds: BoolArray
    n_steps: IntArray = attrs.field(default=attrs.Factory(_ones_like_rewards, takes_self=True))
    weights: FloatArray | None = None
    indices: IntArray | None = None
    episode_returns: FloatArray = attrs.field(factory=_empty_floats)
    episode_lengths: IntArray = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    env_steps: int = attrs.field(default=attrs.Factory(_default_env_steps, takes_self=True))
    #: the custom per-episode metrics of the ended episodes, by name, aligned with
    #: `episode_returns` (`rxrl.rl.data.episode_metrics`); empty unless configured
    episode_metrics: EpisodeMetricsArrays = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        # Runs for every batch a buffer samples: the passing case is a few attribute reads.
        length = len(self.rewards)
        for name in _CHECKED:
            column = getattr(self, name)
            if column is None:
                continue
            shape = column.shape if isinstance(column, np.ndarray) else np.shape(column)
            if shape[:1] != (length,) or (len(shape) != 1 and name not in _ROWS):
                self._shape_error()
        if self.obs.shape[1:] != self.next_obs.shape[1:]:
            raise ValueError(
                f"TransitionBatch obs {self.obs.shape} and next_obs {self.next_obs.shape} differ"
            )
        if len(self.episode_returns) != len(self.episode_lengths):
            raise ValueError(
                "TransitionBatch episode_returns and episode_lengths differ in length: "
                f"{np.shape(self.episode_returns)} vs {np.shape(self.episode_lengths)}"
            )
        if self.episode_metrics:
            check_aligned(self.episode_metrics, len(self.episode_returns), "TransitionBatch")
        if self.env_steps < 0:
            raise ValueError(f"TransitionBatch env_steps must be >= 0, got {self.env_steps}")

    def _shape_error(self) -> None:
        shapes = {n: np.shape(getattr(self, n)) for n in _CHECKED if getattr(self, n) is not None}
        for name, shape in shapes.items():
            if len(shape) < 1 or (name not in _ROWS and len(shape) != 1):
                raise ValueError(f"TransitionBatch field {name!r} must be [B]-shaped per row, got {shape}")
        length = shapes["rewards"][0]
        ragged = sorted(n for n, s in shapes.items() if s[0] != length)
        listing = ", ".join(f"{n}={s}" for n, s in shapes.items())
        raise ValueError(
            f"TransitionBatch fields {ragged} have a leading dimension other than {length} "
            f"(the length of 'rewards'); shapes: {listing}"
        )

    def __len__(self) -> int:
        """The number of transitions `B`."""
        return len(self.rewards)

    @staticmethod
    def concat(batches: Sequence[TransitionBatch]) -> TransitionBatch:
        """Join batches row-wise in order, with their episode statistics and env steps.

        The sampled columns survive only if every batch has them. Raises ValueError on an
        empty sequence or when a column's per-row shape differs between batches.
        """
        if not batches:
            raise ValueError("TransitionBatch.concat needs at least one batch, got none")
        if len(batches) == 1:
            return batches[0]
        for name in TRANSITION_COLUMNS:
            shapes = {np.shape(getattr(b, name))[1:] for b in batches}
            if len(shapes) > 1:
                raise ValueError(
                    f"TransitionBatch.concat: field {name!r} has per-row shapes {sorted(shapes)}"
                )
        columns: dict[str, Any] = {
            n: np.concatenate([getattr(b, n) for b in batches]) for n in TRANSITION_COLUMNS
        }
        for name in SAMPLED_COLUMNS:
            parts = [getattr(b, name) for b in batches]
            columns[name] = None if any(p is None for p in parts) else np.concatenate(parts)
        return TransitionBatch(
            **columns,
            episode_returns=np.concatenate([b.episode_returns for b in batches]),
            episode_lengths=np.concatenate([b.episode_lengths for b in batches]),
            env_steps=sum(b.env_steps for b in batches),
            episode_metrics=join([(b.episode_metrics, len(b.episode_returns)) for b in batches]),
        )

    def take(self, index: builtins.slice | npt.NDArray[np.intp]) -> TransitionBatch:
        """The rows at `index` (a slice or an index array), without episode statistics."""
        columns: dict[str, Any] = {n: getattr(self, n)[index] for n in TRANSITION_COLUMNS}
        for name in SAMPLED_COLUMNS:
            column = getattr(self, name)
            columns[name] = None if column is None else column[index]
        return TransitionBatch(**columns)


__all__ = ["SAMPLED_COLUMNS", "TRANSITION_COLUMNS", "IntArray", "TransitionBatch"]
