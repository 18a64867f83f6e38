"""Learners and losses: PPO/A2C updates, A3C gradient application, checkpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import A2CConfig, PPOConfig
from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.learners.actor_critic import A2CLearner, PPOLearner
from rxrl.rl.objectives.losses import TensorBatch, ppo_loss
from rxrl.rl.workers.rollout import RolloutWorker


@pytest.fixture(scope="module")
def batch() -> SampleBatch:
    return RolloutWorker("CartPole-v1", num_envs=4, fragment_length=64, seed=0).sample()


def weights_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray], atol: float = 0.0) -> bool:
    return a.keys() == b.keys() and all(np.allclose(a[k], b[k], rtol=0, atol=atol) for k in a)


def test_ppo_train_runs_epochs_of_minibatches_and_reports(batch: SampleBatch) -> None:
    learner = PPOLearner("CartPole-v1", PPOConfig(num_epochs=3, minibatch_size=100), seed=0)
    before = learner.get_weights()
    m = learner.train(batch)
    assert m.num_updates == 3 * math.ceil(256 / 100) == learner.num_updates
    assert m.env_steps_trained == 256
    assert m.grad_norm > 0 and m.entropy > 0 and m.value_loss > 0 and m.learner_time_s > 0
    assert 0 <= m.clip_fraction <= 1 and math.isfinite(m.approx_kl)
    assert not weights_equal(before, learner.get_weights())


def test_ppo_target_kl_stops_after_the_first_epoch(batch: SampleBatch) -> None:
    learner = PPOLearner("CartPole-v1", PPOConfig(num_epochs=10, minibatch_size=64, lr=1e-2, target_kl=1e-9))
    assert learner.train(batch).num_updates == 4


def test_on_policy_batch_has_unit_ratios(batch: SampleBatch) -> None:
    """A batch sampled with the learner's own weights: KL 0, nothing clipped."""
    learner = PPOLearner("CartPole-v1", seed=0)  # same seed as the worker: same weights
    c = learner.config
    terms = ppo_loss(
        learner.policy,
        TensorBatch.from_batch(batch),
        clip_coef=c.clip_coef,
        clip_vloss=True,
        vf_coef=c.vf_coef,
        ent_coef=c.ent_coef,
        normalize_advantages=True,
    )
    assert abs(terms.approx_kl) < 1e-6 and terms.clip_fraction == 0.0


@pytest.mark.parametrize("clip_vloss", [True, False])
def test_ppo_loss_matches_the_cleanrl_formula(batch: SampleBatch, clip_vloss: bool) -> None:
    learner = PPOLearner("CartPole-v1", seed=7)  # a different policy: ratios far from 1
    b = TensorBatch.from_batch(batch)
    terms = ppo_loss(
        learner.policy,
        b,
        clip_coef=0.1,
        clip_vloss=clip_vloss,
        vf_coef=0.7,
        ent_coef=0.05,
        normalize_advantages=False,
    )
    with torch.no_grad():
        logp, ent, v = (x.numpy() for x in learner.policy.evaluate(b.obs, b.actions))
    ratio = np.exp(logp - batch.logp)
    adv, ret, old_v = batch.advantages, batch.value_targets, batch.values
    pg = np.mean(np.maximum(-adv * ratio, -adv * np.clip(ratio, 0.9, 1.1)))
    v_err = (v - ret) ** 2
    if clip_vloss:
        v_err = np.maximum(v_err, (old_v + np.clip(v - old_v, -0.1, 0.1) - ret) ** 2)
    expected = pg - 0.05 * ent.mean() + 0.7 * 0.5 * v_err.mean()
    assert terms.loss.item() == pytest.approx(expected, rel=1e-4)
    assert terms.policy_loss == pytest.approx(pg, rel=1e-4)
    assert terms.clip_fraction == pytest.approx(np.mean(np.abs(ratio - 1) > 0.1), abs=1e-6)


def test_a3c_apply_gradients_equals_a2c_train(batch: SampleBatch) -> None:
    """Applying a worker's gradients is the same optimizer step as training on the batch."""
    config = A2CConfig(max_grad_norm=0.1)
    trained, applied = A2CLearner("CartPole-v1", config, seed=0), A2CLearner("CartPole-v1", config, seed=0)
    worker = RolloutWorker("CartPole-v1", num_envs=2, fragment_length=8, seed=0)
    worker.set_weights(applied.get_weights())
    grads = worker.compute_gradients(batch, config)
    assert grads.arrays.keys() == dict(applied.policy.named_parameters()).keys()
    assert grads.metrics.grad_norm > 0.1  # so the learner's clipping matters
    m = trained.train(batch)
    new_weights = applied.apply_gradients(grads)
    assert weights_equal(new_weights, trained.get_weights(), atol=1e-6)
    assert m.grad_norm == pytest.approx(grads.metrics.grad_norm, rel=1e-5)
    assert not weights_equal(new_weights, worker.get_weights())


def test_apply_gradients_rejects_foreign_parameters(batch: SampleBatch) -> None:
    learner = A2CLearner("CartPole-v1")
    grads = RolloutWorker("CartPole-v1", 2, 8).compute_gradients(batch)
    del grads.arrays["vf_head.bias"]
    with pytest.raises(ValueError, match=r"missing \['vf_head.bias'\]"):
        learner.apply_gradients(grads)


def test_checkpoint_resumes_training_exactly(batch: SampleBatch) -> None:
    learner = PPOLearner(EnvSpaces.of("CartPole-v1"), PPOConfig(minibatch_size=64), seed=1)
    learner.train(batch)
    state = learner.state_dict()
    first = learner.train(batch)
    weights = learner.get_weights()
    fresh = PPOLearner("CartPole-v1", PPOConfig(minibatch_size=64), seed=99)
    fresh.load_state_dict(state)
    again = fresh.train(batch)
    assert weights_equal(weights, fresh.get_weights())
    assert again.policy_loss == first.policy_loss and fresh.num_updates == learner.num_updates


def test_learner_set_weights_and_empty_batch(batch: SampleBatch) -> None:
    a, b = PPOLearner("CartPole-v1", seed=0), A2CLearner("CartPole-v1", seed=5)
    a.set_weights(b.get_weights())
    assert weights_equal(a.get_weights(), b.get_weights())
    with pytest.raises(ValueError, match="empty batch"):
        a.train(batch.slice(0, 0))
    with pytest.raises(ValueError, match="empty batch"):
        b.train(batch.slice(0, 0))


def test_configs_validate() -> None:
    with pytest.raises(ValueError, match="lr"):
        PPOConfig(lr=0.0)
    with pytest.raises(ValueError, match="num_epochs"):
        PPOConfig(num_epochs=0)
    with pytest.raises(ValueError, match="max_grad_norm must be None or > 0"):
        A2CConfig(max_grad_norm=0.0)
    assert PPOConfig(max_grad_norm=None, target_kl=0.02).target_kl == 0.02


def test_a2c_on_box_actions() -> None:
    worker = RolloutWorker("Pendulum-v1", num_envs=2, fragment_length=16)
    learner = A2CLearner("Pendulum-v1")
    m = learner.train(worker.sample())
    assert m.num_updates == 1 and math.isfinite(m.policy_loss)
    assert "log_std" in learner.get_weights()
