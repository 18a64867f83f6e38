"""SAC: the squashed Gaussian's density, the critics' targets, entropy tuning, the learner and
the worker."""

from __future__ import annotations

import copy
import math
from typing import cast

import numpy as np
import pytest
import torch
from torch.distributions import Normal, TransformedDistribution
from torch.distributions.transforms import AffineTransform, TanhTransform

from rxrl.envs.vector import EnvSpaces
from rxrl.rl import SACConfig
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.learners.sac import (
    SACLearner,
    SACRolloutWorker,
    SquashedGaussianActor,
    soft_targets,
    temperature_loss,
)
from rxrl.rl.replay.buffers import ReplayBuffer

SMALL = SACConfig(hidden_sizes=(32, 32))


def test_the_squashed_gaussian_density_is_torch_distributions_tanh_affine_normal() -> None:
    spaces = EnvSpaces.of("Pendulum-v1")  # actions in [-2, 2]
    actor = SquashedGaussianActor(spaces, SMALL, seed=0)
    obs = torch.as_tensor(np.random.default_rng(0).normal(size=(64, 3)), dtype=torch.float32)
    noise = torch.randn((64, 1), generator=torch.Generator().manual_seed(1))
    actions, logp = actor.sample(obs, noise)
    mean, log_std = actor._heads(obs)
    reference = TransformedDistribution(Normal(mean, log_std.exp()),
                                        [TanhTransform(), AffineTransform(0.0, 2.0)])
    inside = actions.abs() < 1.999  # the reference's atanh is inexact at the bounds
    expected = cast(torch.Tensor, reference.log_prob(actions)).sum(-1)  # type: ignore[no-untyped-call]
    assert inside.all() and torch.allclose(logp, expected, atol=1e-3)
    assert actions.abs().max() <= 2.0
    assert (log_std >= SMALL.log_std_min).all() and (log_std <= SMALL.log_std_max).all()
    assert torch.allclose(actor.mean_action(obs), 2.0 * torch.tanh(mean))


def test_soft_targets_by_hand() -> None:
    # r + gamma^n (1 - done) (min(q1, q2) - alpha logp)
    got = soft_targets(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([False, True, False]),
                       torch.tensor([1, 1, 2]), torch.tensor([10.0, 10.0, 4.0]),
                       torch.tensor([8.0, 12.0, 6.0]), torch.tensor([-1.0, 0.0, 2.0]),
                       alpha=0.5, gamma=0.9)
    assert torch.allclose(got, torch.tensor([1 + 0.9 * (8 + 0.5), 2.0, 3 + 0.81 * (4 - 1.0)]))


def test_the_temperature_loss_raises_alpha_below_the_target_entropy_and_lowers_it_above() -> None:
    log_alpha = torch.tensor(math.log(0.2), requires_grad=True)
    loss = temperature_loss(log_alpha, torch.tensor([1.0, 3.0]), target_entropy=-1.0)
    (grad,) = torch.autograd.grad(loss, [log_alpha])
    # entropy -E[logp] = -2 is below -1: descending the gradient raises alpha
    assert float(loss.detach()) == pytest.approx(-0.2 * (2.0 - 1.0)) and float(grad) < 0
    above = temperature_loss(log_alpha, torch.tensor([-3.0]), target_entropy=-1.0)
    assert float(torch.autograd.grad(above, [log_alpha])[0]) > 0


def replay_of(env: str, steps: int) -> ReplayBuffer:
    """A buffer of ``steps`` random-action transitions of ``env``."""
    buffer = ReplayBuffer(10_000, seed=0)
    buffer.add(SACRolloutWorker(env, 1, steps, random_steps=10**9, config=SMALL).sample())
    return buffer


@pytest.mark.parametrize(("target", "rises"), [(10.0, True), (-100.0, False)])
def test_entropy_tuning_moves_alpha_towards_the_target(target: float, rises: bool) -> None:
    buffer = replay_of("Pendulum-v1", 300)
    learner = SACLearner("Pendulum-v1", SACConfig(hidden_sizes=(32, 32), target_entropy=target,
                                                  init_alpha=0.5))
    alphas = [learner.train(buffer.sample(64))[0].alpha for _ in range(20)]
    assert (alphas[-1] > 0.5) == rises and (alphas[-1] < 0.5) == (not rises)
    fixed = SACLearner("Pendulum-v1", SACConfig(hidden_sizes=(32, 32), autotune=False, init_alpha=0.5))
    assert all(fixed.train(buffer.sample(64))[0].alpha == 0.5 for _ in range(3))


def test_critic_steps_fit_the_targets_and_the_targets_follow_by_polyak() -> None:
    buffer = replay_of("Pendulum-v1", 400)
    learner = SACLearner("Pendulum-v1", SACConfig(hidden_sizes=(32, 32), tau=0.1))
    before = [p.detach().clone() for p in learner.critic_target.parameters()]
    batch = buffer.sample(128)
    first, priorities = learner.train(batch)
    assert priorities.shape == (128,) and priorities.dtype == np.float32
    for target, old_target, online in zip(learner.critic_target.parameters(), before,
                                          learner.critic.parameters(), strict=True):
        assert torch.allclose(target, old_target + 0.1 * (online - old_target), atol=1e-6)
    losses = [learner.train(batch)[0].value_loss for _ in range(60)]
    assert losses[-1] < first.value_loss  # one fixed batch: the critics fit it


def test_a_restored_learner_continues_exactly() -> None:
    buffer = replay_of("Pendulum-v1", 300)
    learner = SACLearner("Pendulum-v1", SMALL, seed=2)
    for _ in range(5):
        learner.train(buffer.sample(32))
    restored = SACLearner("Pendulum-v1", SMALL, seed=9)
    restored.load_state_dict(copy.deepcopy(learner.state_dict()))
    batch = buffer.sample(32)
    ours, theirs = learner.train(batch)[0], restored.train(batch)[0]
    assert (ours.value_loss, ours.policy_loss, ours.alpha) == (theirs.value_loss, theirs.policy_loss,
                                                                theirs.alpha)
    assert restored.num_updates == 6


def test_a_worker_acts_at_random_first_then_with_the_learners_actor() -> None:
    worker = SACRolloutWorker("Pendulum-v1", num_envs=2, fragment_length=10, seed=0,
                              random_steps=20, config=SMALL)
    learner = SACLearner("Pendulum-v1", SMALL, seed=0)
    assert all(np.array_equal(v, learner.get_weights()[k]) for k, v in worker.get_weights().items())
    first = worker.sample()
    assert first.actions.shape == (20, 1) and first.actions.dtype == np.float32
    assert np.abs(first.actions).max() <= 2.0 and worker.env_steps == 20
    # the policy: its actions are the actor's samples (a deterministic function of the noise)
    second = worker.sample()
    with torch.no_grad():
        mean = worker.actor.mean_action(torch.as_tensor(second.obs, dtype=torch.float32)).numpy()
    assert np.abs(second.actions - mean).max() < 2.0 and np.abs(second.actions).max() <= 2.0
    batch = TransitionBatch.concat([first, second])
    assert len(batch) == 40 and batch.next_obs.shape == (40, 3)


def test_sac_refuses_unbounded_or_discrete_actions() -> None:
    with pytest.raises(ValueError, match="1-D Box action space"):
        SACLearner("CartPole-v1", SMALL)
