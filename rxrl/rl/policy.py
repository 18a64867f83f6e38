"""Torch MLP actor-critic policies: a fast sampling path for rollouts and a loss path."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rxrl.rl.config import PolicyConfig

#: Policy weights as plain numpy arrays, keyed by torch state-dict name: cheap to pickle.
Weights = dict[str, npt.NDArray[np.float32]]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _layer(n_in: int, n_out: int, gain: float, generator: torch.Generator) -> nn.Linear:
    """A linear layer with orthogonal weights of `gain` and zero bias (CleanRL's init)."""
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


def _trunk(n_in: int, config: PolicyConfig, generator: torch.Generator) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in config.hidden_sizes:
        layers += [_layer(n_in, width, math.sqrt(2.0), generator), _ACTIVATIONS[config.activation]()]
        n_in = width
    return nn.Sequential(*layers)


class ActorCritic(nn.Module, ABC):
    """An MLP actor-critic over a Box (flattened) or Discrete (one-hot) observation space.

    Two entry points: `act` (numpy in, numpy out, no autograd, no `torch.distributions`
    objects) for the rollout hot path, and `evaluate` (tensors, differentiable) for losses.
    Weight init draws from a generator seeded with `seed`, so equal seeds give equal weights
    in every process; sampling draws from a separate generator (`seed_sampling`).
    """

    def __init__(
        self,
        observation_space: gym.Space[object],
        out_dim: int,
        config: PolicyConfig,
        seed: int,
    ) -> None:
        super().__init__()
        init = torch.Generator().manual_seed(seed)
        self.config = config
        self.observation_space = observation_space
        if isinstance(observation_space, gym.spaces.Discrete):
            self._one_hot: int | None = int(observation_space.n)
            self._obs_start = int(observation_space.start)
            in_dim = self._one_hot
        else:
            assert isinstance(observation_space, gym.spaces.Box)
            self._one_hot = None
            self._obs_start = 0
            in_dim = int(np.prod(observation_space.shape))
        width = config.hidden_sizes[-1]
        self.pi_trunk = _trunk(in_dim, config, init)
        self.vf_trunk = None if config.shared_trunk else _trunk(in_dim, config, init)
        self.pi_head = _layer(width, out_dim, 0.01, init)
        self.vf_head = _layer(width, 1, 1.0, init)
        self.sampler = torch.Generator().manual_seed(seed)

    def seed_sampling(self, seed: int) -> None:
        """Reseed the generator `act` samples from (weights are untouched)."""
        self.sampler.manual_seed(seed)

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations `[B, *obs_shape]` as float features `[B, in_dim]`."""
        if self._one_hot is not None:
            return nn.functional.one_hot(obs.long() - self._obs_start, self._one_hot).float()
        return obs.reshape(obs.shape[0], -1).float()

    def heads(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy head output `[B, out_dim]` and values `[B]` from encoded observations."""
        pi_hidden = self.pi_trunk(features)
        vf_hidden = pi_hidden if self.vf_trunk is None else self.vf_trunk(features)
        return self.pi_head(pi_hidden), self.vf_head(vf_hidden).squeeze(-1)

    def act(
        self, obs: npt.NDArray[np.generic], deterministic: bool = False
    ) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """Sample actions for a batch of observations: `(actions, logp, values)`.

        `deterministic=True` takes the mode (argmax / mean) instead of sampling; `logp` is
        then the log-probability of that mode.
        """
        with torch.inference_mode():
            out, values = self.heads(self.encode(torch.from_numpy(obs)))
            actions, logp = self._sample(out, deterministic)
        return actions.numpy(), logp.numpy(), values.numpy()

    def value(self, obs: npt.NDArray[np.generic]) -> npt.NDArray[np.float32]:
        """Value estimates `[B]` for a batch of observations (no autograd)."""
        with torch.inference_mode():
            features = self.encode(torch.from_numpy(obs))
            hidden = self.pi_trunk(features) if self.vf_trunk is None else self.vf_trunk(features)
            values: npt.NDArray[np.float32] = self.vf_head(hidden).squeeze(-1).numpy()
        return values

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Differentiable `(logp, entropy, values)`, each `[B]`, of `actions` at `obs`."""
        out, values = self.heads(self.encode(obs))
        logp, entropy = self._logp_entropy(out, actions)
        return logp, entropy, values

    def get_weights(self) -> Weights:
        """A copy of every parameter and buffer as numpy arrays."""
        return {k: t.detach().cpu().numpy().copy() for k, t in self.state_dict().items()}

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Copy `weights` (as from `get_weights`) into this policy.

        Raises ValueError naming the offending entries when names or shapes differ.
        """
        own = self.state_dict()
        missing, extra = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
        if missing or extra:
            raise ValueError(f"set_weights: missing entries {missing}, unexpected {extra}")
        wrong = {
            k: (tuple(own[k].shape), np.shape(w))
            for k, w in weights.items()
            if tuple(own[k].shape) != np.shape(w)
        }
        if wrong:
            raise ValueError(f"set_weights: shape mismatch (expected, got): {wrong}")
        with torch.no_grad():
            for k, w in weights.items():
                own[k].copy_(torch.as_tensor(np.asarray(w)))

    @abstractmethod
    def _sample(self, out: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]: ...

    @abstractmethod
    def _logp_entropy(
        self, out: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


class CategoricalActorCritic(ActorCritic):
    """Actor-critic with a categorical head for a `Discrete(n)` action space.

    Actions are indices `0..n-1` (add the space's `start` when stepping the env).
    Sampling uses the Gumbel-max trick: `argmax(logits + Gumbel noise)`.
    """

    def __init__(
        self,
        observation_space: gym.Space[object],
        action_space: gym.spaces.Discrete[Any],
        config: PolicyConfig,
        seed: int,
    ) -> None:
        super().__init__(observation_space, int(action_space.n), config, seed)
        self.action_space = action_space

    def _sample(self, out: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs = torch.log_softmax(out, dim=-1)
        if deterministic:
            actions = out.argmax(dim=-1)
        else:
            u = torch.rand(out.shape, generator=self.sampler)
            actions = (out - torch.log(-torch.log(u))).argmax(dim=-1)
        return actions, log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    def _logp_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs = torch.log_softmax(out, dim=-1)
        logp = log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        return logp, entropy


class GaussianActorCritic(ActorCritic):
    """Actor-critic with a diagonal Gaussian head and a state-independent log-std.

    For a 1-D `Box` action space; actions are unbounded samples (clip them to the space
    when stepping the env, and keep the unclipped ones for the loss).
    """

    def __init__(
        self,
        observation_space: gym.Space[object],
        action_space: gym.spaces.Box,
        config: PolicyConfig,
        seed: int,
    ) -> None:
        act_dim = int(action_space.shape[0])
        super().__init__(observation_space, act_dim, config, seed)
        self.action_space = action_space
        self.log_std = nn.Parameter(torch.full((act_dim,), float(config.init_log_std)))

    def _sample(self, out: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        noise = torch.zeros_like(out) if deterministic else torch.randn(out.shape, generator=self.sampler)
        actions = out + self.log_std.exp() * noise
        logp = (-0.5 * noise.square() - self.log_std - _LOG_SQRT_2PI).sum(-1)
        return actions, logp

    def _logp_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = (actions - out) * torch.exp(-self.log_std)
        logp = (-0.5 * z.square() - self.log_std - _LOG_SQRT_2PI).sum(-1)
        entropy = (0.5 + _LOG_SQRT_2PI + self.log_std).sum().expand(out.shape[0])
        return logp, entropy


def make_policy(
    observation_space: gym.Space[object],
    action_space: gym.Space[object],
    config: PolicyConfig | None = None,
    seed: int = 0,
) -> ActorCritic:
    """Build the actor-critic for these spaces; equal seeds give equal initial weights.

    Observations: `Box` (any shape, flattened) or `Discrete` (one-hot). Actions:
    `Discrete` (categorical head) or 1-D `Box` (Gaussian head). Anything else raises
    ValueError naming the space.
    """
    config = config or PolicyConfig()
    if not isinstance(observation_space, gym.spaces.Box | gym.spaces.Discrete):
        raise ValueError(
            f"make_policy: unsupported observation space {observation_space!r}; "
            "supported: Box (flattened) and Discrete (one-hot)"
        )
    if isinstance(action_space, gym.spaces.Discrete):
        return CategoricalActorCritic(observation_space, action_space, config, seed)
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return GaussianActorCritic(observation_space, action_space, config, seed)
    raise ValueError(
        f"make_policy: unsupported action space {action_space!r}; supported: Discrete and 1-D Box"
    )


__all__ = [
    "ActorCritic",
    "CategoricalActorCritic",
    "GaussianActorCritic",
    "Weights",
    "make_policy",
]
