"""The IMPALA/APPO CartPole-v1 settings every benchmarked system is given (issue 12).

One `MatchedIMPALA` is rxrl's IMPALA defaults (`rxrl.algos.vtrace.impala`); each runner translates it
into its system's vocabulary and writes one `ppo_settings.RunRecord` (JSON) per run, plus the
staleness of every update where the system reports it.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

import attrs
import ppo_settings as s


@attrs.frozen
class MatchedIMPALA:
    """rxrl's IMPALA defaults: 2 workers x 8 envs x fragments of 32, one fragment in flight per
    worker, batches of 512 trained for 2 epochs of minibatches of 128, Adam lr 1e-3 (constant
    here: throughput runs do not anneal), gamma 0.99, lambda 0.95, rho-bar = c-bar = 1, value
    coefficient 0.5 on 0.5 * MSE, no entropy bonus, grad norm 0.5, weights to the sender after
    every update, 64x64 tanh actor and critic."""

    num_workers: int = 2
    envs_per_worker: int = 8
    fragment_length: int = 32
    max_in_flight: int = 1
    train_batch: int = 512
    num_epochs: int = 2
    minibatch_size: int = 128
    lr: float = 1e-3
    gamma: float = 0.99
    lam: float = 0.95
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 0.5
    broadcast_interval: int = 1
    hidden: tuple[int, ...] = (64, 64)
    env: str = "CartPole-v1"

    @property
    def fragment_rows(self) -> int:
        """Transitions in one worker fragment."""
        return self.envs_per_worker * self.fragment_length

    @property
    def fragments_per_batch(self) -> int:
        """Whole fragments in one train batch."""
        return math.ceil(self.train_batch / self.fragment_rows)


def override(m: MatchedIMPALA, assignments: list[str]) -> MatchedIMPALA:
    """``m`` with ``name=value`` assignments applied (`ppo_settings.override`)."""
    return s.override(m, assignments)


def runner_main(argv: list[str], doc: str,
                run: Callable[[argparse.Namespace, MatchedIMPALA], s.RunRecord]) -> None:
    """One system's command line: run once, print a line, write the JSON record with --out."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--budget-steps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--algo", default="impala", choices=["impala", "appo"])
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", help="write the run's JSON record here")
    args = parser.parse_args(argv)
    record = run(args, override(MatchedIMPALA(), args.set))
    rate = record.env_steps_sampled / record.train_s if record.train_s else math.nan
    print(f"{record.system}: {record.env_steps_sampled} steps in {record.train_s:.1f} s ({rate:,.0f}/s), "
          f"trained {record.env_steps_trained}, learner {record.learner_s:.1f} s", flush=True)
    if args.out:
        from pathlib import Path

        record.write(Path(args.out))


__all__ = ["MatchedIMPALA", "override", "runner_main"]

if __name__ == "__main__":
    sys.exit("run bench/impala_throughput.py")
