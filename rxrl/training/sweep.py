"""Hyper-parameter sweeps of rxrl runs on Ray Tune: search spaces, the sweep, its results.

A sweep trains one algorithm on one env many times, each trial an ordinary rxrl run
(`rxrl.Trainer`) with some settings drawn from a search space, run by Ray Tune with a search
algorithm (random, grid, Optuna) and a scheduler (none, ASHA, PBT). Its directory holds
``sweep.json`` (what was asked), ``tune/`` (Tune's experiment: its state, per-trial results and
checkpoints), ``runs/TRIAL/`` (each trial's rxrl run directory: config.json, metrics.csv,
checkpoint.pt, summary.json), and at the end ``results.csv`` and ``best.json``.

The space language (``--space``, ``--space-file``) is `rxrl.training.sweep_space`. This module
(over 400 lines: one concept, a sweep's life on the driver — its spec and every check made
before anything starts, the run, its results table and files) keeps the checks beside the spec
they check.

Ray Tune is imported only when a sweep runs (``pip install -e ".[tune]"``); the Tune side of a
trial is `rxrl.training.sweep_tune`.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal

import attrs

from rxrl.algos import Algorithm, get
from rxrl.algos.configs import resolve
from rxrl.training.lock import InUse, RunDirClaim
from rxrl.training.setup import BACKENDS, RAY_INIT, check_target_return, check_writable
from rxrl.training.spelling import command_line
from rxrl.training.sweep_space import (
    DISTRIBUTIONS,
    Dist,
    parse_dist,
    parse_space,
    parse_space_entry,
    read_space_file,
    setting_text,
)

#: ``--search``: Tune's random sampling (grid axes expanded), a full grid, Optuna's TPE
SEARCHES = ("random", "grid", "optuna")
#: ``--scheduler``: run every trial to its budget, ASHA early stopping, population-based training
SCHEDULERS = ("none", "asha", "pbt")
#: ``--time-attr``: what ASHA's grace period and PBT's interval count, as a reported metric
TIME_ATTRS = {"env_steps": "env_steps_sampled", "iterations": "iteration"}
#: what the schedulers and searchers maximize: the mean return of the last 100 episodes
METRIC = "episode_return_mean"
#: what they maximize instead in a sweep with a target return (`score`): the return until a
#: trial reaches the target, above the target by how much of the budget it did not need
SCORE = "score"
#: A trial runs its rxrl plan in its own process, on the in-process reference interpreter by
#: default: a Tune trial is already a Ray actor holding one CPU, and rxrl's Ray backend inside
#: it would start an actor per rollout worker and learner besides (CPUs the trial must reserve
#: and processes that each import torch: on 2 cores, fewer trials at once and seconds of
#: start-up each). The reference interpreter is single-threaded and deterministic (a trial's
#: records depend on its config alone, so ASHA's and PBT's decisions do not depend on timing);
#: PPO CartPole trains as fast on it as on the threaded ``rx`` backend (30k steps: 2.2-2.8 s
#: against 3.4-3.5 s here). ``--trial-backend ray`` reserves a CPU per actor of the plan.
DEFAULT_TRIAL_BACKEND = "reference"
#: the files and directories of a sweep directory
SWEEP_FILE, TUNE_DIR, RUNS_DIR, RESULTS_FILE, BEST_FILE = (
    "sweep.json", "tune", "runs", "results.csv", "best.json")
#: the pip extra that brings Ray Tune and Optuna
EXTRA = 'pip install -e ".[tune]"'
SWEEP_FORMAT = "rxrl-sweep/1"


# ----------------------------------------------------------------------------------- sweeps


@attrs.frozen
class Sweep:
    """What a sweep runs (saved as ``sweep.json``; `make_sweep` builds a checked one).

    ``space`` and ``settings`` (fixed ``--set`` values) have full dotted paths as keys;
    ``grace_period`` (ASHA) and ``perturbation_interval`` (PBT) count ``time_attr``.
    """

    algo: str
    env: str | None
    steps: int
    trials: int
    space: Mapping[str, Dist]
    settings: Mapping[str, Any] = attrs.field(factory=dict)
    search: str = "random"
    scheduler: str = "none"
    time_attr: str = "env_steps"
    grace_period: int = 1
    reduction_factor: int = 2
    perturbation_interval: int = 1
    trial_backend: str = DEFAULT_TRIAL_BACKEND
    checkpoint_every: int = 25_000
    max_concurrent: int = 0
    seed: int = 0
    #: each trial stops at the first record whose mean return reaches it (``rxrl train
    #: --target-return``), and trials are ranked by the env steps they needed (`score`)
    target_return: float | None = None
    #: the env steps of all trials together: once the trials' reported env steps add up to
    #: it, the sweep ends (the running trials stopped, the ones not started left out)
    budget: int | None = None
    #: the first trial runs the config as it stands (the algorithm's defaults with
    #: ``settings``) before the search draws: a sweep that starts from where the user is
    defaults_first: bool = False

    @property
    def metric(self) -> str:
        """What Tune's searcher and scheduler maximize: `SCORE` with a target, else `METRIC`."""
        return METRIC if self.target_return is None else SCORE

    def to_json(self) -> dict[str, Any]:
        """The JSON document of ``sweep.json``."""
        doc = attrs.asdict(self, recurse=False)
        doc["space"] = {k: d.text for k, d in self.space.items()}
        doc["settings"] = dict(self.settings)
        return {"format": SWEEP_FORMAT, **doc}

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> Sweep:
        """A `Sweep` from `to_json`'s document."""
        if doc.get("format") != SWEEP_FORMAT:
            raise ValueError(f"not an rxrl sweep file (format {doc.get('format')!r})")
        fields = {k: v for k, v in doc.items() if k != "format"}
        fields["space"] = {k: parse_dist(v) for k, v in fields["space"].items()}
        return Sweep(**fields)

    @property
    def grid_size(self) -> int:
        """How many points the grid axes span (1 without any)."""
        return math.prod(len(d.args) for d in self.space.values() if d.kind == "grid")


