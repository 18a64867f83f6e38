"""``rxrl train``: run an algorithm's plan, log metrics, checkpoint, resume, summarize."""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import sys
import time
from collections import deque
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import attrs

import rxrl
from rxrl.algos import Algorithm, get
from rxrl.algos.common import RolloutSettings, Start, env_spaces
from rxrl.algos.configs import parse_assignment, paths, to_dict, with_settings
from rxrl.cli_run import (
    CHECKPOINT,
    Checkpoint,
    Counters,
    Snapshot,
    deterministic_fields,
    load_checkpoint,
    save_checkpoint,
    save_trace,
    training_plan,
)
from rxrl.rl import Metrics

BACKENDS = ("ray", "rx", "reference")
#: metrics columns written as integers
COUNTS = frozenset({"iteration", "env_steps_sampled", "env_steps_trained", "episodes",
                    "train/env_steps_trained", "train/num_updates"})
#: ``ray.init`` options for the local Ray that ``rxrl train`` starts: no dashboard, no log noise
RAY_INIT = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rxrl train``."""
    p.add_argument("algo", help="algorithm: ppo | a2c | a3c")
    p.add_argument("--env", help="gymnasium env id (default: the algorithm's, CartPole-v1)")
    p.add_argument("--backend", default="ray", help="ray (default; starts a local Ray) | rx | reference")
    p.add_argument("--workers", type=int, help="number of rollout workers")
    p.add_argument("--steps", type=int, help="env steps to train for, in total (default per algorithm)")
    p.add_argument("--seed", type=int, help="random seed (default 0)")
    p.add_argument("--out", help="run directory (default runs/ALGO-ENV-sSEED-TIME)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. --set lr=0.001 --set policy.hidden_sizes=32,32")
    p.add_argument("--resume", metavar="DIR", help="continue from the checkpoint in run directory DIR")
    p.add_argument("--checkpoint-every", type=int, default=25_000, metavar="STEPS",
                   help="env steps between checkpoints (default 25000)")
    p.add_argument("--target-return", type=float, metavar="R",
                   help="stop early once the mean episode return (last 100 episodes) reaches R")
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
    else:
        env = args.env or algo.config().env
        config = _settings(algo.config(), {"env": env, **algo.tuned.get(env, {})}, "tuned setting")
        if "lr_decay_steps" in paths(algo.config):  # a schedule spans the run's budget
            config = _settings(config, {"lr_decay_steps": budget(args, algo)}, "--steps")
    config = _settings(config, {k: v for k, v in flags.items() if v is not None}, "option")
    config = _settings(config, overrides, "--set")
    env_spaces(config, algo.name)
    return algo, config, resumed


def budget(args: argparse.Namespace, algo: Algorithm) -> int:
    """The run's env steps, counted from the first run's start: ``--steps`` or the default."""
    return int(args.steps) if args.steps is not None else algo.default_steps


def _settings(config: RolloutSettings, settings: Mapping[str, Any], what: str) -> RolloutSettings:
    try:
        return with_settings(config, settings)
    except ValueError as e:
        raise ValueError(f"bad {what}: {e}") from None


def out_dir(args: argparse.Namespace, algo: Algorithm, config: RolloutSettings) -> Path:
    """The run directory, created and checked writable (ValueError otherwise)."""
    if args.out:
        path = Path(args.out)
    elif args.resume:
        path = Path(args.resume)
        path = path.parent if path.is_file() else path
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = Path("runs") / f"{algo.name}-{config.env.replace(':', '_')}-s{config.seed}-{stamp}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".rxrl-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ValueError(f"cannot write to --out {path}: {e.strerror or e}") from None
    return path


class Logger:
    """metrics.csv and TensorBoard scalars, one row per iteration.

    A resumed run appends to the metrics.csv already in its directory; a new run replaces it.
    """

    def __init__(self, out: Path, resumed: bool = False) -> None:
        from tensorboardX import SummaryWriter

        self.path = out / "metrics.csv"
        self._append = resumed and self.path.exists() and self.path.stat().st_size > 0
        self._file: IO[str] = self.path.open("a" if self._append else "w", newline="")
        self._csv: csv.DictWriter[str] | None = None
        self._tb = SummaryWriter(logdir=str(out / "tb"))

    def write(self, m: Metrics) -> None:
        """Log one record (env steps sampled are TensorBoard's step)."""
        row = m.as_row()
        if self._csv is None:
            self._csv = csv.DictWriter(self._file, fieldnames=list(row), extrasaction="ignore",
                                       restval="")
            if not self._append:
                self._csv.writeheader()
        self._csv.writerow({k: int(v) if k in COUNTS else v for k, v in row.items()})
        for key, value in row.items():
            if key not in ("iteration", "env_steps_sampled") and math.isfinite(value):
                self._tb.add_scalar(key, value, global_step=m.env_steps_sampled)

    def close(self) -> None:
        """Flush and close both outputs."""
        self._file.close()
        self._tb.close()


class ProgressLine:
    """The live progress line on stderr: rewritten in place on a terminal, else every few seconds."""

    def __init__(self, label: str, total: int, stream: IO[str] = sys.stderr) -> None:
        self.label, self.total, self.stream = label, total, stream
        self.tty = stream.isatty()
        self.recent: deque[tuple[float, int]] = deque()
        self.last_print = -math.inf

    def update(self, m: Metrics, final: bool = False) -> None:
        """Show ``m``; a rate over the last ~10 s of wall time."""
        now = time.perf_counter()
        self.recent.append((now, m.env_steps_sampled))
        while len(self.recent) > 2 and now - self.recent[0][0] > 10:
            self.recent.popleft()
        if not final and now - self.last_print < (0.2 if self.tty else 5.0):
            return
        self.last_print = now
        (t0, s0), (t1, s1) = self.recent[0], self.recent[-1]
        rate = (s1 - s0) / (t1 - t0) if t1 > t0 else math.nan
        ret = "     n/a" if math.isnan(m.episode_return_mean) else f"{m.episode_return_mean:8.1f}"
        pct = min(100.0, 100.0 * m.env_steps_sampled / self.total)
        mins, secs = divmod(int(m.time_s), 60)
        line = (f"{self.label} | steps {m.env_steps_sampled:>9,}/{self.total:,} ({pct:3.0f}%) | "
                f"return {ret} | {rate:7,.0f} steps/s | {mins:d}:{secs:02d}")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def train(args: argparse.Namespace) -> int:
    """``rxrl train``: see ``rxrl train --help``."""
    if args.backend not in BACKENDS:
        raise ValueError(f"unknown backend {args.backend!r}; choose one of {list(BACKENDS)}")
    if args.checkpoint_every < 1:
        raise ValueError(f"--checkpoint-every must be >= 1, got {args.checkpoint_every}")
    algo, config, resumed = configure(args)
    base = resumed.counters if resumed else Counters()
    total = budget(args, algo)
    if total <= base.env_steps_sampled:
        raise ValueError(f"--steps {total} is not more than the {base.env_steps_sampled} env steps "
                         "already trained")
    out = out_dir(args, algo, config)
    trace_file = Path(args.trace) if args.trace else None
    if trace_file is not None and not trace_file.parent.is_dir():
        raise ValueError(f"cannot write --trace {trace_file}: no directory {trace_file.parent}")
    (out / "config.json").write_text(json.dumps(
        {"algo": algo.name, "config": to_dict(config), "backend": args.backend,
         "steps": total, "resumed_from": str(resumed.path) if resumed else None}, indent=2))
    start = Start(resumed.learner_state, reseed=base.iteration) if resumed else None
    final = total - base.env_steps_sampled  # this run's share of the budget
    plan = training_plan(algo, config, start, args.checkpoint_every, final, args.target_return)
    options: dict[str, Any] = {}
    if args.backend == "ray":
        # "local": a Ray of this run's own, never a cluster that happens to run on this machine
        options = {"address": args.address or "local",
                   "init_options": None if args.address else RAY_INIT}
    session = Session(algo, config, args, out, total, base)
    print(f"{session.label}: training for {total:,} env steps; writing to {out}", file=sys.stderr)
    run = rxrl.run(plan, args.backend, **options)
    try:
        for snapshot in run:
            if session.observe(snapshot):
                break
    except Exception:
        session.status = "failed"
        raise
    finally:
        run.close()
        session.close()
        if trace_file is not None:
            save_trace(trace_file, algo.name, config, run.trace, session.records,
                       args.checkpoint_every, final, resumed.path if resumed else None)
    last = session.last
    print(f"{session.label}: {session.status}; return "
          f"{_fmt(last.episode_return_mean if last else math.nan)} after "
          f"{last.env_steps_sampled if last else 0:,} env steps; see {out}/summary.json")
    return 0


class Session:
    """One ``rxrl train`` run as its records arrive: logs, progress, checkpoints, summary."""

    def __init__(self, algo: Algorithm, config: RolloutSettings, args: argparse.Namespace,
                 out: Path, total: int, base: Counters) -> None:
        self.algo, self.config, self.args, self.out = algo, config, args, out
        self.total, self.base, self.target = total, base, args.target_return
        self.label = f"{algo.name} {config.env} [{args.backend}]"
        self.logger = Logger(out, resumed=base.iteration > 0)
        self.progress = ProgressLine(self.label, total)
        self.records: list[dict[str, float]] = []  # for --trace
        self.last: Metrics | None = None
        self.reached: Metrics | None = None
        self.best = -math.inf
        self.status = "interrupted"

    def observe(self, snapshot: Snapshot) -> bool:
        """Log, show and checkpoint one record; True once the run should stop."""
        m = self.base.offset(snapshot.metrics)
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
        if self.target is not None and m.episode_return_mean >= self.target:
            self.reached, self.status = m, "reached target"
            return True
        if m.env_steps_sampled >= self.total:
            self.status = "completed"
            return True
        return False

    def close(self) -> None:
        """Close the logs; show the last record and write summary.json."""
        self.logger.close()
        m = self.last
        if m is None:
            return
        self.progress.update(m, final=True)
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
            "checkpoint": str(self.out / CHECKPOINT) if (self.out / CHECKPOINT).exists() else None,
            "config": to_dict(self.config),
            "train": None if m.train is None else attrs.asdict(m.train),
        }
        (self.out / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else round(x, 4)


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.1f}"


__all__ = ["BACKENDS", "RAY_INIT", "Logger", "ProgressLine", "Session", "add_arguments", "configure",
           "out_dir", "train"]
