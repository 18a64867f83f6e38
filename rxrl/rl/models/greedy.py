"""A trained policy's greedy action as one torch module: what ``rxrl export`` serializes.

`GreedyPolicy` maps a batch of raw env observations to the actions ``rxrl eval`` steps the
env with: observations encoded as the rollout path encodes them (one-hot, or flattened and
normalized with the policy's running statistics, frozen), the policy's deterministic output
(argmax logits or Q-values, the Gaussian mean, SAC's squashed mean), then env actions (a
Discrete space's ``start`` added, a Box action clipped to its bounds). Nothing in it refers
to rxrl's classes: traced, it is a graph that torch (TorchScript) or onnxruntime (ONNX) runs
alone.

`RecurrentGreedyPolicy` is the same for an actor-critic with a recurrent core
(``PolicyConfig.recurrent``): ``(obs, state) -> (actions, new_state)``, where ``state`` is
float32 ``[B, state_size]``, the actor core's state alone (an LSTM's ``h`` then its ``c``, a
GRU's ``h``; the critic's core plays no part in acting). Zeros are an episode's start state:
the caller zeroes a row's state before its episode's first step and passes each step's
``new_state`` to the next, as ``rxrl eval`` does (`rxrl.training.evaluation.RecurrentActing`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rxrl.rl.data.running_stats import obs_transform
from rxrl.rl.models.recurrent import step


class Observations(nn.Module):
    """Raw observations `[B, *shape]` as the float features `[B, in_dim]` the policy reads:
    one-hot for a Discrete space; else flattened, and normalized as the rollout path does
    (float32 ``clip((x - mean) * scale, -clip, clip)``) when ``stats`` is given."""

    mean: torch.Tensor
    scale: torch.Tensor

    def __init__(self, space: gym.Space[Any],
                 stats: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], float] | None = None,
                 encode: bool = True) -> None:
        super().__init__()
        self.encode = encode
        self.one_hot = int(space.n) if isinstance(space, gym.spaces.Discrete) else 0
        self.start = int(space.start) if isinstance(space, gym.spaces.Discrete) else 0
        self.clip = 0.0
        self.normalized = stats is not None
        if stats is not None:
            mean, scale = obs_transform(stats[0], stats[1])
            self.register_buffer("mean", torch.as_tensor(mean))
            self.register_buffer("scale", torch.as_tensor(scale))
            self.clip = float(stats[2])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The features of a batch of observations."""
        if not self.encode:
            return obs
        if self.one_hot:
            return nn.functional.one_hot(obs.long() - self.start, self.one_hot).float()
        flat = obs.reshape(obs.shape[0], -1).float()
        if self.normalized:
            return ((flat - self.mean) * self.scale).clamp(-self.clip, self.clip)
        return flat


class Actions(nn.Module):
    """A policy's deterministic output as env actions: for a Discrete space the argmax plus
    its ``start`` (int64 `[B]`); for a Box the output clipped to the bounds (float32 `[B, d]`)."""

    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, space: gym.Space[Any], argmax: bool) -> None:
        super().__init__()
        self.argmax = argmax
        self.start = int(space.start) if isinstance(space, gym.spaces.Discrete) else 0
        low, high = (space.low, space.high) if isinstance(space, gym.spaces.Box) else (0, 0)
        self.register_buffer("low", torch.as_tensor(np.asarray(low, np.float32)))
        self.register_buffer("high", torch.as_tensor(np.asarray(high, np.float32)))

    def forward(self, out: torch.Tensor) -> torch.Tensor:
        """The env actions of a batch of outputs."""
        if self.argmax:
            return out.argmax(dim=-1) + self.start
        return torch.maximum(torch.minimum(out, self.high), self.low)


