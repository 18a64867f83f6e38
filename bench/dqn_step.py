"""The DQN learner's step alone: milliseconds per `DQNLearner.train` on CartPole- or MinAtar-shaped batches.

One torch thread, 64 random batches after 20 warm-up steps, the best of ``--reps`` passes (the
machine is shared). ``--net cartpole`` (the default): the matched CartPole settings' net
(`dqn_settings.Matched`: 128x128 ReLU, double DQN, batches of 128); ``--net minatar``: the
matched MinAtar Breakout settings (`minatar_settings.MatchedMinAtarDQN`: the MinAtar CNN on
``[4, 10, 10]`` 0/1 frames, 1-step targets, no double Q, batches of 32, no gradient clipping).
Against an older rxrl: put a ``git archive`` of it first on PYTHONPATH.

    python bench/dqn_step.py --reps 5 [--net minatar]
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


def frames(rng: np.random.Generator, n: int) -> TransitionBatch:
    """Random MinAtar-Breakout-shaped transitions (0/1 uint8 frames, 1-step returns)."""
    def images() -> np.ndarray:
        return (rng.random((n, 4, 10, 10)) < 0.1).astype(np.uint8)

    return TransitionBatch(
        obs=images(), actions=rng.integers(0, 3, n).astype(np.int64), rewards=np.ones(n, np.float32),
        next_obs=images(), terminateds=rng.random(n) < 0.01, truncateds=np.zeros(n, np.bool_),
        n_steps=np.ones(n, np.int64))


def learner_and_batches(net: str, rng: np.random.Generator) -> tuple[DQNLearner, list[TransitionBatch]]:
    """The learner and 64 batches of ``net``'s matched settings."""
    if net == "minatar":
        import minatar_settings as ms

        mm = ms.MatchedMinAtarDQN()
        config = DQNConfig(lr=mm.lr, adam_eps=mm.adam_eps, gamma=mm.gamma, n_step=mm.n_step,
                           double_q=mm.double_q, huber_delta=mm.huber_delta, max_grad_norm=mm.max_grad_norm,
                           target_update_interval=mm.target_update_interval,
                           q_net=QNetConfig(trunk="minatar_cnn", dueling=False))
        return DQNLearner(mm.env, config), [frames(rng, mm.batch_size) for _ in range(64)]
    m = d.Matched()
    learner = DQNLearner("CartPole-v1", DQNConfig(lr=m.lr, n_step=m.n_step, gamma=m.gamma,
                                                  target_update_interval=m.target_update_interval,
                                                  q_net=QNetConfig(hidden_sizes=m.hidden)))
    return learner, [batch(rng, m.batch_size) for _ in range(64)]


def main(argv: list[str]) -> None:
    """Time the step and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="passes over the batches; the best is printed")
    parser.add_argument("--net", choices=["cartpole", "minatar"], default="cartpole")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    learner, batches = learner_and_batches(args.net, np.random.default_rng(0))
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
