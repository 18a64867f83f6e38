"""Driver scale (issue 25): items/s of gather, barrier and pipelined-call plans for N = 2 ... 64.

Synthetic rollout workers whose ``sample()`` sleeps ``--latency-ms`` and returns a tiny numpy
array (``--item-bytes``); every actor has ``num_cpus=0``, so 2 cores can host 64 of them (a
sleep needs no core). Three plan shapes, each as an rxrl plan on the Ray backend and as the
same loop written by hand in plain Ray, measured side by side in one Ray instance:

- ``gather``: ``from_actors(workers, sample) | gather(max_in_flight=k)`` against a
  ``ray.wait`` loop that keeps k requests per worker in flight and reads each item;
- ``barrier``: ``from_actors(workers, sample) | barrier()`` against
  ``ray.get([w.sample.remote() for w in workers])`` rounds (items/s counts every shard item);
- ``call``: ``gather(k) | call(learner, Learner.step, max_in_flight=2)`` against a loop that
  hands each finished sample's ObjectRef to ``learner.step`` and keeps 2 learner calls in
  flight (the learner's step is cheap, or sleeps ``--learner-ms``).

For each N of ``--workers`` the hand-written actors are created once (shared by the three
shapes) and each shape's rxrl run once (its actors live for the run); the ``--repeats``
measurements of a shape then alternate the order rxrl / hand-written per repetition (rxrl
first in even ones). Actor start-up is excluded: each measurement pulls for ``--warmup-s``
(which also drains what a paused rxrl run finished meanwhile), then times ``--seconds`` of
pulls (or ``--items`` items). Reported per shape and N: both rates, the ratio rxrl /
hand-written per repetition and its median, and the ideal rate ``N * 1000 / latency_ms``
(an actor runs one call at a time, so k > 1 in flight hides the round trip but does not
multiply a worker's rate; a sleeping learner caps ``call`` at ``1000 / learner_ms``). The
driver's ceiling per shape and system is the highest median rate over N, with the N that
reached it and whether the rate had stopped rising (the largest N less than ``1 + --gain``
times the best smaller N's rate).

With aggregators (``rxrl+agg``, measured beside the two unless ``--aggregators 0``): the same
shapes with the workers split among ``--aggregators`` aggregator actors (``ops.aggregate``),
each running the shape's collector over its part and handing the driver lists of
``--agg-window`` items (a barrier's rounds as they are); the driver gathers the aggregators
(and, for ``call``, hands each list to the learner, which steps once per item). Its items/s
count worker items. ``summary()`` reports the aggregator target: the rate with aggregators at
the largest N against the single driver's ceiling (``aggregator_vs_driver``; target >= 3 at
N = 64).

Writes ``bench/results/scale_<tag>.json`` (with the load average before and after) and
prints markdown tables. Run (the full default sweep takes ~10 min on 2 cores, two thirds of
it starting the 4N + 2 actors of each N, ~1 s each):
``python bench/scale.py [--workers 2,4,8,16,32,64 --latency-ms 20 --k 2 --seconds 1.0
--repeats 3 --tag now]``.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import ray

import rxrl
from rxrl import ops

RESULTS = Path(__file__).resolve().parent / "results"
SHAPES = ("gather", "barrier", "call")
Item = npt.NDArray[np.uint8]


class SyntheticWorker:
    """A rollout worker stand-in: each ``sample()`` sleeps ``latency_s`` and returns ``item_bytes``."""

    def __init__(self, index: int, latency_s: float, item_bytes: int) -> None:
        self.index = index
        self.latency_s = latency_s
        self.item = np.full(item_bytes, index % 256, dtype=np.uint8)
        self.count = 0

    def sample(self) -> Item:
        """One item, after ``latency_s`` of (core-free) sleep."""
        time.sleep(self.latency_s)
        self.count += 1
        return self.item

    def ping(self) -> int:
        """Answer at once (to wait until the actor is up)."""
        return self.index


class SyntheticLearner:
    """A learner stand-in: ``step`` is cheap, or sleeps ``step_s``."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.steps = 0

    def step(self, item: Item) -> int:
        """Consume one item; return a small report (its size)."""
        if self.step_s > 0:
            time.sleep(self.step_s)
        self.steps += 1
        return int(item.nbytes)

    def step_all(self, items: list[Item]) -> int:
        """``step`` each of an aggregator's items; return how many there were."""
        for item in items:
            self.step(item)
        return len(items)

    def ping(self) -> int:
        """Answer at once (to wait until the actor is up)."""
        return self.steps


