"""Running normalization statistics: the merge law, workers, learners, plans and checkpoints."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rxrl
from rxrl import ops
from rxrl.algos.on_policy import ppo
from rxrl.envs.vector import EnvSpaces
from rxrl.rl import Metrics, PolicyConfig, PPOConfig, PPOLearner, RolloutWorker, make_policy
from rxrl.rl.data.running_stats import NormStats, ReturnTracker, RunningMoments
from rxrl.rl.learners.actor_critic import Learner
from rxrl.rl.models.normalizer import Normalizer

NORMALIZING = PolicyConfig(normalize_obs=True, scale_rewards=True)
rows = hnp.arrays(np.float64, st.tuples(st.integers(0, 12), st.just(3)),
                  elements=st.floats(-1e3, 1e3, allow_nan=False))


@given(st.lists(rows, min_size=1, max_size=6))
def test_merging_per_worker_moments_gives_the_moments_of_the_union(parts: list[Any]) -> None:
    """Law: for any split of a data set into parts (empty ones included), merging the parts'
    moments left to right gives the count, mean and variance of the whole set."""
    merged = RunningMoments.merge_all([RunningMoments.of(p) for p in parts])
    whole = np.concatenate(parts)
    assert merged is not None and merged.count == len(whole)
    if len(whole):
        assert np.allclose(merged.mean, whole.mean(axis=0), atol=1e-6)
        assert np.allclose(merged.var, whole.var(axis=0), rtol=1e-6, atol=1e-4)


@given(st.lists(rows, min_size=1, max_size=5))
def test_a_normalizer_fed_batch_after_batch_holds_the_moments_of_all_of_them(parts: list[Any]) -> None:
    """Law: `Normalizer.merge` of each batch's contribution, in turn, leaves the buffers equal
    to the moments of all observations (and all returns) merged; no data: the identity."""
    norm = Normalizer(3, obs_clip=10.0, reward_clip=10.0)
    for p in parts:
        norm.merge(NormStats(RunningMoments.of(p), RunningMoments.of(p[:, 0])))
    whole = np.concatenate(parts)
    assert float(norm.obs_count) == len(whole) == float(norm.return_count)
    if len(whole):
        assert np.allclose(norm.obs_mean.numpy(), whole.mean(axis=0), atol=1e-6)
        assert np.allclose(norm.obs_var.numpy(), whole.var(axis=0), rtol=1e-6, atol=1e-4)
        assert np.isclose(float(norm.return_var), whole[:, 0].var(), rtol=1e-6, atol=1e-4)
    else:
        assert norm.obs_var.tolist() == [1.0, 1.0, 1.0] and float(norm.return_var) == 1.0


def test_the_numpy_and_torch_paths_normalize_alike_and_clip() -> None:
    spaces = EnvSpaces.of("Pendulum-v1")
    policy = make_policy(spaces.observation, spaces.action, NORMALIZING, seed=3)
    assert policy.normalizer is not None
    data = np.random.default_rng(0).normal([5.0, -2.0, 40.0], [0.1, 3.0, 9.0], (500, 3))
    policy.normalizer.merge(NormStats(RunningMoments.of(data)))
    obs = np.concatenate([data[:8], [[5.0, -2.0, 1e6]]]).astype(np.float32)
    normalized = policy.normalizer.obs_np(obs)
    assert np.abs(normalized[:8]).max() < 5 and normalized[8, 2] == 10.0  # clipped to obs_clip
    assert np.allclose(normalized, policy.normalizer.obs_torch(torch.as_tensor(obs)).numpy(), atol=1e-5)
    actions, logp, values = policy.act(obs, deterministic=True)
    t_logp, _, t_values = policy.evaluate(torch.as_tensor(obs), torch.as_tensor(actions))
    assert np.allclose(values, t_values.detach().numpy(), atol=1e-4)
    assert np.allclose(logp, t_logp.detach().numpy(), atol=1e-4)
    assert {"normalizer.obs_mean", "normalizer.return_var"} <= set(policy.get_weights())
    plain = make_policy(spaces.observation, spaces.action, PolicyConfig(), seed=3)
    assert plain.normalizer is None and not any("normalizer" in k for k in plain.state_dict())


def test_a_worker_scales_rewards_by_the_return_std_it_was_sent_and_reports_raw_moments() -> None:
    worker = RolloutWorker("Pendulum-v1", num_envs=2, fragment_length=50, seed=1, policy=NORMALIZING)
    first = worker.sample()
    assert first.norm_stats is not None and first.norm_stats.obs is not None
    assert first.norm_stats.obs.count == len(first) == 100
    assert np.allclose(first.norm_stats.obs.mean, first.obs.mean(axis=0))  # raw observations
    assert first.norm_stats.returns is not None and first.norm_stats.returns.count == 100
    assert first.rewards.min() < -1.0  # the identity scale before any statistics arrive
    # the learner's statistics reach the worker with the weights; rewards are then divided
    # by the return std and clipped
    learner = PPOLearner("Pendulum-v1", PPOConfig(num_epochs=1), NORMALIZING, seed=1)
    learner.train(first)
    worker.set_weights(learner.get_weights())
    assert learner.policy.normalizer is not None
    scale = learner.policy.normalizer.reward_scale()
    assert scale < 0.2  # Pendulum's discounted returns are in the hundreds
    second = worker.sample()
    # Pendulum's reward is a function of the observation and the (clipped) action
    theta = np.arctan2(second.obs[:, 1], second.obs[:, 0])
    torque = np.clip(second.actions[:, 0], -2.0, 2.0)
    raw = -(theta**2 + 0.1 * second.obs[:, 2] ** 2 + 0.001 * torque**2)
    assert np.allclose(second.rewards, np.clip(raw * scale, -10, 10), atol=1e-4)
    assert second.episode_returns.size == 0 or second.episode_returns.min() < -10  # raw returns


def test_the_return_tracker_discounts_and_resets_at_episode_ends() -> None:
    tracker = ReturnTracker(2, gamma=0.5)
    on = np.array([True, True])
    tracker.step(np.array([1.0, 2.0]), on, np.array([False, True]))
    tracker.step(np.array([1.0, 2.0]), np.array([True, False]), np.array([False, False]))
    seen = tracker.take()
    # env 0: 1, 1.5; env 1: 2, then a reset step (not counted)
    assert seen.count == 3 and np.isclose(seen.mean, (1 + 2 + 1.5) / 3)
    assert tracker.take().count == 0


def test_a_learner_trains_with_the_statistics_the_batch_was_sampled_with_then_merges() -> None:
    worker = RolloutWorker("Pendulum-v1", num_envs=2, fragment_length=64, seed=0, policy=NORMALIZING)
    learner = PPOLearner("Pendulum-v1", PPOConfig(num_epochs=2, minibatch_size=64), NORMALIZING)
    batch = worker.sample()
    seen: list[float] = []
    encode = learner.policy.encode

    def recording(obs: torch.Tensor) -> torch.Tensor:
        assert learner.policy.normalizer is not None
        seen.append(float(learner.policy.normalizer.obs_count))
        return encode(obs)

    learner.policy.encode = recording  # type: ignore[method-assign]
    learner.train(batch)
    assert seen and set(seen) == {0.0}  # every minibatch saw the sampling-time statistics
    assert learner.policy.normalizer is not None
    assert float(learner.policy.normalizer.obs_count) == len(batch)


Stats = dict[str, Any]


def learner_stats(learner: PPOLearner, record: Metrics) -> tuple[Metrics, Stats]:
    """On the learner: the record and the learner's running statistics."""
    return record, {k: v for k, v in learner.get_weights().items() if "normalizer" in k}


