"""Dataflow efficiency of the Ray backend: achieved / ideal throughput with items of known cost.

Synthetic rollout actors whose every item costs a known time (a sleep, so that the cost does
not depend on how busy the 2 cores are): with ``--actors`` actors and ``--item-ms`` per item
the ideal is ``actors / item_ms`` items per second. Prints, for ``gather`` (k = 1, 2) and
``barrier`` + ``map``, the achieved throughput, its ratio to the ideal, and the per-round
overhead of ``barrier`` in ms (round time minus the item time); then the same workloads as
hand-written Ray loops (from ``ray_abstraction.py``), which show how much of the gap to the
ideal is Ray's own per-call cost on this machine. Ratios, not pass/fail. Run:
``python bench/ray_dataflow.py [--actors 4 --item-ms 20 --items 400 --repeats 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import ray
from ray_abstraction import by_hand_barrier, by_hand_gather

import rxrl
from rxrl import ops


class SleepyWorker:
    """A rollout worker stand-in whose every sample takes ``seconds``."""

    def __init__(self, index: int, seconds: float) -> None:
        self.index = index
        self.seconds = seconds
        self.count = 0

    def sample(self) -> tuple[int, int]:
        time.sleep(self.seconds)
        self.count += 1
        return self.index, self.count


def workers(n: int, seconds: float) -> rxrl.ActorGroup[SleepyWorker]:
    return rxrl.indexed_actors(lambda i: SleepyWorker(i, seconds), n, name="SleepyWorker")


def timed(plan: rxrl.Plan[Any], warmup: int, items: int) -> float:
    """Seconds to pull ``items`` outputs after ``warmup`` outputs (actors already running)."""
    with rxrl.run(plan, "ray") as run:
        for _ in range(warmup):
            next(run)
        start = time.perf_counter()
        for _ in range(items):
            next(run)
        return time.perf_counter() - start


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--item-ms", type=float, default=20.0)
    parser.add_argument("--items", type=int, default=400, help="items per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n, item_s, items = args.actors, args.item_ms / 1000, args.items
    ray.init(num_cpus=max(4, n), include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    ideal = n / item_s
    rounds = items // n
    group = workers(n, item_s)
    cases: dict[str, tuple[rxrl.Plan[Any], int]] = {
        "gather(max_in_flight=1)": (rxrl.from_actors(group, SleepyWorker.sample) | ops.gather(1), items),
        "gather(max_in_flight=2)": (rxrl.from_actors(group, SleepyWorker.sample) | ops.gather(2), items),
        "barrier() | map": (rxrl.from_actors(group, SleepyWorker.sample) | ops.barrier()
                            | ops.map(lambda batch: len(batch)), rounds),
    }
    print(f"Ray backend, {n} actors x {args.item_ms:g} ms per item: ideal {ideal:.1f} items/s; "
          f"median of {args.repeats} runs of {items} items")
    print(f"{'plan':<26} {'items/s':>9} {'achieved/ideal':>15} {'barrier overhead/round':>23}")
    try:
        for name, (plan, pulls) in cases.items():
            times = [timed(plan, warmup=max(2, pulls // 20), items=pulls) for _ in range(args.repeats)]
            elapsed = statistics.median(times)
            made = pulls * (n if name.startswith("barrier") else 1)
            rate = made / elapsed
            overhead = (f"{(elapsed / pulls - item_s) * 1000:.2f} ms" if name.startswith("barrier")
                        else "")
            print(f"{name:<26} {rate:>9.1f} {rate / ideal:>15.3f} {overhead:>23}")
        by_hand = {"by hand: ray.wait, k=1": by_hand_gather(1), "by hand: ray.wait, k=2": by_hand_gather(2),
                   "by hand: ray.get(round)": by_hand_barrier}
        for name, measure in by_hand.items():
            rate = statistics.median(measure(n, item_s, 0, items) for _ in range(args.repeats))
            overhead = (f"{(n / rate - item_s) * 1000:.2f} ms" if name.endswith("(round)") else "")
            print(f"{name:<26} {rate:>9.1f} {rate / ideal:>15.3f} {overhead:>23}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
