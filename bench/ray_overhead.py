"""Per-item driver overhead of each driver-side operator, reference vs Ray backend (µs/item).

Each plan is ``source | op`` on trivial integer items, timed to the end (actor start-up
excluded), in µs per item; the first row is the source alone, so an operator's own cost is
its row minus that one. On Ray, driver operators run the same generators as the reference
interpreter; ``gather``/``barrier`` over ``from_iterables`` shards, ``call`` and
``broadcast`` include their actor round trips (which is their cost on a real run). Run:
``python bench/ray_overhead.py [--items 100000 --actor-items 2000]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import ray

import rxrl
from rxrl import ops


class Sink:
    """A do-nothing actor for ``call`` and ``broadcast``."""

    def take(self, x: int) -> int:
        return x

    def notice(self, x: int) -> None:
        return None


def driver_cases(xs: list[int]) -> dict[str, Callable[[], rxrl.Plan[Any]]]:
    def src() -> rxrl.Plan[int]:
        return rxrl.from_iterable(xs)

    quarter = [xs[i::4] for i in range(4)]
    return {
        "map": lambda: src() | ops.map(lambda x: x),
        "filter": lambda: src() | ops.filter(lambda x: True),
        "flat_map": lambda: src() | ops.flat_map(lambda x: (x,)),
        "window(16)": lambda: src() | ops.window(16),
        "take": lambda: src() | ops.take(len(xs)),
        "scan": lambda: src() | ops.scan(lambda a, x: x, 0),
        "tap": lambda: src() | ops.tap(lambda x: None),
        "zip x2": lambda: ops.zip(src(), src()),
        "union x4 (round robin)": lambda: ops.union(*map(rxrl.from_iterable, quarter)),
        "union x4 (async)": lambda: ops.union(*map(rxrl.from_iterable, quarter), mode="async"),
        "concurrently x4 (async)": lambda: ops.concurrently(*map(rxrl.from_iterable, quarter),
                                                            mode="async", emit=[0, 1, 2, 3]),
    }


def actor_cases(xs: list[int]) -> dict[str, Callable[[], rxrl.Plan[Any]]]:
    quarter = [xs[i::4] for i in range(4)]
    return {
        "gather x4 (k=1)": lambda: rxrl.from_iterables(quarter) | ops.gather(1),
        "gather x4 (k=4)": lambda: rxrl.from_iterables(quarter) | ops.gather(4),
        "barrier x4": lambda: rxrl.from_iterables(quarter) | ops.barrier(),
        "call": lambda: rxrl.from_iterable(xs) | ops.call(rxrl.actors(Sink, 1), Sink.take),
        "broadcast to 2": lambda: rxrl.from_iterable(xs) | ops.broadcast(rxrl.actors(Sink, 2),
                                                                        Sink.notice),
    }


def per_item(backend: str, build: Callable[[], rxrl.Plan[Any]], n: int, repeats: int) -> float:
    """µs per item of running ``build()`` to the end on ``backend`` (actor start excluded)."""
    def once() -> float:
        with rxrl.run(build(), backend) as run:
            first = next(run)
            start = time.perf_counter()
            for _ in run:
                pass
            del first
            return time.perf_counter() - start

    return min(once() for _ in range(repeats)) / n * 1e6


def main() -> None:
    """Print one table row per operator."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--actor-items", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        print(f"µs per item; driver operators over {args.items} items, actor operators over "
              f"{args.actor_items} items (including their round trips)")
        print(f"{'plan':<26} {'reference':>10} {'ray':>10}")
        xs = list(range(args.items))
        cases = {"from_iterable (source)": lambda: rxrl.from_iterable(xs), **driver_cases(xs)}
        for name, build in cases.items():
            row = [per_item(b, build, args.items, args.repeats) for b in ("reference", "ray")]
            print(f"{name:<26} {row[0]:>10.2f} {row[1]:>10.2f}")
        ys = list(range(args.actor_items))
        for name, build in actor_cases(ys).items():
            row = [per_item(b, build, args.actor_items, args.repeats) for b in ("reference", "ray")]
            print(f"{name:<26} {row[0]:>10.2f} {row[1]:>10.1f}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
