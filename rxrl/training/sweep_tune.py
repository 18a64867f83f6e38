"""The Ray Tune side of a sweep (`rxrl.training.sweep`): the trial (an rxrl run that reports
to Tune), its checkpoints, the Tuner, and the results read back.

A trial is `run_trial`: an `rxrl.Trainer` in its own run directory (``runs/TRIAL`` under the
sweep's), with a `TuneReport` callback that reports each record to Tune, and each record that
has a checkpoint with a ``tune.Checkpoint`` of it (the file and an ``origin.json`` naming the
trial it came from). A trial that Tune starts from a checkpoint — its own, when a sweep
resumes; another trial's, when PBT exploits — copies it into its run directory and resumes
there with the settings Tune gives it (PBT's perturbed ones), and notes it in
``restores.jsonl``. This module imports Ray Tune: `rxrl.training.sweep` imports it only when
a sweep runs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import IO, Any

import attrs
from ray import tune
from ray.train._internal.session import get_session
from ray.tune.experiment import Trial
from ray.tune.search.basic_variant import BasicVariantGenerator
from ray.tune.trainable.function_trainable import wrap_function

from rxrl.rl.data.metrics import Metrics
from rxrl.training.callbacks import Callback
from rxrl.training.checkpoint import CHECKPOINT, load_checkpoint
from rxrl.training.spelling import command_line
from rxrl.training.sweep import (
    METRIC,
    RUNS_DIR,
    SCORE,
    TIME_ATTRS,
    TUNE_DIR,
    Dist,
    Outcome,
    Sweep,
    TrialRow,
    first_point,
    rank,
    reached_at,
    score,
)
from rxrl.training.trainer import Trainer

#: what a Tune checkpoint of a trial holds beside the rxrl checkpoint: where it came from
ORIGIN = "origin.json"
#: the trials that ended once the sweep's budget was spent (`Budget`), in the sweep's directory
BUDGET_FILE = "budget_spent.json"
#: a trial's log of the checkpoints it was started from (PBT's exploits among them)
RESTORES = "restores.jsonl"
#: how long a stopped trial's actor waits for its run to close (summary.json) before it exits
CLOSE_TIMEOUT_S = 60.0
#: a reported metric: the checkpoints a trial's lineage has taken (the ones of the trial it
#: was cloned from included). PBT counts time in it, one perturbation interval per checkpoint,
#: so that it decides only at records that carry a checkpoint to clone (env steps or
#: iterations would drift from the run's checkpoint clock after a resume)
CHECKPOINTS = "checkpoints"


@attrs.frozen
class TrialJob:
    """What every trial of a sweep shares: the run options besides the sampled settings."""

    algo: str
    env: str | None
    steps: int
    settings: Mapping[str, Any]
    backend: str
    checkpoint_every: int
    runs: str  # the directory of the trials' run directories (absolute)
    target_return: float | None = None


def run_trial(config: Mapping[str, Any], job: TrialJob) -> None:
    """One trial, inside its Tune actor: train (or resume) the rxrl run with ``config``."""
    trial = tune.get_context().get_trial_id()
    run_dir = Path(job.runs) / trial
    checkpoint = tune.get_checkpoint()
    resumed = restore(checkpoint, run_dir, trial, config) if checkpoint is not None else None
    if resumed is None and run_dir.exists():  # Tune starts it over: so does its run
        shutil.rmtree(run_dir)
    index = 0 if resumed is None else resumed[1]
    if resumed is not None and resumed[0] >= job.steps:  # cloned at the end of its budget
        row = dict(load_checkpoint(run_dir).row or {"env_steps_sampled": float(resumed[0])})
        if job.target_return is not None:
            row[SCORE] = score(float(row.get(METRIC, math.nan)), int(row["env_steps_sampled"]),
                               job.steps, job.target_return)
        tune.report({**row, CHECKPOINTS: index})
        return
    with command_line():  # a trial's errors name the sweep's flags, as the sweep's own do
        trainer = Trainer(job.algo, run_dir, env=job.env, settings={**job.settings, **config},
                          steps=job.steps, resume=run_dir if resumed is not None else None,
                          backend=job.backend, checkpoint_every=job.checkpoint_every,
                          loggers=["csv"], target_return=job.target_return,
                          callbacks=[TuneReport(trial, index, job.target_return, job.steps)],
                          handle_signals=False)
        trainer.run()


def restore(checkpoint: tune.Checkpoint, run_dir: Path, trial: str,
            config: Mapping[str, Any]) -> tuple[int, int]:
    """Put the rxrl checkpoint of a Tune checkpoint into ``run_dir`` (to resume there), note
    where it came from in ``restores.jsonl``; its env steps and its `CHECKPOINTS` count."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with checkpoint.as_directory() as directory:
        source = Path(directory)
        tmp = run_dir / (CHECKPOINT + ".tmp")
        shutil.copyfile(source / CHECKPOINT, tmp)
        os.replace(tmp, run_dir / CHECKPOINT)
        origin = json.loads((source / ORIGIN).read_text()) if (source / ORIGIN).is_file() else {}
    counters = load_checkpoint(run_dir).counters
    note = {"from_trial": origin.get("trial"), "exploit": origin.get("trial") not in (None, trial),
            "iteration": counters.iteration, "env_steps": counters.env_steps_sampled,
            "settings": dict(config)}
    with (run_dir / RESTORES).open("a") as f:
        f.write(json.dumps(note) + "\n")
    return counters.env_steps_sampled, int(origin.get("index", 0))