class Settings:
    """What every measurement needs: the workload and how long to measure."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.latency_s: float = args.latency_ms / 1000
        self.item_bytes: int = args.item_bytes
        self.k: int = args.k
        self.learner_s: float = args.learner_ms / 1000
        self.warmup_s: float = args.warmup_s
        self.seconds: float = args.seconds
        self.items: int | None = args.items
        self.aggregators: int = args.aggregators
        self.agg_window: int = args.agg_window

    def ideal(self, shape: str, n: int) -> float:
        """Items/s if every worker sampled back to back (and the learner kept up)."""
        rate = n / self.latency_s
        if shape == "call" and self.learner_s > 0:
            rate = min(rate, 1 / self.learner_s)
        return rate


class Stopwatch:
    """Counts items pulled in a warm-up, then in a timed window (by seconds or by items)."""

    def __init__(self, s: Settings) -> None:
        self.s = s
        #: the driver process's CPU seconds in the last timed window (all its threads)
        self.cpu_s = 0.0

    def run(self, pulls: Iterator[int]) -> tuple[int, float]:
        """Consume ``pulls`` (each yields how many items it delivered); (items, seconds) timed."""
        start = time.perf_counter()
        for _ in pulls:
            if time.perf_counter() - start >= self.s.warmup_s:
                break
        items, start, cpu = 0, time.perf_counter(), time.process_time()
        for made in pulls:
            items += made
            elapsed = time.perf_counter() - start
            if (items >= self.s.items) if self.s.items is not None else (elapsed >= self.s.seconds):
                self.cpu_s = time.process_time() - cpu
                return items, elapsed
        raise RuntimeError("the stream ended during a measurement")


class Side(Protocol):
    """One system's side of a (shape, N) case: measured several times, then closed."""

    #: times the measurements (and holds the driver's CPU of the last one)
    watch: Stopwatch

    def measure(self) -> tuple[int, float]:
        """(items, seconds) of one timed window, after a warm-up."""
        ...

    def close(self) -> None:
        """Release what the side holds for this case (not the shared hand-written actors)."""
        ...


# -------------------------------------------------------------------------------- rxrl


def rxrl_plan(shape: str, n: int, s: Settings) -> rxrl.Plan[Any]:
    """The rxrl plan of ``shape`` over ``n`` synthetic workers (actors of its own run)."""
    latency_s, size = s.latency_s, s.item_bytes
    workers = rxrl.indexed_actors(lambda i: SyntheticWorker(i, latency_s, size), n,
                                  name="SyntheticWorker").with_options(num_cpus=0)
    shards = rxrl.from_actors(workers, SyntheticWorker.sample)
    if shape == "gather":
        return shards | ops.gather(max_in_flight=s.k)
    if shape == "barrier":
        return shards | ops.barrier()
    learner = rxrl.actors(SyntheticLearner, 1, s.learner_s).with_options(num_cpus=0)
    return (shards | ops.gather(max_in_flight=s.k)
            | ops.call(learner, SyntheticLearner.step, max_in_flight=2))


