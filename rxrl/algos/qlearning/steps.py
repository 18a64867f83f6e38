"""The steps the Q-learning plans (DQN, Ape-X) name: what the replay, the learner and the
workers do per call, the items they pass, and the driver-side progress.

Small and named, so that ``rxrl show dqn`` prints ``call(DQNLearner×1, train_on_batches)``.
Rows never visit the driver: samples go worker → replay, replayed batches replay → learner,
priorities learner → shard (object refs on Ray); the driver sees episodes, counts, reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from rxrl.actors import Tagged
from rxrl.algos.common import Progress
from rxrl.ready import NOT_READY, NotReady
from rxrl.rl import (
    EpisodeStats,
    Metrics,
    ReplayShard,
    TrainMetrics,
    TransitionBatch,
)
from rxrl.rl.data.transitions import IntArray
from rxrl.rl.models.forward import Weights  # not rxrl.rl's: its module imports torch
from rxrl.rl.workers.qworker import TransitionWorker

FloatArray = npt.NDArray[np.float32]

#: What storing samples in a replay shard answers: their episodes and env steps (the rows
#: stay in the shard).
Stored = EpisodeStats


def store_round(shard: ReplayShard, fragments: list[TransitionBatch]) -> Stored:
    """On the replay: add one barrier round's fragments, in worker order."""
    for fragment in fragments:
        shard.add(fragment)
    return Stored.of(fragments)


def store_sample(shard: ReplayShard, item: Tagged[TransitionBatch]) -> Tagged[Stored]:
    """On a replay shard: add one worker's sample; the worker's tag is kept (its weights sync)."""
    shard.add(item.value)
    return item.with_value(Stored.of([item.value]))


def store_samples(shard: ReplayShard, items: list[Tagged[TransitionBatch]]) -> list[Tagged[Stored]]:
    """On a replay shard: ``store_sample`` each sample of an aggregator's list, in order."""
    return [store_sample(shard, item) for item in items]


def sample_batches(count: int, intensity: float | None = None, lead: int = 0
                   ) -> Callable[[ReplayShard], list[TransitionBatch] | NotReady]:
    """The replay side: ``count`` batches per request, or ``NOT_READY`` below ``learning_starts``
    — and, with an ``intensity``, while the batches would take the shard past ``intensity``
    replayed transitions per env step added, ``lead`` requests ahead at most
    (`ReplayShard.within`): the learner then waits for the samples instead of training ahead
    of them."""

    def sample_batches(shard: ReplayShard) -> list[TransitionBatch] | NotReady:
        """``count`` independent samples of the shard (one per optimizer step)."""
        size = count * shard.config.batch_size
        if intensity is not None and not shard.within(size, intensity, lead * size):
            return NOT_READY
        batches = []
        for _ in range(count):
            batch = shard.sample()
            if isinstance(batch, NotReady):
                return batch
            batches.append(batch)
        return batches

    if intensity is not None:  # `rxrl show` tells the held request from the plain one
        sample_batches.__name__ = sample_batches.__qualname__ = "sample_batches_within_intensity"
    return sample_batches


_SUMMED = ("env_steps_trained", "num_updates", "learner_time_s")


def merged(reports: Sequence[TrainMetrics]) -> TrainMetrics:
    """One report for several optimizer steps, of the reports' own type (SAC's has more
    fields): sums of the counts and times, means of everything else (the latest value of
    SAC's temperature ``alpha``); the fields none of them computes stay `unreported`."""
    values: dict[str, Any] = {}
    for field in attrs.fields(type(reports[0])):
        column = [getattr(r, field.name) for r in reports]
        if field.name == "unreported":
            values[field.name] = frozenset.intersection(*column)
        elif field.name in _SUMMED:
            values[field.name] = sum(column)
        elif field.name == "alpha":
            values[field.name] = column[-1]
        else:
            values[field.name] = float(np.mean(column))
    return type(reports[0])(**values)


class TransitionLearner(Protocol):
    """What the replay plans need of a learner (`DQNLearner`, `SACLearner`)."""

    def train(self, batch: TransitionBatch) -> tuple[TrainMetrics, FloatArray]:
        """One optimizer step on a replayed batch; the report and the rows' new priorities."""
        ...

    def get_weights(self) -> Weights:
        """The acting network's weights."""
        ...


@attrs.frozen(eq=False)
class Priorities:
    """A learner's report on a shard's batches, with their new priorities (ids and ``|TD|``)."""

    metrics: TrainMetrics
    indices: IntArray
    priorities: FloatArray


