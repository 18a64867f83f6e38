"""DQN / Ape-X with rxrl.rl's components in a plain Python loop: the tuning driver, no plan.

Workers (`QRolloutWorker`) sample in turn and store into replay shards (`ReplayShard`,
round-robin by batch); the learner (`DQNLearner`) trains on shard samples, sending
priorities back to the shard each came from, at a fixed *training intensity*: after `S`
transitions sampled since the first shard became ready, `floor(intensity * S / batch_size)`
optimizer steps have run (intensity 2.5 with batches of 64 and rounds of 32 transitions
alternates 1 and 2 steps, exactly, every run). Workers get the learner's weights after
every round, or, with `--sync-every K`, after K of their own env steps (Ape-X's
max_weight_sync_delay). Single process, deterministic for a seed.

The returns reported are those of the workers with the lowest epsilon (all of them for
DQN, the last one for Ape-X): the mean of the last 100 episodes, once 100 have ended.

  nice -n 10 python bench/dqn_loop.py --seed 0                      # DQN, the DQNConfig defaults
  nice -n 10 python bench/dqn_loop.py --seed 0 --apex --steps 200000  # 2 Ape-X workers, 2 PER shards
  nice -n 10 python bench/dqn_loop.py --seed 0 --set lr=5e-4 --set replay.batch_size=128
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch

from rxrl.ready import NotReady
from rxrl.rl import (
    DQNConfig,
    DQNLearner,
    QRolloutWorker,
    ReplayShard,
    TransitionBatch,
    apex_epsilon,
    epsilon_schedule,
)

TARGET_RETURN = 475.0


@attrs.frozen
class LoopSettings:
    """What the loop adds to a `DQNConfig`: the env, worker/shard counts, the budget."""

    env: str = "CartPole-v1"
    seed: int = 0
    steps: int = 100_000
    num_workers: int = 2
    num_envs: int = 1
    fragment_length: int = 16
    num_shards: int = 1
    apex: bool = False  # fixed per-worker epsilons (apex_epsilon) instead of the linear schedule
    sync_every: int | None = None  # worker env steps between weight syncs; None: every round
    stop_at_target: bool = True


def build_config(overrides: Sequence[str], apex: bool) -> DQNConfig:
    """`DQNConfig()` (prioritized replay for Ape-X) with `key=value` overrides, dotted for
    the nested `replay.` and `q_net.` records."""
    config = DQNConfig()
    if apex:
        config = attrs.evolve(config, replay=attrs.evolve(config.replay, prioritized=True))
    for item in overrides:
        key, _, raw = item.partition("=")
        value: Any = json.loads(raw) if raw[:1] in "[{0123456789-tfn" and raw not in ("nan",) else raw
        if isinstance(value, list):
            value = tuple(value)
        head, _, field = key.rpartition(".")
        if head:
            inner = getattr(config, head)
            config = attrs.evolve(config, **{head: attrs.evolve(inner, **{field: value})})
        else:
            config = attrs.evolve(config, **{field: value})
    return config


def make_workers(s: LoopSettings, c: DQNConfig) -> list[QRolloutWorker]:
    """The loop's workers: DQN's decaying epsilon, or Ape-X's fixed one per worker."""
    workers = []
    for i in range(s.num_workers):
        if s.apex:
            epsilon: Any = apex_epsilon(i, s.num_workers)
        else:
            epsilon = epsilon_schedule(
                c.epsilon_start, c.epsilon_end, c.exploration_fraction, s.steps, s.num_workers
            )
        workers.append(
            QRolloutWorker(
                s.env,
                s.num_envs,
                s.fragment_length,
                seed=s.seed,
                worker_index=i,
                epsilon=epsilon,
                n_step=c.n_step,
                gamma=c.gamma,
                q_net=c.q_net,
            )
        )
    return workers


class Progress:
    """Returns of the reporting workers, the first time the target was reached, and a log."""

    def __init__(self, reporting: set[int]) -> None:
        self.reporting = reporting
        self.returns: collections.deque[float] = collections.deque(maxlen=100)
        self.episodes = 0
        self.reached: dict[str, float] | None = None
        self.best = -math.inf

    def observe(self, worker: int, batch: TransitionBatch, steps: int, start: float) -> None:
        if worker not in self.reporting:
            return
        self.returns.extend(batch.episode_returns.tolist())
        self.episodes += len(batch.episode_returns)
        mean = self.mean()
        self.best = max(self.best, mean) if not math.isnan(mean) else self.best
        if self.reached is None and mean >= TARGET_RETURN:
            self.reached = {
                "env_steps": steps,
                "wall_s": time.perf_counter() - start,
                "episodes": self.episodes,
            }

    def mean(self) -> float:
        return float(np.mean(self.returns)) if len(self.returns) == 100 else math.nan