def aggregated_plan(shape: str, n: int, s: Settings) -> rxrl.Plan[int]:
    """The shape with the workers split among aggregators: each item says how many worker
    items it stands for."""
    latency_s, size, k, m = s.latency_s, s.item_bytes, s.k, s.agg_window
    workers = rxrl.indexed_actors(lambda i: SyntheticWorker(i, latency_s, size), n,
                                  name="SyntheticWorker").with_options(num_cpus=0)
    shards = rxrl.from_actors(workers, SyntheticWorker.sample)
    count = min(s.aggregators, n)
    if shape == "barrier":
        rounds = ops.aggregate(shards, lambda part: part | ops.barrier() | ops.map(len),
                               num_aggregators=count)
        return rounds | ops.barrier() | ops.map(sum)
    lists = ops.aggregate(shards, lambda part: part | ops.gather(max_in_flight=k) | ops.window(m),
                          num_aggregators=count)
    if shape == "gather":
        return lists | ops.gather() | ops.map(len)
    learner = rxrl.actors(SyntheticLearner, 1, s.learner_s).with_options(num_cpus=0)
    return (lists | ops.gather()
            | ops.call(learner, SyntheticLearner.step_all, max_in_flight=2))


class RxrlSide:
    """One rxrl run of the shape's plan, open for all the case's measurements; with
    ``aggregated``, the plan with aggregators (each item counts the worker items it holds)."""

    def __init__(self, shape: str, n: int, s: Settings, aggregated: bool = False) -> None:
        self.per_pull = n if shape == "barrier" else 1
        self.aggregated = aggregated
        self.watch = Stopwatch(s)
        start = time.perf_counter()
        plan = aggregated_plan(shape, n, s) if aggregated else rxrl_plan(shape, n, s)
        self.run: rxrl.Run[Any] = rxrl.run(plan, "ray")
        next(self.run)
        self.startup_s = time.perf_counter() - start

    def _pulls(self) -> Iterator[int]:
        for x in self.run:
            yield int(x) if self.aggregated else self.per_pull

    def measure(self) -> tuple[int, float]:
        """Resume the run: warm up (draining what finished while it paused), then time."""
        return self.watch.run(self._pulls())

    def close(self) -> None:
        """Close the run (its actors go)."""
        self.run.close()


# ------------------------------------------------------------------------ hand-written Ray


class HandActors:
    """Plain Ray actors for one N, shared by the three hand-written shapes."""

    def __init__(self, n: int, s: Settings) -> None:
        start = time.perf_counter()
        worker: Any = ray.remote(num_cpus=0)(SyntheticWorker)
        learner: Any = ray.remote(num_cpus=0)(SyntheticLearner)
        self.workers: list[Any] = [worker.remote(i, s.latency_s, s.item_bytes) for i in range(n)]
        self.learner: Any = learner.remote(s.learner_s)
        ray.get([a.ping.remote() for a in [*self.workers, self.learner]])
        self.startup_s = time.perf_counter() - start

    def close(self) -> None:
        """Kill the actors."""
        for a in [*self.workers, self.learner]:
            ray.kill(a)


Loop = Generator[int, None, None]


def hand_gather(actors: HandActors, k: int) -> Loop:
    """``ray.wait`` over k requests per worker; each finished item read, its worker asked again."""
    pending: dict[Any, Any] = {}
    try:
        for w in actors.workers:
            for _ in range(k):
                pending[w.sample.remote()] = w
        while True:
            [ready], _ = ray.wait(list(pending), num_returns=1)
            worker = pending.pop(ready)
            pending[worker.sample.remote()] = worker
            ray.get(ready)
            yield 1
    finally:  # the next measurement starts from idle workers
        ray.wait(list(pending), num_returns=len(pending))


def hand_barrier(actors: HandActors) -> Loop:
    """Rounds of ``ray.get([w.sample.remote() for w in workers])``."""
    n = len(actors.workers)
    while True:
        ray.get([w.sample.remote() for w in actors.workers])
        yield n


