"""The learner pipeline on Ray: ``call(learner, train, max_in_flight=2)`` against ``=1`` and ideal.

``--workers`` rollout actors whose sample takes ``--sample-ms`` (a sleep) feed a learner whose
update takes ``--learn-ms``; its weights go back to the workers. Two shapes:

- **synchronous** (PPO with a pipelined learner)::

      from_actors(workers, sample) | barrier() | call(learner, train, max_in_flight=k)
                                   | broadcast(workers, set_weights)

  With ``k = 1`` sampling and learning take turns: a round costs ``sample + learn``. With
  ``k = 2`` the driver hands the learner round i + 1 while it trains on round i (sampled with
  weights one update older): ideally a round costs ``max(sample, learn)``.
- **asynchronous** (IMPALA's shape)::

      from_actors(workers, sample) | gather(2, tagged=True) | call(learner, train_tagged,
                                   max_in_flight=k) | call(workers, set_weights_of_sender)

  The workers sample continuously; ideally the learner never waits: ``1 / learn`` updates
  per second (or the sampling rate, if lower).

Each plan is measured against a hand-written Ray loop with the same schedule (the same
submissions in the same order), alternating the systems; prints updates per second, each as a
fraction of the ideal overlap (target for ``k = 2``: >= 0.9), and rxrl / hand-written. Run:
``python bench/learner_pipeline.py [--workers 2 --sample-ms 20 --learn-ms 20 --rounds 150]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import ray

import rxrl
from rxrl import ops


class Worker:
    """A rollout worker stand-in: a sample takes ``seconds``; it loads the weights it is sent."""

    def __init__(self, index: int, seconds: float) -> None:
        self.index, self.seconds, self.weights = index, seconds, 0

    def sample(self) -> tuple[int, int]:
        time.sleep(self.seconds)
        return self.index, self.weights

    def set_weights(self, version: int) -> None:
        self.weights = version


class Learner:
    """An update takes ``seconds``; it returns the new weights' version."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.version = seconds, 0

    def train(self, round_: list[tuple[int, int]]) -> int:
        time.sleep(self.seconds)
        self.version += 1
        return self.version


    def train_one(self, sample: tuple[int, int]) -> int:
        return self.train([sample])


def set_weights(worker: Worker, version: int) -> None:
    """The broadcast's effect."""
    worker.set_weights(version)


def train_tagged(learner: Learner, item: rxrl.Tagged[tuple[int, int]]) -> rxrl.Tagged[int]:
    """One update on one worker's sample; the tag routes the weights back to that worker."""
    return item.with_value(learner.train_one(item.value))


def set_weights_of_sender(worker: Worker, item: rxrl.Tagged[int]) -> int:
    """Load the new weights on the worker whose sample was trained on."""
    worker.set_weights(item.value)
    return item.value


Measure = Callable[[int, int, float, float, int], float]


