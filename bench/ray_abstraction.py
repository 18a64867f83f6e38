"""Abstraction cost of the Ray backend: an rxrl plan vs the same loop written by hand in Ray.

The same workload — ``--actors`` rollout actors whose items cost ``--item-ms`` (a sleep) — is
run as a hand-written ``ray.remote`` + ``ray.wait`` loop and as an rxrl plan, in one process
on one Ray instance, alternating A/B/B/A so that drifting machine load hits both alike. Prints
each side's median throughput and the ratio rxrl / hand-written (the goal is >= 0.97). Run:
``python bench/ray_abstraction.py [--actors 4 --item-ms 20 --items 400 --repeats 4]``.

Workloads: asynchronous sampling (``gather``, k = 1 and 2), synchronous sampling
(``barrier``), asynchronous sampling feeding a learner actor (``gather | call``: the
sample goes from worker to learner as an object ref, in the hand-written loop as in rxrl),
and the synchronous PPO shape (``barrier | call | broadcast``: a round goes to the learner,
which takes ``--item-ms`` too and replies with a report and ``--weights-kb`` of weights that
every worker loads before its next sample). Besides the ratio, the table gives the
difference in ms per pull: rxrl's coordination cost per item (or per round).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import ray

import rxrl
from rxrl import ops


class Worker:
    """A rollout worker stand-in: each sample takes ``seconds`` and carries ``size`` bytes."""

    def __init__(self, index: int, seconds: float, size: int) -> None:
        self.index = index
        self.seconds = seconds
        self.payload = bytes(size)
        self.count = 0

    def sample(self) -> tuple[int, int, bytes]:
        time.sleep(self.seconds)
        self.count += 1
        return self.index, self.count, self.payload


    def set_weights(self, weights: bytes) -> None:
        self.weights = weights


class Learner:
    """Consumes samples; returns a small metric (or, for a round, a report and weights)."""

    def __init__(self, seconds: float = 0.0, weights_size: int = 0) -> None:
        self.steps = 0
        self.seconds = seconds
        self.weights = bytes(weights_size)

    def train(self, sample: tuple[int, int, bytes]) -> int:
        self.steps += 1
        return len(sample[2])

    def train_round(self, *samples: tuple[int, int, bytes]) -> tuple[int, bytes]:
        """A PPO-style update on one round: ``seconds`` of work, then (report, weights)."""
        time.sleep(self.seconds)
        self.steps += 1
        return sum(len(s[2]) for s in samples), self.weights


def train_round(learner: Learner, samples: list[tuple[int, int, bytes]]) -> tuple[int, bytes]:
    """``Learner.train_round`` on a barrier round, as a plan function."""
    return learner.train_round(*samples)


def load_weights(worker: Worker, trained: tuple[int, bytes]) -> None:
    """The broadcast's effect: load the learner's weights."""
    worker.set_weights(trained[1])


def report_of(trained: tuple[int, bytes]) -> int:
    """What the driver reads of an update: the report, not the weights."""
    return trained[0]


RemoteWorker: Any = ray.remote(Worker)
RemoteLearner: Any = ray.remote(Learner)

Measure = Callable[[int, float, int, int], float]


# -------------------------------------------------------------------- hand-written loops


def by_hand_gather(k: int) -> Measure:
    def measure(n: int, seconds: float, size: int, items: int) -> float:
        workers = [RemoteWorker.remote(i, seconds, size) for i in range(n)]
        pending: dict[Any, Any] = {}
        for w in workers:
            for _ in range(k):
                pending[w.sample.remote()] = w
        warmup, taken, start = max(2, items // 20), 0, 0.0
        while taken < items + warmup:
            if taken == warmup:
                start = time.perf_counter()
            [ready], _ = ray.wait(list(pending), num_returns=1)
            worker = pending.pop(ready)
            pending[worker.sample.remote()] = worker
            ray.get(ready)
            taken += 1
        elapsed = time.perf_counter() - start
        for w in workers:
            ray.kill(w)
        return items / elapsed
    return measure


def by_hand_barrier(n: int, seconds: float, size: int, items: int) -> float:
    workers = [RemoteWorker.remote(i, seconds, size) for i in range(n)]
    rounds = items // n
    warmup = max(2, rounds // 20)
    start = 0.0
    for r in range(rounds + warmup):
        if r == warmup:
            start = time.perf_counter()
        ray.get([w.sample.remote() for w in workers])
    elapsed = time.perf_counter() - start
    for w in workers:
        ray.kill(w)
    return rounds * n / elapsed


def by_hand_learner(n: int, seconds: float, size: int, items: int) -> float:
    workers = [RemoteWorker.remote(i, seconds, size) for i in range(n)]
    learner = RemoteLearner.remote()
    pending = {w.sample.remote(): w for w in workers}
    warmup, taken, start = max(2, items // 20), 0, 0.0
    while taken < items + warmup:
        if taken == warmup:
            start = time.perf_counter()
        [ready], _ = ray.wait(list(pending), num_returns=1)
        worker = pending.pop(ready)
        pending[worker.sample.remote()] = worker
        ray.get(learner.train.remote(ready))  # the sample travels as a ref
        taken += 1
    elapsed = time.perf_counter() - start
    for w in [*workers, learner]:
        ray.kill(w)
    return items / elapsed


def by_hand_ppo_shape(weights_size: int) -> Measure:
    def measure(n: int, seconds: float, size: int, items: int) -> float:
        workers = [RemoteWorker.remote(i, seconds, size) for i in range(n)]
        learner = RemoteLearner.remote(seconds, weights_size)
        rounds = items // n
        warmup = max(2, rounds // 20)
        start, weights = 0.0, None
        for r in range(rounds + warmup):
            if r == warmup:
                start = time.perf_counter()
            if weights is not None:  # Ray runs these before each worker's next sample
                for w in workers:
                    w.set_weights.remote(weights)
            samples = [w.sample.remote() for w in workers]
            ray.wait(samples, num_returns=n)
            report, weights = learner.train_round.options(num_returns=2).remote(*samples)
            ray.get(report)
        elapsed = time.perf_counter() - start
        for a in [*workers, learner]:
            ray.kill(a)
        return rounds * n / elapsed
    return measure


# ------------------------------------------------------------------------------ rxrl plans


def rxrl_plan(build: Callable[[rxrl.ActorGroup[Worker]], rxrl.Plan[Any]], per_pull: int) -> Measure:
    def measure(n: int, seconds: float, size: int, items: int) -> float:
        group = rxrl.indexed_actors(lambda i: Worker(i, seconds, size), n, name="Worker")
        pulls = items // per_pull
        warmup = max(2, pulls // 20)
        with rxrl.run(build(group), "ray") as run:
            for _ in range(warmup):
                next(run)
            start = time.perf_counter()
            for _ in range(pulls):
                next(run)
            return pulls * per_pull / (time.perf_counter() - start)
    return measure


def learner_plan(group: rxrl.ActorGroup[Worker]) -> rxrl.Plan[int]:
    return (rxrl.from_actors(group, Worker.sample) | ops.gather()
            | ops.call(rxrl.actors(Learner, 1), Learner.train))


def ppo_shape_plan(seconds: float, weights_size: int
                   ) -> Callable[[rxrl.ActorGroup[Worker]], rxrl.Plan[int]]:
    def build(group: rxrl.ActorGroup[Worker]) -> rxrl.Plan[int]:
        learner = rxrl.indexed_actors(lambda i: Learner(seconds, weights_size), 1, name="Learner")
        return (rxrl.from_actors(group, Worker.sample) | ops.barrier()
                | ops.call(learner, train_round) | ops.broadcast(group, load_weights)
                | ops.map(report_of))
    return build


def main() -> None:
    """Alternate the two sides of each workload and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--item-ms", type=float, default=20.0)
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--payload-kb", type=int, default=64)
    parser.add_argument("--weights-kb", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--only", help="run only the workloads whose name contains this")
    args = parser.parse_args()
    n, seconds, size = args.actors, args.item_ms / 1000, args.payload_kb * 1024
    workloads: dict[str, tuple[Measure, Measure]] = {
        "gather(1)": (by_hand_gather(1),
                      rxrl_plan(lambda g: rxrl.from_actors(g, Worker.sample) | ops.gather(1), 1)),
        "gather(2)": (by_hand_gather(2),
                      rxrl_plan(lambda g: rxrl.from_actors(g, Worker.sample) | ops.gather(2), 1)),
        "barrier": (by_hand_barrier,
                    rxrl_plan(lambda g: rxrl.from_actors(g, Worker.sample) | ops.barrier(), n)),
        "gather | call(learner)": (by_hand_learner, rxrl_plan(learner_plan, 1)),
        "barrier | call | broadcast": (by_hand_ppo_shape(args.weights_kb * 1024),
                                       rxrl_plan(ppo_shape_plan(seconds, args.weights_kb * 1024), n)),
    }
    if args.only:
        workloads = {k: v for k, v in workloads.items() if args.only in k}
    ray.init(num_cpus=max(4, n + 1), include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    print(f"{n} actors x {args.item_ms:g} ms per item, {args.payload_kb} KiB per item, "
          f"{args.items} items per measurement, {args.repeats} A/B pairs (medians)")
    print(f"{'workload':<28} {'by hand items/s':>16} {'rxrl items/s':>13} {'rxrl / by hand':>15} "
          f"{'rxrl - by hand, ms/item':>24}")
    try:
        for name, (by_hand, plan) in workloads.items():
            hand: list[float] = []
            ours: list[float] = []
            for r in range(args.repeats):
                pair = [(by_hand, hand), (plan, ours)]
                for measure, into in (pair if r % 2 == 0 else pair[::-1]):
                    into.append(measure(n, seconds, size, args.items))
            h, o = statistics.median(hand), statistics.median(ours)
            print(f"{name:<28} {h:>16.1f} {o:>13.1f} {o / h:>15.3f} {1e3 / o - 1e3 / h:>24.3f}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
