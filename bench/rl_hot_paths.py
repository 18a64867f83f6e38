"""Throughput of the RL hot paths: `python -m bench.rl_hot_paths [env]` prints steps/s and train times.

Figures vary +-20-30 % run to run on shared machines; compare side by side.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

from rxrl.rl.config import PPOConfig
from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.learners.actor_critic import PPOLearner
from rxrl.rl.workers.rollout import RolloutWorker


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """The median wall time of `repeats` calls of `fn`, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_sample(env: str, num_envs: int, fragment_length: int, repeats: int = 30) -> float:
    """Env steps per second of `RolloutWorker.sample()` (one process, one torch thread)."""
    worker = RolloutWorker(env, num_envs=num_envs, fragment_length=fragment_length)
    steps = statistics.mean(worker.sample().env_steps for _ in range(5))
    return steps / median_time(worker.sample, repeats)


def bench_train(env: str, rows: int, config: PPOConfig, repeats: int = 10) -> tuple[float, int]:
    """Seconds per `PPOLearner.train` call on a batch of `rows`, and its optimizer steps."""
    worker = RolloutWorker(env, num_envs=8, fragment_length=128)
    batch = SampleBatch.concat([worker.sample() for _ in range(-(-rows // 1024))]).slice(0, rows)
    learner = PPOLearner(env, config)
    return median_time(lambda: learner.train(batch), repeats), learner.train(batch).num_updates


def main(argv: list[str]) -> None:
    """Print the figures for the env named in `argv[0]` (CartPole-v1 by default)."""
    env = argv[0] if argv else "CartPole-v1"
    for num_envs, length in ((8, 128), (16, 128), (16, 256)):
        rate = bench_sample(env, num_envs, length)
        print(f"sample  {env} num_envs={num_envs:<2} fragment_length={length}: {rate:10,.0f} env steps/s")
    for rows, minibatch in ((1024, 256), (4096, 256)):
        seconds, updates = bench_train(env, rows, PPOConfig(num_epochs=4, minibatch_size=minibatch))
        print(
            f"train   PPO {rows} rows, 4 epochs x minibatch {minibatch} ({updates} updates): "
            f"{seconds * 1e3:6.1f} ms ({seconds / updates * 1e3:.2f} ms/update)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