class TuneReport(Callback):
    """Reports every record to Tune (``tune.report``), with a ``tune.Checkpoint`` when the
    record has a checkpoint: the rxrl file and ``origin.json`` naming ``trial``. ``index``
    counts the checkpoints (`CHECKPOINTS`), from the restored one's.

    With a ``target`` return every report carries its `SCORE` (``steps``: the trial's budget).

    When Tune stops the trial (a scheduler's decision, the sweep's end), ``tune.report``
    raises ``SystemExit`` in the trial's thread: the run then closes (summary.json, status
    ``interrupted``) and the thread ends.
    """

    def __init__(self, trial: str, index: int = 0, target: float | None = None, steps: int = 1) -> None:
        self.trial, self.index, self.target, self.steps = trial, index, target, steps

    def on_iteration(self, trainer: Trainer, record: Metrics) -> None:
        """Report ``record``; with its checkpoint if it has one (written before callbacks run)."""
        metrics = record.as_row()
        if self.target is not None:
            metrics[SCORE] = score(record.episode_return_mean, record.env_steps_sampled,
                                   self.steps, self.target)
        saved = trainer.checkpointed
        if saved is None or saved.iteration != record.iteration:
            tune.report({**metrics, CHECKPOINTS: self.index})
            return
        if trainer.status == "running":  # the last record's checkpoint is no perturbation point
            self.index += 1
        metrics[CHECKPOINTS] = self.index
        origin = {"trial": self.trial, "iteration": record.iteration,
                  "env_steps": record.env_steps_sampled, "index": self.index}
        with staged(trainer.run_dir / CHECKPOINT, origin) as directory:
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))


@contextlib.contextmanager
def staged(checkpoint: Path, origin: Mapping[str, Any]) -> Iterator[str]:
    """A temporary directory with ``checkpoint`` (a hard link: the run replaces its file, never
    rewrites it) and ``origin.json``, for Tune to copy into its storage."""
    with tempfile.TemporaryDirectory(prefix="rxrl-tune-") as directory:
        target = Path(directory) / CHECKPOINT
        try:
            os.link(checkpoint, target)
        except OSError:
            shutil.copyfile(checkpoint, target)
        (Path(directory) / ORIGIN).write_text(json.dumps(origin))
        yield directory


