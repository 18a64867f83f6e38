"""``rxrl train``: run an algorithm's plan, log metrics, checkpoint, resume, summarize.

A run never loses or mixes data: ``--out`` must be a new directory (``--resume`` continues
one); SIGINT/SIGTERM end a run at its next record with a checkpoint of that record (see
`rxrl.cli_signals`); a resumed run cuts its metrics back to the checkpoint it starts from,
and no run writes ``config.json`` (or anything else) before it has really started.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import signal
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import attrs

import rxrl
from rxrl.algos import Algorithm, get
from rxrl.algos.common import RolloutSettings, Start, env_spaces
from rxrl.algos.configs import parse_assignment, paths, to_dict, with_settings
from rxrl.cli_log import Logger, ProgressLine
from rxrl.cli_machine import check_machine, check_overshoot, explain_actor_error
from rxrl.cli_run import (
    CHECKPOINT,
    Checkpoint,
    CheckpointClock,
    Counters,
    Snapshot,
    check_fits,
    deterministic_fields,
    load_checkpoint,
    save_checkpoint,
    save_trace,
    training_plan,
)
from rxrl.cli_signals import INTERRUPTS, exit_code
from rxrl.compile import compile_plan
from rxrl.errors import ActorError
from rxrl.rl import Metrics

BACKENDS = ("ray", "rx", "reference")
#: ``ray.init`` options for the local Ray that ``rxrl train`` starts: no dashboard, no log noise
#: (which also makes it a lean Ray: `rxrl.backends.ray.connect.is_lean`)
RAY_INIT = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False}
#: modules every worker process of that Ray imports as soon as it has started, before it is
#: given an actor: Ray starts (one per CPU) while ``ray.init`` is still running, so the
#: imports overlap with the rest of the start-up instead of following the actor's creation
#: (``ray._common.pydantic_compat``: Ray's serializer add-ons import pydantic, ~0.2 s, at a
#: process's first task otherwise)
WORKER_PRELOAD = ("torch", "gymnasium", "rxrl.backends.ray.host", "rxrl.algos",
                  "ray._common.pydantic_compat")
#: the same for a plan whose actors are mostly torch-free rollout workers (factories whose
#: ``torch_free`` is true: `rxrl.rl.worker.RolloutWorkerFactory`, PPO's and A2C's): torch would cost
#: every worker process ~0.9 s of CPU that only the learner's needs (it imports torch itself)
TORCH_FREE_PRELOAD = ("gymnasium", "rxrl.backends.ray.host", "rxrl.rl.worker", "rxrl.rl.reply",
                      "ray._common.pydantic_compat")
#: what a run directory holds; a directory with any of these is an existing run
RUN_FILES = ("config.json", "metrics.csv", CHECKPOINT, "summary.json", "tb")
#: The niceness of the local Ray's worker processes (Ray's default: 15). The actors are the
#: training job itself (learner and rollout workers), not background work: at nice 15 any other
#: busy process on the machine takes their CPU first, and a run of ``rxrl train`` went slower
#: than the same work in one process at nice 0 (docs/design-notes.md, "The local Ray").
WORKER_NICENESS = 0
#: restarts per rollout worker by default (a killed worker process comes back)
WORKER_RESTARTS = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rxrl train``."""
    p.add_argument("algo", help="algorithm: ppo | a2c | a3c | impala | appo | dqn | apex | ma-ppo | "
                                 "two-trainer | maml")
    p.add_argument("--env", help="gymnasium env id, or module:Env-v0 to import module first; for "
                                 "ma-ppo/two-trainer a PettingZoo env: MultiCartPole-v0, "
                                 "mpe2.simple_spread_v3 (default: the algorithm's)")
    p.add_argument("--backend", default="ray", help="ray (default; starts a local Ray) | rx | reference")
    p.add_argument("--workers", type=int, help="number of rollout workers")
    p.add_argument("--steps", type=int, help="env steps to train for, in total (default per algorithm)")
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


