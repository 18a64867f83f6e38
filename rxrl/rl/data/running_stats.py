"""Running normalization statistics: observation mean/variance and the return scale.

Continuous-control PPO at CleanRL/SB3 quality normalizes observations with running
statistics and scales rewards by the standard deviation of a running discounted return
(gymnasium's `NormalizeObservation` / `NormalizeReward` wrappers). With several rollout
workers those statistics must be *one* set, or workers would feed the policy differently
scaled inputs. rxrl keeps them in the policy itself (a `rxrl.rl.models.normalizer.Normalizer`
module: torch buffers, so they are in every `state_dict`, checkpoint and `get_weights`), and
moves them the way weights move:

1. a worker normalizes with the statistics it was last sent (its policy's buffers) and
   returns, with each batch, the `RunningMoments` of the *raw* observations and discounted
   returns it saw (`NormStats`, the batch's contribution);
2. the learner trains on the batch with the statistics the batch was sampled with, *then*
   merges the batch's contribution into its own (`Normalizer.merge`);
3. the new statistics travel to the workers inside the weights.

So a synchronous plan trains every batch with exactly the normalization it was sampled
with, `rxrl eval` and `--resume` use the checkpoint's statistics, and the merged moments
equal the moments of all the data seen, whatever the number of workers (Chan et al.'s
parallel update; `tests/rl/test_normalize.py` checks the law).

>>> import numpy as np
>>> a, b = np.arange(4.0)[:, None], np.arange(4.0, 10.0)[:, None]
>>> merged = RunningMoments.of(a).merge(RunningMoments.of(b))
>>> whole = RunningMoments.of(np.concatenate([a, b]))
>>> bool(np.allclose(merged.mean, whole.mean) and np.allclose(merged.var, whole.var))
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
#: added to a variance before its square root
EPS = 1e-8


@attrs.frozen(eq=False)
class RunningMoments:
    """Count, mean and (population) variance of a set of rows, per feature.

    `of(x)` takes the moments of the rows of `x` (`[B, *shape]`); `merge` combines the
    moments of two disjoint sets into those of their union (exact up to rounding).
    """

    count: float
    mean: F64
    var: F64

    @staticmethod
    def of(x: npt.ArrayLike) -> RunningMoments:
        """The moments of the rows of `x` (an empty `x` has count 0, mean 0, var 0)."""
        rows = np.asarray(x, dtype=np.float64)
        if len(rows) == 0:
            zeros = np.zeros(rows.shape[1:], np.float64)
            return RunningMoments(0.0, zeros, zeros.copy())
        return RunningMoments(float(len(rows)), rows.mean(axis=0), rows.var(axis=0))

    def merge(self, other: RunningMoments) -> RunningMoments:
        """The moments of the union of the two sets (Chan, Golub and LeVeque's update)."""
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        total = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / total)
        m2 = self.var * self.count + other.var * other.count + np.square(delta) * (
            self.count * other.count / total)
        return RunningMoments(total, mean, m2 / total)

    @staticmethod
    def merge_all(parts: Sequence[RunningMoments | None]) -> RunningMoments | None:
        """The merge of the given moments, left to right (None where there are none)."""
        out: RunningMoments | None = None
        for part in parts:
            if part is not None:
                out = part if out is None else out.merge(part)
        return out


@attrs.frozen(eq=False)
class NormStats:
    """What one batch contributes to the running statistics: the moments of the raw
    observations (`obs`) and of the running discounted returns (`returns`) its worker saw;
    None where that normalization is off."""

    obs: RunningMoments | None = None
    returns: RunningMoments | None = None

    @staticmethod
    def merge_all(parts: Sequence[NormStats | None]) -> NormStats | None:
        """The statistics of several batches together (None if none has any)."""
        present = [p for p in parts if p is not None]
        if not present:
            return None
        return NormStats(RunningMoments.merge_all([p.obs for p in present]),
                         RunningMoments.merge_all([p.returns for p in present]))


