"""`rxrl.train` / `rxrl.Trainer` from Python: a run, step by step, interrupted, resumed; callbacks.

The laws: an interrupted and resumed run ends at the env-step count of an uninterrupted one,
with one metrics row per iteration (none lost, none twice); callbacks see exactly the rows the
CSV gets, in order, and each checkpoint after it is on disk.
"""

from __future__ import annotations

import csv
import datetime
import io
import itertools
import json
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import rxrl
from rxrl.algos.configs import with_settings
from rxrl.algos.on_policy.ppo import PPO
from rxrl.errors import BackendStoppedError
from rxrl.rl.data.metrics import Metrics
from rxrl.training import Callback, Trainer, TrainResult, load_checkpoint, setup
from rxrl.training.loggers import COUNTS
from rxrl.training.setup import run_files

#: a small PPO: 128 env steps per iteration (1 worker x 2 envs x 64 steps)
QUICK: dict[str, Any] = {"num_workers": 1, "num_envs_per_worker": 2, "fragment_length": 64,
                         "train_batch_size": 256, "num_epochs": 1, "minibatch_size": 128}
STEPS = 2560  # 10 iterations of 256 env steps


def quick(run_dir: Path | None, **options: Any) -> Trainer:
    """A reference-backend PPO trainer with CSV logs only, signals left alone."""
    kwargs: dict[str, Any] = {"backend": "reference", "steps": STEPS, "settings": QUICK,
                              "loggers": ["csv"], "checkpoint_every": 1024, "handle_signals": False}
    kwargs.update(options)
    return Trainer("ppo", run_dir, **kwargs)


def rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


class Recorder(Callback):
    """Every hook call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def on_start(self, trainer: Trainer) -> None:
        self.calls.append(("start", run_files(trainer.run_dir)))

    def on_iteration(self, trainer: Trainer, record: Metrics) -> None:
        self.calls.append(("iteration", record.as_row()))

    def on_checkpoint(self, trainer: Trainer, path: Path, record: Metrics,
                      state: Mapping[str, Any]) -> None:
        on_disk = load_checkpoint(path).counters.iteration
        self.calls.append(("checkpoint", (record.iteration, on_disk, sorted(state)[:2])))

    def on_end(self, trainer: Trainer, result: TrainResult) -> None:
        self.calls.append(("end", result.status))


class InterruptAt(Callback):
    """Raises KeyboardInterrupt at one iteration, as a user's Ctrl-C in a callback would."""

    def __init__(self, iteration: int) -> None:
        self.iteration = iteration

    def on_iteration(self, trainer: Trainer, record: Metrics) -> None:
        if record.iteration == self.iteration:
            raise KeyboardInterrupt


def test_callbacks_are_called_in_order_with_the_rows_the_csv_gets(tmp_path: Path) -> None:
    recorder = Recorder()
    result = quick(tmp_path / "run", callbacks=[recorder]).run()
    assert result.status == "completed" and result.env_steps >= STEPS
    kinds = [kind for kind, _ in recorder.calls]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert recorder.calls[0][1] == []  # claimed, and nothing written before the first record
    assert recorder.calls[-1][1] == "completed"
    seen = [row for kind, row in recorder.calls if kind == "iteration"]
    written = rows(tmp_path / "run")
    assert len(seen) == len(written) == result.last.iteration  # type: ignore[union-attr]
    for row, line in zip(seen, written, strict=True):
        assert set(line) == set(row)
        for key, value in row.items():
            assert line[key] == str(int(value) if key in COUNTS else value)
    checkpoints = [info for kind, info in recorder.calls if kind == "checkpoint"]
    # each checkpoint follows its record's iteration call, and is on disk when announced
    assert checkpoints and all(it == on_disk for it, on_disk, _ in checkpoints)
    assert checkpoints[-1][0] == result.checkpoint_iteration == result.last.iteration  # type: ignore[union-attr]
    for i, (kind, info) in enumerate(recorder.calls):
        if kind == "checkpoint":
            assert recorder.calls[i - 1][0] == "iteration"
            assert recorder.calls[i - 1][1]["iteration"] == info[0]