class Method(nn.Module):
    """A module's method as a module's ``forward`` (SAC's ``mean_action``, say)."""

    def __init__(self, module: nn.Module, name: str) -> None:
        super().__init__()
        self.module, self.name = module, name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``module.name(x)``."""
        out: torch.Tensor = getattr(self.module, self.name)(x)
        return out


class GreedyPolicy(nn.Module):
    """``actions(net(observations(obs)))``: raw observations to env actions (module docstring)."""

    #: floats of recurrent state per row: none (`RecurrentGreedyPolicy` carries some)
    state_size: int = 0

    def __init__(self, observations: Observations, net: nn.Module, actions: Actions) -> None:
        super().__init__()
        self.observations, self.net, self.actions = observations, net, actions

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The greedy env actions of a batch of raw observations."""
        out: torch.Tensor = self.actions(self.net(self.observations(obs)))
        return out


class RecurrentGreedyPolicy(nn.Module):
    """A recurrent actor's greedy step (module docstring): ``(obs [B, *obs_shape], state [B,
    state_size] float32) -> (actions, new_state [B, state_size])``, computing
    ``actions(head(core(trunk(observations(obs)), state)))`` with one step of the LSTM or GRU
    ``core`` (`rxrl.rl.models.recurrent.step`). A zero state is an episode's start."""

    def __init__(self, observations: Observations, trunk: nn.Module, core: nn.LSTM | nn.GRU,
                 head: nn.Module, actions: Actions) -> None:
        super().__init__()
        self.observations, self.trunk, self.core, self.head, self.actions = (
            observations, trunk, core, head, actions)
        #: floats of state per row: an LSTM's ``h`` and ``c``, a GRU's ``h``
        self.state_size = core.hidden_size * (2 if isinstance(core, nn.LSTM) else 1)

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The greedy env actions of a batch of raw observations seen in ``state``, and the
        state after them."""
        hidden, new_state = step(self.core, self.trunk(self.observations(obs)), state)
        out: torch.Tensor = self.actions(self.head(hidden))
        return out, new_state


def actor_critic_greedy(policy: Any, observation_space: gym.Space[Any],
                        action_space: gym.Space[Any]) -> GreedyPolicy | RecurrentGreedyPolicy:
    """The greedy policy of an actor-critic (`rxrl.rl.models.policy.ActorCritic`): the argmax
    of its logits, or its Gaussian mean, from the policy trunk and head alone — and, when it
    has a recurrent core (``policy.core``), that core: a `RecurrentGreedyPolicy` whose state is
    the actor core's (``policy.config.core_state_size`` floats; with ``shared_trunk`` the one
    core's)."""
    normalizer = policy.normalizer
    stats = None
    if normalizer is not None and policy.config.normalize_obs:
        stats = (normalizer.obs_mean.detach().cpu().numpy(), normalizer.obs_var.detach().cpu().numpy(),
                 float(normalizer.obs_clip))
    torso = getattr(policy, "torso", None)  # a CNN policy's: it takes the images as they are
    observations = Observations(observation_space, stats, encode=torso is None)
    actions = Actions(action_space, argmax=isinstance(action_space, gym.spaces.Discrete))
    trunk = policy.pi_trunk if torso is None else nn.Sequential(torso, policy.pi_trunk)
    if policy.core is not None:
        return RecurrentGreedyPolicy(observations, trunk, policy.core, policy.pi_head, actions)
    return GreedyPolicy(observations, nn.Sequential(trunk, policy.pi_head), actions)


def q_network_greedy(q_net: nn.Module, observation_space: gym.Space[Any],
                     action_space: gym.Space[Any]) -> GreedyPolicy:
    """The greedy policy of a Q-network (it encodes observations itself): argmax Q."""
    return GreedyPolicy(Observations(observation_space, encode=False), q_net,
                        Actions(action_space, argmax=True))


def squashed_actor_greedy(actor: nn.Module, observation_space: gym.Space[Any],
                          action_space: gym.Space[Any]) -> GreedyPolicy:
    """The greedy policy of SAC's squashed Gaussian actor: its squashed mean."""
    return GreedyPolicy(Observations(observation_space, encode=False), Method(actor, "mean_action"),
                        Actions(action_space, argmax=False))


__all__ = ["Actions", "GreedyPolicy", "Method", "Observations", "RecurrentGreedyPolicy",
           "actor_critic_greedy", "q_network_greedy", "squashed_actor_greedy"]
