"""``rxrl train``: the command line over `rxrl.Trainer` — options, the progress line, the
closing line and the exit status; the run itself (directory, checkpoints, resume, loggers,
summary) is the library's.

SIGINT/SIGTERM end a run at its next record with a checkpoint of that record (see
`rxrl.training.interrupts`); the exit status is then 128 + the signal.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from rxrl.algos import ALGORITHMS, MODULES
from rxrl.algos.configs import parse_assignment
from rxrl.cli.progress import Progress
from rxrl.training.interrupts import INTERRUPTS, exit_code
from rxrl.training.loggers import DEFAULT_LOGGERS, LOGGERS
from rxrl.training.setup import BACKENDS, WORKER_RESTARTS
from rxrl.training.trainer import Trainer


def algorithms_help() -> str:
    """One line per registered algorithm: its name and its spec's summary."""
    width = max(len(name) for name in MODULES)
    return "\n".join(f"  {name:<{width}}  {ALGORITHMS[name].summary}" for name in MODULES)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rxrl train``."""
    p.add_argument("algo", metavar="ALGO", help=f"algorithm: {' | '.join(MODULES)} (listed below)")
    p.add_argument("--env", help="gymnasium env id, or module:Env-v0 to import module first; for "
                                 "ma-ppo/two-trainer a PettingZoo env: MultiCartPole-v0, "
                                 "mpe2.simple_spread_v3 (default: the algorithm's)")
    p.add_argument("--backend", default="ray",
                   help=f"{' | '.join(BACKENDS)} (default ray: starts a local Ray)")
    p.add_argument("--workers", type=int, help="number of rollout workers")
    p.add_argument("--steps", type=int, help="env steps to train for, in total (default per algorithm; with "
                   "--resume, the resumed run's)")
    p.add_argument("--seed", type=int, help="random seed (default 0)")
    p.add_argument("--out", help="a new run directory (default runs/ALGO-ENV-sSEED-TIME)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. --set lr=0.001 --set policy.hidden_sizes=32,32")
    p.add_argument("--resume", metavar="DIR", help="continue from the checkpoint in run directory DIR")
    p.add_argument("--checkpoint-every", type=int, default=25_000, metavar="STEPS",
                   help="env steps between checkpoints (default 25000)")
    p.add_argument("--target-return", type=float, metavar="R",
                   help="stop early once the mean episode return (last 100 episodes) reaches R")
    p.add_argument("--worker-restarts", type=int, default=WORKER_RESTARTS, metavar="N",
                   help="times the ray backend restarts a rollout worker whose process died "
                        f"(default {WORKER_RESTARTS}; 0: a dead worker ends the run; -1: no limit)")
    p.add_argument("--trace", metavar="FILE", help="save the run's trace for `rxrl replay`")
    p.add_argument("--address", help="an existing Ray cluster to run on (ray backend)")
    p.add_argument("--eval-interval", type=int, default=0, metavar="N",
                   help="evaluate the greedy policy every N iterations, beside training, on "
                        "unseen seeds (default 0: off; ppo a2c a3c impala appo dqn apex sac)")
    p.add_argument("--eval-workers", type=int, default=1, metavar="K",
                   help="evaluator actors (default 1)")
    p.add_argument("--eval-episodes", type=int, default=10, metavar="E",
                   help="greedy episodes per evaluation (default 10)")
    p.add_argument("--profile", action="store_true",
                   help="time every operator and actor: stats.json (rxrl show RUN --stats) and "
                        "profile.json (a Chrome trace: chrome://tracing, ui.perfetto.dev) in the run "
                        "directory")
    p.add_argument("--logger", dest="loggers", action="append", metavar="NAME",
                   help=f"where records go, repeatable or comma-separated: {' | '.join(LOGGERS)} "
                        f"(default {','.join(DEFAULT_LOGGERS)}; wandb and mlflow need their extras)")


class AlgorithmsHelp(argparse.RawDescriptionHelpFormatter):
    """``rxrl train --help`` ends with the registered algorithms, read from their specs when
    the help is shown (not when the parser is built: that would import every algorithm)."""

    def format_help(self) -> str:
        """The usual help, then the algorithms."""
        return super().format_help() + "\nalgorithms:\n" + algorithms_help() + "\n"


def loggers_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The ``--logger`` names, split at commas (the default when none is given)."""
    if not args.loggers:
        return DEFAULT_LOGGERS
    names = [name.strip() for value in args.loggers for name in value.split(",")]
    if any(not name for name in names):
        raise ValueError(f"--logger: an empty name in {','.join(args.loggers)!r}")
    return tuple(dict.fromkeys(names))


def trainer(args: argparse.Namespace) -> Trainer:
    """The `Trainer` that ``args`` (parsed ``rxrl train`` options) describe."""
    overrides: dict[str, Any] = {}
    for text in args.settings:
        key, value = parse_assignment(text)
        overrides[key] = value
    return Trainer(args.algo, args.out, env=args.env, settings=overrides, steps=args.steps,
                   workers=args.workers, seed=args.seed, resume=args.resume, backend=args.backend,
                   address=args.address, checkpoint_every=args.checkpoint_every,
                   target_return=args.target_return, worker_restarts=args.worker_restarts,
                   trace=args.trace, loggers=loggers_of(args), callbacks=[Progress()],
                   evaluation_interval=getattr(args, "eval_interval", 0),
                   evaluation_workers=getattr(args, "eval_workers", 1),
                   evaluation_episodes=getattr(args, "eval_episodes", 10),
                   profile=getattr(args, "profile", False))


def train(args: argparse.Namespace) -> int:
    """``rxrl train``: see ``rxrl train --help``."""
    if args.algo not in MODULES:
        raise ValueError(f"unknown algorithm {args.algo!r}; choose one of {sorted(MODULES)}")
    run = trainer(args)
    result = run.run()
    signum, INTERRUPTS.requested = INTERRUPTS.requested, None
    last = result.last
    ret = result.episode_return_mean
    print(f"{run.label}: {result.status}; return {'n/a' if math.isnan(ret) else f'{ret:.1f}'} after "
          f"{last.env_steps_sampled if last else 0:,} env steps; see {run.run_dir}/summary.json")
    if result.status == "interrupted":
        signum = result.signal or signum
        if signum is not None:
            return exit_code(signum)
    return 0


__all__ = ["AlgorithmsHelp", "add_arguments", "algorithms_help", "loggers_of", "train", "trainer"]
