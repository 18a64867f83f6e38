"""Where an iteration of distributed PPO goes: rxrl on Ray against the hand-written Ray loop.

Runs both (alternating, `--repeats` times each), dumps Ray's task timeline for every run,
and splits the mean iteration into what ran on the critical path — sampling on the slowest
worker (itself split into env step / policy forward / the rest by an in-process profile of
`RolloutWorker.sample`), SGD on the learner, loading weights on the slowest worker — plus
Ray's (de)serialization of task arguments and results, and the remainder: coordination
(driver work, scheduling, messages, waiting). rxrl's learner runs in an actor here
(``learner_placement="actor"``), as the hand-written loop's does, not on the driver (PPO's
default), where Ray's timeline would not see its SGD.

    python bench/ray_breakdown.py --budget-steps 30000 --repeats 3
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import attrs
import handwritten_ray_ppo
import ppo_settings as s
import rxrl_ppo

from rxrl.rl import RolloutWorker

#: per system: (role, task name) -> phase; roles come from the actor's constructor name
PHASES = {
    "handwritten": {("worker", "sample"): "sample", ("worker", "set_weights"): "set_weights",
                    ("learner", "train"): "sgd"},
    # the Ray backend's Host methods (``next``/``pull`` for a sample, ``effect`` for a broadcast,
    # ``apply`` for a call, or their ``*_both`` variants)
    "rxrl": {("worker", "next"): "sample", ("worker", "pull"): "sample",
             ("worker", "effect"): "set_weights", ("worker", "apply"): "set_weights",
             ("learner", "apply"): "sgd"},
}


def phase_of(system: str, role: str, name: str) -> str | None:
    """The phase of a task called ``name`` on an actor of ``role`` (None: not counted)."""
    return PHASES[system].get((role, name.removesuffix("_both")))


@attrs.frozen
class Breakdown:
    """Mean milliseconds per iteration along the critical path of the synchronous loop.

    An iteration: the workers sample (until the slower one finishes), [gap: results reach the
    driver, the learner call is submitted and scheduled], the learner trains, [gap: the result
    reaches the driver, weights go to the workers, set_weights runs, the next sample calls
    are submitted and scheduled]. `sgd` is the learner call, `serialization` Ray's
    (de)serializing of task arguments and results, summed over all actors (partly overlapping
    other phases, so not part of the sum).
    """

    system: str
    iterations: int
    wall: float
    sample: float  # first sample call start -> last sample call end, per round
    before_sgd: float  # last sample end -> learner call start
    sgd: float  # the learner call (SGD; for the hand-written loop also concat + standardize)
    after_sgd: float  # learner call end -> next round's first sample start (includes set_weights)
    set_weights: float  # the slower worker's set_weights call (inside after_sgd)
    serialization: float
    other: float  # wall - (sample + before_sgd + sgd + after_sgd): the driver's own pace


Span = tuple[float, float]  # start, end in ms


def roles(events: list[dict[str, Any]]) -> dict[str, str]:
    """Worker process id -> "worker" / "learner": a process that samples (rxrl's ``next``,
    the hand-written ``sample``) is a worker, one that only trains (``apply`` / ``train``) the
    learner. (Constructor events are not used: Ray may drop a process's oldest events.)"""
    names: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if str(e.get("cat", "")).startswith("task::"):
            names[e["tid"]].add(e["name"])
    out: dict[str, str] = {}
    for tid, seen in names.items():
        if seen & {"next", "next_both", "pull", "pull_both", "sample"}:
            out[tid] = "worker"
        elif seen & {"apply", "apply_both", "train"}:
            out[tid] = "learner"
    return out


def breakdown(system: str, record: s.RunRecord, events: list[dict[str, Any]]) -> Breakdown:
    """Split the mean iteration of one run (see `Breakdown`)."""
    role_of = roles(events)
    spans: dict[str, dict[str, list[Span]]] = defaultdict(lambda: defaultdict(list))  # phase -> tid -> spans
    serial: list[Span] = []
    for e in events:
        role = role_of.get(e["tid"])
        cat = str(e.get("cat", ""))
        span = (e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3)
        if role is None:
            continue
        if cat in ("task:deserialize_arguments", "task:store_outputs"):
            serial.append(span)
        elif cat.startswith("task::"):
            phase = phase_of(system, role, e["name"])
            if phase is not None:
                spans[phase][e["tid"]].append(span)
    workers = [sorted(v) for v in spans["sample"].values()]
    sgd = sorted(s_ for v in spans["sgd"].values() for s_ in v)
    set_w = [sorted(v) for v in spans["set_weights"].values()]
    if not workers or not sgd:
        raise SystemExit(f"{system}: the Ray timeline has no sample or train events")
    rounds = min([len(sgd), *(len(w) for w in workers)])
    total: dict[str, float] = defaultdict(float)
    for k in range(rounds):
        first = min(w[k][0] for w in workers)
        last = max(w[k][1] for w in workers)
        total["sample"] += last - first
        total["before_sgd"] += sgd[k][0] - last
        total["sgd"] += sgd[k][1] - sgd[k][0]
        if k + 1 < rounds:
            total["after_sgd"] += min(w[k + 1][0] for w in workers) - sgd[k][1]
            if all(len(w) > k for w in set_w):
                total["set_weights"] += max(w[k][1] - w[k][0] for w in set_w)
    window_start = min(w[0][0] for w in workers)
    serialization = sum(b - a for a, b in serial if a >= window_start)
    n = max(rounds, 1)
    mean = {k: v / n for k, v in total.items()}
    mean["after_sgd"] = total["after_sgd"] / max(rounds - 1, 1)
    mean["set_weights"] = total["set_weights"] / max(rounds - 1, 1)
    wall = record.train_s * 1e3 / len(record.curve)
    return Breakdown(system, rounds, wall, mean["sample"], mean["before_sgd"], mean["sgd"], mean["after_sgd"],
                     mean["set_weights"], serialization / n,
                     wall - mean["sample"] - mean["before_sgd"] - mean["sgd"] - mean["after_sgd"])


def sample_split(m: s.Matched, calls: int = 60) -> dict[str, float]:
    """Shares of `RolloutWorker.sample` time: env step, policy forward, the rest (batching, GAE)."""
    worker = RolloutWorker(m.env, num_envs=m.envs_per_worker, fragment_length=m.fragment_length, seed=0,
                           gamma=m.gamma, lam=m.lam, torch_threads=1)
    worker.sample()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        worker.sample()
    profile.disable()
    # {(file, line, name): (cc, nc, tottime, cumtime, callers)}; untyped in typeshed
    stats: dict[tuple[str, int, str], Any] = vars(pstats.Stats(profile))["stats"]
    total = float(sum(v[3] for k, v in stats.items() if k[2] == "sample" and k[0].endswith("worker.py")))

    def cum(file_end: str, name: str) -> float:
        return float(sum(v[3] for k, v in stats.items() if k[0].endswith(file_end) and k[2] == name))

    env = cum("cartpole.py", "step")
    policy = cum("policy.py", "act") + cum("policy.py", "value")
    return {"env step": env / total, "policy forward": policy / total,
            "batching, GAE, bookkeeping": 1.0 - (env + policy) / total}


def main(argv: list[str]) -> None:
    """Run both systems alternately and print the mean breakdown of each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-steps", type=int, default=30_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", type=Path, help="write the breakdowns as JSON here")
    args = parser.parse_args(argv)
    m = s.override(s.Matched(), args.set)
    results: dict[str, list[Breakdown]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeats):
            for system in (["rxrl", "handwritten"] if k % 2 == 0 else ["handwritten", "rxrl"]):
                path = Path(tmp) / f"{system}-{k}.json"
                if system == "rxrl":
                    # its learner in an actor, as the hand-written loop's: the timeline shows its SGD
                    record = rxrl_ppo.run(m, k, args.budget_steps, timeline=path, placement="actor")
                else:
                    record = handwritten_ray_ppo.run(m, k, args.budget_steps, timeline=path)
                b = breakdown(system, record, json.loads(path.read_text()))
                results[system].append(b)
                print(f"{system} run {k}: " + ", ".join(
                    f"{f.name} {getattr(b, f.name):.1f}" for f in attrs.fields(Breakdown)[2:]) + " ms/iter",
                    flush=True)
    split = sample_split(m)
    names = [f.name for f in attrs.fields(Breakdown)[2:]]
    print("\nmedian ms per iteration (" + ", ".join(f"{k} {v:.0%}" for k, v in split.items())
          + " of sample, in-process profile)")
    print("| phase | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    medians = {system: {n: statistics.median(getattr(b, n) for b in bs) for n in names}
               for system, bs in results.items()}
    for n in names:
        print(f"| {n} | " + " | ".join(f"{medians[system][n]:.1f}" for system in results) + " |")
    if args.out:
        runs = {k: [attrs.asdict(b) for b in v] for k, v in results.items()}
        args.out.write_text(json.dumps({"sample_split": split, "median_ms_per_iteration": medians,
                                        "runs": runs}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
