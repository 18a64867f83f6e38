"""Where ``rxrl train ppo --env CartPole-v1`` spends its time before the first record.

Runs what the command runs, in one process, and times each phase: importing rxrl's CLI
(torch, gymnasium), importing Ray, starting the local Ray (``connect``), building the
plan, placing and constructing the actors (2 rollout workers, 1 learner: each a process
that imports torch), and the first two iterations. Run: ``python bench/startup.py [--reps 3]``
(one fresh process per repetition).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def phases() -> dict[str, float]:
    """One start-up, timed phase by phase (seconds)."""
    marks = [("start", time.perf_counter())]
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")  # as the rxrl command does
    import rxrl
    import rxrl.cli  # what the console script imports
    from rxrl.algos import get
    from rxrl.cli_run import CheckpointClock, training_plan
    from rxrl.cli_train import RAY_INIT, WORKER_RESTARTS

    marks.append(("import rxrl.cli", time.perf_counter()))
    import ray

    marks.append(("import ray", time.perf_counter()))
    from rxrl.backends.ray.connect import connect

    connect("local", dict(RAY_INIT))
    marks.append(("ray.init", time.perf_counter()))
    algo = get("ppo")
    plan = training_plan(algo, algo.config(), None, CheckpointClock(25_000, 100_000), WORKER_RESTARTS)
    marks.append(("plan", time.perf_counter()))
    with rxrl.run(plan, "ray") as run:
        records = iter(run)
        marks.append(("actors", time.perf_counter()))
        next(records)
        marks.append(("first iteration", time.perf_counter()))
        next(records)
        marks.append(("second iteration", time.perf_counter()))
    ray.shutdown()
    out = {name: round(t - marks[i][1], 2) for i, (name, t) in enumerate(marks[1:])}
    out["time to first record"] = round(marks[-2][1] - marks[0][1], 2)
    return out


def main() -> None:
    """Print one line of phases per repetition, each in a fresh process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(phases()))
        return
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for _ in range(args.reps):
        done = subprocess.run([sys.executable, __file__, "--one"], capture_output=True, text=True,
                              check=True, timeout=600)
        doc = json.loads(done.stdout.strip().splitlines()[-1])
        print(" | ".join(f"{k} {v:.2f} s" for k, v in doc.items()))


if __name__ == "__main__":
    main()
