"""Where ``rxrl train ppo --env CartPole-v1`` spends its time before the first record.

Runs what the command runs, in one process, and times each phase: importing rxrl's CLI
(torch, gymnasium), importing Ray, building the plan, starting the local Ray (``connect``
with the CLI's `ray_init_options`), placing and constructing the actors (2 rollout workers,
whose processes never import torch, and the learner, on the driver), and the first two
iterations; then the CPU seconds the whole process tree spent until the first record. Run:
``python bench/startup.py [--reps 3] [--without lean,preload,cpus]`` (one fresh process per
repetition; with ``--without``, the repetitions alternate between all cuts and all cuts but
the ones named, so that load on a shared machine hits both alike).

The cuts (docs/benchmarks.md, "Start-up"): ``lean`` — the local Ray without its API server,
log monitor and autoscaler monitor (`rxrl.backends.ray.connect.is_lean`); ``preload`` — the
worker processes import what their actors need as soon as they start (`WORKER_PRELOAD`; for
PPO, whose rollout workers act without torch, `TORCH_FREE_PRELOAD`); ``cpus`` —
a CPU per actor, so that every actor is constructed at once; ``torchfree`` — PPO's rollout
workers act without torch (`rxrl.algos.common.torch_free_workers`; without it, each builds a
torch policy from the seed, and the worker processes preload torch); ``prompt`` — the local
node's start polls the GCS for its raylet's registration every 20 ms before Ray's own check,
which sleeps a whole second between asks (`rxrl.backends.ray.connect`); ``driver`` — PPO's
learner lives in the driver's process (``learner_placement="driver"``, `ActorGroup.on_driver`),
not in an actor process that imports torch once its actor is created.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Any

import attrs

CUTS = ("lean", "preload", "cpus", "torchfree", "prompt", "driver")


def phases(without: frozenset[str] = frozenset()) -> dict[str, float]:
    """One start-up, timed phase by phase (seconds), without the cuts named in ``without``."""
    marks = [("start", time.perf_counter())]
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")  # as the rxrl command does
    import rxrl
    import rxrl.cli  # what the console script imports
    from rxrl.algos import get
    from rxrl.training.checkpoint import CheckpointClock, training_plan
    from rxrl.training.setup import WORKER_RESTARTS, ray_init_options

    marks.append(("import rxrl.cli", time.perf_counter()))
    import importlib

    import ppo_settings
    import ray

    psutil = ppo_settings.optional("psutil")
    # the module (the package's own `connect` function shadows its name)
    connecting: Any = importlib.import_module("rxrl.backends.ray.connect")

    marks.append(("import ray", time.perf_counter()))
    algo = get("ppo")
    if "torchfree" in without:  # PPO's rollout workers as before: torch policies from the seed
        ppo: Any = importlib.import_module("rxrl.algos.on_policy.ppo")
        make_groups = ppo.make_groups
        ppo.make_groups = lambda *args, **kwargs: make_groups(*args, **{**kwargs, "torch_free": False})
    config = algo.config()
    if "driver" in without:  # the learner in an actor process of its own
        config = attrs.evolve(config, learner_placement="actor")
    plan = training_plan(algo, config, None, CheckpointClock(25_000, 100_000), WORKER_RESTARTS)
    marks.append(("plan", time.perf_counter()))
    options = ray_init_options(plan)
    if "preload" in without:
        del options["_system_config"]
    if "cpus" in without:
        del options["num_cpus"]
    if "lean" in without:
        connecting.LEAN_SKIPS = ()
    if "prompt" in without:  # Ray's own once-a-second check for the raylet's registration
        connecting._prompt_node_registration = contextlib.nullcontext
    connecting.connect("local", options)
    marks.append(("ray.init", time.perf_counter()))
    with rxrl.run(plan, "ray") as run:
        records = iter(run)
        marks.append(("actors", time.perf_counter()))
        next(records)
        marks.append(("first iteration", time.perf_counter()))
        me = psutil.Process()
        cpu = sum(sum(p.cpu_times()[:2]) for p in [me, *me.children(recursive=True)])
        next(records)
        marks.append(("second iteration", time.perf_counter()))
    ray.shutdown()
    out = {name: round(t - marks[i][1], 2) for i, (name, t) in enumerate(marks[1:])}
    out["time to first record"] = round(marks[-2][1] - marks[0][1], 2)
    out["CPU to first record"] = round(cpu, 2)
    return out


def main() -> None:
    """Print one line of phases per repetition, each in a fresh process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--without", default="",
                        help=f"comma-separated cuts to compare against, from {list(CUTS)}")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    without = frozenset(w for w in args.without.split(",") if w)
    if not without <= set(CUTS):
        raise SystemExit(f"--without {args.without}: choose from {list(CUTS)}")
    if args.one:
        print(json.dumps(phases(without)))
        return
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    variants = [frozenset[str](), without] if without else [frozenset[str]()]
    for rep in range(args.reps):
        for variant in variants if rep % 2 == 0 else variants[::-1]:
            done = subprocess.run([sys.executable, __file__, "--one", "--without", ",".join(sorted(variant))],
                                  capture_output=True, text=True, check=True, timeout=600)
            doc = json.loads(done.stdout.strip().splitlines()[-1])
            label = f"without {','.join(sorted(variant))}" if variant else "all cuts"
            print(f"{label}: " + " | ".join(f"{k} {v:.2f} s" for k, v in doc.items())
                  + f" (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
