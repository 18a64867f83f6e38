"""Running normalization statistics: observation mean/variance and the return scale.

Continuous-control PPO at CleanRL/SB3 quality normalizes observations with running
statistics and scales rewards by the standard deviation of a running discounted return
(gymnasium's `NormalizeObservation` / `NormalizeReward` wrappers). With several rollout
workers those statistics must be *one* set, or workers would feed the policy differently
scaled inputs. rxrl keeps them in the policy itself (a `Normalizer` module: torch buffers,
so they are in every `state_dict`, checkpoint and `get_weights`), and moves them the way
weights move:

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

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import torch
from torch import nn

F64 = npt.NDArray[np.float64]
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


class Normalizer(nn.Module):
    """The running statistics a policy normalizes with, as torch buffers (float64).

    Observations become `clip((obs - mean) / sqrt(var + 1e-8), -obs_clip, obs_clip)`;
    rewards `clip(r / sqrt(return_var + 1e-8), -reward_clip, reward_clip)`. Before any data
    the means are 0 and the variances 1 (the identity, up to clipping).
    """

    obs_mean: torch.Tensor
    obs_var: torch.Tensor
    obs_count: torch.Tensor
    return_mean: torch.Tensor
    return_var: torch.Tensor
    return_count: torch.Tensor

    def __init__(self, obs_dim: int, obs_clip: float, reward_clip: float) -> None:
        super().__init__()
        self.obs_clip, self.reward_clip = obs_clip, reward_clip
        self._np_cache: tuple[tuple[int, int, int], npt.NDArray[np.float32],
                              npt.NDArray[np.float32]] | None = None
        for name, shape in (("obs", (obs_dim,)), ("return", ())):
            self.register_buffer(f"{name}_mean", torch.zeros(shape, dtype=torch.float64))
            self.register_buffer(f"{name}_var", torch.ones(shape, dtype=torch.float64))
            self.register_buffer(f"{name}_count", torch.zeros((), dtype=torch.float64))

    def obs_np(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Normalized observations `[B, obs_dim]` (numpy, the rollout path: once per env step).

        The mean and `1 / std` are computed once per change of the statistics (a merge,
        `set_weights`, `load_state_dict`: all in place, each bumping the buffers' version
        counters), not on every call."""
        key = (self.obs_mean._version, self.obs_var._version, self.obs_mean.data_ptr())
        if self._np_cache is None or self._np_cache[0] != key:
            mean = self.obs_mean.detach().cpu().numpy().astype(np.float32)
            scale = (1.0 / np.sqrt(self.obs_var.detach().cpu().numpy() + EPS)).astype(np.float32)
            self._np_cache = (key, mean, scale)
        _, mean, scale = self._np_cache
        out: npt.NDArray[np.float32] = np.clip((x - mean) * scale, -self.obs_clip, self.obs_clip)
        return out

    def obs_torch(self, x: torch.Tensor) -> torch.Tensor:
        """Normalized observations `[B, obs_dim]` (torch, the loss path; no gradient flows
        into the statistics)."""
        scale = torch.rsqrt(self.obs_var + EPS)
        out = ((x.double() - self.obs_mean) * scale).clamp(-self.obs_clip, self.obs_clip)
        return out.float()

    def reward_scale(self) -> float:
        """The factor rewards are multiplied by: `1 / sqrt(return_var + 1e-8)`."""
        return float(1.0 / np.sqrt(float(self.return_var) + EPS))

    def scale_rewards(self, rewards: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        """`rewards` scaled and clipped (see the class docstring), float32."""
        scaled = np.clip(rewards * self.reward_scale(), -self.reward_clip, self.reward_clip)
        return scaled.astype(np.float32)

    def moments(self, name: str) -> RunningMoments:
        """The statistics `name` (``"obs"`` or ``"return"``) as `RunningMoments`."""
        return RunningMoments(float(getattr(self, f"{name}_count")),
                              getattr(self, f"{name}_mean").detach().cpu().numpy().copy(),
                              getattr(self, f"{name}_var").detach().cpu().numpy().copy())

    def merge(self, stats: NormStats | None) -> None:
        """Add a batch's contribution (`NormStats`) to the statistics, in place."""
        if stats is None:
            return
        for name, part in (("obs", stats.obs), ("return", stats.returns)):
            if part is None or part.count == 0:
                continue
            own = self.moments(name)
            merged = own.merge(part) if own.count > 0 else part
            mean, var = getattr(self, f"{name}_mean"), getattr(self, f"{name}_var")
            with torch.no_grad():
                mean.copy_(torch.as_tensor(np.asarray(merged.mean)).reshape(mean.shape))
                var.copy_(torch.as_tensor(np.asarray(merged.var)).reshape(var.shape))
                getattr(self, f"{name}_count").fill_(merged.count)


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


__all__ = ["EPS", "NormStats", "Normalizer", "ReturnTracker", "RunningMoments"]
