"""Ape-X written by hand on Ray: the low-level baseline rxrl's Ape-X plan must match.

The same math and settings as `rxrl.algos.qlearning.apex` (it wraps `QRolloutWorker`, `ReplayShard` and
`DQNLearner` and reads the same `ApeX` config), the same dataflow, written the way a Ray user
would write it without rxrl: each worker keeps ``max_in_flight`` samples under way
(``ray.wait`` takes them in completion order); a sample goes to the shards in turn as an
object ref and its worker gets the learner's current weights (a ref, straight from the
learner) once ``max_weight_sync_delay`` of its steps passed; each shard keeps one sample
request under way (a status and the batches as two returns, so that a shard below
``learning_starts`` is seen without fetching anything, and asked again after its next add);
the learner gets ``calls_per_sample`` calls per stored sample, ``learner_queue`` ahead, and
its priorities go to the shard the batches came from. Only episodes, counts and reports
reach the driver.

Run alone: ``python bench/handwritten_ray_apex.py --budget-steps 30000 --seed 0``.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from typing import Any

import attrs
import dqn_settings as d
import numpy as np
import ppo_settings as s
import ray
import rxrl_dqn

from rxrl.algos.qlearning.apex import ApeX
from rxrl.algos.qlearning.steps import Stored, merged
from rxrl.ready import NotReady
from rxrl.rl import DQNLearner, QRolloutWorker, ReplayShard, TrainMetrics, TransitionBatch, Weights


class Shard(ReplayShard):
    """A replay shard with the calls the loop makes."""

    def store(self, batch: TransitionBatch) -> Stored:
        """Add a worker's sample; its episodes and env steps."""
        self.add(batch)
        return Stored.of([batch])

    @ray.method(num_returns=2)
    def sample_batches(self, count: int) -> tuple[bool, list[TransitionBatch] | None]:
        """Whether the shard is ready, and ``count`` batches if so."""
        batches = []
        for _ in range(count):
            batch = self.sample()
            if isinstance(batch, NotReady):
                return False, None
            batches.append(batch)
        return True, batches

    def update(self, trained: tuple[TrainMetrics, Any, Any]) -> TrainMetrics:
        """The learner's new priorities for this shard's batches; its report passes on."""
        report, indices, priorities = trained
        self.update_priorities(indices, priorities)
        return report


class Learner(DQNLearner):
    """A `DQNLearner` that trains on a shard's batches."""

    def train_batches(self, batches: list[TransitionBatch]) -> tuple[TrainMetrics, Any, Any]:
        """A step per batch; the merged report, the rows' ids and new priorities."""
        reports, indices, priorities = [], [], []
        for batch in batches:
            report, td = self.train(batch)
            assert batch.indices is not None  # a replayed batch
            reports.append(report)
            indices.append(batch.indices)
            priorities.append(td)
        return merged(reports), np.concatenate(indices), np.concatenate(priorities)


def run(m: d.Matched, seed: int, budget_steps: int, stop_at_target: bool = False) -> s.RunRecord:
    """Train until `budget_steps` env steps were sampled; return the record of the run."""
    c = rxrl_dqn.apex_config(m, seed)
    record = s.RunRecord("handwritten-apex", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["ray", "torch", "gymnasium", "numpy"]))
    s.clean_ray_env()
    ray.init(**s.RAY_INIT)
    try:
        workers: list[Any] = [
            ray.remote(QRolloutWorker).remote(c.env, c.num_envs_per_worker, c.fragment_length, seed=seed,
                                              worker_index=i, epsilon=c.epsilon(i), n_step=c.learner.n_step,
                                              gamma=c.learner.gamma, q_net=c.learner.q_net)
            for i in range(c.num_workers)]
        shards: list[Any] = [ray.remote(Shard).remote(c.learner.replay, seed=seed, shard_index=j)
                             for j in range(c.num_shards)]
        learner: Any = ray.remote(Learner).remote(c.env, c.learner, seed=seed)
        ray.get([w.get_weights.remote() for w in workers] + [learner.get_weights.remote()]
                + [sh.__len__.remote() for sh in shards])
        record.setup_s = s.since_start()
        _train(c, workers, shards, learner, record, stop_at_target)
    finally:
        ray.shutdown()
    return record


def _train(c: ApeX, workers: list[Any], shards: list[Any], learner: Any, record: s.RunRecord,
           stop_at_target: bool) -> None:
    reporting = set(c.reporting)
    returns: collections.deque[float] = collections.deque(maxlen=100)
    sampled = trained = calls = stores = 0
    owed = 0.0
    since_sync = [0] * c.num_workers
    samples = {workers[i].sample.remote(): i for i in range(c.num_workers) for _ in range(c.max_in_flight)}
    requests: dict[Any, tuple[int, Any]] = {}  # status ref -> (shard, batches ref)
    waiting: set[int] = set()  # shards that answered "not ready": asked again after their next add
    for j, shard in enumerate(shards):
        status, batches = shard.sample_batches.remote(c.updates_per_call)
        requests[status] = (j, batches)
    reports: collections.deque[Any] = collections.deque()  # update results, learner_queue ahead
    syncs: collections.deque[Any] = collections.deque()
    start = time.perf_counter()
    while not d.done(record, stop_at_target):
        [ref], _ = ray.wait(list(samples), num_returns=1)  # a sample, in completion order
        i = samples.pop(ref)
        samples[workers[i].sample.remote()] = i
        j = stores % c.num_shards
        stores += 1
        stored: Stored = ray.get(shards[j].store.remote(ref))
        if j in waiting:
            waiting.discard(j)
            status, batches = shards[j].sample_batches.remote(c.updates_per_call)
            requests[status] = (j, batches)
        sampled += stored.env_steps
        if i in reporting:
            returns.extend(stored.episode_returns.tolist())
        since_sync[i] += stored.env_steps
        if since_sync[i] >= c.max_weight_sync_delay:
            since_sync[i] = 0
            weights: ray.ObjectRef[Weights] = learner.get_weights.remote()
            syncs.append(workers[i].set_weights.remote(weights))
            if len(syncs) > c.reply_queue:
                ray.get(syncs.popleft())
        owed += c.calls_per_sample
        while owed >= 1 and len(waiting) < len(shards):
            [status], _ = ray.wait(list(requests), num_returns=1)  # a shard, in completion order
            j, batches = requests.pop(status)
            if not ray.get(status):
                waiting.add(j)
                continue
            owed -= 1
            status, more = shards[j].sample_batches.remote(c.updates_per_call)
            requests[status] = (j, more)
            reports.append(shards[j].update.remote(learner.train_batches.remote(batches)))
            if len(reports) >= c.learner_queue:
                report: TrainMetrics = ray.get(reports.popleft())
                trained += report.env_steps_trained
                record.learner_s += report.learner_time_s
                calls += 1
                if calls % c.report_every == 0:
                    mean = float(np.mean(returns)) if returns else math.nan
                    record.add(time.perf_counter() - start, sampled, trained, mean)
        # every shard below learning_starts: the turn waits, no backlog (as a round-robin union)
        owed = min(owed, c.calls_per_sample)


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    d.runner_main(argv, __doc__ or "", lambda a, m: run(m, a.seed, a.budget_steps, a.stop_at_target))


if __name__ == "__main__":
    main(sys.argv[1:])
