"""SAC on Pendulum-v1 from Python: the plan, a run to a step budget, a greedy evaluation.

Run it: ``python examples/sac_pendulum.py`` (add ``ray`` or ``rx`` to pick a backend). With the
default 20k steps the greedy policy returns about -150 (a random one about -1200).
"""

from __future__ import annotations

import sys

import numpy as np
import torch

import rxrl
from rxrl import ops
from rxrl.algos.configs import with_settings
from rxrl.algos.qlearning import sac
from rxrl.cli.tools import episode_returns
from rxrl.rl import Metrics, Weights
from rxrl.rl.learners.sac import SACLearner


def actor_weights(learner: SACLearner, record: Metrics) -> tuple[Metrics, Weights]:
    """On the learner: the record and the actor it was made with."""
    return record, learner.get_weights()


def main(backend: str = "reference", steps: int = 20_000) -> tuple[list[Metrics], float]:
    """Train for ``steps`` env steps; the records and the greedy policy's mean return."""
    config = with_settings(sac.SAC(env="Pendulum-v1", seed=0), sac.TUNED["Pendulum-v1"])
    actors = sac.groups(config)
    plan = sac.plan(config, actors) | ops.call(actors.learner, actor_weights)
    print(rxrl.show(plan))
    records: list[Metrics] = []
    weights: Weights = {}
    with rxrl.run(plan, backend) as run:
        for record, latest in run:
            records.append(record)
            weights = latest
            if len(records) % 50 == 0:
                print(f"{record.env_steps_sampled:>7,} env steps   return "
                      f"{record.episode_return_mean:7.1f}   alpha {getattr(record.train, 'alpha', 0.0):.3f}")
            if record.env_steps_sampled >= steps:
                break
    act = sac.greedy(config, {"policy": {k: torch.as_tensor(v) for k, v in weights.items()}})
    greedy = float(np.mean(episode_returns(config.env, {}, act, 5, seed=1)))
    print(f"greedy return over 5 episodes: {greedy:.1f}")
    return records, greedy


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reference")
