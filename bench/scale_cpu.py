"""Where the CPU of a driver-scale shape goes, per item: rxrl against the hand-written loop.

``bench/scale.py`` reports items/s; on a small machine at large N the rate is set by the
machine's CPU, not by the driver alone. This runs one shape of ``bench/scale.py`` (same
synthetic workers, same plans and loops) for one N, alternating rxrl and the hand-written
loop, and reports per item: the driver process's CPU, the whole machine's CPU
(``/proc/stat``), and the CPU of every process of the machine grouped by its title (Ray names
an actor's process ``ray::Class`` while idle and ``ray::Class.method`` while it runs one).
Idle actors of the other system are measured too: their share is Ray's background work.

Run: ``python bench/scale_cpu.py [--shape call --workers 32 --repeats 4 --seconds 3]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import ray
import scale
from ray import cloudpickle

# the synthetic actors travel by value: Ray's workers need not find bench/ on their path
by_value: Callable[[ModuleType], None] = cloudpickle.register_pickle_by_value  # untyped upstream
by_value(scale)

#: clock ticks per second of /proc's CPU counters
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def machine_cpu_s() -> float:
    """CPU seconds the machine has spent busy (all cores, not idle or waiting on I/O)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) * TICK_S


def process_cpu_s() -> dict[str, tuple[str, float]]:
    """Per process id: (its title, CPU seconds so far)."""
    out: dict[str, tuple[str, float]] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline") as f:
                title = f.read().split("\0")[0]
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        out[pid] = (kind(title), (int(fields[11]) + int(fields[12])) * TICK_S)
    return out


def kind(title: str) -> str:
    """A process title grouped: Ray's actors by class (``ray::Host``), its daemons by name."""
    if title.startswith("ray::"):
        return title.split(".")[0]
    name = Path(title.split()[0]).name if title else "?"
    return "driver (python)" if name.startswith("python") else name


def measure(side: scale.Side) -> dict[str, float]:
    """One timed window of ``side``: items/s and CPU ms per item (driver, machine, per kind)."""
    machine, procs, start = machine_cpu_s(), process_cpu_s(), time.perf_counter()
    items, seconds = side.measure()
    elapsed = time.perf_counter() - start  # the warm-up too: CPU is read around both
    rate = items / seconds
    per_item = 1000 / (rate * elapsed)  # ms per item, at the window's rate
    after = process_cpu_s()
    by_kind: dict[str, float] = collections.defaultdict(float)
    for pid, (name, cpu) in after.items():
        by_kind[name] += cpu - procs.get(pid, (name, 0.0))[1]
    row = {"items/s": rate, "driver ms/item": 1000 * side.watch.cpu_s / items,
           "machine ms/item": (machine_cpu_s() - machine) * per_item}
    top = sorted(by_kind.items(), key=lambda kv: -kv[1])[:6]
    row.update({f"{name} ms/item": cpu * per_item for name, cpu in top})
    return row


def main() -> None:
    """Measure and print the medians per system."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="call", choices=scale.SHAPES)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--warmup-s", type=float, default=1.5)
    p.add_argument("--latency-ms", type=float, default=20.0)
    args = p.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    s = scale.Settings(argparse.Namespace(
        latency_ms=args.latency_ms, item_bytes=64, k=2, learner_ms=0.0, warmup_s=args.warmup_s,
        seconds=args.seconds, items=None, aggregators=0, agg_window=16))
    sides: dict[str, scale.Side] = {
        "rxrl": scale.RxrlSide(args.shape, args.workers, s),
        "hand": scale.HandSide(args.shape, scale.HandActors(args.workers, s), s)}
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for rep in range(args.repeats):
        for name in (["rxrl", "hand"] if rep % 2 == 0 else ["hand", "rxrl"]):
            rows[name].append(measure(sides[name]))
    ratios = [a["items/s"] / b["items/s"] for a, b in zip(rows["rxrl"], rows["hand"], strict=True)]
    print(f"{args.shape}, N={args.workers}: rxrl / hand items/s per pair "
          f"{', '.join(f'{r:.3f}' for r in ratios)}; median {statistics.median(ratios):.3f}; "
          f"load {os.getloadavg()[0]:.1f}")
    for name, measured in rows.items():
        keys = sorted({k for row in measured for k in row}, key=lambda k: -measured[0].get(k, 0))
        cells = [f"{k} {statistics.median(row.get(k, 0.0) for row in measured):.2f}" for k in keys]
        print(f"{name}: " + "; ".join(cells))
    sides["rxrl"].close()
    ray.shutdown()


if __name__ == "__main__":
    main()
