"""The RL classes inside a plan: the PPO dataflow from the design, on the reference backend."""

from __future__ import annotations

import numpy as np

import rxrl
from rxrl import ops
from rxrl.rl import (
    Metrics,
    MetricsAccumulator,
    PPOConfig,
    PPOLearner,
    RolloutWorker,
    SampleBatch,
    TrainMetrics,
    standardize,
)


def ppo_plan(accumulator: MetricsAccumulator) -> tuple[rxrl.Plan[Metrics], rxrl.ActorGroup[RolloutWorker]]:
    workers = rxrl.indexed_actors(
        lambda i: RolloutWorker("CartPole-v1", num_envs=4, fragment_length=32, seed=5, worker_index=i), 2
    )
    learner = rxrl.actors(PPOLearner, 1, "CartPole-v1", PPOConfig(minibatch_size=128), seed=5)

    def train(lr: PPOLearner, batch: SampleBatch) -> tuple[TrainMetrics, dict[str, np.ndarray]]:
        return lr.train(batch), lr.get_weights()

    def set_weights(w: RolloutWorker, item: tuple[TrainMetrics, dict[str, np.ndarray]]) -> None:
        w.set_weights(item[1])

    plan = (
        rxrl.from_actors(workers, RolloutWorker.sample)
        | ops.barrier()
        | ops.map(SampleBatch.concat)
        | ops.window(min_size=500, combine=SampleBatch.concat)
        | ops.map(standardize("advantages"))
        | ops.map(accumulator.observe_samples)
        | ops.call(learner, train)
        | ops.broadcast(workers, set_weights)
        | ops.map(lambda item: accumulator.observe_train(item[0]))
    )
    return plan, workers


def test_ppo_plan_runs_and_accumulates_metrics() -> None:
    plan, _ = ppo_plan(MetricsAccumulator())
    records = list(rxrl.run(plan | ops.take(3)))
    assert [m.iteration for m in records] == [1, 2, 3]
    # each iteration: 2 barrier rounds of 2 workers x 128 rows = 512 rows >= min_size 500
    assert [m.env_steps_trained for m in records] == [512, 1024, 1536]
    assert all(m.env_steps_sampled >= m.env_steps_trained for m in records)
    assert records[-1].train is not None and records[-1].train.num_updates == 4 * 4
    assert records[-1].episodes > 0


def test_ppo_plan_is_reproducible() -> None:
    """Seeded workers and learner: two runs of the same plan give the same records."""
    first = [m.train for m in rxrl.run(ppo_plan(MetricsAccumulator())[0] | ops.take(2))]
    second = [m.train for m in rxrl.run(ppo_plan(MetricsAccumulator())[0] | ops.take(2))]
    assert [t.policy_loss for t in first if t] == [t.policy_loss for t in second if t]
