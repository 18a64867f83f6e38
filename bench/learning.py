"""Learning targets of issue 5, measured with the real command line: one command per target.

    python bench/learning.py ppo-cartpole      # PPO CartPole-v1 >= 475 within 100k steps, seeds 0 1 2
    python bench/learning.py ppo-pendulum      # PPO Pendulum-v1 >= -250 within 200k steps
    python bench/learning.py a2c-cartpole      # A2C CartPole-v1 >= 400 within 200k steps
    python bench/learning.py a3c-cartpole      # A3C CartPole-v1 >= 400 within 200k steps
    python bench/learning.py impala-cartpole   # IMPALA CartPole-v1 >= 450 within 300k steps (issue 12)
    python bench/learning.py appo-cartpole     # APPO CartPole-v1 >= 475 within 200k steps (issue 12)
    python bench/learning.py ppo-lstm-stateless  # PPO-LSTM StatelessCartPole >= 450 within 500k (issue 24)
    python bench/learning.py all

Each seed is one ``rxrl train ALGO --env ENV --seed S --steps BUDGET --target-return R`` (the
default Ray backend unless ``--backend``; 2 workers, the algorithm's default and tuned
settings), run one after another. The run stops when the mean return of the last 100
episodes reaches the target; the table gives the env steps and the wall time (from the start
of the plan, Ray start-up and actor creation included) at which it did. ``--seeds 0-9 --runs 2
--load-after-first`` runs each of ten seeds twice, the second time beside a process spinning on
a core; the closing table gives per target the success rate and the interquartile mean (IQM)
with its 95 % stratified bootstrap interval (rliable) of the env steps to the target (a miss
counts as the whole budget) and of the final return, also written to ``reliability.json``::

    python bench/learning.py appo-cartpole --seeds 0-9 --runs 2 --load-after-first

Runs go to a new
``OUT/<date>-<time>/`` per invocation (``--out``, default ``runs/learning``; ``rxrl train``
refuses an ``--out`` that holds a run); ``rxrl plot`` draws their curves.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class Target:
    """One learning target: an algorithm reaching ``threshold`` on ``env`` within ``budget`` steps."""

    algo: str
    env: str
    budget: int
    threshold: float
    seeds: tuple[int, ...] = (0, 1, 2)


TARGETS = {
    "ppo-cartpole": Target("ppo", "CartPole-v1", 100_000, 475.0),
    "ppo-pendulum": Target("ppo", "Pendulum-v1", 200_000, -250.0),
    "a2c-cartpole": Target("a2c", "CartPole-v1", 200_000, 400.0),
    "a3c-cartpole": Target("a3c", "CartPole-v1", 200_000, 400.0),
    "impala-cartpole": Target("impala", "CartPole-v1", 300_000, 450.0),
    "appo-cartpole": Target("appo", "CartPole-v1", 200_000, 475.0),
    "dqn-cartpole": Target("dqn", "CartPole-v1", 100_000, 475.0),
    "apex-cartpole": Target("apex", "CartPole-v1", 200_000, 475.0),
    # issue 25: DD-PPO (every worker a learner); ``ppo-cartpole --set learner.num_learners=2``
    # is PPO with a learner group
    "ddppo-cartpole": Target("ddppo", "CartPole-v1", 150_000, 475.0),
    # issue 24: PPO with an LSTM (the env's tuned settings) on CartPole without velocities;
    # ``--set policy.recurrent=none`` runs the MLP beside it
    "ppo-lstm-stateless": Target("ppo", "rxrl/StatelessCartPole-v0", 500_000, 450.0),
    "a2c-lstm-stateless": Target("a2c", "rxrl/StatelessCartPole-v0", 500_000, 450.0),
}


def command(target: Target, seed: int, backend: str, out: Path, stop: bool = True,
            settings: tuple[str, ...] = ()) -> list[str]:
    """The ``rxrl train`` command line of one seed (``stop``: at the target; else it trains
    the whole budget, and the summary still says when it first reached the target)."""
    script = shutil.which("rxrl", path=str(Path(sys.executable).parent)) or "rxrl"
    return [script, "train", target.algo, "--env", target.env, "--seed", str(seed),
            "--steps", str(target.budget), "--backend", backend, "--workers", "2", "--out", str(out),
            *(["--target-return", str(target.threshold)] if stop else []),
            *(f"--set={s}" for s in settings)]


@attrs.frozen
class Outcome:
    """One run: its seed, repetition, whether it ran under load, and how it ended."""

    seed: int
    run: int
    loaded: bool
    reached: bool
    env_steps: int  # to the target, or the run's total when it missed it
    wall_s: float
    final_return: float | None


def measure(name: str, target: Target, backend: str, root: Path, seeds: tuple[int, ...],
            runs: int = 1, load_after_first: bool = False, stop: bool = True,
            settings: tuple[str, ...] = ()) -> list[Outcome]:
    """Run every seed of ``target`` ``runs`` times (runs after the first under a competing CPU
    load when ``load_after_first``); print one Markdown row per run."""
    print(f"\n{name}: {target.algo} {target.env}, mean return >= {target.threshold:g} within "
          f"{target.budget:,} env steps ({backend} backend)")
    print("| seed | run | reached | env steps | wall time (s) | final return | process wall time (s) |")
    print("|---|---|---|---|---|---|---|")
    outcomes = []
    for run in range(runs):
        loaded = load_after_first and run > 0
        for seed in seeds:
            out = root / f"{name}-{backend}-s{seed}-r{run}"
            started = time.perf_counter()
            with competing_load(loaded):
                done = subprocess.run(command(target, seed, backend, out, stop, settings),
                                      capture_output=True, text=True,
                                      timeout=3600, stdin=subprocess.DEVNULL)
            elapsed = time.perf_counter() - started
            tag = f"{run}{' (loaded)' if loaded else ''}"
            if done.returncode != 0:
                print(f"| {seed} | {tag} | error | | | | {elapsed:.0f} |  {done.stderr.strip()[-200:]}")
                outcomes.append(Outcome(seed, run, loaded, False, target.budget, elapsed, None))
                continue
            summary = json.loads((out / "summary.json").read_text())
            reached = summary["reached_target"] if stop else first_reached(out, target.threshold)
            steps = int(reached["env_steps"] if reached else summary["env_steps_sampled"])
            wall = reached["time_s"] if reached else summary["time_s"]
            final = summary["episode_return_mean"]
            outcomes.append(Outcome(seed, run, loaded, reached is not None, steps, wall, final))
            print(f"| {seed} | {tag} | {'yes' if reached else 'no'} | {'' if reached else '> '}{steps:,} | "
                  f"{wall:.1f} | {'n/a' if final is None else f'{final:.1f}'} | {elapsed:.0f} |", flush=True)
    return outcomes


def first_reached(run: Path, threshold: float) -> dict[str, float] | None:
    """When a run's mean return first reached ``threshold`` (its metrics.csv), or None."""
    with (run / "metrics.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            if float(row["episode_return_mean"]) >= threshold:
                return {"env_steps": int(float(row["env_steps_sampled"])), "time_s": float(row["time_s"])}
    return None


@contextlib.contextmanager
def competing_load(on: bool) -> Iterator[None]:
    """Within the block (when ``on``), one process spins on a core: another job on the machine."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def reliability(target: Target, outcomes: list[Outcome], reps: int = 5000) -> dict[str, Any]:
    """Success rate, and the interquartile mean (IQM) with its 95 % stratified bootstrap
    interval (rliable) of the env steps to the target — a run that missed it counts as the
    whole budget, so a miss only makes the figure worse — and of the final return."""
    import numpy as np
    import ppo_settings as s

    rly: Any = s.optional("rliable.library")
    metrics: Any = s.optional("rliable.metrics")

    def iqm(values: list[float]) -> tuple[float, float, float]:
        scores = {"x": np.asarray(values, dtype=np.float64)[:, None]}
        point, interval = rly.get_interval_estimates(
            scores, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=reps)
        return float(point["x"][0]), float(interval["x"][0][0]), float(interval["x"][1][0])

    steps = [float(o.env_steps if o.reached else target.budget) for o in outcomes]
    finals = [o.final_return if o.final_return is not None else float("nan") for o in outcomes]
    return {"runs": len(outcomes), "reached": sum(o.reached for o in outcomes),
            "steps_iqm": iqm(steps), "final_return_iqm": iqm([f for f in finals if f == f] or [0.0])}


def main(argv: list[str] | None = None) -> int:
    """Measure the named targets; exit status 0 when every run reached its target."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=[*TARGETS, "all"])
    p.add_argument("--backend", default="ray", help="ray (default) | rx | reference")
    p.add_argument("--seeds", help="seeds: 0,1,2 or a range 0-9 (default 0,1,2)")
    p.add_argument("--runs", type=int, default=1, help="runs of each seed (default 1)")
    p.add_argument("--load-after-first", action="store_true",
                   help="runs after the first share the machine with a process spinning on a core")
    p.add_argument("--no-stop", action="store_true",
                   help="train the whole budget (the final return shows a collapse after the target)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting for every run, as rxrl train's --set")
    p.add_argument("--out", default="runs/learning",
                   help="the run directories go to a new OUT/<date>-<time>/ per invocation")
    args = p.parse_args(argv)
    names = list(TARGETS) if args.target == "all" else [args.target]
    root = Path(args.out) / time.strftime("%Y%m%d-%H%M%S")  # the same command twice: two sets of runs
    while root.exists():  # (two invocations within a second)
        root = root.with_name(root.name + "+")
    table = []
    for name in names:
        target = TARGETS[name]
        seeds = parse_seeds(args.seeds) if args.seeds else target.seeds
        outcomes = measure(name, target, args.backend, root, seeds, args.runs, args.load_after_first,
                           not args.no_stop, tuple(args.settings))
        table.append((name, target, outcomes))
    print("\n| target | reached | env steps to target, IQM [95 % CI] | final return, IQM [95 % CI] |")
    print("|---|---|---|---|")
    docs = {}
    for name, target, outcomes in table:
        r = reliability(target, outcomes)
        docs[name] = {"target": attrs.asdict(target), **r, "outcomes": [attrs.asdict(o) for o in outcomes]}
        (s, slo, shi), (f, flo, fhi) = r["steps_iqm"], r["final_return_iqm"]
        print(f"| {name} | {r['reached']}/{r['runs']} | {s:,.0f} [{slo:,.0f}, {shi:,.0f}] | "
              f"{f:.1f} [{flo:.1f}, {fhi:.1f}] |")
    root.mkdir(parents=True, exist_ok=True)
    (root / "reliability.json").write_text(json.dumps(docs, indent=2))
    return 0 if all(o.reached for _, _, outcomes in table for o in outcomes) else 1


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0,1,2`` or ``0-9`` (both ends included)."""
    if "-" in text and "," not in text:
        first, last = (int(x) for x in text.split("-"))
        return tuple(range(first, last + 1))
    return tuple(int(x) for x in text.split(","))


if __name__ == "__main__":
    sys.exit(main())