def test_an_interrupt_from_a_callback_checkpoints_and_a_resume_loses_and_repeats_nothing(
        tmp_path: Path) -> None:
    whole = quick(tmp_path / "whole").run()
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        quick(run_dir, callbacks=[InterruptAt(3)]).run()
    ckpt = load_checkpoint(run_dir)
    # the interrupt came between records: the run trained on to the next one and checkpointed it
    assert ckpt.counters.iteration == 4
    assert [int(r["iteration"]) for r in rows(run_dir)] == [1, 2, 3, 4]
    summary = (run_dir / "summary.json").read_text()
    assert '"status": "interrupted"' in summary
    before = rows(run_dir)
    resumed = quick(run_dir, resume=run_dir).run()
    assert resumed.status == "completed"
    assert resumed.last is not None and whole.last is not None
    assert resumed.last.iteration == whole.last.iteration
    after = rows(run_dir)
    assert after[:4] == before  # the rows through the checkpoint are kept as they were
    iterations = [int(r["iteration"]) for r in after]
    assert iterations == list(range(1, whole.last.iteration + 1))  # none lost, none twice
    # env steps continue from the checkpoint's and end where the uninterrupted run's do: at
    # the first iteration past the budget (the counts per iteration differ by the few reset
    # steps of the episodes a resumed worker starts afresh: envs are not checkpointed)
    steps = [int(r["env_steps_sampled"]) for r in after]
    assert all(b > a for a, b in itertools.pairwise(steps))
    assert steps[-2] < STEPS <= steps[-1] and resumed.env_steps == steps[-1]
    whole_steps = [int(r["env_steps_sampled"]) for r in rows(tmp_path / "whole")]
    assert steps[:4] == whole_steps[:4]  # the same run until the interrupt
    assert whole_steps[-2] < STEPS <= whole_steps[-1]


def test_a_resume_without_a_budget_goes_on_to_the_interrupted_runs(tmp_path: Path) -> None:
    """The budget is the run's, not the resume's: a resume given no ``steps`` trains to the
    first run's (not to the algorithm's default), and a finished run's is refused in one line
    saying how to go on."""
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        quick(run_dir, callbacks=[InterruptAt(3)]).run()
    assert load_checkpoint(run_dir).budget == STEPS
    resumed = quick(run_dir, resume=run_dir, steps=None)
    assert resumed.total == STEPS != resumed.algo.default_steps
    result = resumed.run()
    steps = [int(r["env_steps_sampled"]) for r in rows(run_dir)]
    assert result.status == "completed" and steps[-2] < STEPS <= steps[-1] == result.env_steps
    with pytest.raises(ValueError, match=r"already trained \d+ env steps, its budget of 2560; "
                                         r"give steps above \d+ to go on"):
        quick(run_dir, resume=run_dir, steps=None)
    assert quick(run_dir, resume=run_dir, steps=2 * STEPS).total == 2 * STEPS


def test_a_run_left_early_keeps_its_last_checkpoint_and_the_resume_cuts_back(
        tmp_path: Path) -> None:
    """Leaving the records' loop early (as an interrupt inside the backend does) closes the run
    where it is: the last checkpoint stands, and the resume cuts the rows after it and trains
    them again."""
    run_dir = tmp_path / "run"
    trainer = quick(run_dir, checkpoint_every=512)
    for record in trainer:
        if record.iteration == 3:
            break
    assert trainer.done is True  # iterating to a break closes the run
    assert load_checkpoint(run_dir).counters.iteration == 2
    resumed = quick(run_dir, resume=run_dir).run()
    assert [int(r["iteration"]) for r in rows(run_dir)] == list(range(1, resumed.last.iteration + 1))  # type: ignore[union-attr]


