"""`rxrl.train` and `rxrl.Trainer`: one training run, from Python or from ``rxrl train``.

A run owns its directory: ``config.json``, ``metrics.csv`` and the other loggers' files,
``checkpoint.pt`` (atomic, every ``checkpoint_every`` env steps and at the end) and
``summary.json``. It never loses or mixes data: a new run refuses a directory that holds one;
``resume`` continues a checkpoint with nothing lost or counted twice (its loggers cut back to
the checkpoint); nothing is written before the first record, so a run that never starts
leaves nothing behind.

Stopping: the first SIGINT/SIGTERM (Ctrl-C, a notebook's interrupt) while records arrive
ends the run at its next record, with a checkpoint of it; a ``KeyboardInterrupt`` raised
between records (by a callback, say) does the same and is raised again; a second signal, or
one during start-up, unwinds at once and the last checkpoint stands.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import attrs

import rxrl
from rxrl.algos import Algorithm, Snapshot
from rxrl.algos.common import RolloutSettings, Start
from rxrl.algos.configs import to_dict
from rxrl.errors import ActorError, BackendStoppedError
from rxrl.rl.data.metrics import Metrics, MetricsAccumulator, resuming
from rxrl.timings import Timings
from rxrl.training.callbacks import Callback
from rxrl.training.checkpoint import (
    CHECKPOINT,
    CheckpointClock,
    Counters,
    deterministic_fields,
    save_checkpoint,
    save_trace,
    training_plan,
)
from rxrl.training.evaluation import EvalResult, Evaluation, check_supported, empty_row, evaluation_settings
from rxrl.training.interrupts import INTERRUPTS
from rxrl.training.lock import InUse, RunDirClaim
from rxrl.training.loggers import DEFAULT_LOGGERS, Logger, LoggerSpec, RunInfo, check_loggers, make_loggers
from rxrl.training.machine import check_machine, check_overshoot, explain_actor_error
from rxrl.training.profile import write_profile
from rxrl.training.setup import (
    BACKENDS,
    WORKER_RESTARTS,
    Setup,
    check_no_run,
    check_target_return,
    prepare,
    ray_init_options,
    same_dir,
    write_json,
)
from rxrl.training.setup import run_dir as choose_run_dir
from rxrl.training.spelling import given, option

Status = Literal["running", "completed", "reached target", "interrupted", "failed"]


@attrs.frozen
class TrainResult:
    """How a run ended: its status, last record, directory and checkpoint.

    ``signal`` is the signal that stopped an interrupted run (None otherwise); ``reached``
    the first record at or above ``target_return``.
    """

    status: Status
    run_dir: Path
    last: Metrics | None
    checkpoint: Path | None
    checkpoint_iteration: int | None
    reached: Metrics | None = None
    signal: int | None = None

    @property
    def env_steps(self) -> int:
        """Env steps sampled, from the first run's start."""
        return 0 if self.last is None else self.last.env_steps_sampled

    @property
    def episode_return_mean(self) -> float:
        """The last record's mean episode return (NaN before the first episode)."""
        return math.nan if self.last is None else self.last.episode_return_mean