def configure(args: argparse.Namespace) -> tuple[Algorithm, RolloutSettings, Checkpoint | None]:
    """The algorithm, its config (defaults < tuned for the env < flags < --set) and the resume point."""
    algo = get(args.algo)
    if args.steps is not None and args.steps < 1:
        raise ValueError(f"--steps must be >= 1, got {args.steps}")
    overrides: dict[str, Any] = {}
    for text in args.settings:
        key, value = parse_assignment(text)
        overrides[key] = value
    flags = {"num_workers": args.workers, "seed": args.seed}
    resumed = load_checkpoint(args.resume) if args.resume else None
    if resumed is not None:
        if resumed.algo.name != algo.name:
            raise ValueError(f"--resume {args.resume} is a {resumed.algo.name} run, not {algo.name}")
        if args.env and args.env != resumed.config.env:
            raise ValueError(f"--resume {args.resume} trained on {resumed.config.env}, not {args.env}")
        config = resumed.config
        decay = getattr(config, "lr_decay_steps", None)
        if args.steps is not None and decay is not None and decay != args.steps:
            # a learning-rate schedule spans the run's budget: a longer (or shorter) --steps
            # stretches it, else the lr would be 0 for the whole extension
            config = _settings(config, {"lr_decay_steps": args.steps}, "--steps")
    else:
        env = args.env or algo.config().env
        config = _settings(algo.config(), {"env": env, **algo.tuned.get(env, {})}, "tuned setting")
        # a schedule spans the run's budget (a None schedule, as PPO's default, stays off)
        for spans in ("lr_decay_steps", *algo.budget_settings):
            if spans in paths(algo.config) and getattr(config, spans) is not None:
                config = _settings(config, {spans: budget(args, algo)}, "--steps")
    config = _settings(config, {k: v for k, v in flags.items() if v is not None}, "option")
    config = _settings(config, overrides, "--set")
    if algo.check_env is not None:  # not a single-agent gymnasium env (multi-agent)
        try:
            algo.check_env(config, resumed.learner_state if resumed is not None else None)
        except ValueError as e:
            raise ValueError(f"--resume {args.resume}: {e}" if resumed is not None else str(e)) from None
        return algo, config, resumed
    spaces = env_spaces(config, algo.name)
    if resumed is not None:
        try:
            check_fits(resumed, config, spaces)
        except ValueError as e:
            raise ValueError(f"--resume {args.resume}: {e}") from None
    return algo, config, resumed


def budget(args: argparse.Namespace, algo: Algorithm) -> int:
    """The run's env steps, counted from the first run's start: ``--steps`` or the default."""
    return int(args.steps) if args.steps is not None else algo.default_steps


def _settings(config: RolloutSettings, settings: Mapping[str, Any], what: str) -> RolloutSettings:
    try:
        return with_settings(config, settings)
    except ValueError as e:
        raise ValueError(f"bad {what}: {e}") from None


def run_files(path: Path) -> list[str]:
    """The run files (`RUN_FILES`) that ``path`` already holds."""
    return [name for name in RUN_FILES if (path / name).exists()]


