"""The Atari settings every system of bench/atari.py is given (issue 23), and its runners' command line.

One `MatchedAtari` value: the env with its preprocessing, the model and the PPO/IMPALA
hyper-parameters. Every runner (rxrl's PPO and IMPALA, the hand-written Ray loops, the
CleanRL-style ``ppo_atari``, SB3's PPO, RLlib's PPO and APPO) translates it into its own
vocabulary and writes one `ppo_settings.RunRecord` (JSON) per run. Throughput is what is
compared: env *frames* per second (an agent step is ``frame_skip`` frames), sampled and trained.

The preprocessing is the standard one for all (`rxrl.envs.atari.AtariSettings`'s defaults):
``ALE/Pong-v5`` with sticky actions 0.25, up to 30 no-ops at a reset, frame skip 4 with the max
of the last two frames, 84×84 grayscale, a stack of 4, an episode per life and rewards clipped
to [-1, 1] for training; returns reported are the games' raw scores. The model is the Nature CNN
(32-64-64 convolutions, 512 units) with a policy and a value head on one torso.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any

import attrs
import ppo_settings as s


@attrs.frozen
class MatchedAtari:
    """CleanRL's ``ppo_atari`` settings (lr 2.5e-4 constant here: throughput runs do not
    anneal), on ``num_workers × envs_per_worker`` envs; IMPALA/APPO's on the same envs."""

    env: str = "ALE/Pong-v5"
    num_workers: int = 2
    envs_per_worker: int = 4
    # PPO: fragments of 128 steps, a batch of 1,024 transitions, 4 epochs of minibatches of 256
    fragment_length: int = 128
    num_epochs: int = 4
    minibatch_size: int = 256
    lr: float = 2.5e-4
    gamma: float = 0.99
    lam: float = 0.95
    clip_coef: float = 0.1
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    max_grad_norm: float = 0.5
    #: torch threads of PPO's learner: it trains while the workers wait for its weights, so
    #: it has both cores (the single-process peers' torch uses both too)
    learner_threads: int = 2
    # IMPALA/APPO: fragments of 32 steps, one in flight per worker, batches of 512, 1 epoch
    impala_fragment_length: int = 32
    impala_train_batch: int = 512
    impala_minibatch_size: int = 512
    impala_num_epochs: int = 1
    impala_lr: float = 5e-4
    #: IMPALA's learner trains while the workers sample: one thread
    impala_learner_threads: int = 1
    # the preprocessing (rxrl.envs.atari.AtariSettings's fields)
    frame_skip: int = 4
    frame_stack: int = 4
    screen_size: int = 84
    noop_max: int = 30
    repeat_action_probability: float = 0.25

    @property
    def num_envs(self) -> int:
        """Envs in all (the single-process systems step them in one process)."""
        return self.num_workers * self.envs_per_worker

    @property
    def train_batch(self) -> int:
        """PPO's transitions per iteration."""
        return self.num_envs * self.fragment_length

    def env_kwargs(self) -> dict[str, Any]:
        """The preprocessing as rxrl's ``env_kwargs`` (`rxrl.envs.atari.AtariSettings`)."""
        return {"frame_skip": self.frame_skip, "frame_stack": self.frame_stack,
                "screen_size": self.screen_size, "noop_max": self.noop_max,
                "repeat_action_probability": self.repeat_action_probability}


def override(m: MatchedAtari, assignments: list[str]) -> MatchedAtari:
    """``m`` with ``name=value`` assignments applied (`ppo_settings.override`)."""
    return s.override(m, assignments)


def runner_main(argv: list[str], doc: str,
                run: Callable[[argparse.Namespace, MatchedAtari], s.RunRecord]) -> None:
    """One system's command line: run once, print a line, write the JSON record with --out.

    ``--budget-steps`` counts agent steps (env steps); the line prints frames/s too."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--budget-steps", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--algo", default="ppo", choices=["ppo", "impala", "appo"])
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", help="write the run's JSON record here")
    args = parser.parse_args(argv)
    m = override(MatchedAtari(), args.set)
    record = run(args, m)
    rate = record.env_steps_sampled / record.train_s if record.train_s else math.nan
    trained = record.env_steps_trained / record.train_s if record.train_s else math.nan
    print(f"{record.system}: {record.env_steps_sampled} steps in {record.train_s:.1f} s "
          f"({rate * m.frame_skip:,.0f} frames/s sampled, {trained * m.frame_skip:,.0f} trained), "
          f"learner {record.learner_s:.1f} s, setup {record.setup_s:.1f} s", flush=True)
    if args.out:
        from pathlib import Path

        record.write(Path(args.out))


__all__ = ["MatchedAtari", "override", "runner_main"]

if __name__ == "__main__":
    sys.exit("run bench/atari.py")
