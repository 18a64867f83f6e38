"""A training run's plan and files, shared by ``rxrl train``, ``eval`` and ``replay``.

A run directory holds ``config.json`` (the algorithm and its config), ``metrics.csv``,
``tb/`` (TensorBoard event files), ``checkpoint.pt`` (the latest checkpoint) and
``summary.json``. A checkpoint holds the learner's ``state_dict`` (policy, optimizer,
minibatch RNG, update count), the config, and the run's counters.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

import rxrl
from rxrl import ops
from rxrl.algos import Algorithm, get
from rxrl.algos.common import RolloutSettings, Start
from rxrl.algos.configs import from_dict, to_dict
from rxrl.rl import Learner, Metrics

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = "rxrl-checkpoint/1"
TRACE_FORMAT = "rxrl-run-trace/1"


@attrs.frozen
class Counters:
    """Where a run stands: added to a resumed run's per-run counts."""

    iteration: int = 0
    env_steps_sampled: int = 0
    env_steps_trained: int = 0
    episodes: int = 0
    time_s: float = 0.0

    def offset(self, m: Metrics) -> Metrics:
        """``m`` (counted from this run's start) counted from the first run's start."""
        return attrs.evolve(
            m, iteration=m.iteration + self.iteration,
            env_steps_sampled=m.env_steps_sampled + self.env_steps_sampled,
            env_steps_trained=m.env_steps_trained + self.env_steps_trained,
            episodes=m.episodes + self.episodes, time_s=m.time_s + self.time_s)

    @staticmethod
    def of(m: Metrics) -> Counters:
        """The counters after the iteration ``m`` reports."""
        return Counters(m.iteration, m.env_steps_sampled, m.env_steps_trained, m.episodes, m.time_s)


@attrs.frozen(eq=False)
class Snapshot:
    """A plan's `Metrics` record, with the learner's state when a checkpoint is due."""

    metrics: Metrics
    due: bool = False
    state: Mapping[str, Any] | None = None


class CheckpointClock:
    """Driver side: marks a record due every ``every`` env steps, and at the run's end.

    The end is ``final`` env steps, or the first record whose mean return reaches ``target``.
    """

    def __init__(self, every: int, final: int, target: float | None = None) -> None:
        self.every, self.final, self.target, self.last = every, final, target, 0

    def mark(self, m: Metrics) -> Snapshot:
        """Wrap ``m``; due when ``every`` steps passed since the last checkpoint, or at the end."""
        due = (m.env_steps_sampled - self.last >= self.every or m.env_steps_sampled >= self.final
               or (self.target is not None and m.episode_return_mean >= self.target))
        if due:
            self.last = m.env_steps_sampled
        return Snapshot(m, due)


def snapshot_if_due(learner: Learner, snapshot: Snapshot) -> Snapshot:
    """On the learner: attach its ``state_dict`` to a due snapshot."""
    return attrs.evolve(snapshot, state=learner.state_dict()) if snapshot.due else snapshot


def training_plan(algo: Algorithm, config: RolloutSettings, start: Start | None,
                  every: int, final: int, target: float | None = None) -> rxrl.Plan[Snapshot]:
    """The algorithm's plan plus checkpointing: the plan ``rxrl train`` runs (and replays).

    ``every`` and ``final`` count env steps of this run (not of the runs it resumes).
    """
    plan, actors = algo.build(config, start)
    clock = CheckpointClock(every, final, target)
    return plan | ops.map(clock.mark) | ops.call(actors.learner, snapshot_if_due)


# ----------------------------------------------------------------------------- checkpoints


def save_checkpoint(path: Path, algo: str, config: RolloutSettings, state: Mapping[str, Any],
                    counters: Counters) -> None:
    """Write a checkpoint atomically (a reader never sees half a file)."""
    doc = {"format": CHECKPOINT_FORMAT, "algo": algo, "config": to_dict(config),
           "learner": dict(state), "counters": attrs.asdict(counters)}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(doc, tmp)
    os.replace(tmp, path)


@attrs.frozen(eq=False)
class Checkpoint:
    """A loaded checkpoint: algorithm, config, learner state and counters."""

    path: Path
    algo: Algorithm
    config: RolloutSettings
    learner_state: Mapping[str, Any]
    counters: Counters


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint file, or the ``checkpoint.pt`` of a run directory.

    Raises ValueError ("corrupt checkpoint ...") for anything that is not a complete
    rxrl checkpoint.
    """
    file = Path(path)
    if file.is_dir():
        file = file / CHECKPOINT
    if not file.is_file():
        raise ValueError(f"no checkpoint at {path} (expected a {CHECKPOINT} file or a run directory)")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols before failing
            warnings.simplefilter("ignore")
            doc: Any = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ValueError(f"corrupt checkpoint {file}: not a readable torch file "
                         f"({type(e).__name__})") from e
    try:
        if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT:
            raise ValueError("not an rxrl checkpoint")
        algo = get(doc["algo"])
        config = from_dict(algo.config, doc["config"])
        counters = Counters(**doc["counters"])
        state = doc["learner"]
        if not isinstance(state, dict) or not {"policy", "optimizer"} <= set(state):
            raise ValueError("the learner state is incomplete")
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"corrupt checkpoint {file}: {_one_line(e)}") from e
    return Checkpoint(file, algo, config, state, counters)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) < 300 else text[:297] + "..."


# ---------------------------------------------------------------------------------- traces


def deterministic_fields(m: Metrics) -> dict[str, float]:
    """The fields of a record that a replay must reproduce exactly (no wall-clock times)."""
    row = m.as_row()
    return {k: v for k, v in row.items()
            if k not in ("steps_per_s", "time_s", "train/learner_time_s")}


def save_trace(path: Path, algo: str, config: RolloutSettings, trace: rxrl.Trace,
               records: list[dict[str, float]], every: int, final: int,
               resumed_from: Path | None) -> None:
    """A run's trace with what ``rxrl replay`` needs to rebuild and check the run."""
    doc = {"format": TRACE_FORMAT, "algo": algo, "config": to_dict(config),
           "checkpoint_every": every, "final_steps": final,
           "resumed_from": None if resumed_from is None else str(resumed_from.resolve()),
           "records": records, "trace": json.loads(trace.to_json())}
    path.write_text(json.dumps(doc))


def same(a: float, b: float) -> bool:
    """Equal, NaN equal to NaN."""
    return a == b or (math.isnan(a) and math.isnan(b))


__all__ = [
    "CHECKPOINT", "Checkpoint", "CheckpointClock", "Counters", "Snapshot", "deterministic_fields",
    "load_checkpoint", "same", "save_checkpoint", "save_trace", "snapshot_if_due", "training_plan",
]