class Trainer:
    """One training run, step by step (`step`, iteration) or at once (`run`).

    ``algo`` is an algorithm name (``"ppo"``: its defaults, the settings tuned for ``env``),
    a registered `Algorithm`, or a config instance (``PPO(lr=...)``: used as it is). The
    other arguments are ``rxrl train``'s options: ``settings`` are ``--set`` paths
    (``{"policy.hidden_sizes": (32, 32)}``), ``steps`` the budget counted from the first run's
    start, ``resume`` a run directory (or its checkpoint) to continue — in that directory
    unless ``run_dir`` names a new one.

    ``evaluation_interval`` (iterations; 0 or None: off, the default), ``evaluation_workers``
    and ``evaluation_episodes`` evaluate the greedy policy beside training
    (`rxrl.training.evaluation`): the rows then carry ``eval/*`` columns (the latest
    evaluation; NaN before the first) and summary.json an ``"evaluation"`` entry.

    ``profile=True`` times every operator and actor of the run (`rxrl.timings.Timings`) and
    writes ``stats.json`` and ``profile.json`` (a Chrome trace) into the run directory when it
    closes (`rxrl.training.profile`); off, the run reports no events at all.

    Everything is checked when the trainer is made (ValueError, one line); nothing starts
    and nothing is written until the first `step`. Then the run claims its directory: one live
    run writes to a directory at a time, and a default-named one started in the same second
    as another gets a suffix (`rxrl.training.lock`; ``run_dir`` is then the directory used).
    """

    def __init__(self, algo: str | Algorithm | RolloutSettings, run_dir: str | Path | None = None, *,
                 env: str | None = None, settings: Mapping[str, Any] | None = None,
                 steps: int | None = None, workers: int | None = None, seed: int | None = None,
                 resume: str | Path | None = None, backend: str = "ray", address: str | None = None,
                 checkpoint_every: int = 25_000, target_return: float | None = None,
                 worker_restarts: int = WORKER_RESTARTS, trace: str | Path | None = None,
                 loggers: Sequence[LoggerSpec] = DEFAULT_LOGGERS, callbacks: Sequence[Callback] = (),
                 handle_signals: bool = True, stream: IO[str] | None = None,
                 evaluation_interval: int | None = None, evaluation_workers: int = 1,
                 evaluation_episodes: int = 10, profile: bool = False) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {list(BACKENDS)}")
        if checkpoint_every < 1:
            raise ValueError(f"{option('--checkpoint-every', 'checkpoint_every')} must be >= 1, "
                             f"got {checkpoint_every}")
        if worker_restarts < -1:
            raise ValueError(f"{option('--worker-restarts', 'worker_restarts')} must be >= 0 (or -1 "
                             f"for no limit), got {worker_restarts}")
        target_return = check_target_return(target_return)
        check_loggers(loggers)
        self.evaluation: Evaluation | None = evaluation_settings(
            evaluation_interval, evaluation_workers, evaluation_episodes)
        self.setup: Setup = prepare(algo, env=env, settings=settings, steps=steps, workers=workers,
                                    seed=seed, resume=resume)
        self.algo, self.config, self.total = self.setup.algo, self.setup.config, self.setup.total
        if self.evaluation is not None:
            check_supported(self.algo)
        resumed = self.setup.resumed
        self.base = resumed.counters if resumed is not None else Counters()
        self.final = self.total - self.base.env_steps_sampled  # this run's share of the budget
        if backend == "ray" and not address:
            check_machine(self.config)
        check_overshoot(self.config, self.final)
        self.run_dir = choose_run_dir(run_dir, self.setup, resume)
        #: a default-named directory: made when the run starts, with a suffix if it exists
        self._numbered = run_dir is None and resume is None
        self._claim: RunDirClaim | None = None
        self.trace_file = Path(trace) if trace is not None else None
        if self.trace_file is not None and not self.trace_file.parent.is_dir():
            raise ValueError(f"cannot write {given('--trace', 'trace', self.trace_file)}: no "
                             f"directory {self.trace_file.parent}")
        if self.trace_file is not None and self.trace_file.exists():
            raise ValueError(f"{given('--trace', 'trace', self.trace_file)} already exists (a "
                             "trace is one run's): choose a new file")
        self.backend, self.address, self.target = backend, address, target_return
        self.checkpoint_every, self.worker_restarts = checkpoint_every, worker_restarts
        self.callbacks = list(callbacks)
        #: the run's timings (``profile=True``: stats.json and profile.json when it closes)
        self.timings: Timings | None = Timings() if profile else None
        self.handle_signals = handle_signals
        self.stream = stream if stream is not None else sys.stderr
        self.label = f"{self.algo.name} {self.config.env} [{backend}]"
        self.in_place = resumed is not None and same_dir(self.run_dir, resumed.path.parent)
        self._logger_specs = list(loggers)
        self.loggers: list[Logger] = []
        self.clock = CheckpointClock(checkpoint_every, self.final, target_return)
        self.plan: rxrl.Plan[Snapshot | EvalResult] | None = None
        self._run: rxrl.Run[Snapshot | EvalResult] | None = None
        #: the metrics accumulators the plan built (`rxrl.rl.data.metrics.resuming`)
        self._accumulators: list[MetricsAccumulator] = []
        #: the latest evaluation (its counters from the first run's start), None before the first
        self.evaluated: EvalResult | None = None
        self.records: list[dict[str, float]] = []  # for the trace
        self.last: Metrics | None = None
        self.reached: Metrics | None = None
        self.best = -math.inf
        self.status: Status = "running"
        self.signal: int | None = None
        self._stop_signal: int | None = None
        self._stop_requested = False
        #: the counters of the checkpoint in the run directory (the resumed one, in place)
        self.checkpointed: Counters | None = self.base if self.in_place else None
        self._closed = False
        self._result: TrainResult | None = None

    # ------------------------------------------------------------------------- stepping

    def start(self) -> None:
        """Build the plan (once) and start it on the backend; `step` calls it when needed."""
        if self._run is not None:
            return
        if self._claim is None:
            self._claim = self._claim_dir()
        resumed = self.setup.resumed
        start = Start(resumed.learner_state, reseed=self.base.iteration) if resumed is not None else None
        # the plan's accumulator goes on from the checkpoint's episodes; its windows are saved
        with resuming(resumed.episodes if resumed is not None else None) as self._accumulators:
            if self.evaluation is None:
                self.plan = training_plan(self.algo, self.config, start, self.clock, self.worker_restarts)
            else:
                self.plan = training_plan(self.algo, self.config, start, self.clock, self.worker_restarts,
                                          evaluation=self.evaluation)
        options: dict[str, Any] = {}
        if self.backend == "ray":
            # "local": a Ray of this run's own, never a cluster that happens to run on this machine
            options = {"address": self.address or "local",
                       "init_options": None if self.address else ray_init_options(self.plan)}
        for callback in self.callbacks:
            callback.on_start(self)
        from rxrl.backends.ray.connect import RayConnectError

        try:
            self._run = rxrl.run(self.plan, self.backend, on_event=self.timings, **options)
        except RayConnectError as e:
            self.status = "failed"
            raise ValueError(f"{given('--address', 'address', self.address)}: {e}") from None
        except ActorError as e:
            self.status = "failed"
            self._reraise(e)

    def _claim_dir(self) -> RunDirClaim:
        """Claim the run directory for this run (`rxrl.training.lock`); ValueError (one line)
        if another live run holds it, or a new run's directory got a run meanwhile."""
        try:
            claim = (RunDirClaim.take_new(self.run_dir) if self._numbered
                     else RunDirClaim.take(self.run_dir))
        except InUse as e:
            self.status = "failed"
            here = e.pid == os.getpid()  # a notebook's earlier Trainer, not closed
            by = (" in a Trainer of this process" if here else
                  f" (process {e.pid})" if e.pid is not None else "")
            then = "close it first (trainer.close())" if here else "stop it first"
            if self.in_place:
                raise ValueError(f"{given('--resume', 'resume', self.run_dir)}: the run is still "
                                 f"going{by}; {then}, or resume into a new "
                                 f"{option('--out', 'run_dir')}") from None
            raise ValueError(f"{given('--out', 'run_dir', self.run_dir)} is in use by another "
                             f"run{by}; {'close it, or ' if here else ''}choose a new "
                             f"{option('--out', 'run_dir')}") from None
        except OSError as e:
            self.status = "failed"
            raise ValueError(f"cannot make the run directory {self.run_dir}: {e}") from None
        if not self.in_place:  # a run that wrote here after this trainer checked, and ended
            try:
                check_no_run(claim.path)
            except ValueError:
                claim.release()
                self.status = "failed"
                raise
        self.run_dir = claim.path
        return claim

    @property
    def done(self) -> bool:
        """Whether the run has ended (no more records)."""
        return self.status != "running"

    def step(self) -> Metrics | None:
        """Train one iteration: pull, log, checkpoint when due; the record, or None once the run
        has ended (its budget, its target, a stop request)."""
        if self.done:
            return None
        self.start()
        assert self._run is not None
        try:
            while isinstance(item := next(self._run), EvalResult):  # evaluations in between
                self._evaluated(item)
            snapshot = item
        except StopIteration:
            self.status = "completed"
            return None
        except BackendStoppedError as e:
            self.status = "failed"
            if self._stop_signal is None:
                self._reraise(e)
            # the stop's signal reached the backend's processes too (a batch scheduler signals
            # every process of a job): the run stops as asked, at the checkpoint it last wrote
            self.status, self.signal = "interrupted", self._stop_signal
            at = ("no checkpoint was written" if self.checkpointed is None else
                  f"the checkpoint of iteration {self.checkpointed.iteration} stands")
            print(f"{self.label}: the backend stopped too, before the next record: {e}; {at}",
                  file=self.stream)
            return None
        except ActorError as e:
            self.status = "failed"
            self._reraise(e)
        except Exception:
            self.status = "failed"
            raise
        except BaseException:  # KeyboardInterrupt, Terminated: mid-pull, the run is broken
            self.status = "interrupted"
            raise
        return self._observe(snapshot)

    def __iter__(self) -> Iterator[Metrics]:
        """The records, one per iteration, until the run ends (then it is closed)."""
        try:
            while (record := self.step()) is not None:
                yield record
        finally:
            self.close()

    def request_stop(self, signum: int | None = None) -> None:
        """End the run at its next record, with a checkpoint of it (thread- and signal-safe)."""
        self._stop_requested = True
        if signum is not None and self._stop_signal is None:
            self._stop_signal = signum
        self.clock.request()

    def _evaluated(self, result: EvalResult) -> None:
        """An evaluation's result: the eval columns of the next rows, summary.json's entry."""
        self.evaluated = attrs.evolve(result, iteration=result.iteration + self.base.iteration,
                                      env_steps=result.env_steps + self.base.env_steps_sampled)

    def _observe(self, snapshot: Snapshot) -> Metrics:
        m = self.base.offset(snapshot.metrics)
        if self.last is None:
            self._begin()
        self.last = m
        if not math.isnan(m.episode_return_mean):
            self.best = max(self.best, m.episode_return_mean)
        if self.trace_file is not None:
            self.records.append(deterministic_fields(snapshot.metrics))
        row = m.as_row()
        if self.evaluation is not None:  # from the first row: the CSV header stays the same
            row.update(empty_row() if self.evaluated is None else self.evaluated.as_row())
        checkpoint = self._checkpoint(snapshot, m, row)
        if self.target is not None and m.episode_return_mean >= self.target:
            self.reached, self.status = m, "reached target"
        elif m.env_steps_sampled >= self.total:
            self.status = "completed"
        elif self._stop_requested and snapshot.state is not None:
            self.status, self.signal = "interrupted", self._stop_signal
        for logger in self.loggers:
            logger.write(row, m.env_steps_sampled)
        for callback in self.callbacks:
            callback.on_iteration(self, m)
        if checkpoint is not None and snapshot.state is not None:
            for callback in self.callbacks:
                callback.on_checkpoint(self, checkpoint, m, snapshot.state)
        return m

    def _begin(self) -> None:
        """At the first record: the run directory, config.json and the loggers."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        resumed = self.setup.resumed
        write_json(self.run_dir / "config.json", {
            "algo": self.algo.name, "config": to_dict(self.config), "backend": self.backend,
            "steps": self.total, "resumed_from": str(resumed.path) if resumed is not None else None})
        info = RunInfo(self.run_dir, self.algo.name, to_dict(self.config),
                       self.base if self.in_place else None, self.stream,
                       resumed.row if self.in_place and resumed is not None else None)
        self.loggers = make_loggers(self._logger_specs, info)

    def _checkpoint(self, snapshot: Snapshot, m: Metrics, row: Mapping[str, float]) -> Path | None:
        if snapshot.state is None:
            return None
        path = self.run_dir / CHECKPOINT
        # one accumulator (not a multi-agent plan's): the episodes its record covered
        episodes = (self._accumulators[0].window_at(snapshot.metrics.iteration)
                    if len(self._accumulators) == 1 else None)
        save_checkpoint(path, self.algo.name, self.config, snapshot.state, Counters.of(m), row, episodes,
                        self.total)
        self.checkpointed = Counters.of(m)
        return path

    # -------------------------------------------------------------------------- running

    def run(self) -> TrainResult:
        """Train until the budget, the target or a stop; close; the `TrainResult`.

        With ``handle_signals`` (and on the main thread), the first SIGINT/SIGTERM after the
        first record stops the run at its next record, with a checkpoint, and `run` returns
        ``status="interrupted"``. A ``KeyboardInterrupt`` raised between records (from a
        callback) first trains to the next record to checkpoint it, then is raised again.
        """
        with contextlib.ExitStack() as stack:
            if self.handle_signals and threading.current_thread() is threading.main_thread():
                if not INTERRUPTS.installed:
                    INTERRUPTS.install()
                    stack.callback(INTERRUPTS.uninstall)
                INTERRUPTS.requested = None
            graceful = False
            try:
                while not self.done:
                    if self.last is not None and not graceful and self.handle_signals:
                        stack.enter_context(INTERRUPTS.graceful(self.request_stop))
                        graceful = True
                    try:
                        self.step()
                    except KeyboardInterrupt:
                        if self.status == "running":  # raised between records: the run is intact
                            self._checkpoint_then_stop()
                            self.status = "interrupted"
                        raise
                    except Exception:
                        if self.status == "running":
                            self.status = "failed"
                        raise
            finally:
                self.close()
        assert self._result is not None
        return self._result

    def _checkpoint_then_stop(self) -> None:
        """After an interrupt between records: one more record, with a checkpoint."""
        if self.last is None or self._run is None or self.done:
            return
        if self.checkpointed is not None and self.checkpointed.iteration == self.last.iteration:
            return  # the last record has its checkpoint already
        self.request_stop(signal.SIGINT)
        print(f"{self.label}: interrupted: checkpointing at the next record", file=self.stream)
        with contextlib.suppress(KeyboardInterrupt):  # a second one: the last checkpoint stands
            while not self.done:
                self.step()

    def close(self) -> TrainResult:
        """Stop the backend, close the loggers, write summary.json and the trace (once)."""
        if self._result is not None:
            return self._result
        if self.status == "running":
            self.status = "interrupted" if self.last is not None else "failed"
        run, self._run = self._run, None
        try:
            if run is not None:
                run.close()
        finally:
            closing = contextlib.ExitStack()  # every logger is closed, whichever raises
            for logger in self.loggers:
                closing.callback(logger.close)
            closing.close()
            if self.last is not None:
                self._summary()
                if self.timings is not None and self.plan is not None:
                    write_profile(self.run_dir, self.timings, self.plan, self.backend, self.base.iteration)
            if self.trace_file is not None and run is not None and self.records:
                resumed = self.setup.resumed
                written = save_trace(self.trace_file, self.algo.name, self.config, run.trace,
                                     self.records, self.checkpoint_every, self.final,
                                     resumed.path if resumed else None, self.evaluation)
                if written != self.trace_file:
                    print(f"{self.label}: {self.trace_file} was written by another run meanwhile; "
                          f"this run's trace is {written}", file=self.stream)
            ckpt = self.checkpointed
            self._result = TrainResult(
                self.status, self.run_dir, self.last,
                self.run_dir / CHECKPOINT if ckpt is not None else None,
                None if ckpt is None else ckpt.iteration, self.reached, self.signal)
            claim, self._claim = self._claim, None
            if claim is not None:  # a run that never recorded anything leaves nothing behind
                claim.release(remove=self.last is None)
            for callback in self.callbacks:
                callback.on_end(self, self._result)
        return self._result

    def _summary(self) -> None:
        m = self.last
        assert m is not None
        ckpt = self.checkpointed
        doc = {
            "algo": self.algo.name, "env": self.config.env, "seed": self.config.seed,
            "backend": self.backend, "status": self.status, "iterations": m.iteration,
            "env_steps_sampled": m.env_steps_sampled, "env_steps_trained": m.env_steps_trained,
            "episodes": m.episodes, "episode_return_mean": _num(m.episode_return_mean),
            "best_episode_return_mean": _num(self.best), "time_s": round(m.time_s, 3),
            "target_return": self.target,
            "reached_target": None if self.reached is None else {
                "env_steps": self.reached.env_steps_sampled,
                "time_s": round(self.reached.time_s, 3)},
            "signal": None if self.signal is None else signal.Signals(self.signal).name,
            "checkpoint": str(self.run_dir / CHECKPOINT) if ckpt is not None else None,
            # the checkpoint may predate the last record (a run killed between checkpoints)
            "checkpoint_iteration": None if ckpt is None else ckpt.iteration,
            "checkpoint_env_steps": None if ckpt is None else ckpt.env_steps_sampled,
            "checkpoint_is_latest": ckpt is not None and ckpt.iteration == m.iteration,
            "config": to_dict(self.config),
            "train": None if m.train is None else m.train.as_dict(),
        }
        if self.evaluation is not None:
            doc["evaluation"] = None if self.evaluated is None else {
                **self.evaluated.as_dict(), "interval": self.evaluation.interval,
                "workers": self.evaluation.workers}
        write_json(self.run_dir / "summary.json", doc)

    def _reraise(self, e: ActorError) -> Any:
        better = explain_actor_error(e, self.address)
        if better is e:
            raise e
        raise better from e

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is not None and self.status == "running":
            self.status = "interrupted" if isinstance(value, KeyboardInterrupt) else "failed"
        self.close()


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else round(x, 4)


def train(algo: str | Algorithm | RolloutSettings, run_dir: str | Path | None = None,
          **options: Any) -> TrainResult:
    """Train ``algo`` into ``run_dir`` and return how it ended: ``Trainer(algo, run_dir,
    **options).run()`` (see `Trainer` for the options).

    >>> import rxrl
    >>> result = rxrl.train("ppo", "/tmp/doctest-ppo", steps=2048, backend="reference",
    ...                     loggers=["csv"], settings={"num_workers": 1})  # doctest: +SKIP
    """
    return Trainer(algo, run_dir, **options).run()


__all__ = ["Status", "TrainResult", "Trainer", "train"]