def holds_the_same_stats(worker: RolloutWorker, item: tuple[Metrics, Stats]) -> None:
    """On each worker: its statistics must be the learner's (they came with the weights)."""
    own = worker.get_weights()
    different = [k for k, v in item[1].items() if not np.array_equal(own[k], v)]
    if different:
        raise AssertionError(f"worker {worker.worker_index} differs from the learner in {different}")


@pytest.mark.parametrize("backend", ["reference", "rx"])
def test_a_ppo_plan_keeps_one_set_of_statistics_for_all_workers(backend: str) -> None:
    """Through the plan: after each iteration the learner's statistics count every row trained
    on, and every worker holds exactly the learner's statistics."""
    config = ppo.PPO(env="Pendulum-v1", num_workers=2, num_envs_per_worker=2, fragment_length=32,
                     train_batch_size=256, policy=NORMALIZING,
                     learner=PPOConfig(num_epochs=1, minibatch_size=128))
    actors = ppo.groups(config)
    checked = (ppo.plan(config, actors)
               | ops.call(actors.learner, learner_stats)
               | ops.broadcast(actors.workers, holds_the_same_stats)
               | ops.take(3))
    items = list(rxrl.run(checked, backend=backend))
    assert [record.env_steps_trained for record, _ in items] == [256, 512, 768]
    assert [float(stats["normalizer.obs_count"]) for _, stats in items] == [256, 512, 768]