def hand_call(actors: HandActors, k: int, in_flight: int = 2) -> Loop:
    """The gather loop, each finished sample's ref handed to the learner; ``in_flight`` steps out."""
    pending: dict[Any, Any] = {}
    steps: collections.deque[Any] = collections.deque()
    try:
        for w in actors.workers:
            for _ in range(k):
                pending[w.sample.remote()] = w
        while True:
            while len(steps) < in_flight:
                [ready], _ = ray.wait(list(pending), num_returns=1)
                worker = pending.pop(ready)
                pending[worker.sample.remote()] = worker
                steps.append(actors.learner.step.remote(ready))  # the sample travels as a ref
            ray.get(steps.popleft())
            yield 1
    finally:
        rest = [*pending, *steps]
        ray.wait(rest, num_returns=len(rest))


class HandSide:
    """The hand-written loop of a shape over the N's shared actors; each measurement from idle."""

    def __init__(self, shape: str, actors: HandActors, s: Settings) -> None:
        self.watch = Stopwatch(s)
        self.startup_s = actors.startup_s
        loops: dict[str, Callable[[], Loop]] = {
            "gather": lambda: hand_gather(actors, s.k),
            "barrier": lambda: hand_barrier(actors),
            "call": lambda: hand_call(actors, s.k),
        }
        self.loop = loops[shape]

    def measure(self) -> tuple[int, float]:
        """Run the loop afresh: warm up, time, then let its requests finish (untimed)."""
        pulls = self.loop()
        try:
            return self.watch.run(pulls)
        finally:
            pulls.close()

    def close(self) -> None:
        """Nothing: the actors are the N's, closed after its last shape."""


# ------------------------------------------------------------------------------ the sweep

#: the systems measured for every (shape, N): name -> side factory (``rxrl+agg`` goes when
#: ``--aggregators 0``)
SYSTEMS: dict[str, Callable[[str, int, HandActors, Settings], Side]] = {
    "rxrl": lambda shape, n, actors, s: RxrlSide(shape, n, s),
    "hand": lambda shape, n, actors, s: HandSide(shape, actors, s),
    "rxrl+agg": lambda shape, n, actors, s: RxrlSide(shape, n, s, aggregated=True),
}


def measure_case(shape: str, n: int, actors: HandActors, s: Settings, repeats: int
                 ) -> dict[str, Any]:
    """``repeats`` measurements of every system on one (shape, N), order alternating."""
    sides: dict[str, Side] = {}
    rates: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    cpu_ms: dict[str, list[float]] = {name: [] for name in SYSTEMS}  # driver CPU per item
    startup: dict[str, float] = {}
    try:
        for name, make in SYSTEMS.items():
            sides[name] = make(shape, n, actors, s)
            startup[name] = float(getattr(sides[name], "startup_s", 0.0))
        names = list(SYSTEMS)
        for r in range(repeats):
            for name in (names if r % 2 == 0 else names[::-1]):
                items, seconds = sides[name].measure()
                rates[name].append(items / seconds)
                watch = getattr(sides[name], "watch", None)
                if watch is not None:
                    cpu_ms[name].append(1000 * watch.cpu_s / max(items, 1))
    finally:
        for side in sides.values():
            side.close()
    ratios = [o / h for o, h in zip(rates["rxrl"], rates["hand"], strict=True)]
    ideal = s.ideal(shape, n)
    return {
        "shape": shape, "n": n, "ideal": ideal, "rates": rates,
        "median": {name: statistics.median(rs) for name, rs in rates.items()},
        "ratios": ratios, "median_ratio": statistics.median(ratios),
        "driver_cpu_ms_per_item": {name: statistics.median(xs) for name, xs in cpu_ms.items() if xs},
        "of_ideal": {name: statistics.median(rs) / ideal for name, rs in rates.items()},
        "startup_s": startup, "loadavg_1m": os.getloadavg()[0],
    }


