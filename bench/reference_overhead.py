"""Per-item cost of each operator in the reference interpreter, against a bare generator.

Prints µs per item and the ratio to a plain Python loop doing the same work, then the
per-item cost of ``split`` itself: a split into n branches merged by a round-robin union,
minus the same union over n separate sources of the same items (what a split replaces), per
item of the source (target: <= 1 µs). Run: ``python bench/reference_overhead.py [--items N]``.
Timings vary with machine load: compare the figures printed side by side in one run, not
absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import rxrl
from rxrl import ops


def best_of(fn: Callable[[], object], repeats: int = 5) -> float:
    """The fastest of ``repeats`` timings of ``fn()``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Time each operator chain on ``--items`` integers and print a table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=200_000)
    n = parser.parse_args().items
    xs = list(range(n))

    def inc(x: int) -> int:
        return x + 1

    baseline = best_of(lambda: [inc(x) for x in xs])
    cases: dict[str, rxrl.Plan[object]] = {
        "from_iterable": rxrl.from_iterable(xs),
        "map": rxrl.from_iterable(xs) | ops.map(inc),
        "5 x map": rxrl.from_iterable(xs) | ops.map(inc) | ops.map(inc) | ops.map(inc)
        | ops.map(inc) | ops.map(inc),
        "filter": rxrl.from_iterable(xs) | ops.filter(lambda x: x % 2 == 0),
        "window(16)": rxrl.from_iterable(xs) | ops.window(16),
        "union x4 (async)": ops.union(*(rxrl.from_iterable(xs[i::4]) for i in range(4)),
                                      mode="async"),
        "gather x4": rxrl.from_iterables([xs[i::4] for i in range(4)]) | ops.gather(),
        "barrier x4": rxrl.from_iterables([xs[i::4] for i in range(4)]) | ops.barrier(),
    }
    print(f"reference interpreter, {n} items; baseline `[f(x) for x in xs]`: "
          f"{baseline / n * 1e6:.3f} µs/item")
    print(f"{'plan':<20} {'µs/item':>9} {'× baseline':>11}")
    for name, plan in cases.items():
        t = best_of(lambda plan=plan: list(rxrl.run(plan)))  # type: ignore[misc]
        print(f"{name:<20} {t / n * 1e6:>9.3f} {t / baseline:>11.1f}")
    print(f"\nsplit, per item of the source ({n} items):")
    print(f"{'branches':<9} {'split + union µs':>17} {'n sources + union µs':>21} {'split µs/item':>14}")
    for branches in (2, 4):
        split = ops.union(*ops.split(rxrl.from_iterable(xs), branches))
        apart = ops.union(*(rxrl.from_iterable(xs) for _ in range(branches)))
        ts = best_of(lambda plan=split: list(rxrl.run(plan)))  # type: ignore[misc]
        ta = best_of(lambda plan=apart: list(rxrl.run(plan)))  # type: ignore[misc]
        print(f"{branches:<9} {ts / n * 1e6:>17.3f} {ta / n * 1e6:>21.3f} {(ts - ta) / n * 1e6:>14.3f}")


if __name__ == "__main__":
    main()