def run(s: LoopSettings, c: DQNConfig, log_every: int = 10_000) -> dict[str, Any]:
    """Train until `s.steps` env steps (or the target, with `stop_at_target`); the record."""
    torch.manual_seed(s.seed)
    start = time.perf_counter()
    workers = make_workers(s, c)
    learner = DQNLearner(s.env, c, seed=s.seed)
    shards = [ReplayShard(c.replay, seed=s.seed, shard_index=j) for j in range(s.num_shards)]
    eps = [w.current_epsilon() for w in workers]
    progress = Progress(
        {i for i, e in enumerate(eps) if e == min(eps)} if s.apex else set(range(s.num_workers))
    )
    sampled = sampled_ready = trained_steps = batches = 0
    synced_at = [0] * s.num_workers
    next_log = log_every
    while sampled < s.steps and not (s.stop_at_target and progress.reached):
        for i, worker in enumerate(workers):
            batch = worker.sample()
            shards[batches % s.num_shards].add(batch)
            batches += 1
            sampled += batch.env_steps
            if any(len(shard) >= c.replay.learning_starts for shard in shards):
                sampled_ready += batch.env_steps
            progress.observe(i, batch, sampled, start)
            due = math.floor(c.training_intensity * sampled_ready / c.replay.batch_size) - trained_steps
            for _ in range(due):
                trained_steps += train_once(learner, shards, trained_steps)
            if s.sync_every is not None and worker.env_steps - synced_at[i] >= s.sync_every:
                worker.set_weights(learner.get_weights())
                synced_at[i] = worker.env_steps
        if s.sync_every is None:
            weights = learner.get_weights()
            for worker in workers:
                worker.set_weights(weights)
        if sampled >= next_log:
            next_log += log_every
            print(
                f"  steps {sampled:>7}  mean100 {progress.mean():7.1f}  trained {trained_steps:>6}  "
                f"eps {workers[0].current_epsilon():.3f}  {time.perf_counter() - start:6.1f} s",
                file=sys.stderr,
            )
    return {
        "settings": attrs.asdict(s),
        "config": attrs.asdict(c),
        "env_steps": sampled,
        "trained_steps": trained_steps,
        "replayed_per_sampled": trained_steps * c.replay.batch_size / max(sampled, 1),
        "reached": progress.reached,
        "final_mean100": progress.mean(),
        "best_mean100": progress.best,
        "episodes": progress.episodes,
        "wall_s": time.perf_counter() - start,
    }


def train_once(learner: DQNLearner, shards: list[ReplayShard], step: int) -> int:
    """One optimizer step on a sample of the next ready shard (round-robin); 1 if trained."""
    for k in range(len(shards)):
        shard = shards[(step + k) % len(shards)]
        batch = shard.sample()
        if isinstance(batch, NotReady):
            continue
        _, priorities = learner.train(batch)
        assert batch.indices is not None
        shard.update_priorities(batch.indices, priorities)
        return 1
    return 0


def main(argv: list[str]) -> None:
    """Parse the command line, run, print the record as one JSON line (and to --out)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=None, help="env steps (100k; 200k with --apex)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--fragment-length", type=int, default=16)
    p.add_argument("--shards", type=int, default=None, help="replay shards (1; 2 with --apex)")
    p.add_argument("--apex", action="store_true", help="Ape-X: fixed per-worker epsilons, prioritized shards")
    p.add_argument("--sync-every", type=int, default=None, help="worker env steps between weight syncs")
    p.add_argument("--no-stop", action="store_true", help="run the whole budget after reaching the target")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="DQNConfig override")
    p.add_argument("--out", default=None, help="append the JSON record to this file")
    a = p.parse_args(argv)
    settings = LoopSettings(
        env=a.env,
        seed=a.seed,
        steps=a.steps or (200_000 if a.apex else 100_000),
        num_workers=a.workers,
        num_envs=a.num_envs,
        fragment_length=a.fragment_length,
        num_shards=a.shards or (2 if a.apex else 1),
        apex=a.apex,
        sync_every=a.sync_every,
        stop_at_target=not a.no_stop,
    )
    record = run(settings, build_config(a.set, a.apex))
    line = json.dumps(record, default=str)
    print(line)
    if a.out:
        with open(a.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