def trainable(job: TrialJob, cpus: int) -> type[tune.Trainable]:
    """The Tune trainable of a sweep's trials, reserving ``cpus`` CPUs each."""

    def rxrl_trial(config: dict[str, Any]) -> None:
        run_trial(config, job)

    class RxrlTrial(wrap_function(rxrl_trial)):  # type: ignore[misc]
        """Tune's function trainable, whose actor waits for the run to close when stopped."""

        def cleanup(self) -> None:
            """Stop the trial's thread (its next report raises), then wait for it: Tune
            ends the actor's process next, and the run must write summary.json first."""
            session = get_session()
            thread = session.training_thread if session is not None else None
            try:
                super().cleanup()
            finally:
                if thread is not None and thread is not threading.current_thread():
                    threading.Thread.join(thread, timeout=CLOSE_TIMEOUT_S)

    resources: Any = {"cpu": 1} if cpus == 1 else tune.PlacementGroupFactory([{"CPU": 1}] * cpus)
    return tune.with_resources(RxrlTrial, resources)  # type: ignore[no-any-return]


def cpus_per_trial(sweep: Sweep) -> int:
    """CPUs a trial holds: one for an in-process backend; with ``ray``, one more for each
    actor of its plan (which Tune places in the trial's placement group)."""
    if sweep.trial_backend != "ray":
        return 1
    from rxrl.compile import compile_plan
    from rxrl.training.setup import prepare

    base = {**sweep.settings, **{k: d.probes()[0] for k, d in sweep.space.items()}}
    setup = prepare(sweep.algo, env=sweep.env, settings=base, steps=sweep.steps)
    plan, _ = setup.algo.build(setup.config)
    return 1 + sum(g.size for g in compile_plan(plan.node).groups if not g.driver_hosted)


def trial_name(trial: Trial) -> str:
    """A trial's name and directory name: its id."""
    return str(trial.trial_id)


@attrs.frozen
class Clip:
    """PBT's explore step, finished: perturbed values brought back into their ranges."""

    space: Mapping[str, Dist]

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with each swept value clipped (`Dist.clip`)."""
        return {k: self.space[k].clip(v) if k in self.space else v for k, v in config.items()}


def scheduler(sweep: Sweep) -> Any:
    """The Tune scheduler ``sweep.scheduler`` names (None: first in, first out)."""
    from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

    if sweep.scheduler == "asha":
        return ASHAScheduler(time_attr=TIME_ATTRS[sweep.time_attr], max_t=sweep.steps,
                             grace_period=sweep.grace_period, reduction_factor=sweep.reduction_factor)
    if sweep.scheduler == "pbt":
        mutations = {k: list(d.args) if d.discrete else d.tune_domain() for k, d in sweep.space.items()}
        # Every checkpoint is a perturbation point (a run checkpoints at the interval).
        # Synchronous: a trial that reaches one waits (paused, its CPU free) until the whole
        # population has, and PBT then ranks them all at once. Asynchronous PBT with more
        # trials than CPUs let a running trial clone the same stale checkpoint of a waiting one
        # again and again (a 4-trial population on 2 CPUs: 42 clones of one checkpoint).
        return PopulationBasedTraining(time_attr=CHECKPOINTS, perturbation_interval=1, synch=True,
                                       hyperparam_mutations=mutations, custom_explore_fn=Clip(sweep.space))
    return None


def searcher(sweep: Sweep) -> Any:
    """The Tune search algorithm ``sweep.search`` names, seeded with ``sweep.seed`` (starting
    from `first_point` with ``sweep.defaults_first``)."""
    first = [first_point(sweep)] if sweep.defaults_first else None
    if sweep.search == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        # TuneConfig's max_concurrent_trials limits it
        return OptunaSearch(seed=sweep.seed, points_to_evaluate=first)
    return BasicVariantGenerator(max_concurrent=sweep.max_concurrent, random_state=sweep.seed,
                                 points_to_evaluate=first)


def env_steps(result: Mapping[str, Any] | None) -> int:
    """The env steps a trial's result reports (0 for none yet)."""
    return int((result or {}).get("env_steps_sampled", 0))


def spent(steps: Iterable[int], budget: int | None) -> bool:
    """Whether the trials' env steps ``steps`` (each its last report) spend ``budget``."""
    return budget is not None and sum(steps) >= budget


