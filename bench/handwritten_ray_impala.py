"""IMPALA written by hand on Ray: the low-level baseline rxrl's IMPALA plan must match.

The same math (it wraps `rxrl.rl.RolloutWorker.sample_fragment` and `rxrl.rl.IMPALALearner`) and
the same schedule as the plan, written the way a Ray user would without rxrl: ``ray.wait`` over
each worker's ``max_in_flight`` sample requests, a finished fragment's ref passed straight to the
learner (fragments never visit the driver) and the worker's next sample submitted at once, at
most two batches' worth of fragments at the learner (the next batch waits while it trains),
and the learner's reply ref passed to the worker that sent the fragment, which loads the new
weights it carries; the driver reads only the small rest of each reply.

Run alone: ``python bench/handwritten_ray_impala.py --budget-steps 50000 --seed 0``.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from typing import Any

import attrs
import impala_settings as i
import numpy as np
import ppo_settings as s
import ray

from rxrl.rl import IMPALAConfig, IMPALALearner, PolicyConfig, RolloutWorker
from rxrl.rl.data.fragment import Fragment
from rxrl.rl.learners.vtrace import VersionedWeights, VTraceMetrics

#: what the learner answers each fragment with: (episodes' returns, env steps, report or None,
#: weights for the sender or None)
Answer = tuple[np.ndarray[Any, Any], int, VTraceMetrics | None, VersionedWeights | None]


class Learner:
    """An `IMPALALearner` that takes fragments one at a time and answers each."""

    def __init__(self, m: i.MatchedIMPALA, seed: int) -> None:
        import torch

        torch.set_num_threads(1)
        config = IMPALAConfig(lr=m.lr, num_epochs=m.num_epochs, minibatch_size=m.minibatch_size,
                              vf_coef=m.vf_coef, ent_coef=m.ent_coef, max_grad_norm=m.max_grad_norm)
        self.m = m
        self.learner = IMPALALearner(m.env, config, PolicyConfig(hidden_sizes=m.hidden), seed=seed,
                                     gamma=m.gamma, lam=m.lam)

    def learn(self, fragment: Fragment, worker: int) -> Answer:
        """Buffer the fragment, train on a full batch, and answer with weights when due."""
        report = self.learner.add_fragment(fragment, self.m.train_batch)
        weights = self.learner.weights_for(worker, self.m.broadcast_interval)
        return fragment.batch.episode_returns, fragment.batch.env_steps, report, weights


class Worker(RolloutWorker):
    """A `RolloutWorker` that loads the weights a learner's answer carries."""

    def load(self, answer: Answer) -> tuple[np.ndarray[Any, Any], int, VTraceMetrics | None]:
        """Load the answer's weights, if any; return the rest."""
        returns, steps, report, sent = answer
        if sent is not None:
            self.set_weights({k: v.copy() for k, v in sent.weights.items()}, version=sent.version)
        return returns, steps, report


def run(m: i.MatchedIMPALA, seed: int, budget_steps: int) -> s.RunRecord:
    """Train until ``budget_steps`` env steps were sampled; return the record of the run."""
    record = s.RunRecord("handwritten-impala", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["ray", "torch", "gymnasium", "numpy"]))
    s.clean_ray_env()
    ray.init(**s.RAY_INIT)
    try:
        workers: list[Any] = [
            ray.remote(Worker).remote(m.env, num_envs=m.envs_per_worker, fragment_length=m.fragment_length,
                                      seed=seed, worker_index=w, gamma=m.gamma, lam=m.lam,
                                      policy=PolicyConfig(hidden_sizes=m.hidden), torch_threads=1)
            for w in range(m.num_workers)]
        learner: Any = ray.remote(Learner).remote(m, seed)
        ray.get([w.get_weights.remote() for w in workers] + [learner.__ray_ready__.remote()])
        record.setup_s = s.since_start()
        _train(m, workers, learner, record)
    finally:
        ray.shutdown()
    return record


def _train(m: i.MatchedIMPALA, workers: list[Any], learner: Any, record: s.RunRecord) -> None:
    returns: collections.deque[float] = collections.deque(maxlen=100)
    sampled = trained = 0
    learner_queue = 2 * m.fragments_per_batch
    reply_queue = m.num_workers * m.max_in_flight + 1
    sampling = {workers[w].sample_fragment.remote(): w for w in range(m.num_workers)
                for _ in range(m.max_in_flight)}
    at_learner: collections.deque[tuple[Any, int]] = collections.deque()  # (answer ref, worker)
    at_workers: collections.deque[Any] = collections.deque()  # refs of the workers' load results
    start = time.perf_counter()
    while record.running():
        # the learner holds at most two batches' worth of fragments; then the oldest answer goes
        # to its worker, and at most `reply_queue` of those are waited for at once
        while len(at_learner) < learner_queue:
            (done,), _ = ray.wait(list(sampling), num_returns=1)
            w = sampling.pop(done)
            sampling[workers[w].sample_fragment.remote()] = w
            at_learner.append((learner.learn.remote(done, w), w))
        answer, w = at_learner.popleft()
        ray.wait([answer], num_returns=1)
        at_workers.append(workers[w].load.remote(answer))
        if len(at_workers) < reply_queue:
            continue
        episode_returns, steps, report = ray.get(at_workers.popleft())
        returns.extend(episode_returns.tolist())
        sampled += steps
        if report is None:
            continue
        trained += report.env_steps_trained
        record.learner_s += report.learner_time_s
        record.add(time.perf_counter() - start, sampled, trained,
                   float(np.mean(returns)) if returns else math.nan)


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    i.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps))


if __name__ == "__main__":
    main(sys.argv[1:])

__all__ = ["Answer", "Learner", "Worker", "run"]
