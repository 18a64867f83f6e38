"""Learning targets of issue 5, measured with the real command line: one command per target.

    python bench/learning.py ppo-cartpole      # PPO CartPole-v1 >= 475 within 100k steps, seeds 0 1 2
    python bench/learning.py ppo-pendulum      # PPO Pendulum-v1 >= -250 within 200k steps
    python bench/learning.py a2c-cartpole      # A2C CartPole-v1 >= 400 within 200k steps
    python bench/learning.py a3c-cartpole      # A3C CartPole-v1 >= 400 within 200k steps
    python bench/learning.py impala-cartpole   # IMPALA CartPole-v1 >= 450 within 300k steps (issue 12)
    python bench/learning.py appo-cartpole     # APPO CartPole-v1 >= 475 within 200k steps (issue 12)
    python bench/learning.py all

Each seed is one ``rxrl train ALGO --env ENV --seed S --steps BUDGET --target-return R`` (the
default Ray backend unless ``--backend``; 2 workers, the algorithm's default and tuned
settings), run one after another. The run stops when the mean return of the last 100
episodes reaches the target; the table gives the env steps and the wall time (from the start
of the plan, Ray start-up and actor creation included) at which it did. Runs go to a new
``OUT/<date>-<time>/`` per invocation (``--out``, default ``runs/learning``; ``rxrl train``
refuses an ``--out`` that holds a run); ``rxrl plot`` draws their curves.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

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
}


def command(target: Target, seed: int, backend: str, out: Path) -> list[str]:
    """The ``rxrl train`` command line of one seed."""
    script = shutil.which("rxrl", path=str(Path(sys.executable).parent)) or "rxrl"
    return [script, "train", target.algo, "--env", target.env, "--seed", str(seed),
            "--steps", str(target.budget), "--target-return", str(target.threshold),
            "--backend", backend, "--workers", "2", "--out", str(out)]


def measure(name: str, target: Target, backend: str, root: Path, seeds: tuple[int, ...]) -> bool:
    """Run every seed of ``target``; print one Markdown row per seed; True if all reached it."""
    print(f"\n{name}: {target.algo} {target.env}, mean return >= {target.threshold:g} within "
          f"{target.budget:,} env steps ({backend} backend)")
    print("| seed | reached | env steps | wall time (s) | final return | process wall time (s) |")
    print("|---|---|---|---|---|---|")
    ok = True
    for seed in seeds:
        out = root / f"{name}-{backend}-s{seed}"
        started = time.perf_counter()
        done = subprocess.run(command(target, seed, backend, out), capture_output=True, text=True,
                              timeout=3600, stdin=subprocess.DEVNULL)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            print(f"| {seed} | error | | | | {elapsed:.0f} |  {done.stderr.strip()[-200:]}")
            ok = False
            continue
        summary = json.loads((out / "summary.json").read_text())
        reached = summary["reached_target"]
        ok = ok and reached is not None
        steps = f"{reached['env_steps']:,}" if reached else f"> {summary['env_steps_sampled']:,}"
        wall = f"{reached['time_s']:.1f}" if reached else f"({summary['time_s']:.1f})"
        final = summary["episode_return_mean"]
        print(f"| {seed} | {'yes' if reached else 'no'} | {steps} | {wall} | "
              f"{'n/a' if final is None else f'{final:.1f}'} | {elapsed:.0f} |", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    """Measure the named targets; exit status 0 when every seed reached its target."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=[*TARGETS, "all"])
    p.add_argument("--backend", default="ray", help="ray (default) | rx | reference")
    p.add_argument("--seeds", help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--out", default="runs/learning",
                   help="the run directories go to a new OUT/<date>-<time>/ per invocation")
    args = p.parse_args(argv)
    names = list(TARGETS) if args.target == "all" else [args.target]
    root = Path(args.out) / time.strftime("%Y%m%d-%H%M%S")  # the same command twice: two sets of runs
    while root.exists():  # (two invocations within a second)
        root = root.with_name(root.name + "+")
    ok = True
    for name in names:
        target = TARGETS[name]
        seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else target.seeds
        ok = measure(name, target, args.backend, root, seeds) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