def test_the_first_sigint_stops_at_the_next_record_with_a_checkpoint(tmp_path: Path) -> None:
    """Ctrl-C in a notebook: the kernel gets SIGINT; `run` ends gracefully and returns."""

    class Signal(Callback):
        def on_iteration(self, trainer: Trainer, record: Metrics) -> None:
            if record.iteration == 2:
                os.kill(os.getpid(), signal.SIGINT)

    previous = signal.getsignal(signal.SIGINT)
    result = quick(tmp_path / "run", callbacks=[Signal()], handle_signals=True).run()
    assert signal.getsignal(signal.SIGINT) is previous  # put back
    assert result.status == "interrupted" and result.signal == signal.SIGINT
    assert result.last is not None and result.last.iteration == 3
    assert result.checkpoint_iteration == 3


def test_step_by_step_and_from_a_config(tmp_path: Path) -> None:
    config = with_settings(PPO(), QUICK)
    trainer = Trainer(config, tmp_path / "run", backend="reference", steps=768, loggers=["csv"],
                      handle_signals=False)
    assert trainer.algo.name == "ppo" and trainer.config == config
    records = []
    while (record := trainer.step()) is not None:
        records.append(record.env_steps_sampled)
    assert len(records) == 3 and records[1] < 768 <= records[2]
    assert trainer.close().status == "completed"


def test_rxrl_train_is_the_library_call(tmp_path: Path) -> None:
    result = rxrl.train("ppo", tmp_path / "run", backend="reference", steps=512, settings=QUICK,
                        loggers=["csv", "tensorboard"], handle_signals=False)
    assert result.status == "completed" and result.env_steps >= 512
    assert {"config.json", "metrics.csv", "checkpoint.pt", "summary.json", "tb"} <= {
        p.name for p in (tmp_path / "run").iterdir()}


def test_a_run_that_never_starts_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new" / "run"
    trainer = quick(target)
    result = trainer.close()
    assert result.status == "failed" and result.last is None
    assert not (tmp_path / "new").exists()
    with pytest.raises(ValueError, match="unknown logger 'nope'"):
        quick(target, loggers=["nope"])
    quick(tmp_path / "done", steps=256).run()
    with pytest.raises(ValueError, match="already holds a run"):
        quick(tmp_path / "done")


def test_a_run_builds_the_env_once_on_the_driver_and_compiles_its_plan_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gymnasium

    import rxrl.compile
    from rxrl.envs import vector
    from rxrl.training.setup import ray_init_options

    made: list[str] = []
    make = gymnasium.make

    def counting_make(env: Any, **kwargs: Any) -> Any:
        made.append(str(env))
        return make(env, **kwargs)

    compiled: list[object] = []
    compile_ = rxrl.compile._compile

    def counting_compile(root: Any, check: bool) -> Any:
        compiled.append(root)
        return compile_(root, check)

    monkeypatch.setattr(vector, "_SPACES", {})
    monkeypatch.setattr(gymnasium, "make", counting_make)
    monkeypatch.setattr(rxrl.compile, "_compile", counting_compile)
    trainer = quick(tmp_path / "run", steps=512)
    trainer.start()  # builds the plan and runs it (the reference backend: workers in-process)
    assert trainer.plan is not None
    ray_init_options(trainer.plan)  # what the ray backend reads of the plan before it runs
    assert trainer.step() is not None
    trainer.close()
    assert made == ["CartPole-v1"]  # the spaces: one throwaway instance (workers use vector envs)
    assert len(compiled) == 1