class Budget(tune.Stopper):
    """Ends the sweep once its trials' env steps add up to ``steps`` (`Sweep.budget`): each
    trial counts with the env steps it reported last."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.used: dict[str, int] = {}

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        """Note the trial's env steps; stop it if they spend the budget (at once, as a
        scheduler stops a trial: the others running stop when Tune next checks `stop_all`)."""
        self.used[trial_id] = env_steps(result)
        return self.stop_all()

    def stop_all(self) -> bool:
        """True once the budget is spent."""
        return spent(self.used.values(), self.steps)


def note_budget_cut(file: Path, trial_id: str) -> None:
    """Add ``trial_id`` to the trials that ended once the budget was spent (``file``: JSON)."""
    file.write_text(json.dumps(sorted(set(budget_cut(file)) | {trial_id})) + "\n")


def budget_cut(file: Path) -> list[str]:
    """The trials noted as ended once the budget was spent (none without the file)."""
    return list(json.loads(file.read_text())) if file.is_file() else []


class Progress(tune.Callback):
    """A line on ``stream`` (default stderr) for each trial that ends."""

    # a sweep saved before these existed unpickles without them
    budget: int | None = None
    budget_file: Path | None = None

    def __init__(self, steps: int, stream: IO[str] | None = None, target: float | None = None,
                 budget: int | None = None, budget_file: Path | None = None) -> None:
        self.steps, self.stream, self.target = steps, stream, target
        self.budget, self.budget_file = budget, budget_file

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the stream (Tune keeps its callbacks in the experiment's state)."""
        return {**self.__dict__, "stream": None}

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        """The trial ended: how far it got, its return, its settings."""
        result = trial.last_result or {}
        steps = env_steps(result)
        reached = reached_at(result, self.target) is not None
        # the budget was spent by then (what the trials reported last: as `Budget` counts)
        cut = spent((env_steps(t.last_result) for t in trials), self.budget)
        if cut and self.budget_file is not None:
            note_budget_cut(self.budget_file, trial.trial_id)
        ended = ("reached target" if reached else "completed" if steps >= self.steps else
                 "budget spent" if cut else "stopped early")
        settings = ", ".join(f"{k}={_short(v)}" for k, v in trial.config.items())
        self._line(f"trial {trial.trial_id}: {ended} after {steps:,} env steps, return "
                   f"{_short(result.get(METRIC, math.nan))} ({settings})")

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        """The trial failed: where its error is."""
        self._line(f"trial {trial.trial_id}: failed; see {trial.path}/error.txt")

    def _line(self, text: str) -> None:
        print(f"rxrl sweep: {text}", file=self.stream or sys.stderr, flush=True)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def fit(sweep: Sweep, out: Path, resume: bool, stream: IO[str]) -> tuple[tune.ResultGrid, int | None]:
    """Run the sweep's Tuner (restored from ``out/tune`` with ``resume``); its results, and the
    signal that interrupted it (None if none did)."""
    job = TrialJob(sweep.algo, sweep.env, sweep.steps, dict(sweep.settings), sweep.trial_backend,
                   sweep.checkpoint_every, str(out / RUNS_DIR), sweep.target_return)
    runnable = trainable(job, cpus_per_trial(sweep))
    path = out / TUNE_DIR
    if resume and tune.Tuner.can_restore(path):
        tuner = tune.Tuner.restore(str(path), runnable, resume_unfinished=True, resume_errored=True)
    else:
        tuner = tune.Tuner(
            runnable, param_space={k: d.tune_domain() for k, d in sweep.space.items()},
            tune_config=tune.TuneConfig(
                metric=sweep.metric, mode="max", search_alg=searcher(sweep), scheduler=scheduler(sweep),
                num_samples=sweep.trials // sweep.grid_size,
                max_concurrent_trials=(sweep.max_concurrent or None) if sweep.search == "optuna" else None,
                reuse_actors=True, trial_name_creator=trial_name, trial_dirname_creator=trial_name),
            run_config=tune.RunConfig(
                name=TUNE_DIR, storage_path=str(out), verbose=0,
                stop=None if sweep.budget is None else Budget(sweep.budget),
                callbacks=[Progress(sweep.steps, stream, sweep.target_return, sweep.budget,
                                    out / BUDGET_FILE)],
                # PBT clones checkpoints: keep them all, else the one chosen may go before
                # the trial that clones it has copied it
                checkpoint_config=tune.CheckpointConfig(
                    num_to_keep=None if sweep.scheduler == "pbt" else 2)))
    with signals() as received, quiet_tune():
        grid = tuner.fit()
    return grid, received[0] if received else None


