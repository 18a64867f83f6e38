"""The DQN learner's step alone: milliseconds per `DQNLearner.train` on CartPole-shaped batches.

One torch thread, the matched settings' net (`dqn_settings.Matched`: 128x128 ReLU, double DQN,
batches of 128), 64 random batches after 20 warm-up steps, the best of ``--reps`` passes (the
machine is shared). Against an older rxrl: put a ``git archive`` of it first on PYTHONPATH.

    python bench/dqn_step.py --reps 5
"""

from __future__ import annotations

import argparse
import sys
import time

import dqn_settings as d
import numpy as np
import torch

from rxrl.rl import DQNConfig, QNetConfig
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.learners.dqn import DQNLearner


def batch(rng: np.random.Generator, n: int) -> TransitionBatch:
    """Random CartPole-shaped transitions (3-step returns, a few terminal rows)."""
    return TransitionBatch(
        obs=rng.standard_normal((n, 4)).astype(np.float32), actions=rng.integers(0, 2, n).astype(np.int64),
        rewards=np.ones(n, np.float32), next_obs=rng.standard_normal((n, 4)).astype(np.float32),
        terminateds=rng.random(n) < 0.01, truncateds=np.zeros(n, np.bool_), n_steps=np.full(n, 3, np.int64))


def main(argv: list[str]) -> None:
    """Time the step and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="passes over the batches; the best is printed")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    m = d.Matched()
    rng = np.random.default_rng(0)
    batches = [batch(rng, m.batch_size) for _ in range(64)]
    learner = DQNLearner("CartPole-v1", DQNConfig(lr=m.lr, n_step=m.n_step, gamma=m.gamma,
                                                  target_update_interval=m.target_update_interval,
                                                  q_net=QNetConfig(hidden_sizes=m.hidden)))
    for b in batches[:20]:
        learner.train(b)
    best = float("inf")
    for _ in range(args.reps):
        began = time.perf_counter()
        for b in batches:
            learner.train(b)
        best = min(best, (time.perf_counter() - began) / len(batches))
    print(f"DQNLearner.train: {best * 1e3:.3f} ms a step (best of {args.reps} passes of {len(batches)})")


if __name__ == "__main__":
    main(sys.argv[1:])
