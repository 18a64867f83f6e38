"""MAML's pieces: rollouts of task envs, the inner adaptation step, the meta-update's learner.

The inner step is one policy-gradient step on a task's pre-adaptation episodes,
``theta' = theta - inner_lr * grad L_pg(theta)``, with advantages from a linear feature
baseline fit to the same episodes (Finn et al., 2017; Duan et al., 2016). A worker takes it
on a copy of the meta-policy, samples post-adaptation episodes with ``theta'`` and sends both
batches; the learner takes the meta-update from them: it recomputes ``theta'(theta)`` with
the same function, differentiably, and steps ``theta`` on a clipped surrogate of the
post-adaptation episodes under ``theta'(theta)`` (second-order MAML, the outer objective of
ProMP and RLlib's MAML). With ``meta_gradient=False`` the learner instead runs the same
surrogate on the pre-adaptation episodes under ``theta`` — PPO on the task mixture, the
baseline MAML is measured against.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import torch
from attrs import validators as v
from torch import nn

from rxrl.envs.navigation import TaskEnv
from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import PolicyConfig
from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.data.metrics import TrainMetrics
from rxrl.rl.learners.actor_critic import Device, Learner
from rxrl.rl.models.policy import ActorCritic, Weights, make_policy

Params = dict[str, torch.Tensor]


@attrs.frozen
class MAMLConfig:
    """The inner step and the meta-update.

    ``inner_lr``: the inner policy-gradient step size (plain SGD, one step); ``gamma`` the
    discount of the returns the baseline fits. The meta-update: ``num_epochs`` Adam steps
    (``lr``) per meta-batch on the clipped surrogate (``clip_coef``), over every task of the
    batch. ``meta_gradient=False``: PPO on the pre-adaptation episodes (the task mixture).
    """

    inner_lr: float = attrs.field(default=0.1, validator=v.gt(0.0))
    gamma: float = attrs.field(default=0.99, validator=[v.ge(0.0), v.le(1.0)])
    lr: float = attrs.field(default=1e-3, validator=v.gt(0.0))
    num_epochs: int = attrs.field(default=3, validator=v.ge(1))
    clip_coef: float = attrs.field(default=0.2, validator=v.gt(0.0))
    meta_gradient: bool = True
    adam_eps: float = attrs.field(default=1e-5, validator=v.gt(0.0))


@attrs.frozen(eq=False)
class TaskBatch:
    """One task's episodes before and after the inner step (``post`` sampled with ``theta'``)."""

    task: Any
    pre: SampleBatch
    post: SampleBatch


def adapted_names(policy: ActorCritic) -> list[str]:
    """The parameters the inner step adapts: the policy's (trunk, head, log-std), not the critic's."""
    return [n for n, _ in policy.named_parameters() if n.startswith(("pi_", "log_std"))]


class _Evaluate(nn.Module):
    """``policy.evaluate``'s log-probs as a forward, so that `torch.func.functional_call` can run
    the policy on parameters other than its own (``theta'``)."""

    def __init__(self, policy: ActorCritic) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.policy.evaluate(obs, actions)[0]


def log_probs(policy: ActorCritic, params: Mapping[str, torch.Tensor], obs: torch.Tensor,
              actions: torch.Tensor) -> torch.Tensor:
    """Log-probs of ``actions`` under ``policy`` with ``params`` in place of its own (by name)."""
    swapped = {f"policy.{k}": t for k, t in params.items()}
    out: torch.Tensor = torch.func.functional_call(_Evaluate(policy), swapped, (obs, actions), strict=False)
    return out


def inner_step(policy: ActorCritic, batch: SampleBatch, inner_lr: float, create_graph: bool = False,
               params: Mapping[str, torch.Tensor] | None = None) -> Params:
    """``theta'``: one policy-gradient step from ``params`` (default: the policy's own) on
    ``batch`` (its ``advantages``); differentiable in ``theta`` with ``create_graph``."""
    own = dict(policy.named_parameters())
    theta = {n: (params or own)[n] for n in adapted_names(policy)}
    obs, actions = torch.as_tensor(batch.obs), torch.as_tensor(batch.actions)
    advantages = torch.as_tensor(batch.advantages)
    loss = -(log_probs(policy, theta, obs, actions) * advantages).mean()
    grads = torch.autograd.grad(loss, list(theta.values()), create_graph=create_graph)
    return {n: t - inner_lr * g for (n, t), g in zip(theta.items(), grads, strict=True)}


def linear_baseline_advantages(obs: npt.NDArray[np.float32], rewards: npt.NDArray[np.float32],
                               gamma: float) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Advantages (standardized) and returns of ``[N, T]`` episodes, against a linear feature
    baseline fit to the returns: features ``o, o^2, t, t^2, t^3, 1`` (Duan et al., 2016)."""
    n, horizon = rewards.shape
    returns = np.zeros_like(rewards, dtype=np.float64)
    running = np.zeros(n)
    for t in range(horizon - 1, -1, -1):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    o = obs.reshape(n * horizon, -1).astype(np.float64)
    al = np.tile(np.arange(horizon) / 100.0, n)[:, None]
    features = np.concatenate([o, o**2, al, al**2, al**3, np.ones_like(al)], axis=1)
    y = returns.ravel()
    reg = 1e-5
    for _ in range(5):  # as rllab: raise the ridge until the solve is finite
        coef = np.linalg.solve(features.T @ features + reg * np.eye(features.shape[1]), features.T @ y)
        if np.isfinite(coef).all():
            break
        reg *= 10
    adv = y - features @ coef
    adv = (adv - adv.mean()) / max(float(adv.std()), 1e-8)
    return adv.astype(np.float32), y.astype(np.float32)


def rollout(policy: ActorCritic, env: TaskEnv, gamma: float) -> SampleBatch:
    """``env.num_envs`` episodes of the current task with ``policy`` (sampled actions), env-major,
    with linear-baseline advantages (``values`` are the baseline's complement: unused)."""
    obs = env.reset()
    steps: list[tuple[Any, ...]] = []
    space = env.action_space
    for _ in range(env.horizon):
        actions, logp, _ = policy.act(obs)
        low, high = getattr(space, "low", None), getattr(space, "high", None)
        moved = actions if low is None else np.clip(actions, low, high)
        next_obs, rewards, terminated, truncated = env.step(moved)
        steps.append((obs, actions, logp, rewards, terminated, truncated))
        obs = next_obs
    o, a, lp, r, te, tr = (np.stack(c, axis=1) for c in zip(*steps, strict=True))  # [N, T, ...]
    n, horizon = r.shape
    advantages, returns = linear_baseline_advantages(o, r, gamma)
    flat = n * horizon
    zeros = np.zeros(flat, np.float32)
    return SampleBatch(obs=o.reshape(flat, -1), actions=a.reshape(flat, *a.shape[2:]),
                       rewards=r.reshape(flat).astype(np.float32), terminateds=te.reshape(flat),
                       truncateds=tr.reshape(flat), logp=lp.reshape(flat).astype(np.float32), values=zeros,
                       advantages=advantages, value_targets=returns,
                       episode_returns=r.sum(axis=1).astype(np.float32),
                       episode_lengths=np.full(n, horizon, np.int64))


def with_params(policy: ActorCritic, params: Mapping[str, torch.Tensor]) -> Weights:
    """The policy's weights with ``params`` in place of its own (numpy, for ``set_weights``)."""
    weights = policy.get_weights()
    weights.update({k: t.detach().cpu().numpy().copy() for k, t in params.items()})
    return weights


class MAMLWorker:
    """Adapts the meta-policy to tasks of its own, shard-locally, and samples before and after.

    Each `adapt_and_sample` draws ``tasks_per_worker`` tasks from ``env`` (a `TaskEnv`
    seeded from ``(seed, worker_index)``, so workers see different tasks); per task: the
    meta-policy's episodes, the inner step on a copy (`inner_step`), the adapted policy's
    episodes. Initial weights from ``seed`` (as the learner's).
    """

    def __init__(self, env: TaskEnv, config: MAMLConfig, tasks_per_worker: int = 10,
                 policy: PolicyConfig | None = None, seed: int = 0, worker_index: int = 0,
                 torch_threads: int | None = 1) -> None:
        if torch_threads is not None:
            torch.set_num_threads(torch_threads)
        self.env, self.config, self.tasks_per_worker = env, config, tasks_per_worker
        self.policy = make_policy(env.observation_space, env.action_space, policy, seed)
        sampling = np.random.SeedSequence([seed, worker_index]).generate_state(1)[0]
        self.policy.seed_sampling(int(sampling))
        self.adapted = copy.deepcopy(self.policy)

    def adapt(self, task: Any) -> TaskBatch:
        """One task: episodes with the meta-policy, the inner step, episodes after it."""
        self.env.set_task(task)
        pre = rollout(self.policy, self.env, self.config.gamma)
        theta = inner_step(self.policy, pre, self.config.inner_lr)
        self.adapted.set_weights(with_params(self.policy, theta))
        self.adapted.sampler = self.policy.sampler  # one sampling stream per worker
        return TaskBatch(task, pre, rollout(self.adapted, self.env, self.config.gamma))

    def adapt_and_sample(self) -> list[TaskBatch]:
        """``tasks_per_worker`` new tasks, each adapted to (see the class docstring)."""
        return [self.adapt(task) for task in self.env.sample_tasks(self.tasks_per_worker)]

    def get_weights(self) -> Weights:
        """The meta-policy's weights."""
        return self.policy.get_weights()

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Load meta-policy weights (as from `MAMLLearner.get_weights`)."""
        self.policy.set_weights(weights)


#: the `TrainMetrics` fields the meta-update does not compute (no value function, no entropy term)
MAML_UNREPORTED = frozenset({"value_loss", "entropy", "explained_variance"})


class MAMLLearner(Learner):
    """The meta-policy and its Adam optimizer; `meta_update` from the workers' task batches."""

    def __init__(self, env: str | EnvSpaces, config: MAMLConfig | None = None,
                 policy: PolicyConfig | None = None, seed: int = 0,
                 env_kwargs: Mapping[str, Any] | None = None,
                 device: Device = "cpu") -> None:
        self.config = config = config or MAMLConfig()
        super().__init__(env, policy, seed, config.lr, config.adam_eps, env_kwargs, device)

    def surrogate(self, tasks: Sequence[TaskBatch]) -> tuple[torch.Tensor, float, float]:
        """The clipped surrogate loss over ``tasks`` (post-adaptation under ``theta'(theta)``, or
        pre-adaptation under ``theta`` without the meta-gradient); its mean KL and clip share."""
        c = self.config
        losses, kls, clipped = [], [], []
        for tb in tasks:
            if c.meta_gradient:
                params: Params = inner_step(self.policy, tb.pre, c.inner_lr, create_graph=True)
                batch = tb.post
            else:
                params, batch = {n: p for n, p in self.policy.named_parameters()
                                 if n in adapted_names(self.policy)}, tb.pre
            logp = log_probs(self.policy, params, torch.as_tensor(batch.obs), torch.as_tensor(batch.actions))
            log_ratio = logp - torch.as_tensor(batch.logp)
            ratio = log_ratio.exp()
            adv = torch.as_tensor(batch.advantages)
            loss = -torch.min(ratio * adv, ratio.clamp(1 - c.clip_coef, 1 + c.clip_coef) * adv).mean()
            losses.append(loss)
            kls.append(float(((ratio - 1) - log_ratio).detach().mean()))
            clipped.append(float(((ratio - 1).abs() > c.clip_coef).float().detach().mean()))
        return torch.stack(losses).mean(), float(np.mean(kls)), float(np.mean(clipped))

    def meta_update(self, tasks: Sequence[TaskBatch]) -> TrainMetrics:
        """``num_epochs`` Adam steps on the surrogate over every task (see the module docstring)."""
        start = time.perf_counter()
        losses, norms = [], []
        kl = clip = 0.0
        for _ in range(self.config.num_epochs):
            loss, kl, clip = self.surrogate(tasks)
            norms.append(self._step(loss, None))
            losses.append(float(loss.detach()))
        rows = sum(len(t.pre) + len(t.post) for t in tasks)
        return TrainMetrics(policy_loss=float(np.mean(losses)), value_loss=0.0, entropy=0.0, approx_kl=kl,
                            clip_fraction=clip, grad_norm=float(np.mean(norms)),
                            explained_variance=float("nan"),
                            env_steps_trained=rows, num_updates=self.config.num_epochs,
                            learner_time_s=time.perf_counter() - start,
                            unreported=MAML_UNREPORTED)


def adaptation_returns(weights: Mapping[str, npt.NDArray[np.generic]], env: TaskEnv, tasks: Sequence[Any],
                       config: MAMLConfig, policy: PolicyConfig | None = None, seed: int = 0
                       ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per task, the mean episode return before and after one inner step from ``weights``
    (``env.num_envs`` sampled episodes each): how a meta-policy is evaluated."""
    worker = MAMLWorker(env, config, len(tasks), policy, seed=seed, worker_index=10_007, torch_threads=None)
    worker.set_weights(weights)
    before, after = [], []
    for task in tasks:
        tb = worker.adapt(task)
        before.append(float(tb.pre.episode_returns.mean()))
        after.append(float(tb.post.episode_returns.mean()))
    return np.asarray(before), np.asarray(after)


__all__ = ["MAML_UNREPORTED", "MAMLConfig", "MAMLLearner", "MAMLWorker", "Params", "TaskBatch",
           "adaptation_returns",
           "adapted_names", "inner_step", "linear_baseline_advantages", "log_probs", "rollout", "with_params"]