def test_resuming_a_learner_keeps_its_statistics() -> None:
    learner = PPOLearner("Pendulum-v1", PPOConfig(num_epochs=1), NORMALIZING)
    learner.train(RolloutWorker("Pendulum-v1", 2, 32, policy=NORMALIZING).sample())
    restored = PPOLearner("Pendulum-v1", PPOConfig(num_epochs=1), NORMALIZING)
    restored.load_state_dict(copy.deepcopy(learner.state_dict()))
    assert restored.policy.normalizer is not None and learner.policy.normalizer is not None
    assert float(restored.policy.normalizer.obs_count) == 64
    assert torch.equal(restored.policy.normalizer.obs_var, learner.policy.normalizer.obs_var)
    assert restored.env_steps_trained == 64


def test_algorithms_without_a_learner_that_merges_refuse_normalization() -> None:
    from rxrl.algos.on_policy.a3c import A3C

    with pytest.raises(ValueError, match=r"A3C does not support policy\.normalize_obs"):
        A3C(policy=PolicyConfig(normalize_obs=True))
    assert ppo.PPO(policy=NORMALIZING).policy.normalizes


def learning_rate(learner: Learner, record: Metrics) -> float:
    """On the learner: the learning rate its optimizer was last set to."""
    return float(learner.optimizer.param_groups[0]["lr"])


def test_a_ppo_lr_decay_reaches_zero_at_its_steps() -> None:
    config = ppo.PPO(env="Pendulum-v1", num_workers=1, num_envs_per_worker=1, fragment_length=64,
                     train_batch_size=64, lr_decay_steps=128,
                     learner=PPOConfig(lr=1e-3, num_epochs=1, minibatch_size=64))
    actors = ppo.groups(config)
    plan = ppo.plan(config, actors)
    rates = list(rxrl.run(plan | ops.call(actors.learner, learning_rate) | ops.take(3)))
    assert rates == [1e-3, 5e-4, 0.0]  # set before each batch: at 0, 64 and 128 steps trained
    assert "train_on_fragments_decayed" in rxrl.show(plan)
    assert "train_on_fragments_decayed" not in rxrl.show(ppo.plan(ppo.PPO(), ppo.groups(ppo.PPO())))


def test_an_a2c_lr_decay_is_ppos_schedule() -> None:
    from rxrl.algos.on_policy import a2c
    from rxrl.rl import A2CConfig

    config = a2c.A2C(env="CartPole-v1", num_workers=1, num_envs_per_worker=1, fragment_length=32,
                     train_batch_size=32, lr_decay_steps=128, learner=A2CConfig(lr=2e-3))
    actors = a2c.groups(config)
    plan = a2c.plan(config, actors)
    rates = list(rxrl.run(plan | ops.call(actors.learner, learning_rate) | ops.take(5)))
    assert rates == [2e-3, 1.5e-3, 1e-3, 5e-4, 0.0]  # at 0, 32, 64, 96 and 128 steps trained
    assert "train_on_fragments_decayed" in rxrl.show(plan)
    assert "train_on_fragments_decayed" not in rxrl.show(a2c.plan(a2c.A2C(), a2c.groups(a2c.A2C())))


def test_v_trace_learners_merge_the_fragments_statistics_and_appos_target_shares_them() -> None:
    from rxrl.rl import APPOConfig, APPOLearner, IMPALAConfig, IMPALALearner

    worker = RolloutWorker("Pendulum-v1", num_envs=2, fragment_length=16, seed=0, policy=NORMALIZING)
    fragments = [worker.sample_fragment() for _ in range(2)]
    assert all(f.batch.norm_stats is not None for f in fragments)
    impala = IMPALALearner("Pendulum-v1", IMPALAConfig(), NORMALIZING)
    impala.train(fragments)
    assert impala.policy.normalizer is not None and float(impala.policy.normalizer.obs_count) == 64
    appo = APPOLearner("Pendulum-v1", APPOConfig(), NORMALIZING)
    appo.train(fragments)
    assert appo.target.normalizer is appo.policy.normalizer
    restored = APPOLearner("Pendulum-v1", APPOConfig(), NORMALIZING)
    restored.load_state_dict(appo.state_dict())
    assert restored.target.normalizer is restored.policy.normalizer
    assert restored.policy.normalizer is not None and float(restored.policy.normalizer.obs_count) == 64