@command_line()  # a sweep's errors name its flags, from Python too (docs/sweeps.md)
def make_sweep(algo: str, *, env: str | None = None, steps: int | None = None,
               trials: int | None = None, space: Mapping[str, Dist | str],
               settings: Mapping[str, Any] | None = None, search: str = "random",
               scheduler: str = "none", time_attr: str = "env_steps",
               grace_period: int | None = None, reduction_factor: int = 2,
               perturbation_interval: int | None = None,
               trial_backend: str = DEFAULT_TRIAL_BACKEND, checkpoint_every: int = 25_000,
               max_concurrent: int = 0, seed: int = 0, target_return: float | None = None,
               budget: int | None = None, defaults_first: bool = False) -> Sweep:
    """A checked `Sweep`; ValueError (one line) for anything that does not fit.

    ``space`` values are `Dist` or their text (``"loguniform(1e-4, 1e-2)"``); keys are
    ``--set`` paths (``lr`` resolves to ``learner.lr``). Every setting of the space is tried
    at its bounds (each listed value) against the algorithm's config, so a trial does not
    fail on a value it could draw. ``trials`` is the number of trials in all (default: 8, or
    the grid's size for ``search="grid"``); grid axes must divide it. ``grace_period`` and
    ``perturbation_interval`` default to an eighth of the budget in ``time_attr`` units.
    With ``target_return`` a trial stops once its mean return reaches it, and the sweep
    maximizes `score` (fewest env steps to the target first) instead of the last return.
    With ``budget`` the sweep ends once its trials' env steps add up to it (to compare
    searches at an equal budget): the trials then running stop, the ones not started are
    left out. With ``defaults_first`` the first trial runs the config as it stands (each swept
    setting at its default, which the space must hold) and the search goes on from there.
    """
    _one_of("--search", search, SEARCHES)
    _one_of("--scheduler", scheduler, SCHEDULERS)
    _one_of("--time-attr", time_attr, tuple(TIME_ATTRS))
    _one_of("--trial-backend", trial_backend, BACKENDS)
    target_return = check_target_return(target_return)
    if target_return is not None and scheduler == "pbt":
        raise ValueError("--target-return stops each trial at the target, and PBT trains its "
                         "population for the whole budget: use --scheduler asha or none")
    if budget is not None and budget < 1:
        raise ValueError(f"--budget must be >= 1 env step, got {budget}")
    spec = get(algo)
    resolved = _resolved_space(spec, space)
    fixed = {_resolve(spec, k, "--set"): v for k, v in (settings or {}).items()}
    both = sorted(set(fixed) & set(resolved))
    if both:
        raise ValueError(f"{both[0]} is both fixed (--set) and swept (--space): give it once")
    resolved = _with_search(resolved, search, scheduler)
    sweep = Sweep(algo, env, steps or spec.default_steps, 1, resolved, fixed, search, scheduler,
                  time_attr, reduction_factor=reduction_factor, trial_backend=trial_backend,
                  checkpoint_every=checkpoint_every, max_concurrent=max_concurrent, seed=seed,
                  target_return=target_return, budget=budget, defaults_first=defaults_first)
    sweep = attrs.evolve(sweep, trials=_trials(sweep, trials))
    iteration = check_configs(sweep)
    if defaults_first:
        if search == "grid" or sweep.grid_size > 1:
            raise ValueError("--defaults-first: a grid runs each of its points already; use "
                             "--search random or optuna with choice(...)")
        first_point(sweep)
    budget = sweep.steps if time_attr == "env_steps" else max(1, sweep.steps // iteration)
    eighth = max(budget // 8, 1 if time_attr == "iterations" else iteration)
    sweep = attrs.evolve(sweep, grace_period=grace_period or eighth,
                         perturbation_interval=perturbation_interval or eighth)
    _check_schedule(sweep, spec, grace_period, perturbation_interval)
    if scheduler == "pbt":  # PBT perturbs (and clones) at each checkpoint
        every = sweep.perturbation_interval * (iteration if time_attr == "iterations" else 1)
        sweep = attrs.evolve(sweep, checkpoint_every=every)
    return sweep


def _one_of(flag: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {flag} {value!r}; choose one of {', '.join(choices)}")


def _resolve(spec: Algorithm, key: str, flag: str) -> str:
    try:
        return resolve(spec.config, key)
    except ValueError as e:
        raise ValueError(f"bad {flag} {key}: {e}") from None


def _resolved_space(spec: Algorithm, space: Mapping[str, Dist | str]) -> dict[str, Dist]:
    out: dict[str, Dist] = {}
    for key, dist in space.items():
        if isinstance(dist, str):
            dist = parse_space_entry(f"{key}={dist}")[1]
        path = _resolve(spec, key, "--space")
        if path in out:
            raise ValueError(f"bad --space {key}: {path} is in the space twice")
        out[path] = dist
    if not out:
        raise ValueError("the search space is empty: give --space key=dist(...) or --space-file")
    return out


def _with_search(space: dict[str, Dist], search: str, scheduler: str) -> dict[str, Dist]:
    """The space as the search needs it: choices as grid axes for ``grid``; refusals."""
    if search == "grid":
        ranges = [f"{k}={d.text}" for k, d in space.items() if not d.discrete]
        if ranges:
            raise ValueError(f"--search grid needs listed values (grid or choice), not {ranges[0]}")
        space = {k: Dist("grid", d.args) for k, d in space.items()}
    grids = [f"{k}={d.text}" for k, d in space.items() if d.kind == "grid"]
    if grids and search == "optuna":
        raise ValueError(f"--search optuna cannot search a grid ({grids[0]}): use choice(...)")
    if grids and scheduler == "pbt":
        raise ValueError(f"--scheduler pbt cannot perturb a grid ({grids[0]}): use choice(...)")
    if search == "optuna":
        for key, dist in space.items():
            odd = [v for v in dist.args if not isinstance(v, int | float | str | bool) and v is not None]
            if odd:
                raise ValueError(f"--search optuna: {key}: Optuna chooses among numbers, strings "
                                 f"and booleans, not {odd[0]!r}")
    return space


def _trials(sweep: Sweep, trials: int | None) -> int:
    grid = sweep.grid_size
    if trials is None:
        return grid if sweep.search == "grid" or grid > 1 else 8
    if trials < 1:
        raise ValueError(f"--trials must be >= 1, got {trials}")
    if trials % grid:
        raise ValueError(f"--trials {trials}: the grid has {grid} points and each repeat runs them "
                         "all, so --trials must be a multiple of it")
    return trials


def _check_schedule(sweep: Sweep, spec: Algorithm, grace: int | None, interval: int | None) -> None:
    for flag, value in (("--grace-period", grace), ("--perturbation-interval", interval),
                        ("--checkpoint-every", sweep.checkpoint_every)):
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be >= 1, got {value}")
    if sweep.reduction_factor < 2:
        raise ValueError(f"--reduction-factor must be >= 2, got {sweep.reduction_factor}")
    if sweep.max_concurrent < 0:
        raise ValueError(f"--max-concurrent must be >= 0 (0: as many as fit), got {sweep.max_concurrent}")
    if sweep.scheduler != "pbt":
        return
    if sweep.search == "optuna":
        raise ValueError("--scheduler pbt chooses the configs itself: use --search random")
    if sweep.trials < 2:
        raise ValueError(f"--scheduler pbt needs a population: --trials >= 2, got {sweep.trials}")
    for key in sweep.space:
        if spec.depends_on(key) or key in ("env", "env_kwargs"):
            raise ValueError(
                f"--scheduler pbt cannot perturb {key}: a trial that clones another's checkpoint "
                "resumes it, and the learner state depends on that setting (sweep it with "
                "--scheduler asha or none)")


@command_line()  # a sweep's errors name its flags, from Python too (docs/sweeps.md)
def check_configs(sweep: Sweep) -> int:
    """Check the fixed settings, then every setting of the space at each of its probe values
    (`Dist.probes`), as a trial's `Trainer` would (its config, its budget): one-line
    ValueErrors. The fewest env steps an iteration samples, over the configs tried."""
    from rxrl.training.machine import check_overshoot
    from rxrl.training.setup import prepare

    def iteration(settings: Mapping[str, Any]) -> int:
        setup = prepare(sweep.algo, env=sweep.env, settings=settings, steps=sweep.steps)
        check_overshoot(setup.config, setup.total)
        return setup.config.iteration_sample().steps

    base = {**sweep.settings, **{k: d.probes()[0] for k, d in sweep.space.items()}}
    steps = [iteration(sweep.settings)]
    for key, dist in sweep.space.items():
        for value in dist.probes():
            try:
                steps.append(iteration({**base, key: value}))
            except ValueError as e:
                raise ValueError(f"--space {key}={dist.text}: at {value!r}: {e}") from None
    return min(steps)


@command_line()  # a sweep's errors name its flags, from Python too (docs/sweeps.md)
def first_point(sweep: Sweep) -> dict[str, Any]:
    """The swept settings' values in the config as it stands (defaults with the fixed
    settings): `Sweep.defaults_first`'s first trial. ValueError (one line) for a value that
    the space cannot hold."""
    from rxrl.algos.configs import to_dict
    from rxrl.training.setup import prepare

    config = to_dict(prepare(sweep.algo, env=sweep.env, settings=sweep.settings, steps=sweep.steps).config)
    point: dict[str, Any] = {}
    for key, dist in sweep.space.items():
        value: Any = config
        for part in key.split("."):
            value = value[part]
        if isinstance(value, list):
            value = tuple(value) if any(isinstance(a, tuple) for a in dist.args) else value
        if not dist.holds(value):
            raise ValueError(f"--defaults-first: {key} is {json.dumps(value)} as it stands, "
                             f"which --space {key}={dist.text} cannot draw")
        point[key] = value
    return point


# ---------------------------------------------------------------------------------- results


Outcome = Literal["completed", "reached target", "stopped early", "budget spent", "not started",
                  "unfinished", "error"]


@attrs.frozen
class TrialRow:
    """One trial's line of the results: its final settings (a PBT trial's last ones), how it
    ended, its last and best mean return, and how often it cloned another trial (PBT)."""

    trial: str
    status: Outcome
    env_steps: int
    iterations: int
    episode_return_mean: float
    best_episode_return_mean: float
    exploits: int
    settings: Mapping[str, Any]
    run_dir: Path
    error: str | None = None
    #: the env steps of the first record at or above the sweep's target return (None: not
    #: reached, or no target)
    reached: int | None = None


@attrs.frozen
class SweepResult:
    """How a sweep ended: ``completed`` (every trial ended) or ``interrupted`` (``--resume``
    continues it), its rows (best first) and the best trial (None when no trial reported)."""

    out: Path
    status: Literal["completed", "interrupted"]
    rows: tuple[TrialRow, ...]
    best: TrialRow | None
    #: the signal that interrupted the sweep (None otherwise)
    signal: int | None = None


def score(episode_return_mean: float, env_steps: int, steps: int, target: float | None) -> float:
    """A record's `SCORE`: its mean return below ``target`` (or without one); at or above it,
    ``target`` plus ``|target|`` times the share of the ``steps`` budget left when it got there,
    so that a trial that reached the target ranks above every one that did not, and the
    sooner the higher."""
    if target is None or not episode_return_mean >= target:
        return episode_return_mean
    return target + abs(target) * max(0.0, 1.0 - env_steps / steps)


def reached_at(last: Mapping[str, Any], target: float | None) -> int | None:
    """The env steps at which a trial reached ``target``, from its ``last`` reported metrics
    (None: it did not, or no target): a trial stops at its first record at the target, so
    it reached it iff its last record is there."""
    if target is None or not float(last.get(METRIC, math.nan)) >= target:
        return None
    return int(last.get("env_steps_sampled", 0))


def rank(row: TrialRow) -> tuple[bool, float, float, int]:
    """How trials compare, larger first: having reached the target, sooner, a higher last
    mean return, fewer env steps."""
    return (row.reached is not None, -(row.reached or 0), row.episode_return_mean, -row.env_steps)


def best_of(rows: Iterable[TrialRow]) -> TrialRow | None:
    """The best trial (`rank`): the first to reach the target, else the highest last mean
    return (fewer env steps break a tie)."""
    ranked = [r for r in rows if r.status != "error" and math.isfinite(r.episode_return_mean)]
    return max(ranked, key=rank, default=None)


def write_results(sweep: Sweep, out: Path, rows: Sequence[TrialRow]) -> TrialRow | None:
    """``results.csv`` (a row per trial, best first) and ``best.json`` (the best trial's
    settings, as ``--set`` values and as an ``rxrl train`` command); the best row."""
    keys = list(sweep.space)
    with (out / RESULTS_FILE).open("w", newline="") as f:
        writer = csv.writer(f)
        target = sweep.target_return is not None
        writer.writerow(["trial", "status", "env_steps", "iterations", METRIC,
                         f"best_{METRIC}", *(["reached_target_at"] if target else []), "exploits",
                         *keys, "run_dir"])
        for r in rows:
            writer.writerow([r.trial, r.status, r.env_steps, r.iterations, r.episode_return_mean,
                             r.best_episode_return_mean, *([r.reached or ""] if target else []),
                             r.exploits, *(_cell(r.settings.get(k)) for k in keys), r.run_dir])
    best = best_of(rows)
    if best is not None:
        write_best(sweep, out, best)
    return best


def _cell(value: Any) -> str:
    """A setting in results.csv: a string as it is, anything else as JSON (``[64, 64]``)."""
    return value if isinstance(value, str) else json.dumps(value)


def write_best(sweep: Sweep, out: Path, best: TrialRow) -> None:
    """``best.json``: the best trial, its settings (fixed and swept) as ``--set`` values."""
    settings = {**sweep.settings, **{k: best.settings[k] for k in sweep.space if k in best.settings}}
    sets = [setting_text(k, v) for k, v in settings.items()]
    target = [] if sweep.target_return is None else ["--target-return", f"{sweep.target_return:g}"]
    command = ["rxrl", "train", sweep.algo, *(["--env", sweep.env] if sweep.env else []),
               "--steps", str(sweep.steps), *target, *(a for s in sets for a in ("--set", s))]
    reached = {} if sweep.target_return is None else {
        "target_return": sweep.target_return, "reached_target_at": best.reached}
    doc = {"algo": sweep.algo, "env": sweep.env, "trial": best.trial, "status": best.status,
           "env_steps": best.env_steps, **reached, METRIC: best.episode_return_mean,
           f"best_{METRIC}": best.best_episode_return_mean, "run_dir": str(best.run_dir),
           "settings": {k: best.settings.get(k) for k in sweep.space}, "fixed": dict(sweep.settings),
           "set": sets, "command": " ".join(shlex.quote(a) for a in command)}
    (out / BEST_FILE).write_text(json.dumps(doc, indent=2) + "\n")


def format_table(result: SweepResult, space: Sequence[str]) -> str:
    """The results as an aligned text table, best first."""
    head = ["trial", "status", "env steps", "return", "best", *(k.rpartition(".")[2] for k in space)]
    exploits = any(r.exploits for r in result.rows)
    reached = any(r.reached is not None for r in result.rows)
    head += ["exploits"] if exploits else []
    head[3:3] = ["reached at"] if reached else []
    lines = [head]
    for r in result.rows:
        line = [r.trial, r.status, f"{r.env_steps:,}", _fmt(r.episode_return_mean),
                _fmt(r.best_episode_return_mean), *(_fmt(r.settings.get(k)) for k in space)]
        line[3:3] = ([f"{r.reached:,}" if r.reached is not None else "-"] if reached else [])
        lines.append(line + ([str(r.exploits)] if exploits else []))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4g}"
    return json.dumps(value) if not isinstance(value, str) else value


# ----------------------------------------------------------------------------------- running


def sweep_files(out: Path) -> list[str]:
    """The sweep files that ``out`` already holds."""
    return [name for name in (SWEEP_FILE, TUNE_DIR, RUNS_DIR) if (out / name).exists()]


@command_line()  # a sweep's errors name its flags, from Python too (docs/sweeps.md)
def check_out(sweep: Sweep, out: Path, resume: bool) -> None:
    """Refuse (one line) an ``out`` that holds a sweep without ``resume``, or that holds none
    (or another one) with it."""
    existing = sweep_files(out) if out.is_dir() else []
    if not resume:
        if existing:
            raise ValueError(f"--out {out} already holds a sweep ({', '.join(existing)}): continue it "
                             "with --resume, or choose a new --out")
        check_writable(out, "out")
        return
    file = out / SWEEP_FILE
    if not file.is_file():
        raise ValueError(f"--resume: {out} holds no sweep (no {SWEEP_FILE})")
    try:
        saved = Sweep.from_json(json.loads(file.read_text()))
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"--resume: {file} is not a readable sweep ({e})") from None
    mine, theirs = sweep.to_json(), saved.to_json()
    for key, value in theirs.items():
        if mine.get(key) != value:
            raise ValueError(f"--resume {out}: that sweep has {key} = {json.dumps(value)}, this one "
                             f"{json.dumps(mine.get(key))}: give the options it was started with")


def require_tune() -> None:
    """ValueError naming the extra unless Ray Tune (and Optuna) can be imported."""
    for module in ("ray.tune", "pandas", "pyarrow"):
        try:
            __import__(module)
        except ImportError:
            raise ValueError(f"rxrl sweep needs Ray Tune ({module} is missing): {EXTRA}") from None


def run_sweep(sweep: Sweep, out: str | Path, *, resume: bool = False, address: str | None = None,
              stream: IO[str] | None = None) -> SweepResult:
    """Run ``sweep`` into the directory ``out`` (or continue it there, ``resume``) on Ray Tune,
    write ``results.csv`` and ``best.json``, and return the `SweepResult`.

    Ray is initialised if it is not (``address``: a cluster; default: a local Ray with this
    machine's CPUs). ``stream`` gets a line per finished trial (default stderr). On the main
    thread a SIGINT (Ctrl-C) or SIGTERM ends the sweep as Tune does: its state saved, the
    result ``interrupted`` (its ``signal`` the one received); run it again with
    ``resume=True`` to continue, each unfinished trial from its last checkpoint.
    """
    out = Path(out)
    check_out(sweep, out, resume)
    require_tune()
    if sweep.search == "optuna":
        _require("optuna", "--search optuna")
    from rxrl.training import sweep_tune

    try:  # one live sweep per directory (`rxrl.training.lock`), checked again under the claim
        claim = RunDirClaim.take(out)
    except InUse as e:
        pid = f" (process {e.pid})" if e.pid is not None else ""
        raise ValueError(f"--out {out} is in use by another sweep{pid}; wait for it to end, or "
                         "choose a new --out") from None
    started = False  # a sweep that never started removes what its claim made
    try:
        check_out(sweep, out, resume)
        connect(address, sweep_tune.cpus_per_trial(sweep))
        started = True
        if not resume:
            (out / SWEEP_FILE).write_text(json.dumps(sweep.to_json(), indent=2) + "\n")
        grid, signum = sweep_tune.fit(sweep, out.resolve(), resume, stream or sys.stderr)
        rows = sweep_tune.rows_of(sweep, out.resolve(), grid)
        best = write_results(sweep, out, rows)
    finally:
        claim.release(remove=not started)
    unfinished = any(r.status == "unfinished" for r in rows)
    return SweepResult(out, "interrupted" if unfinished else "completed", tuple(rows), best,
                       signum if unfinished else None)


def _require(module: str, what: str) -> None:
    try:
        __import__(module)
    except ImportError:
        raise ValueError(f"{what} needs {module}: {EXTRA}") from None


def connect(address: str | None, cpus_per_trial: int) -> None:
    """Initialise Ray unless it is: the cluster at ``address``, or a local Ray (lean: no
    dashboard, no log forwarding) with this machine's CPUs, at least one trial's worth."""
    import ray

    from rxrl.backends.ray.connect import RayConnectError
    from rxrl.backends.ray.connect import connect as ray_connect

    if ray.is_initialized():
        return
    # the trials' output stays in their actors' logs (Tune's own lines, mostly); a failed trial's
    # error is in its error.txt, which a line names
    quiet = {k: RAY_INIT[k] for k in ("log_to_driver", "logging_level")}
    options = quiet if address else {**RAY_INIT, "num_cpus": max(os.cpu_count() or 1, cpus_per_trial)}
    try:
        ray_connect(address or "local", options)
    except RayConnectError as e:
        raise ValueError(f"--address {address}: {e}") from None


__all__ = ["BEST_FILE", "DEFAULT_TRIAL_BACKEND", "DISTRIBUTIONS", "EXTRA", "METRIC", "RESULTS_FILE",
           "RUNS_DIR", "SCHEDULERS", "SCORE", "SEARCHES", "SWEEP_FILE", "TIME_ATTRS", "TUNE_DIR", "Dist",
           "Outcome", "Sweep", "SweepResult", "TrialRow", "best_of", "check_configs", "check_out",
           "connect", "first_point", "format_table", "make_sweep", "parse_dist", "parse_space",
           "parse_space_entry", "rank", "reached_at", "read_space_file", "require_tune", "run_sweep",
           "score", "setting_text", "sweep_files", "write_best", "write_results"]
