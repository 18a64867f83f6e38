"""Learning sanity check: a plain-Python PPO loop (no plan) solves much of CartPole-v1."""

from __future__ import annotations

from rxrl.rl.config import PPOConfig
from rxrl.rl.data.batch import standardize
from rxrl.rl.data.metrics import Metrics, MetricsAccumulator
from rxrl.rl.learners.actor_critic import PPOLearner
from rxrl.rl.workers.rollout import RolloutWorker


def train_cartpole(seed: int, max_steps: int) -> Metrics:
    worker = RolloutWorker("CartPole-v1", num_envs=8, fragment_length=128, seed=seed)
    learner = PPOLearner("CartPole-v1", PPOConfig(lr=2e-3, minibatch_size=256, ent_coef=0.0), seed=seed)
    accumulator = MetricsAccumulator(window=20)
    while True:
        batch = standardize("advantages")(accumulator.observe_samples(worker.sample()))
        metrics = accumulator.observe_train(learner.train(batch))
        worker.set_weights(learner.get_weights())
        if metrics.env_steps_sampled >= max_steps:
            return metrics


def test_ppo_reaches_mean_return_150_on_cartpole_within_30k_steps() -> None:
    metrics = train_cartpole(seed=0, max_steps=30_000)
    assert metrics.episode_return_mean >= 150, metrics
    assert metrics.env_steps_trained <= metrics.env_steps_sampled <= 32_000
