"""Distributed PPO written by hand on Ray: the low-level baseline an rxrl plan must match.

The same math as rxrl's PPO (it wraps `rxrl.rl.RolloutWorker` and `rxrl.rl.PPOLearner`), the
same synchronous dataflow (sample on every worker, wait for all, train, send the new weights
to every worker), written the way a Ray user would write it without rxrl: `ray.remote` actors,
`ray.wait` as the barrier, batches passed to the learner as object refs (they never visit
the driver) and the new weights passed to the workers as one object ref.

Run alone: ``python bench/handwritten_ray_ppo.py --budget-steps 50000 --seed 0``.
"""

from __future__ import annotations

import collections
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import ppo_settings as s
import ray

from rxrl.rl import (
    PolicyConfig,
    PPOConfig,
    PPOLearner,
    RolloutWorker,
    SampleBatch,
    TrainMetrics,
    Weights,
    standardize,
)


def rxrl_configs(m: s.Matched) -> tuple[PPOConfig, PolicyConfig]:
    """The matched settings as rxrl's learner and policy configs."""
    ppo = PPOConfig(lr=m.lr, num_epochs=m.num_epochs, minibatch_size=m.minibatch_size, clip_coef=m.clip_coef,
                    clip_vloss=False, vf_coef=m.vf_coef, ent_coef=m.ent_coef, max_grad_norm=m.max_grad_norm,
                    normalize_advantages=True)
    return ppo, PolicyConfig(hidden_sizes=m.hidden, activation="tanh" if m.activation == "tanh" else "relu")


_standardize = standardize("advantages")

#: what the learner sends the driver each iteration: its report, the returns of the
#: episodes that ended in the batch, and the env steps sampled for it
Summary = tuple[TrainMetrics, npt.NDArray[np.float32], int]


class BatchLearner:
    """A `PPOLearner` that takes the round's fragments and returns a small summary plus weights."""

    def __init__(self, m: s.Matched, seed: int) -> None:
        import torch

        torch.set_num_threads(1)
        ppo, policy = rxrl_configs(m)
        self.learner = PPOLearner(m.env, ppo, policy, seed=seed)

    def train(self, *fragments: SampleBatch) -> tuple[Summary, Weights]:
        """Concatenate the fragments, standardize advantages over the batch (as rxrl's plan
        does), run PPO's epochs, and return (summary, new weights)."""
        batch = _standardize(SampleBatch.concat(list(fragments)))
        report = self.learner.train(batch)
        return (report, batch.episode_returns, batch.env_steps), self.learner.get_weights()


def ray_init() -> None:
    """Start a private local Ray whose workers can import the bench modules."""
    s.clean_ray_env()
    bench = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (bench, os.environ.get("PYTHONPATH")) if p)
    ray.init(**s.RAY_INIT)


def run(m: s.Matched, seed: int, budget_steps: int, timeline: Path | None = None) -> s.RunRecord:
    """Train until `budget_steps` env steps were sampled; return the record of the run.

    With `timeline`, Ray's task timeline (Chrome trace JSON) is written there before Ray
    shuts down (bench/ray_breakdown.py reads it).
    """
    record = s.RunRecord("handwritten", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["ray", "torch", "gymnasium", "numpy"]))
    ray_init()
    try:
        worker_cls = ray.remote(RolloutWorker)
        learner_cls = ray.remote(BatchLearner)
        policy = rxrl_configs(m)[1]
        workers: list[Any] = [
            worker_cls.remote(m.env, num_envs=m.envs_per_worker, fragment_length=m.fragment_length, seed=seed,
                              worker_index=i, gamma=m.gamma, lam=m.lam, policy=policy, torch_threads=1)
            for i in range(m.num_workers)
        ]
        learner: Any = learner_cls.remote(m, seed)
        # Wait for the actors to be constructed, so that setup time is not charged to training.
        ray.get([w.get_weights.remote() for w in workers])
        ray.get(learner.__ray_ready__.remote())
        record.setup_s = s.since_start()
        _train(workers, learner, record)
        if timeline is not None:
            ray.timeline(filename=str(timeline))
    finally:
        ray.shutdown()
    return record


def _train(workers: list[Any], learner: Any, record: s.RunRecord) -> None:
    returns: collections.deque[float] = collections.deque(maxlen=100)
    sampled = trained = 0
    weights: ray.ObjectRef[Weights] | None = None
    start = time.perf_counter()
    while record.running():
        if weights is not None:  # an actor runs one caller's calls in order: before the sample below
            for w in workers:
                w.set_weights.remote(weights)
        fragments = [w.sample.remote() for w in workers]
        ray.wait(fragments, num_returns=len(fragments))  # the barrier: every worker has answered
        # the refs go to the learner; the fragments never visit the driver
        summary_ref, weights = learner.train.options(num_returns=2).remote(*fragments)
        report, episode_returns, env_steps = ray.get(summary_ref)
        returns.extend(episode_returns.tolist())
        sampled += env_steps
        trained += report.env_steps_trained
        record.learner_s += report.learner_time_s
        mean = float(np.mean(returns)) if returns else math.nan
        record.add(time.perf_counter() - start, sampled, trained, mean)


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    s.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps))


if __name__ == "__main__":
    main(sys.argv[1:])