def test_a_resumed_run_reports_the_episodes_its_checkpoint_covered_until_new_ones_end(
        tmp_path: Path) -> None:
    """Law: a checkpoint keeps the episodes its record's statistics cover, and the resumed
    run's records go on from them (before: NaN, "return n/a", until an episode ended).
    MountainCar's episodes last 200 steps: the first 128 env-step iteration after a resume
    (1 worker x 2 envs, restarted) ends none."""
    run_dir = tmp_path / "run"
    first = quick(run_dir, env="MountainCar-v0", steps=1024).run()
    assert first.last is not None and first.last.episodes == 4
    ckpt = load_checkpoint(run_dir)
    assert ckpt.episodes is not None
    assert ckpt.episodes.returns == (-200.0,) * 4 and ckpt.episodes.lengths == (200,) * 4
    records: list[Metrics] = []

    class Keep(Callback):
        def on_iteration(self, trainer: Trainer, record: Metrics) -> None:
            records.append(record)

    quick(run_dir, env="MountainCar-v0", steps=1280, resume=run_dir, callbacks=[Keep()]).run()
    assert records[0].iteration == first.last.iteration + 1 and records[0].episodes == 4  # none new
    assert records[0].episode_return_mean == -200.0 and records[0].episode_length_mean == 200.0
    assert float(rows(run_dir)[4]["episode_return_mean"]) == -200.0


def test_a_resumed_dqn_run_with_a_pipelined_learner_goes_on_from_its_checkpoints_episodes(
        tmp_path: Path) -> None:
    """The same for DQN, whose learner calls are pipelined (a checkpoint's snapshot reaches the
    driver after later rounds were counted: the window saved is its record's, `window_at`)."""
    run_dir = tmp_path / "dqn"
    options: dict[str, Any] = {"backend": "reference", "env": "MountainCar-v0", "loggers": ["csv"],
                               "handle_signals": False, "settings": {"num_workers": 1}}
    first = Trainer("dqn", run_dir, steps=1600, **options).run()
    ckpt = load_checkpoint(run_dir)
    assert first.last is not None and ckpt.episodes is not None
    assert len(ckpt.episodes.returns) == ckpt.counters.episodes > 0
    assert first.last.episode_return_mean == -200.0
    records: list[Metrics] = []

    class Keep(Callback):
        def on_iteration(self, trainer: Trainer, record: Metrics) -> None:
            records.append(record)

    Trainer("dqn", run_dir, steps=1700, resume=run_dir, callbacks=[Keep()], **options).run()
    assert records and records[0].episodes == ckpt.counters.episodes  # none of its own yet
    assert records[0].episode_return_mean == -200.0


class _StoppedRun:
    """A run whose backend has stopped: every pull raises `BackendStoppedError`."""

    trace = None

    def __next__(self) -> Any:
        raise BackendStoppedError("actor W[0] died: the local Ray this run started has stopped")

    def close(self) -> None:
        pass


@pytest.mark.parametrize("stop_requested", [True, False], ids=["after-a-stop-request", "unasked"])
def test_a_backend_that_stops_under_a_run_ends_it_as_interrupted_only_after_a_stop_request(
        tmp_path: Path, stop_requested: bool) -> None:
    """A signal sent to every process of a job stops the driver (asked to stop at its next
    record) and Ray's processes too: the next record never comes. The run then ends as
    interrupted by that signal, its last checkpoint standing; the same loss with no stop asked
    for is a failure, raised."""
    trainer = quick(tmp_path / "run")
    for _ in range(5):  # a checkpoint every 1,024 env steps: at iteration 4 of 256 each
        assert trainer.step() is not None
    assert trainer.checkpointed is not None and trainer.checkpointed.iteration == 4
    real_run = trainer._run
    assert real_run is not None
    trainer._run = _StoppedRun()  # type: ignore[assignment]
    if stop_requested:
        trainer.request_stop(signal.SIGTERM)
        assert trainer.step() is None
        result = trainer.close()
        assert (result.status, result.signal) == ("interrupted", signal.SIGTERM)
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["status"] == "interrupted" and summary["signal"] == "SIGTERM"
        assert (summary["iterations"], summary["checkpoint_iteration"]) == (5, 4)
        assert summary["checkpoint_is_latest"] is False
        assert load_checkpoint(tmp_path / "run").counters.iteration == 4
    else:
        with pytest.raises(BackendStoppedError):
            trainer.step()
        assert trainer.close().status == "failed"
    real_run.close()