def ceilings(cases: list[dict[str, Any]], gain: float) -> dict[str, dict[str, Any]]:
    """Per shape and system: the highest median items/s over N, where, and whether it stopped rising.

    The ceiling counts as reached (the driver, not the number of workers, limits) when the
    largest N's rate is less than ``1 + gain`` times the best rate at any smaller N.
    """
    out: dict[str, dict[str, Any]] = {}
    for shape in SHAPES:
        rows = sorted((c for c in cases if c["shape"] == shape), key=lambda c: c["n"])
        if not rows:
            continue
        out[shape] = {}
        for name in SYSTEMS:
            best = max(rows, key=lambda c: c["median"][name])
            last = rows[-1]
            before = max((c["median"][name] for c in rows[:-1]), default=None)
            out[shape][name] = {
                "ceiling": best["median"][name], "at_n": best["n"],
                "of_ideal_at_max_n": last["of_ideal"][name],
                "last_gain": None if before is None else last["median"][name] / before,
                "reached": before is not None and last["median"][name] < (1 + gain) * before,
            }
    return out


def summary(cases: list[dict[str, Any]], gain: float) -> dict[str, Any]:
    """Ceilings, the worst median ratio, and the aggregator target: per shape, the rate with
    aggregators at the largest N against the single driver's ceiling (rxrl's)."""
    ratios = [c["median_ratio"] for c in cases]
    per_shape = ceilings(cases, gain)
    against: dict[str, Any] = {}
    if "rxrl+agg" in SYSTEMS:
        for shape in per_shape:
            last = max((c for c in cases if c["shape"] == shape), key=lambda c: c["n"])
            cpu = last.get("driver_cpu_ms_per_item", {})
            against[shape] = {"n": last["n"], "with_aggregators": last["median"]["rxrl+agg"],
                              "driver_ceiling": per_shape[shape]["rxrl"]["ceiling"],
                              "ratio": last["median"]["rxrl+agg"] / per_shape[shape]["rxrl"]["ceiling"],
                              # what one driver core could coordinate: 1000 / its CPU ms per item
                              "driver_cpu_ms_per_item": cpu,
                              "driver_cpu_ratio": (cpu["rxrl"] / cpu["rxrl+agg"]
                                                   if cpu.get("rxrl+agg") else None)}
    return {
        "ceilings": per_shape,
        "driver_ceiling": {name: max(c[name]["ceiling"] for c in per_shape.values())
                           for name in SYSTEMS} if per_shape else {},
        "min_median_ratio": min(ratios) if ratios else None,
        "ratio_target": 0.97,
        "cases_below_target": [(c["shape"], c["n"], round(c["median_ratio"], 3))
                               for c in cases if c["median_ratio"] < 0.97],
        "aggregator_vs_driver": against or None,  # target >= 3 at N = 64
        "aggregator_target": 3.0,
    }


def gain_text(x: float | None) -> str:
    """A gain for the table (a dash when there is no smaller N)."""
    return "-" if x is None else f"{x:.2f}"