def train_steps(learner: TransitionLearner, batches: Sequence[TransitionBatch]) -> Priorities:
    """One optimizer step per batch, in order; the merged report and every row's new priority."""
    reports, priorities = [], []
    for batch in batches:
        report, td = learner.train(batch)
        reports.append(report)
        priorities.append(td)
    indices = [b.indices if b.indices is not None else np.zeros(0, np.int64) for b in batches]
    return Priorities(merged(reports), np.concatenate(indices), np.concatenate(priorities))


@attrs.frozen(eq=False)
class QTrained:
    """DQN's learner reply: the report of a call's optimizer steps and the new Q-net weights."""

    metrics: TrainMetrics
    weights: Weights


def train_on_batches(learner: TransitionLearner, batches: list[TransitionBatch]) -> QTrained:
    """On the learner: a step per batch (the target net follows every
    ``target_update_interval`` steps); the report and the new weights in one reply."""
    return QTrained(train_steps(learner, batches).metrics, learner.get_weights())


def train_on_sample(learner: TransitionLearner, item: Tagged[list[TransitionBatch]]) -> Tagged[Priorities]:
    """On the learner: a step per batch of a shard's sample; the shard's tag is kept."""
    return item.with_value(train_steps(learner, item.value))


def update_priorities(shard: ReplayShard, item: Tagged[Priorities]) -> TrainMetrics:
    """On the shard the batches came from: their new priorities; the report passes on."""
    shard.update_priorities(item.value.indices, item.value.priorities)
    return item.value.metrics


def set_q_weights(worker: TransitionWorker, trained: QTrained) -> None:
    """Load the learner's new weights into ``worker``."""
    # a writable copy: weights that arrive through Ray's object store are read-only views
    worker.set_weights({k: np.array(v) for k, v in trained.weights.items()})


def is_due(item: Tagged[bool]) -> bool:
    """Whether the worker of the tag is due new weights."""
    return item.value


def weights_if_due(learner: TransitionLearner, item: Tagged[bool]) -> Tagged[Weights | None]:
    """On the learner: its current weights for the worker of the tag, if that one is due."""
    return item.with_value(learner.get_weights() if item.value else None)


def load_weights_if_sent(worker: TransitionWorker, item: Tagged[Weights | None]) -> bool:
    """On the worker the weights were meant for: load them, if any; whether it did."""
    if item.value is None:
        return False
    worker.set_weights({k: np.array(v) for k, v in item.value.items()})
    return True


class QProgress(Progress):
    """`Progress` for the Q-learning plans: a record per learner call (DQN) or per
    ``report_every`` calls (Ape-X); episodes only from the ``reporting`` workers (Ape-X: the
    lowest epsilon), env steps from all; which worker is due new weights."""

    def __init__(self, num_workers: int = 1, reporting: Sequence[int] = (), sync_delay: int = 1,
                 report_every: int = 1, custom_names: Sequence[str] = ()) -> None:
        super().__init__(custom_names=custom_names)
        self.reporting, self.sync_delay, self.report_every = set(reporting), sync_delay, report_every
        self.since_sync = [0] * num_workers
        self.calls = 0

    def observe_stored_round(self, stored: Stored) -> Stored:
        """Count a round's episodes and env steps (every worker's)."""
        self.observe_episodes(stored)
        return stored

    def observe_trained(self, trained: QTrained) -> Metrics:  # type: ignore[override]
        """Close an iteration with a DQN learner reply."""
        return self.observe_train(trained.metrics)

    def observe_stored(self, item: Tagged[Stored]) -> Tagged[bool]:
        """Count a worker's sample; whether it is due weights (``sync_delay`` env steps since
        its last ones)."""
        worker, stored = item.shard, item.value
        if worker in self.reporting:
            self.observe_episodes(stored)
        else:
            self.observe_episodes(attrs.evolve(stored, episode_returns=stored.episode_returns[:0],
                                              episode_lengths=stored.episode_lengths[:0],
                                              episode_metrics={}))
        self.since_sync[worker] += stored.env_steps
        due = self.since_sync[worker] >= self.sync_delay
        if due:
            self.since_sync[worker] = 0
        return item.with_value(due)

    def observe_stored_each(self, items: list[Tagged[Stored]]) -> list[Tagged[bool]]:
        """``observe_stored`` of each sample of an aggregator's list, in order."""
        return [self.observe_stored(item) for item in items]

    def report(self, train: TrainMetrics) -> list[Metrics]:
        """A record every ``report_every`` learner calls (with the latest call's report)."""
        self.calls += 1
        if self.calls % self.report_every:
            self._trained += train.env_steps_trained
            return []
        return [self.observe_train(train)]


__all__ = [
    "Priorities", "QProgress", "QTrained", "Stored", "load_weights_if_sent", "merged",
    "TransitionLearner", "sample_batches", "set_q_weights", "store_round", "store_sample", "train_on_batches",
    "train_on_sample", "train_steps", "update_priorities", "weights_if_due",
]