def obs_transform(mean: npt.ArrayLike, var: npt.ArrayLike) -> tuple[F32, F32]:
    """The float32 mean and ``1 / sqrt(var + 1e-8)`` that observations are normalized with."""
    scale = (1.0 / np.sqrt(np.asarray(var, dtype=np.float64) + EPS)).astype(np.float32)
    return np.asarray(mean, dtype=np.float64).astype(np.float32), scale


def normalized_obs(x: F32, mean: F32, scale: F32, clip: float) -> F32:
    """``clip((x - mean) * scale, -clip, clip)``: observations `[B, obs_dim]`, normalized."""
    out: F32 = np.clip((x - mean) * scale, -clip, clip)
    return out


def reward_scale(return_var: float) -> float:
    """The factor rewards are multiplied by: ``1 / sqrt(return_var + 1e-8)``."""
    return float(1.0 / np.sqrt(float(return_var) + EPS))


def scaled_rewards(rewards: npt.NDArray[Any], scale: float, clip: float) -> F32:
    """``rewards * scale`` clipped to ``[-clip, clip]``, float32."""
    scaled = np.clip(rewards * scale, -clip, clip)
    return scaled.astype(np.float32)


class ArrayNormalizer:
    """The rollout side of a policy's statistics over plain numpy arrays (the
    ``normalizer.*`` entries of its weights), for a policy without torch
    (`rxrl.rl.models.forward.NumpyActorCritic`): normalizes as `rxrl.rl.models.normalizer.Normalizer`
    does, bit for bit. The arrays change in place (`set_weights`); `changed` says so, and
    the mean and ``1 / std`` are computed again on the next call."""

    def __init__(self, arrays: Mapping[str, npt.NDArray[Any]], obs_clip: float, reward_clip: float) -> None:
        self.arrays, self.obs_clip, self.reward_clip = arrays, obs_clip, reward_clip
        self._obs: tuple[F32, F32] | None = None

    def changed(self) -> None:
        """The statistics were overwritten: forget the derived mean and scale."""
        self._obs = None

    def obs_np(self, x: F32) -> F32:
        """Normalized observations `[B, obs_dim]`."""
        if self._obs is None:
            self._obs = obs_transform(self.arrays["normalizer.obs_mean"], self.arrays["normalizer.obs_var"])
        return normalized_obs(x, *self._obs, self.obs_clip)

    def reward_scale(self) -> float:
        """The factor rewards are multiplied by (`reward_scale`)."""
        return reward_scale(float(self.arrays["normalizer.return_var"]))

    def scale_rewards(self, rewards: npt.NDArray[Any]) -> F32:
        """`rewards` scaled and clipped, float32."""
        return scaled_rewards(rewards, self.reward_scale(), self.reward_clip)


class ReturnTracker:
    """A worker's running discounted returns per sub-environment, for reward scaling:
    `ret = gamma * ret + r` each valid step, reset to 0 when an episode ends (after the step
    is counted). `take()` hands over the moments of the returns seen since the last call."""

    def __init__(self, num_envs: int, gamma: float) -> None:
        self.gamma = gamma
        self.returns = np.zeros(num_envs, np.float64)
        self._seen: list[F64] = []

    def step(self, rewards: npt.NDArray[Any], valid: npt.NDArray[np.bool_],
             done: npt.NDArray[np.bool_]) -> None:
        """Advance by one vector step (raw rewards; `valid` False at reset steps)."""
        self.returns = np.where(valid, self.gamma * self.returns + rewards, self.returns)
        self._seen.append(self.returns[valid].copy())
        self.returns[done] = 0.0

    def take(self) -> RunningMoments:
        """The moments of the returns seen since the last `take` (count 0 if none)."""
        seen = np.concatenate(self._seen) if self._seen else np.zeros(0)
        self._seen = []
        return RunningMoments.of(seen)


__all__ = ["EPS", "ArrayNormalizer", "NormStats", "ReturnTracker", "RunningMoments",
           "normalized_obs", "obs_transform", "reward_scale", "scaled_rewards"]
