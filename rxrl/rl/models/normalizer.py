"""`Normalizer`: a policy's running normalization statistics as torch buffers (float64), so
that they are in its `state_dict`, its checkpoints and its `get_weights` (`rxrl.rl.data.running_stats`
has the statistics themselves and how they move between workers and learner)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rxrl.rl.data.running_stats import (
    EPS,
    NormStats,
    RunningMoments,
    normalized_obs,
    obs_transform,
    reward_scale,
    scaled_rewards,
)


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
            mean, scale = obs_transform(self.obs_mean.detach().cpu().numpy(),
                                        self.obs_var.detach().cpu().numpy())
            self._np_cache = (key, mean, scale)
        _, mean, scale = self._np_cache
        return normalized_obs(x, mean, scale, self.obs_clip)

    def obs_torch(self, x: torch.Tensor) -> torch.Tensor:
        """Normalized observations `[B, obs_dim]` (torch, the loss path; no gradient flows
        into the statistics)."""
        scale = torch.rsqrt(self.obs_var + EPS)
        out = ((x.double() - self.obs_mean) * scale).clamp(-self.obs_clip, self.obs_clip)
        return out.float()

    def reward_scale(self) -> float:
        """The factor rewards are multiplied by: `1 / sqrt(return_var + 1e-8)`."""
        return reward_scale(float(self.return_var))

    def scale_rewards(self, rewards: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        """`rewards` scaled and clipped (see the class docstring), float32."""
        return scaled_rewards(rewards, self.reward_scale(), self.reward_clip)

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


__all__ = ["Normalizer"]
