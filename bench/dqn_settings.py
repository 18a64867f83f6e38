"""The DQN CartPole-v1 settings every benchmarked system is given, and the runners' command line.

One `Matched` value is translated into each system's vocabulary by its runner
(`rxrl.algos.qlearning.dqn.DQN` / `apex.ApeX`, SB3's `DQN(...)`, RLlib's `DQNConfig`, the CleanRL-style
loop's `Args`); where a system words a setting differently the runner says how it maps. Runs
write `ppo_settings.RunRecord`s (the record is not PPO-specific), which `dqn_cartpole.py`
reads back.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

import attrs
import ppo_settings as s

TARGET_RETURN = s.TARGET_RETURN


@attrs.frozen
class Matched:
    """DQN hyper-parameters shared by every system: rxrl's DQN defaults (`rxrl.algos.qlearning.dqn.DQN()`)
    as they were until 2026-12-04 (a hard target copy every 50 steps, a constant learning rate:
    what SB3 and the CleanRL-style loop can be given; the defaults now follow the target by
    Polyak averaging and decay the rate, docs/algorithms.md).

    2 workers x 1 env, 16 steps per sample; Adam lr 1e-3; 3-step returns; double DQN; Huber
    loss; gradients clipped at global norm 10; the target net copied every
    `target_update_interval` optimizer steps (= 4x that in env steps at intensity 32 with
    batches of 128: one optimizer step per 4 env steps); `training_intensity` replayed per
    sampled transition; a uniform buffer of `capacity`; epsilon 1 -> 0.05 over the first
    `exploration_fraction` of `exploration_steps` env steps; 128x128 ReLU.
    """

    env: str = "CartPole-v1"
    num_workers: int = 2
    envs_per_worker: int = 1
    fragment_length: int = 16
    lr: float = 1e-3
    gamma: float = 0.99
    n_step: int = 3
    max_grad_norm: float = 10.0
    target_update_interval: int = 50
    training_intensity: float = 32.0
    capacity: int = 100_000
    batch_size: int = 128
    learning_starts: int = 1_000
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    exploration_fraction: float = 0.1
    exploration_steps: int = 100_000
    hidden: tuple[int, ...] = (128, 128)

    @property
    def num_envs(self) -> int:
        """Environments in all, for the single-process systems."""
        return self.num_workers * self.envs_per_worker

    @property
    def env_steps_per_update(self) -> float:
        """Env steps sampled per optimizer step: ``batch_size / training_intensity`` (4)."""
        return self.batch_size / self.training_intensity


def override(m: Matched, assignments: list[str]) -> Matched:
    """``m`` with ``name=value`` assignments applied (`ppo_settings.override`)."""
    return s.override(m, assignments)


def runner_main(argv: list[str], doc: str, run: Callable[[argparse.Namespace, Matched], s.RunRecord],
                add_arguments: Callable[[argparse.ArgumentParser], object] | None = None) -> None:
    """The command line of one system's runner: run once, print a line, write JSON with --out."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--budget-steps", type=int, default=100_000)
    parser.add_argument("--budget-s", type=float, help="also stop after this much training wall time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a matched setting, e.g. --set lr=5e-4")
    parser.add_argument("--out", type=Path, help="write the run's JSON record here")
    parser.add_argument("--stop-at-target", action="store_true",
                        help="stop once the mean return of the last 100 episodes reaches 475")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    s.TIME_BUDGET_S = args.budget_s
    record = run(args, override(Matched(), args.set))
    hit = record.first_at()
    rate = record.env_steps_sampled / record.train_s if record.train_s else math.nan
    at = "-" if hit is None else f"{hit.time_s:.1f} s / {hit.env_steps_sampled} steps"
    print(f"{record.system}: {record.env_steps_sampled} steps in {record.train_s:.1f} s ({rate:,.0f}/s), "
          f"trained {record.env_steps_trained}, learner {record.learner_s:.1f} s, "
          f"setup {record.setup_s:.1f} s, 475 at {at}", flush=True)
    if args.out:
        record.write(args.out)


def done(record: s.RunRecord, stop_at_target: bool) -> bool:
    """True once the run's budgets are spent, or (``stop_at_target``) the target was reached."""
    return not record.running() or (stop_at_target and record.first_at() is not None)
