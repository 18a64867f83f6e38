"""``rxrl sweep``: the command line over `rxrl.training.sweep` — options, the results table and
the exit status; the sweep itself (search space, Ray Tune, trials, results files) is the
library's.

A SIGINT (Ctrl-C) or SIGTERM ends a sweep with its state saved (exit status 128 + the
signal); the same command with ``--resume`` continues it.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from rxrl.algos import MODULES
from rxrl.algos.configs import parse_assignment
from rxrl.training import sweep as lib
from rxrl.training.interrupts import exit_code
from rxrl.training.setup import BACKENDS


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rxrl sweep``."""
    p.add_argument("algo", metavar="ALGO", help=f"algorithm: {' | '.join(MODULES)}")
    p.add_argument("--env", help="gymnasium env id (default: the algorithm's)")
    p.add_argument("--steps", type=int, help="env steps each trial trains for (default per algorithm)")
    p.add_argument("--trials", type=int,
                   help="trials in all (default 8; --search grid: the grid's size)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="the sweep's directory: sweep.json, tune/, runs/TRIAL/, results.csv, best.json")
    p.add_argument("--space", action="append", default=[], metavar="KEY=DIST",
                   help="a swept setting, repeatable: lr=loguniform(1e-4,1e-2), gamma=choice(0.98,0.99); "
                        f"distributions: {', '.join(lib.DISTRIBUTIONS)} (randint: [low, high))")
    p.add_argument("--space-file", metavar="FILE",
                   help='more of the space: JSON {"lr": "loguniform(1e-4,1e-2)"} or a KEY=DIST per line')
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting every trial shares, as rxrl train --set")
    p.add_argument("--search", default="random", help=f"{' | '.join(lib.SEARCHES)} (default random)")
    p.add_argument("--scheduler", default="none",
                   help=f"{' | '.join(lib.SCHEDULERS)}: ASHA stops poor trials early, PBT clones "
                        "good ones and perturbs their settings (default none)")
    p.add_argument("--time-attr", default="env_steps",
                   help="what --grace-period and --perturbation-interval count: env_steps | iterations")
    p.add_argument("--grace-period", type=int, metavar="T",
                   help="ASHA: time before a trial may be stopped (default: an eighth of the budget)")
    p.add_argument("--reduction-factor", type=int, default=2, metavar="RF",
                   help="ASHA: keep the best 1/RF at each rung (default 2)")
    p.add_argument("--perturbation-interval", type=int, metavar="T",
                   help="PBT: time between perturbations, each at a checkpoint (default: an eighth "
                        "of the budget)")
    p.add_argument("--trial-backend", default=lib.DEFAULT_TRIAL_BACKEND,
                   help=f"{' | '.join(BACKENDS)}: where a trial runs its plan (default "
                        f"{lib.DEFAULT_TRIAL_BACKEND}: in the trial's process)")
    p.add_argument("--checkpoint-every", type=int, default=25_000, metavar="STEPS",
                   help="env steps between a trial's checkpoints, which --resume continues from "
                        "(default 25000; PBT: its interval)")
    p.add_argument("--max-concurrent", type=int, default=0, metavar="N",
                   help="trials at once (default 0: as many as there are CPUs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the search (default 0)")
    p.add_argument("--target-return", type=float, metavar="R",
                   help="stop each trial once its mean return reaches R, and rank the trials by "
                        "the env steps they needed (the searcher and ASHA maximize a score: the "
                        "return until R, above R by the share of the budget left)")
    p.add_argument("--budget", type=int, metavar="STEPS",
                   help="env steps of all trials together: the sweep ends once they add up to "
                        "STEPS (running trials stopped, the rest not started), to compare "
                        "searches at an equal budget")
    p.add_argument("--defaults-first", action="store_true",
                   help="the first trial runs the config as it stands (the algorithm's defaults "
                        "with --set), then the search draws: start from where you are")
    p.add_argument("--resume", action="store_true",
                   help="continue the sweep in --out (give the options it was started with)")
    p.add_argument("--address", help="an existing Ray cluster to run the trials on")


def sweep_of(args: argparse.Namespace) -> lib.Sweep:
    """The checked `Sweep` that ``args`` (parsed ``rxrl sweep`` options) describe."""
    if args.algo not in MODULES:
        raise ValueError(f"unknown algorithm {args.algo!r}; choose one of {sorted(MODULES)}")
    space = lib.parse_space(args.space)
    if args.space_file:
        for key, dist in lib.read_space_file(args.space_file).items():
            if key in space:
                raise ValueError(f"--space-file {args.space_file}: {key} is given by --space too")
            space[key] = dist
    settings: dict[str, Any] = dict(parse_assignment(text) for text in args.settings)
    return lib.make_sweep(
        args.algo, env=args.env, steps=args.steps, trials=args.trials, space=space,
        settings=settings, search=args.search, scheduler=args.scheduler, time_attr=args.time_attr,
        grace_period=args.grace_period, reduction_factor=args.reduction_factor,
        perturbation_interval=args.perturbation_interval, trial_backend=args.trial_backend,
        checkpoint_every=args.checkpoint_every, max_concurrent=args.max_concurrent, seed=args.seed,
        target_return=args.target_return, budget=args.budget, defaults_first=args.defaults_first)


def sweep(args: argparse.Namespace) -> int:
    """``rxrl sweep``: see ``rxrl sweep --help``."""
    spec = sweep_of(args)
    lib.check_out(spec, Path(args.out), args.resume)  # before the first line: refused in one
    where = "continuing" if args.resume else "writing to"
    print(f"rxrl sweep: {spec.trials} trials of {spec.algo} on {spec.env or 'its default env'}, "
          f"{spec.steps:,} env steps each ({spec.search} search, scheduler {spec.scheduler}); "
          f"{where} {args.out}", file=sys.stderr)
    result = lib.run_sweep(spec, args.out, resume=args.resume, address=args.address)
    print(lib.format_table(result, list(spec.space)))
    if result.status == "interrupted":
        print("rxrl sweep: interrupted; the same command with --resume continues it", file=sys.stderr)
        return exit_code(result.signal) if result.signal is not None else 1
    if spec.budget is not None:
        used = sum(r.env_steps for r in result.rows)
        left = sum(r.status == "not started" for r in result.rows)
        print(f"rxrl sweep: {used:,} env steps in all (budget {spec.budget:,})"
              + (f"; {left} trial{'s' * (left != 1)} not started" if left else ""), file=sys.stderr)
    best = result.best
    if best is None:
        errors = [r.error for r in result.rows if r.error]
        raise ValueError(f"no trial reported a return{': ' + errors[0] if errors else ''}; see "
                         f"{args.out}/{lib.TUNE_DIR}/TRIAL/error.txt")
    ret = best.episode_return_mean
    reached = "" if best.reached is None else f" (reached {spec.target_return:g} at {best.reached:,})"
    print(f"best: {best.trial}, return {'n/a' if math.isnan(ret) else f'{ret:.1f}'} after "
          f"{best.env_steps:,} env steps{reached}; its settings in {args.out}/{lib.BEST_FILE}")
    return 0


__all__ = ["add_arguments", "sweep", "sweep_of"]