def out_dir(args: argparse.Namespace, algo: Algorithm, config: RolloutSettings) -> Path:
    """The run directory, created and checked writable (ValueError otherwise).

    ``--out`` must not hold a run already, unless it is the directory being resumed.
    """
    resume_dir = None
    if args.resume:
        resume_dir = Path(args.resume)
        resume_dir = resume_dir.parent if resume_dir.is_file() else resume_dir
    if args.out:
        path = Path(args.out)
        existing = run_files(path) if path.is_dir() else []
        if existing and not (resume_dir is not None and _same_dir(path, resume_dir)):
            raise ValueError(f"--out {path} already holds a run ({', '.join(existing)}): "
                             f"continue it with --resume {path}, or choose a new --out")
    elif resume_dir is not None:
        path = resume_dir
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        base = Path("runs") / f"{algo.name}-{config.env.replace(':', '_')}-s{config.seed}-{stamp}"
        path, n = base, 1
        while path.exists() and run_files(path):  # two runs started within the same second
            n += 1
            path = base.with_name(f"{base.name}-{n}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".rxrl-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ValueError(f"cannot write to --out {path}: {e.strerror or e}") from None
    return path


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def write_json(path: Path, doc: Any) -> None:
    """Write ``doc`` as JSON atomically (a reader sees the old file or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def check_target(target: float | None) -> None:
    """``--target-return`` must be a finite number."""
    if target is not None and not math.isfinite(target):
        raise ValueError(f"--target-return must be a finite number, got {target}")


def ray_init_options(plan: rxrl.Plan[Any]) -> dict[str, Any]:
    """``ray.init`` options for the local Ray that runs ``plan``: `RAY_INIT`, the
    `WORKER_PRELOAD` modules (`TORCH_FREE_PRELOAD` where most actors are torch-free rollout
    workers), and a worker process started in advance for every actor.

    Ray starts one worker process per CPU as soon as its raylet is up, at most one per core
    at a time; an actor beyond those waits for a worker started only when the run asks for
    it (PPO's 2 rollout workers and learner on 2 cores: the third actor's process started
    ~2 s after the others). So the local Ray gets at least as many CPUs as the plan has
    actors, and starts that many workers at once.

    The actors also run at the driver's priority (`WORKER_NICENESS`), not at Ray's default of
    nice 15.
    """
    groups = [g for g in compile_plan(plan.node).groups if not g.driver_hosted]
    actors = sum(group.size for group in groups)
    torch_free = sum(group.size for group in groups if getattr(group.make, "torch_free", False))
    cpus = max(os.cpu_count() or 1, actors)
    preload = TORCH_FREE_PRELOAD if torch_free > actors - torch_free else WORKER_PRELOAD
    return {**RAY_INIT, "num_cpus": cpus,
            "_system_config": {"preload_python_modules": list(preload),
                               "worker_maximum_startup_concurrency": cpus,
                               "worker_niceness": WORKER_NICENESS}}


def train(args: argparse.Namespace) -> int:
    """``rxrl train``: see ``rxrl train --help``."""
    if args.backend not in BACKENDS:
        raise ValueError(f"unknown backend {args.backend!r}; choose one of {list(BACKENDS)}")
    if args.checkpoint_every < 1:
        raise ValueError(f"--checkpoint-every must be >= 1, got {args.checkpoint_every}")
    if args.worker_restarts < -1:
        raise ValueError(f"--worker-restarts must be >= 0 (or -1 for no limit), got {args.worker_restarts}")
    check_target(args.target_return)
    algo, config, resumed = configure(args)
    base = resumed.counters if resumed else Counters()
    total = budget(args, algo)
    if total <= base.env_steps_sampled:
        raise ValueError(f"--steps {total} is not more than the {base.env_steps_sampled} env steps "
                         "already trained")
    final = total - base.env_steps_sampled  # this run's share of the budget
    if args.backend == "ray" and not args.address:
        check_machine(config)
    check_overshoot(config, final)
    out = out_dir(args, algo, config)
    trace_file = Path(args.trace) if args.trace else None
    if trace_file is not None and not trace_file.parent.is_dir():
        raise ValueError(f"cannot write --trace {trace_file}: no directory {trace_file.parent}")
    doc = {"algo": algo.name, "config": to_dict(config), "backend": args.backend, "steps": total,
           "resumed_from": str(resumed.path) if resumed else None}
    start = Start(resumed.learner_state, reseed=base.iteration) if resumed else None
    clock = CheckpointClock(args.checkpoint_every, final, args.target_return)
    plan = training_plan(algo, config, start, clock, args.worker_restarts)
    options: dict[str, Any] = {}
    if args.backend == "ray":
        # "local": a Ray of this run's own, never a cluster that happens to run on this machine
        options = {"address": args.address or "local",
                   "init_options": None if args.address else ray_init_options(plan)}
    in_place = resumed is not None and _same_dir(out, resumed.path.parent)
    session = Session(algo, config, args, out, total, base, resumed, in_place, config_doc=doc)
    print(f"{session.label}: training for {total:,} env steps; writing to {out}", file=sys.stderr)
    with contextlib.ExitStack() as stack:
        run = _start(plan, args, options)
        try:
            for snapshot in run:
                if session.last is None:  # from the first record on, a signal stops gracefully
                    stack.enter_context(INTERRUPTS.graceful(lambda signum: clock.request()))
                if session.observe(snapshot, INTERRUPTS.requested):
                    break
        except ActorError as e:
            session.status = "failed"
            _reraise(e, args.address)
        except Exception:
            session.status = "failed"
            raise
        finally:
            run.close()
            session.close()
            if trace_file is not None:
                save_trace(trace_file, algo.name, config, run.trace, session.records,
                           args.checkpoint_every, final, resumed.path if resumed else None)
    signum, INTERRUPTS.requested = INTERRUPTS.requested, None
    last = session.last
    print(f"{session.label}: {session.status}; return "
          f"{_fmt(last.episode_return_mean if last else math.nan)} after "
          f"{last.env_steps_sampled if last else 0:,} env steps; see {out}/summary.json")
    return exit_code(signum) if signum is not None and session.status == "interrupted" else 0


def _start(plan: rxrl.Plan[Snapshot], args: argparse.Namespace,
           options: dict[str, Any]) -> rxrl.Run[Snapshot]:
    from rxrl.backends.ray.connect import RayConnectError

    try:
        return rxrl.run(plan, args.backend, **options)
    except RayConnectError as e:
        raise ValueError(f"--address {args.address}: {e}") from None
    except ActorError as e:
        _reraise(e, args.address)


def _reraise(e: ActorError, address: str | None) -> NoReturn:
    better = explain_actor_error(e, address)
    if better is e:
        raise e
    raise better from e


class Session:
    """One ``rxrl train`` run as its records arrive: logs, progress, checkpoints, summary.

    ``config_doc`` is written to config.json at the first record: a run that fails to start
    (a resume that does not fit, an --address where no Ray runs) leaves its directory as it
    was, and a new one reusable.
    """

    def __init__(self, algo: Algorithm, config: RolloutSettings, args: argparse.Namespace,
                 out: Path, total: int, base: Counters, resumed: Checkpoint | None = None,
                 in_place: bool = False, config_doc: Any = None) -> None:
        self.algo, self.config, self.args, self.out = algo, config, args, out
        self.total, self.base, self.target = total, base, args.target_return
        self.label = f"{algo.name} {config.env} [{args.backend}]"
        self.logger = Logger(out, resumed=base if in_place else None)
        self.progress = ProgressLine(self.label, total)
        self.records: list[dict[str, float]] = []  # for --trace
        self.last: Metrics | None = None
        self.reached: Metrics | None = None
        self.best = -math.inf
        self.status = "interrupted"
        self.signal: int | None = None
        self.config_doc = config_doc
        #: the counters of the checkpoint in the run directory (the resumed one, in place)
        self.checkpointed: Counters | None = base if resumed is not None and in_place else None

    def observe(self, snapshot: Snapshot, stop_requested: int | None = None) -> bool:
        """Log, show and checkpoint one record; True once the run should stop.

        ``stop_requested`` (a signal number) stops the run at the first record that carries
        a checkpoint (the clock was asked to mark the next one due).
        """
        m = self.base.offset(snapshot.metrics)
        if self.last is None and self.config_doc is not None:
            write_json(self.out / "config.json", self.config_doc)
        self.last = m
        if not math.isnan(m.episode_return_mean):
            self.best = max(self.best, m.episode_return_mean)
        self.logger.write(m)
        self.progress.update(m)
        if self.args.trace:
            self.records.append(deterministic_fields(snapshot.metrics))
        if snapshot.state is not None:
            save_checkpoint(self.out / CHECKPOINT, self.algo.name, self.config, snapshot.state,
                            Counters.of(m))
            self.checkpointed = Counters.of(m)
        if self.target is not None and m.episode_return_mean >= self.target:
            self.reached, self.status = m, "reached target"
            return True
        if m.env_steps_sampled >= self.total:
            self.status = "completed"
            return True
        if stop_requested is not None and snapshot.state is not None:
            self.signal = stop_requested
            return True  # status stays "interrupted", with a checkpoint of this record
        return False

    def close(self) -> None:
        """Close the logs; show the last record and write summary.json."""
        self.logger.close()
        m = self.last
        if m is None:
            return
        self.progress.update(m, final=True)
        ckpt = self.checkpointed
        doc = {
            "algo": self.algo.name, "env": self.config.env, "seed": self.config.seed,
            "backend": self.args.backend, "status": self.status, "iterations": m.iteration,
            "env_steps_sampled": m.env_steps_sampled, "env_steps_trained": m.env_steps_trained,
            "episodes": m.episodes, "episode_return_mean": _num(m.episode_return_mean),
            "best_episode_return_mean": _num(self.best), "time_s": round(m.time_s, 3),
            "target_return": self.target,
            "reached_target": None if self.reached is None else {
                "env_steps": self.reached.env_steps_sampled,
                "time_s": round(self.reached.time_s, 3)},
            "signal": None if self.signal is None else signal.Signals(self.signal).name,
            "checkpoint": str(self.out / CHECKPOINT) if ckpt is not None else None,
            # the checkpoint may predate the last record (a run killed between checkpoints)
            "checkpoint_iteration": None if ckpt is None else ckpt.iteration,
            "checkpoint_env_steps": None if ckpt is None else ckpt.env_steps_sampled,
            "checkpoint_is_latest": ckpt is not None and ckpt.iteration == m.iteration,
            "config": to_dict(self.config),
            "train": None if m.train is None else attrs.asdict(m.train),
        }
        write_json(self.out / "summary.json", doc)


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else round(x, 4)


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.1f}"

__all__ = ["BACKENDS", "RAY_INIT", "RUN_FILES", "WORKER_PRELOAD", "WORKER_RESTARTS", "Logger",
           "ProgressLine", "Session", "add_arguments", "budget", "check_target", "configure",
           "out_dir", "ray_init_options", "run_files", "train", "write_json"]