@contextlib.contextmanager
def quiet_tune() -> Iterator[None]:
    """Within the block, Tune prints nothing of its own (its new console output prints a table
    even at ``verbose=0``; `Progress` says what a sweep has to say)."""
    before = os.environ.get("RAY_AIR_NEW_OUTPUT")
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["RAY_AIR_NEW_OUTPUT"]
        else:
            os.environ["RAY_AIR_NEW_OUTPUT"] = before


@contextlib.contextmanager
def signals() -> Iterator[list[int]]:
    """While a Tuner runs (main thread only): SIGTERM ends it as SIGINT does — Tune's own
    handler stops the trials, saves the experiment's state and returns — once; afterwards
    the handlers are put back (Tune leaves its SIGINT handler behind). The list gets the
    signal that ended the run, if one did."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}

    def on_term(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        signal.signal(signal.SIGTERM, before[signal.SIGTERM])  # a second one: as before
        signal.raise_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, on_term)
    try:
        yield received
    finally:
        # Tune's SIGINT handler puts back the one it replaced when it fires
        if not received and signal.getsignal(signal.SIGINT) is before[signal.SIGINT]:
            received.append(signal.SIGINT)
        for sig, handler in before.items():
            signal.signal(sig, handler)


def rows_of(sweep: Sweep, out: Path, grid: tune.ResultGrid) -> list[TrialRow]:
    """A `TrialRow` per trial of ``grid``, best first (by last mean return)."""
    analysis = tune.ExperimentAnalysis(grid.experiment_path, storage_filesystem=grid.filesystem)
    status = {t.trial_id: t.status for t in analysis.trials}
    budget_spent = spent((env_steps(grid[i].metrics) for i in range(len(grid))), sweep.budget)
    cut = set(budget_cut(out / BUDGET_FILE))
    rows = []
    for i in range(len(grid)):
        result = grid[i]
        trial = Path(result.path).name
        metrics = result.metrics or {}
        frame = result.metrics_dataframe
        history = frame[METRIC].dropna() if frame is not None and METRIC in frame else []
        steps = env_steps(metrics)
        reached = reached_at(metrics, sweep.target_return)
        state = status.get(trial)
        outcome: Outcome = (
            "error" if result.error is not None or state == Trial.ERROR else
            # the budget ended the sweep: a trial it cut short, or one never started
            ("budget spent" if steps else "not started") if budget_spent and reached is None and
            steps < sweep.steps and (state != Trial.TERMINATED or trial in cut or not steps) else
            "unfinished" if state != Trial.TERMINATED else
            "reached target" if reached is not None else
            "completed" if steps >= sweep.steps else "stopped early")
        rows.append(TrialRow(
            trial, outcome, steps, int(metrics.get("iteration", 0)),
            float(metrics.get(METRIC, math.nan)), float(max(history, default=math.nan)),
            exploits(out / RUNS_DIR / trial), dict(result.config or {}), out / RUNS_DIR / trial,
            None if result.error is None else _one_line(result.error), reached))
    return sorted(rows, key=lambda r: (math.isfinite(r.episode_return_mean), rank(r)), reverse=True)



def exploits(run_dir: Path) -> int:
    """How many times the trial in ``run_dir`` started from another trial's checkpoint."""
    file = run_dir / RESTORES
    if not file.is_file():
        return 0
    return sum(bool(json.loads(line).get("exploit")) for line in file.read_text().splitlines() if line)


def _one_line(e: BaseException) -> str:
    lines = [line for line in str(e).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(e).__name__


__all__ = ["BUDGET_FILE", "CHECKPOINTS", "CLOSE_TIMEOUT_S", "ORIGIN", "RESTORES", "Budget", "Clip",
           "Progress", "TrialJob", "TuneReport", "budget_cut", "cpus_per_trial", "env_steps", "exploits",
           "fit", "note_budget_cut", "quiet_tune", "restore", "rows_of", "run_trial", "scheduler",
           "searcher", "signals", "spent", "staged", "trainable", "trial_name"]
