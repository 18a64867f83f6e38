"""The rx backend against the reference interpreter: per-item driver overhead and shard throughput.

1. Per-item overhead (µs/item) of a chain of 5 maps and of a 4-input async union, reference vs
   rx (single-threaded work: the price of Rx operators, recorded choices and the pull protocol).
   Measured in CPU time of this process (``time.process_time``), which other load on a shared
   machine does not inflate the way it inflates wall time.
2. Dataflow efficiency on synthetic shards whose items cost a known time: 4 in-process actors,
   each item ``time.sleep(work)`` (sleeping releases the GIL, like a real env step in C or a
   torch op). Achieved / ideal throughput for ``gather`` and ``barrier | map`` on both backends,
   the per-round overhead of ``barrier`` in ms, and a hand-written ``ThreadPoolExecutor`` loop
   as the peer (the abstraction cost of the rx plan).

Prints, never asserts. Run: ``python bench/rx_overhead.py [--items N] [--work-ms MS]``.
Timings vary with machine load: compare figures printed side by side in one run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import rxrl
from rxrl import ops


def best_of(fn: Callable[[], object], repeats: int = 5) -> float:
    """The least CPU time (seconds, all threads of this process) of ``repeats`` runs of ``fn()``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def inc(x: int) -> int:
    """The work of one map."""
    return x + 1


def per_item(n: int) -> None:
    """Print µs/item of driver-side plans on both backends."""
    xs = list(range(n))
    cases: dict[str, rxrl.Plan[object]] = {
        "5 x map": rxrl.from_iterable(xs) | ops.map(inc) | ops.map(inc) | ops.map(inc)
        | ops.map(inc) | ops.map(inc),
        "union x4 (async)": ops.union(*(rxrl.from_iterable(xs[i::4]) for i in range(4)),
                                      mode="async"),
        "zip x2": ops.zip(rxrl.from_iterable(xs), rxrl.from_iterable(xs)),
        "window(16)": rxrl.from_iterable(xs) | ops.window(16),
    }
    print(f"## per-item overhead, {n} items (CPU time, best of 5)")
    print(f"{'plan':<18} {'reference µs':>13} {'rx µs':>8} {'rx / ref':>9}")
    for name, plan in cases.items():
        ref = best_of(lambda plan=plan: list(rxrl.run(plan, "reference")))  # type: ignore[misc]
        rx = best_of(lambda plan=plan: list(rxrl.run(plan, "rx")))  # type: ignore[misc]
        print(f"{name:<18} {ref / n * 1e6:>13.2f} {rx / n * 1e6:>8.2f} {rx / ref:>9.2f}")


class Shard:
    """A synthetic rollout worker: each item costs ``work`` seconds of GIL-free waiting."""

    def __init__(self, index: int, work: float) -> None:
        self.index = index
        self.work = work
        self.count = 0

    def sample(self) -> int:
        """One item, after ``work`` seconds."""
        time.sleep(self.work)
        self.count += 1
        return self.count


def handwritten(items: int, actors: int, work: float, k: int) -> None:
    """The peer: a hand-written thread pool keeping ``k`` requests in flight per worker."""
    shards = [Shard(i, work) for i in range(actors)]
    pools = [ThreadPoolExecutor(1) for _ in shards]  # one thread per worker, calls in order
    owner: dict[Future[int], int] = {}
    for i, (shard, pool) in enumerate(zip(shards, pools, strict=True)):
        for _ in range(k):
            owner[pool.submit(shard.sample)] = i
    taken = 0
    while taken < items:
        done, _ = wait(owner, return_when=FIRST_COMPLETED)
        for future in done:
            i = owner.pop(future)
            future.result()
            taken += 1
            owner[pools[i].submit(shards[i].sample)] = i
    for pool in pools:
        pool.shutdown(wait=True, cancel_futures=True)


def throughput(items: int, work_ms: float, actors: int = 4, repeats: int = 3) -> None:
    """Print achieved / ideal throughput of gather and barrier on synthetic shards."""
    work = work_ms / 1000
    ideal = actors / work  # items per second with every worker always busy
    rounds = items // actors

    def group() -> rxrl.ActorGroup[Shard]:
        return rxrl.indexed_actors(lambda i: Shard(i, work), actors, name="Shard")

    def gather(k: int) -> rxrl.Plan[int]:
        return rxrl.from_actors(group(), Shard.sample) | ops.gather(k) | ops.take(items)

    def barrier() -> rxrl.Plan[int]:
        return (rxrl.from_actors(group(), Shard.sample) | ops.barrier() | ops.map(sum)
                | ops.take(rounds))

    def timed(fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    cases: dict[str, Callable[[], object]] = {
        "gather(1) rx": lambda: list(rxrl.run(gather(1), "rx")),
        "gather(2) rx": lambda: list(rxrl.run(gather(2), "rx")),
        "barrier|map rx": lambda: list(rxrl.run(barrier(), "rx")),
        "hand-written pool k=1": lambda: handwritten(items, actors, work, 1),
        "gather(1) reference": lambda: list(rxrl.run(gather(1), "reference")),
    }
    best = {name: float("inf") for name in cases}
    for _ in range(repeats):  # A/B alternated, best of `repeats`
        for name, case in cases.items():
            best[name] = min(best[name], timed(case))
    print(f"\n## synthetic shards: {actors} actors × {work_ms:g} ms per item, {items} items "
          f"(ideal {ideal:.0f} items/s; best of {repeats}, alternated)")
    print(f"{'plan':<22} {'items/s':>8} {'of ideal':>9}")
    for name, seconds in best.items():
        n = rounds * actors if name.startswith("barrier") else items
        print(f"{name:<22} {n / seconds:>8.1f} {n / seconds / ideal:>9.3f}")
    per_round = (best["barrier|map rx"] / rounds - work) * 1000
    print(f"barrier per-round overhead (rx): {per_round:.3f} ms")
    peer = best["hand-written pool k=1"]
    print(f"rx gather(1) / hand-written pool: {peer / best['gather(1) rx']:.3f}")


def main() -> None:
    """Run both benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=100_000, help="items per overhead case")
    parser.add_argument("--shard-items", type=int, default=200, help="items per throughput case")
    parser.add_argument("--work-ms", type=float, default=20.0, help="cost of one shard item")
    args = parser.parse_args()
    per_item(args.items)
    throughput(args.shard_items, args.work_ms)


if __name__ == "__main__":
    main()
