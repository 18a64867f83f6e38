"""MAML's target (issue 13): on unseen tasks, the return after one inner step vs before it, and
vs a policy trained with PPO on the task mixture and adapted with the same step.

    rxrl train maml --seed S --steps 12000000 --out runs/maml-sS                  # S = 0, 1, 2
    rxrl train maml --seed S --steps 12000000 --set maml.meta_gradient=false --out runs/mix-sS
    python bench/maml_eval.py --maml runs/maml-s* --baseline runs/mix-s*

Each run's checkpoint (its final meta-policy) is evaluated on the same ``--tasks`` goals, drawn
with ``--seed`` from the task distribution (unseen: training draws its goals from other
seeds): per task, the mean return of the checkpoint's ``num_envs_per_worker`` sampled
episodes before and after one inner step (the run's ``maml.inner_lr``). Means over tasks
with 95 % bootstrap confidence intervals (10,000 resamples of the tasks).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rxrl.algos.meta.maml import MAML, task_env
from rxrl.rl.learners.maml import adaptation_returns
from rxrl.training.checkpoint import load_checkpoint


def interval(x: npt.NDArray[np.float64], seed: int = 0) -> tuple[float, float, float]:
    """The mean of ``x`` and its 95 % bootstrap interval."""
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), (10_000, len(x)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(x.mean()), float(low), float(high)


def fmt(x: npt.NDArray[np.float64]) -> str:
    """``mean [low, high]``."""
    m, lo, hi = interval(x)
    return f"{m:.1f} [{lo:.1f}, {hi:.1f}]"


def evaluate(run: Path, tasks: int, seed: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per-task mean returns before and after one inner step of ``run``'s checkpoint."""
    ckpt = load_checkpoint(run)
    config = ckpt.config
    if not isinstance(config, MAML):
        raise SystemExit(f"{run} is not a maml run")
    env = task_env(config, seed, 0)
    goals = env.sample_tasks(tasks)
    weights = {k: t.numpy() for k, t in ckpt.learner_state["policy"].items()}
    return adaptation_returns(weights, env, goals, config.maml, config.policy, seed=seed)


def main(argv: list[str] | None = None) -> int:
    """Print one row per run and one per group (MAML, mixture), and whether the target holds."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--maml", nargs="+", type=Path, required=True, help="maml run directories")
    p.add_argument("--baseline", nargs="+", type=Path, required=True,
                   help="runs of maml.meta_gradient=false (PPO on the task mixture)")
    p.add_argument("--tasks", type=int, default=20)
    p.add_argument("--seed", type=int, default=2027, help="the evaluation tasks' seed")
    args = p.parse_args(argv)
    print(f"{args.tasks} unseen tasks (seed {args.seed}); mean return per task, 95 % bootstrap CI\n")
    print("| run | trained | before adaptation | after one inner step | gain |")
    print("|---|---|---|---|---|")
    Pair = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]
    pooled: dict[str, list[Pair]] = {"maml": [], "mixture": []}
    for group, runs in (("maml", args.maml), ("mixture", args.baseline)):
        for run in runs:
            before, after = evaluate(run, args.tasks, args.seed)
            pooled[group].append((before, after))
            steps = load_checkpoint(run).counters.env_steps_sampled
            print(f"| {run.name} ({group}) | {steps:,} | {fmt(before)} | {fmt(after)} | "
                  f"{fmt(after - before)} |")
    means = {}
    for group, results in pooled.items():
        # per task, the mean over the group's seeds (the same tasks for every run)
        before = np.mean([b for b, _ in results], axis=0)
        after = np.mean([a for _, a in results], axis=0)
        means[group] = (before, after)
        print(f"| all {group} seeds | | {fmt(before)} | {fmt(after)} | {fmt(after - before)} |")
    (mb, ma), (_, xa) = means["maml"], means["mixture"]
    ok = bool(ma.mean() > mb.mean() and ma.mean() > xa.mean())
    print(f"\nMAML after vs before: {fmt(ma - mb)}; MAML after vs mixture after: {fmt(ma - xa)} "
          f"-> target {'met' if ok else 'not met'}")
    return 0 if ok else 1


if __name__ == "__main__":

    sys.exit(main())
