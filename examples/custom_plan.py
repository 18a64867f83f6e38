"""A plan of your own from rxrl's parts: PPO where each worker batches its own experience.

Each worker samples ``fragments_per_worker`` fragments in a row and standardizes their
advantages itself — shard-local operators, which run *inside* the worker's actor on Ray, so
only one (bigger) batch per worker crosses to the driver per round. The barrier then joins
one such batch from every worker, the learner trains on them, and the weights go back.

Run it: ``python examples/custom_plan.py`` (add ``ray`` or ``rx`` to pick a backend).
"""

from __future__ import annotations

import sys

import rxrl
from rxrl import ops
from rxrl.algos.common import Progress, set_weights, train_and_get_weights
from rxrl.rl import Metrics, PPOConfig, PPOLearner, RolloutWorker, SampleBatch, standardize


def per_worker_ppo(env: str = "CartPole-v1", workers: int = 2, fragments_per_worker: int = 2,
                   seed: int = 0) -> rxrl.Plan[Metrics]:
    """PPO with per-worker windows and per-worker advantage standardization."""
    rollout = rxrl.indexed_actors(
        lambda i: RolloutWorker(env, num_envs=4, fragment_length=64, seed=seed, worker_index=i),
        workers, name="RolloutWorker")
    learner = rxrl.actors(PPOLearner, 1, env, PPOConfig(lr=2e-3, num_epochs=10, ent_coef=0.0,
                                                        clip_vloss=False), seed=seed)
    progress = Progress()
    return (
        rxrl.from_actors(rollout, RolloutWorker.sample)
        | ops.window(fragments_per_worker)                  # per worker: k fragments, same weights
        | ops.map(SampleBatch.concat)                       # ... joined inside the worker
        | ops.map(standardize("advantages"))                # ... and standardized there
        | ops.barrier()                                     # one batch from every worker
        | ops.map(SampleBatch.concat)
        | ops.tap(progress.observe_samples)
        | ops.call(learner, train_and_get_weights)
        | ops.broadcast(rollout, set_weights)
        | ops.map(progress.observe_trained)
    )


def main(backend: str = "reference", iterations: int = 40) -> list[Metrics]:
    """Print the plan, train for ``iterations`` updates, return the metrics records."""
    plan = per_worker_ppo()
    print(rxrl.show(plan))
    records = []
    with rxrl.run(plan | ops.take(iterations), backend) as run:
        for m in run:
            records.append(m)
            print(f"{m.iteration:>3}  {m.env_steps_sampled:>7,} env steps   "
                  f"return {m.episode_return_mean:6.1f}")
    return records


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reference")
