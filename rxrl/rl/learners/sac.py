"""Soft actor-critic: a squashed Gaussian actor, twin Q-critics, the SAC losses, a learner, a worker.

The learner keeps the interface the replay plans drive (`DQNLearner`'s): `train(batch)`
takes one step on a replayed `TransitionBatch` and returns `(TrainMetrics, priorities)`,
`get_weights` the actor's weights, which is what `SACRolloutWorker.set_weights` takes.
Networks use PyTorch's default `nn.Linear` init, drawn from generators seeded with `seed`,
so a worker and a learner with the same seed start from the same actor.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from typing import Any

import attrs
import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import SACConfig
from rxrl.rl.data.metrics import TrainMetrics
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.models.policy import Weights
from rxrl.rl.models.qnet import _linear
from rxrl.rl.objectives.losses import clip_gradients
from rxrl.rl.workers.qworker import TransitionWorker

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def _mlp(n_in: int, sizes: tuple[int, ...], n_out: int, generator: torch.Generator) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in sizes:
        layers += [_linear(n_in, width, generator), nn.ReLU()]
        n_in = width
    return nn.Sequential(*layers, _linear(n_in, n_out, generator))


def _box(space: gym.Space[Any], what: str) -> gym.spaces.Box:
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise ValueError(f"SAC needs a 1-D Box {what} space, got {space!r}")
    if what == "action" and not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise ValueError(f"SAC needs a bounded action space (it squashes into it), got {space!r}")
    return space


class SquashedGaussianActor(nn.Module):
    """`a = bias + scale * tanh(u)`, `u ~ N(mu(s), sigma(s))`: actions inside the Box bounds.

    The log-std head is squashed into `[log_std_min, log_std_max]` (CleanRL's form).
    `sample` is differentiable (reparameterized) and returns the log-density of the
    squashed action; `mean_action` is the deterministic policy (evaluation).
    """

    def __init__(self, spaces: EnvSpaces, config: SACConfig, seed: int) -> None:
        super().__init__()
        obs, action = _box(spaces.observation, "observation"), _box(spaces.action, "action")
        init = torch.Generator().manual_seed(seed)
        act_dim = int(action.shape[0])
        self.trunk = _mlp(int(obs.shape[0]), config.hidden_sizes[:-1], config.hidden_sizes[-1], init)
        self.mean = _linear(config.hidden_sizes[-1], act_dim, init)
        self.log_std = _linear(config.hidden_sizes[-1], act_dim, init)
        self.log_std_min, self.log_std_max = config.log_std_min, config.log_std_max
        self.register_buffer("scale", torch.as_tensor((action.high - action.low) / 2.0, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor((action.high + action.low) / 2.0, dtype=torch.float32))

    scale: torch.Tensor
    bias: torch.Tensor

    def _heads(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.relu(self.trunk(obs.float()))
        log_std = torch.tanh(self.log_std(hidden))
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1)
        return self.mean(hidden), log_std

    def sample(self, obs: torch.Tensor,
               noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions `[B, act_dim]` and their log-densities `[B]` (`noise`: standard normal
        draws, default fresh ones)."""
        mean, log_std = self._heads(obs)
        eps = torch.randn_like(mean) if noise is None else noise
        u = mean + log_std.exp() * eps
        gauss = (-0.5 * eps.square() - log_std - _LOG_SQRT_2PI).sum(-1)
        # log |d tanh(u)/du| = log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stably
        squash = (2.0 * (_LOG_2 - u - nn.functional.softplus(-2.0 * u))).sum(-1)
        logp = gauss - squash - torch.log(self.scale).sum()
        return self.bias + self.scale * torch.tanh(u), logp

    def mean_action(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action: the squashed mean."""
        return self.bias + self.scale * torch.tanh(self._heads(obs)[0])

    def act(self, obs: npt.NDArray[Any], deterministic: bool = False
            ) -> tuple[npt.NDArray[np.float32], None, None]:
        """numpy in and out, no autograd: `(actions, None, None)` (as ``rxrl eval`` calls it)."""
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(obs, dtype=np.float32))
            actions = self.mean_action(x) if deterministic else self.sample(x)[0]
        return actions.numpy(), None, None


class TwinQ(nn.Module):
    """Two Q-networks `Q_i(s, a)` on the concatenated observation and action."""

    def __init__(self, spaces: EnvSpaces, config: SACConfig, seed: int) -> None:
        super().__init__()
        obs, action = _box(spaces.observation, "observation"), _box(spaces.action, "action")
        init = torch.Generator().manual_seed(seed + 1)
        n_in = int(obs.shape[0]) + int(action.shape[0])
        self.q1 = _mlp(n_in, config.hidden_sizes, 1, init)
        self.q2 = _mlp(n_in, config.hidden_sizes, 1, init)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`(Q_1, Q_2)`, each `[B]`."""
        x = torch.cat([obs.float(), actions.float()], dim=-1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


def soft_targets(rewards: torch.Tensor, terminateds: torch.Tensor, n_steps: torch.Tensor,
                 q1_next: torch.Tensor, q2_next: torch.Tensor, next_logp: torch.Tensor,
                 alpha: float, gamma: float) -> torch.Tensor:
    """The critics' targets `r + gamma^n (1 - terminated) (min(Q'_1, Q'_2) - alpha logp')`, `[B]`
    (`Q'` the target critics at `(s', a')`, `logp'` the policy's log-density of `a'`)."""
    soft = torch.min(q1_next, q2_next) - alpha * next_logp
    discount = torch.pow(gamma, n_steps.to(soft.dtype)) * (~terminateds).to(soft.dtype)
    return rewards + discount * soft


def temperature_loss(log_alpha: torch.Tensor, logp: torch.Tensor, target_entropy: float) -> torch.Tensor:
    """The automatic entropy tuning loss `-E[alpha (logp + target_entropy)]` (CleanRL's form):
    its gradient raises alpha while the policy's entropy `-E[logp]` is below the target and
    lowers it above."""
    return -(log_alpha.exp() * (logp + target_entropy)).mean()


#: the `TrainMetrics` fields a SAC step does not compute (no KL, no clipping)
SAC_UNREPORTED = frozenset({"approx_kl", "clip_fraction"})


@attrs.frozen
class SACMetrics(TrainMetrics):
    """`TrainMetrics` of SAC steps: `value_loss` the critics' loss, `policy_loss` the actor's,
    `entropy` the mean of `-log pi(a|s)` on the batch, `alpha` the temperature after the step,
    `q_mean` the mean of `Q_1(s, a)` on replayed pairs. `approx_kl` and `clip_fraction` do not
    apply (0, `unreported`)."""

    alpha: float
    q_mean: float


class SACLearner:
    """Trains the actor, the twin critics and the temperature on replayed batches (`SACConfig`).

    `train(batch)` takes one step of each (critics, then actor, then alpha, then the targets'
    Polyak step) and returns `(SACMetrics, priorities)` (`|Q_1 - target|` per row, for a
    prioritized replay; importance `weights` of a batch scale the critics' squared errors).
    Rewards are folded n-step returns: bootstraps use `gamma ** n_steps`.
    """

    def __init__(
        self,
        env: str | EnvSpaces,
        config: SACConfig | None = None,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = c = config or SACConfig()
        self.spaces = env if isinstance(env, EnvSpaces) else EnvSpaces.of(env, env_kwargs)
        self.actor = SquashedGaussianActor(self.spaces, c, seed)
        self.critic = TwinQ(self.spaces, c, seed)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        act_dim = int(np.prod(self.spaces.action.shape or ()))
        self.target_entropy = -float(act_dim) if c.target_entropy is None else c.target_entropy
        self.log_alpha = torch.tensor(math.log(c.init_alpha), requires_grad=c.autotune)
        self.actor_optimizer = _adam(self.actor.parameters(), c.actor_lr, c.adam_eps)
        self.critic_optimizer = _adam(self.critic.parameters(), c.lr, c.adam_eps)
        self.alpha_optimizer = _adam([self.log_alpha], c.alpha_lr, c.adam_eps)
        self._targets: list[torch.Tensor] = list(self.critic_target.parameters())
        self._online: list[torch.Tensor] = list(self.critic.parameters())
        self.generator = torch.Generator().manual_seed(seed + 0x5AC)
        self.num_updates = 0

    @property
    def optimizer(self) -> torch.optim.Adam:
        """The critics' optimizer (what a learning-rate schedule sets)."""
        return self.critic_optimizer

    def train(self, batch: TransitionBatch) -> tuple[SACMetrics, npt.NDArray[np.float32]]:
        """One SAC step on `batch`; the metrics and the rows' new priorities."""
        start, c = time.perf_counter(), self.config
        if len(batch) == 0:
            raise ValueError("SACLearner.train: got an empty batch")
        t = torch.as_tensor
        obs, next_obs, actions = t(batch.obs).float(), t(batch.next_obs).float(), t(batch.actions).float()
        alpha = float(self.log_alpha.detach().exp())
        with torch.no_grad():
            next_actions, next_logp = self.actor.sample(next_obs, self._noise(len(batch)))
            q1_next, q2_next = self.critic_target(next_obs, next_actions)
            targets = soft_targets(t(batch.rewards), t(batch.terminateds), t(batch.n_steps),
                                   q1_next, q2_next, next_logp, alpha, c.gamma)
        q1, q2 = self.critic(obs, actions)
        errors = (q1 - targets).square() + (q2 - targets).square()
        weights = None if batch.weights is None else t(batch.weights)
        critic_loss = 0.5 * (errors.mean() if weights is None else (weights * errors).mean())
        critic_norm = self._step(self.critic_optimizer, critic_loss, self.critic)

        self.critic.requires_grad_(False)  # the actor's loss moves only the actor
        pi_actions, logp = self.actor.sample(obs, self._noise(len(batch)))
        q_pi = torch.min(*self.critic(obs, pi_actions))
        actor_loss = (alpha * logp - q_pi).mean()
        actor_norm = self._step(self.actor_optimizer, actor_loss, self.actor)
        self.critic.requires_grad_(True)

        if c.autotune:
            alpha_loss = temperature_loss(self.log_alpha, logp.detach(), self.target_entropy)
            self.alpha_optimizer.zero_grad(set_to_none=True)
            torch.autograd.backward(alpha_loss)
            self.alpha_optimizer.step()
        with torch.no_grad():  # Polyak: target <- target + tau (online - target)
            torch._foreach_lerp_(self._targets, self._online, c.tau)
        self.num_updates += 1
        var = float(targets.var()) if len(batch) > 1 else 0.0
        explained = float("nan") if var == 0.0 else 1.0 - float((targets - q1.detach()).var()) / var
        metrics = SACMetrics(
            policy_loss=float(actor_loss.detach()), value_loss=float(critic_loss.detach()),
            entropy=float(-logp.detach().mean()), approx_kl=0.0, clip_fraction=0.0,
            grad_norm=0.5 * (critic_norm + actor_norm), explained_variance=explained,
            env_steps_trained=len(batch), num_updates=1, learner_time_s=time.perf_counter() - start,
            alpha=float(self.log_alpha.detach().exp()), q_mean=float(q1.detach().mean()),
            unreported=SAC_UNREPORTED)
        return metrics, (q1.detach() - targets).abs().numpy().astype(np.float32, copy=False)

    def get_weights(self) -> Weights:
        """The actor's weights (what `SACRolloutWorker.set_weights` takes)."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.actor.state_dict().items()}

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Overwrite the actor's weights (critics and optimizers are kept)."""
        self.actor.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in weights.items()})

    def state_dict(self) -> dict[str, Any]:
        """A deep copy of everything needed to resume: the actor ("policy", as every learner's
        checkpoint names it), critics and their targets, the temperature, the optimizers, the
        noise generator and the update count."""
        return copy.deepcopy({
            "policy": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "optimizer": self.critic_optimizer.state_dict(),  # the critics' (every learner has one)
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "num_updates": self.num_updates,
        })

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()`; training then continues exactly as it would have."""
        self.actor.load_state_dict(state["policy"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.generator.set_state(state["generator"])
        self.num_updates = int(state["num_updates"])

    def _noise(self, rows: int) -> torch.Tensor:
        act_dim = int(self.actor.scale.shape[0])
        return torch.randn((rows, act_dim), generator=self.generator)

    def _step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, module: nn.Module) -> float:
        """One step of `optimizer` on `loss`; the pre-clipping gradient norm of `module`."""
        optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        norm = clip_gradients(module.parameters(), self.config.max_grad_norm)
        optimizer.step()
        return norm


def _adam(params: Any, lr: float, eps: float) -> torch.optim.Adam:
    """Adam, fused where torch supports it (CPU from torch 2.4)."""
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, eps=eps, fused=True)
    except RuntimeError:
        return torch.optim.Adam(params, lr=lr, eps=eps)


class SACRolloutWorker(TransitionWorker):
    """Samples transitions for SAC (`TransitionWorker`): uniformly random actions for the
    first `random_steps` env steps of this worker, then the actor's samples.

    Actions are stored as the env takes them (inside the Box bounds), float32 `[B, act_dim]`.
    The actor's initial weights come from `seed` alone (equal to a `SACLearner`'s); its
    sampling noise from a generator seeded with `(seed, worker_index)`. ``episode_metrics``:
    as `TransitionWorker`'s.
    """

    def __init__(
        self,
        env: str,
        num_envs: int = 1,
        fragment_length: int = 1,
        seed: int = 0,
        worker_index: int = 0,
        random_steps: int = 0,
        config: SACConfig | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        vectorization_mode: str | None = None,
        vector_kwargs: Mapping[str, Any] | None = None,
        torch_threads: int | None = 1,
        episode_metrics: str | None = None,
    ) -> None:
        config = config or SACConfig()
        super().__init__(env, num_envs, fragment_length, seed, worker_index, config.n_step,
                         config.gamma, env_kwargs, vectorization_mode, vector_kwargs, torch_threads,
                         episode_metrics)
        self.random_steps = random_steps
        self.actor = SquashedGaussianActor(self.spaces, config, seed)
        self.actor.requires_grad_(False)
        self._action_space = _box(self.spaces.action, "action")
        self._noise = torch.Generator().manual_seed(int(self.rng.integers(2**62)))

    def sample(self) -> TransitionBatch:
        """Step the envs `fragment_length` times (random, then policy actions); the transitions."""
        batch = self.step_fragment()
        return attrs.evolve(batch, actions=batch.actions.astype(np.float32, copy=False))

    def get_weights(self) -> Weights:
        """The actor's weights as numpy arrays."""
        return {k: v.detach().numpy().copy() for k, v in self.actor.state_dict().items()}

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Load actor weights (as from `SACLearner.get_weights`)."""
        self.actor.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in weights.items()})

    def _act(self, obs: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        space = self._action_space
        if self.env_steps < self.random_steps:
            return self.rng.uniform(space.low, space.high, (self.num_envs, *space.shape)).astype(np.float32)
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(obs, dtype=np.float32))
            noise = torch.randn((self.num_envs, *space.shape), generator=self._noise)
            actions: npt.NDArray[np.float32] = self.actor.sample(x, noise)[0].numpy()
        return actions


__all__ = ["SAC_UNREPORTED", "SACLearner", "SACMetrics", "SACRolloutWorker", "SquashedGaussianActor", "TwinQ",
           "soft_targets", "temperature_loss"]