def test_one_live_run_per_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The law: a run writes to a directory no other live run writes to. A second trainer for a
    directory a live run holds (a new run, or a resume of it) is refused when it starts, in one
    line, before anything runs; two default-named runs started in the same second get two
    directories; a run that got a run into its directory after it was set up is refused."""
    run_dir = tmp_path / "run"
    live, twin = quick(run_dir, checkpoint_every=256), quick(run_dir)  # both checked: empty
    assert live.step() is not None  # started: the directory is claimed
    with pytest.raises(ValueError, match=rf"^run_dir='{run_dir}' is in use by another run in a "
                                         r"Trainer of this process; close it, or choose a new "
                                         r"run_dir$"):
        twin.step()
    assert twin.close().status == "failed"
    live.close()
    late_dir = tmp_path / "late"
    late = quick(late_dir)  # set up while the directory is empty
    quick(late_dir).run()  # another run writes there, and ends
    with pytest.raises(ValueError, match=rf"^run_dir='{late_dir}' already holds a run \(config.json, "
                                         r"metrics.csv, checkpoint.pt, summary.json\): continue "
                                         "it with resume="):
        late.step()
    resumer = quick(run_dir, resume=run_dir, steps=2 * STEPS)
    assert resumer.step() is not None
    with pytest.raises(ValueError, match=rf"^resume='{run_dir}': the run is still going in a "
                                         r"Trainer of this process; close it first "
                                         r"\(trainer.close\(\)\), or resume into a new run_dir$"):
        quick(run_dir, resume=run_dir, steps=2 * STEPS).step()
    resumer.close()

    class Second(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> Second:
            return cls(2026, 12, 7, 12, 0, 0)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(setup, "datetime", Second)
    a, b = quick(None), quick(None)
    assert a.run_dir == b.run_dir == Path("runs/ppo-CartPole-v1-s0-20261207-120000")
    a.step()
    b.step()
    assert (a.run_dir, b.run_dir) == (Path("runs/ppo-CartPole-v1-s0-20261207-120000"),
                                      Path("runs/ppo-CartPole-v1-s0-20261207-120000-2"))
    a.close()
    b.close()
    assert all(rows(d) for d in (a.run_dir, b.run_dir))
    assert not any((d / ".lock").exists() for d in (a.run_dir, b.run_dir))  # released


def test_a_run_that_fails_to_start_leaves_nothing(tmp_path: Path) -> None:
    class Fails(Callback):
        def on_start(self, trainer: Trainer) -> None:
            assert trainer.run_dir.is_dir()  # claimed by now
            raise RuntimeError("a callback failed")

    run_dir = tmp_path / "new" / "run"
    with pytest.raises(RuntimeError, match="a callback failed"):
        quick(run_dir, callbacks=[Fails()]).run()
    assert not (tmp_path / "new").exists()  # neither the directory its claim made nor its parent


def test_a_trace_never_replaces_another(tmp_path: Path) -> None:
    """``trace=FILE`` that exists is refused when the trainer is made; one that another run
    wrote while this one trained is kept, and this run's goes beside it (``-2``), said on the
    run's stream."""
    trace = tmp_path / "run.trace.json"
    trace.write_text("another run's trace")
    with pytest.raises(ValueError, match=rf"^trace='{trace}' already exists \(a trace is one "
                                         r"run's\): choose a new file$"):
        quick(tmp_path / "a", trace=trace)
    trace.unlink()

    class Meanwhile(Callback):
        def on_iteration(self, trainer: Trainer, record: Metrics) -> None:
            if record.iteration == 2:
                trace.write_text("another run's trace")

    stream = io.StringIO()
    quick(tmp_path / "b", trace=trace, callbacks=[Meanwhile()], stream=stream).run()
    assert trace.read_text() == "another run's trace"
    beside = tmp_path / "run-2.trace.json"
    assert json.loads(beside.read_text())["records"]
    assert f"{trace} was written by another run meanwhile; this run's trace is {beside}" in stream.getvalue()