def timed(run: Iterator[object], rounds: int) -> float:
    """Updates per second over ``rounds`` items of ``run``, after a warm-up."""
    for _ in range(max(3, rounds // 10)):
        next(run)
    start = time.perf_counter()
    for _ in range(rounds):
        next(run)
    return rounds / (time.perf_counter() - start)


def rxrl_sync(k: int, workers: int, sample_s: float, learn_s: float, rounds: int) -> float:
    """The synchronous plan with ``max_in_flight=k``."""
    group = rxrl.indexed_actors(lambda i: Worker(i, sample_s), workers, name="Worker")
    learner = rxrl.indexed_actors(lambda i: Learner(learn_s), 1, name="Learner")
    plan = (rxrl.from_actors(group, Worker.sample) | ops.barrier()
            | ops.call(learner, Learner.train, max_in_flight=k) | ops.broadcast(group, set_weights))
    with rxrl.run(plan, "ray") as run:
        return timed(run, rounds)


def rxrl_async(k: int, workers: int, sample_s: float, learn_s: float, rounds: int) -> float:
    """The asynchronous plan with ``max_in_flight=k``."""
    group = rxrl.indexed_actors(lambda i: Worker(i, sample_s), workers, name="Worker")
    learner = rxrl.indexed_actors(lambda i: Learner(learn_s), 1, name="Learner")
    plan = (rxrl.from_actors(group, Worker.sample) | ops.gather(2, tagged=True)
            | ops.call(learner, train_tagged, max_in_flight=k)
            | ops.call(group, set_weights_of_sender))
    with rxrl.run(plan, "ray") as run:
        return timed(run, rounds)


RemoteWorker: Any = ray.remote(Worker)
RemoteLearner: Any = ray.remote(Learner)


def hand_sync(k: int, workers: int, sample_s: float, learn_s: float, rounds: int) -> float:
    """The synchronous loop by hand: the same submissions, in the same order."""
    ws = [RemoteWorker.remote(i, sample_s) for i in range(workers)]
    learner = RemoteLearner.remote(learn_s)

    def updates() -> Iterator[object]:
        training: deque[Any] = deque()
        while True:
            while len(training) < k:
                samples = [w.sample.remote() for w in ws]
                ray.wait(samples, num_returns=len(samples))
                training.append(learner.train.remote(samples))
            version = ray.get(training.popleft())
            for w in ws:
                w.set_weights.remote(version)
            yield version

    try:
        return timed(updates(), rounds)
    finally:
        for a in [*ws, learner]:
            ray.kill(a)


def hand_async(k: int, workers: int, sample_s: float, learn_s: float, rounds: int) -> float:
    """The asynchronous loop by hand: two samples in flight per worker, k updates ahead."""
    ws = [RemoteWorker.remote(i, sample_s) for i in range(workers)]
    learner = RemoteLearner.remote(learn_s)

    def updates() -> Iterator[object]:
        sampling = {w.sample.remote(): i for i, w in enumerate(ws) for _ in range(2)}
        training: deque[tuple[Any, int]] = deque()
        while True:
            while len(training) < k:
                [ready], _ = ray.wait(list(sampling), num_returns=1)
                i = sampling.pop(ready)
                sampling[ws[i].sample.remote()] = i
                training.append((learner.train_one.remote(ready), i))
            ref, i = training.popleft()
            version = ray.get(ref)
            ray.get(ws[i].set_weights.remote(version))
            yield version

    try:
        return timed(updates(), rounds)
    finally:
        for a in [*ws, learner]:
            ray.kill(a)


def main() -> None:
    """Alternate the systems for each shape and k, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sample-ms", type=float, default=20.0)
    parser.add_argument("--learn-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    sample_s, learn_s = args.sample_ms / 1000, args.learn_ms / 1000
    ideal = {"synchronous": 1 / max(sample_s, learn_s),
             "asynchronous": min(1 / learn_s, args.workers / sample_s)}
    systems: dict[tuple[str, int], tuple[Measure, Measure]] = {
        (shape, k): ((hand_sync, rxrl_sync) if shape == "synchronous" else (hand_async, rxrl_async))
        for shape in ideal for k in (1, 2)}
    ray.init(num_cpus=max(4, args.workers + 2), include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    results: dict[tuple[str, int], tuple[list[float], list[float]]] = {
        key: ([], []) for key in systems}
    try:
        for r in range(args.repeats):
            for key, (hand, ours) in systems.items():
                pair = [(hand, results[key][0]), (ours, results[key][1])]
                for measure, into in (pair if r % 2 == 0 else pair[::-1]):
                    into.append(measure(key[1], args.workers, sample_s, learn_s, args.rounds))
    finally:
        ray.shutdown()
    print(f"{args.workers} workers x {args.sample_ms:g} ms per sample, learner {args.learn_ms:g} ms "
          f"per update, {args.rounds} updates per measurement, {args.repeats} alternations "
          "(medians)")
    print(f"{'shape':<13} {'k':>2} {'ideal/s':>8} {'by hand/s':>10} {'of ideal':>9} {'rxrl/s':>8} "
          f"{'of ideal':>9} {'rxrl / by hand':>15}")
    for (shape, k), (by_hand, by_rxrl) in results.items():
        h, o = statistics.median(by_hand), statistics.median(by_rxrl)
        print(f"{shape:<13} {k:>2} {ideal[shape]:>8.1f} {h:>10.1f} {h / ideal[shape]:>9.3f} "
              f"{o:>8.1f} {o / ideal[shape]:>9.3f} {o / h:>15.3f}")


if __name__ == "__main__":
    main()