def markdown(cases: list[dict[str, Any]], summ: dict[str, Any], s: Settings, repeats: int) -> str:
    """The results as markdown tables."""
    agg = "rxrl+agg" in SYSTEMS
    lines = [f"{s.latency_s * 1000:g} ms per sample, k = {s.k}, learner step "
             f"{s.learner_s * 1000:g} ms; {repeats} alternating pairs per case, medians"
             + (f"; with aggregators: {s.aggregators} of them, lists of {s.agg_window}" if agg else ""),
             "",
             "| shape | N | ideal items/s | rxrl items/s | hand items/s | rxrl / hand per pair "
             "| **median ratio** | rxrl of ideal |" + (" rxrl+agg items/s |" if agg else ""),
             "|---|---:|---:|---:|---:|---|---:|---:|" + ("---:|" if agg else "")]
    for c in cases:
        pairs = ", ".join(f"{x:.3f}" for x in c["ratios"])
        lines.append(f"| {c['shape']} | {c['n']} | {c['ideal']:.0f} | {c['median']['rxrl']:.0f} "
                     f"| {c['median']['hand']:.0f} | {pairs} | **{c['median_ratio']:.3f}** "
                     f"| {c['of_ideal']['rxrl']:.2f} |"
                     + (f" {c['median']['rxrl+agg']:.0f} |" if agg else ""))
    lines += ["", "| shape | system | ceiling items/s | at N | largest N: of ideal "
              "| largest N / best smaller N | ceiling reached |",
              "|---|---|---:|---:|---:|---:|---|"]
    for shape, by_system in summ["ceilings"].items():
        for name, c in by_system.items():
            lines.append(f"| {shape} | {name} | {c['ceiling']:.0f} | {c['at_n']} "
                         f"| {c['of_ideal_at_max_n']:.2f} | {gain_text(c['last_gain'])} "
                         f"| {'yes' if c['reached'] else 'no'} |")
    for shape, a in (summ.get("aggregator_vs_driver") or {}).items():
        cpu = a["driver_cpu_ms_per_item"]
        lines.append(f"\nWith aggregators, {shape} at N = {a['n']}: {a['with_aggregators']:.0f} items/s, "
                     f"**{a['ratio']:.2f}x** the single driver's ceiling ({a['driver_ceiling']:.0f}); "
                     f"the driver's CPU per item: {cpu.get('rxrl', 0):.3f} ms alone, "
                     f"{cpu.get('rxrl+agg', 0):.3f} ms with aggregators "
                     f"({gain_text(a['driver_cpu_ratio'])}x less)")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    """Sweep N, measure every shape on every system, print the tables and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="2,4,8,16,32,64", help="the Ns, comma-separated")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--latency-ms", type=float, default=20.0, help="each sample's sleep")
    parser.add_argument("--item-bytes", type=int, default=64)
    parser.add_argument("--k", type=int, default=2, help="requests in flight per worker (gather)")
    parser.add_argument("--learner-ms", type=float, default=0.0, help="the learner step's sleep")
    parser.add_argument("--warmup-s", type=float, default=0.3)
    parser.add_argument("--seconds", type=float, default=1.0, help="timed seconds per measurement")
    parser.add_argument("--items", type=int, default=None,
                        help="time this many items per measurement instead of --seconds")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gain", type=float, default=0.1,
                        help="the ceiling is reached if the largest N gains less than this")
    parser.add_argument("--aggregators", type=int, default=4,
                        help="aggregators of the rxrl+agg system (0: do not measure it)")
    parser.add_argument("--agg-window", type=int, default=8,
                        help="worker items per list an aggregator hands the driver")
    parser.add_argument("--tag", default="now", help="results go to bench/results/scale_<tag>.json")
    args = parser.parse_args(argv)
    if args.aggregators <= 0:
        SYSTEMS.pop("rxrl+agg")
    s = Settings(args)
    ns = [int(x) for x in args.workers.split(",")]
    shapes = [x for x in args.shapes.split(",") if x]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shapes {sorted(unknown)}; choose from {SHAPES}")
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    cases: list[dict[str, Any]] = []
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        for n in ns:
            actors = HandActors(n, s)
            try:
                for shape in shapes:
                    case = measure_case(shape, n, actors, s, args.repeats)
                    cases.append(case)
                    agg = case["median"].get("rxrl+agg")
                    print(f"{shape:<8} N={n:<3} ideal {case['ideal']:7.0f}  rxrl "
                          f"{case['median']['rxrl']:7.1f}  hand {case['median']['hand']:7.1f}  "
                          + ("" if agg is None else f"agg {agg:7.1f}  ") +
                          f"ratio {case['median_ratio']:.3f}  "
                          f"({', '.join(f'{x:.3f}' for x in case['ratios'])})  "
                          f"load {case['loadavg_1m']:.1f}", flush=True)
            finally:
                actors.close()
    finally:
        ray.shutdown()
    summ = summary(cases, args.gain)
    table = markdown(cases, summ, s, args.repeats)
    print()
    print(table)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"scale_{args.tag}.json"
    path.write_text(json.dumps({
        "command": " ".join(["python", "bench/scale.py", *argv]),
        "started_utc": started, "wall_s": time.perf_counter() - t0,
        "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
        "cpus": os.cpu_count(), "ray": ray.__version__,
        "settings": {k: v for k, v in vars(args).items()},
        "cases": cases, "summary": summ, "markdown": table,
    }, indent=1) + "\n")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
