"""Metrics records that flow through plans, and an accumulator that makes them cumulative."""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol

import attrs
import numpy as np
import numpy.typing as npt

from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.data.episode_metrics import EpisodeMetricsArrays, join


class Episodes(Protocol):
    """What `MetricsAccumulator.observe_samples` reads of a batch: the episodes that ended
    while it was sampled and the env steps stepped for it (`SampleBatch`, `TransitionBatch`)."""

    @property
    def episode_returns(self) -> npt.NDArray[np.float32]:
        """Returns of the episodes that ended."""
        ...

    @property
    def episode_lengths(self) -> npt.NDArray[np.int64]:
        """Lengths of the episodes that ended."""
        ...

    @property
    def env_steps(self) -> int:
        """Env transitions stepped to produce the batch."""
        ...


@attrs.frozen(eq=False)
class EpisodeStats:
    """A rows-free `Episodes`: the episodes that ended while some batches were sampled and the
    env steps stepped for them. What crosses processes instead of a batch when only its
    episodes count (a learner's reply, a replay shard's answer): a few arrays, ~3x cheaper to
    pickle than an empty `SampleBatch`. ``episode_metrics``: the episodes' custom metrics
    (`rxrl.rl.data.episode_metrics`), aligned with ``episode_returns``; empty unless configured."""

    episode_returns: npt.NDArray[np.float32]
    episode_lengths: npt.NDArray[np.int64]
    env_steps: int
    episode_metrics: EpisodeMetricsArrays = attrs.field(factory=dict)

    @staticmethod
    def of(batches: Sequence[Episodes]) -> EpisodeStats:
        """The episodes and env steps of ``batches`` together."""
        if len(batches) == 1:
            b = batches[0]
            return EpisodeStats(b.episode_returns, b.episode_lengths, b.env_steps, metrics_of(b))
        return EpisodeStats(np.concatenate([b.episode_returns for b in batches]).astype(np.float32),
                            np.concatenate([b.episode_lengths for b in batches]).astype(np.int64),
                            sum(b.env_steps for b in batches),
                            join([(metrics_of(b), len(b.episode_returns)) for b in batches]))


def metrics_of(batch: Episodes) -> EpisodeMetricsArrays:
    """``batch``'s custom per-episode metrics (``episode_metrics``), or none if it has no such
    attribute (an `Episodes` need not: a multi-agent batch has none)."""
    values: EpisodeMetricsArrays = getattr(batch, "episode_metrics", {})
    return values


@attrs.frozen
class SampleMetrics:
    """What one sampled batch says about the environment (NaN returns if no episode ended)."""

    env_steps: int
    episodes: int
    episode_return_mean: float
    episode_return_min: float
    episode_return_max: float
    episode_length_mean: float

    @staticmethod
    def from_batch(batch: SampleBatch) -> SampleMetrics:
        """Summarize the episodes that ended while `batch` was sampled."""
        returns, lengths = batch.episode_returns, batch.episode_lengths
        if len(returns) == 0:
            nan = math.nan
            return SampleMetrics(batch.env_steps, 0, nan, nan, nan, nan)
        return SampleMetrics(
            env_steps=batch.env_steps,
            episodes=len(returns),
            episode_return_mean=float(returns.mean()),
            episode_return_min=float(returns.min()),
            episode_return_max=float(returns.max()),
            episode_length_mean=float(lengths.mean()),
        )


@attrs.frozen
class TrainMetrics:
    """What one learner update (`train` or `apply_gradients`) reports.

    Losses, entropy and KL are means over the minibatch updates that ran; `grad_norm` is
    the mean pre-clipping global gradient norm; `approx_kl` is the "k3" estimator
    `E[(r - 1) - log r]`; `clip_fraction` the share of ratios outside the clip range (0
    for A2C); `explained_variance` compares the batch's value targets with its behaviour
    values. `env_steps_trained` is the batch length, `num_updates` the optimizer steps.
    `unreported` names the fields this learner does not compute (a DQN step has no policy
    loss): they hold 0 or NaN, and no logger gets a column for them (`as_dict`).
    """

    policy_loss: float
    value_loss: float
    entropy: float
    approx_kl: float
    clip_fraction: float
    grad_norm: float
    explained_variance: float
    env_steps_trained: int
    num_updates: int
    learner_time_s: float
    unreported: frozenset[str] = attrs.field(default=frozenset(), kw_only=True)

    def as_dict(self) -> dict[str, float]:
        """The fields this learner computes, by name (`unreported` left out)."""
        return {k: v for k, v in attrs.asdict(self, recurse=False).items()
                if k != "unreported" and k not in self.unreported}


@attrs.frozen
class Metrics:
    """A cumulative progress record, one per training iteration.

    Episode statistics cover the last `window` episodes (100 by default, as RLlib and SB3
    report), NaN before the first episode ends. Step counts are cumulative;
    `steps_per_s` is environment steps sampled per second of wall time since the previous
    record; `time_s` is the wall time since the accumulator started. `train` is the latest
    learner report, if any. `custom`: the custom per-episode metrics
    (`rxrl.rl.data.episode_metrics`), means over the same window as the episode statistics,
    by name; reported as ``custom/<name>`` columns, none unless configured.
    """

    iteration: int
    env_steps_sampled: int
    env_steps_trained: int
    episodes: int
    episode_return_mean: float
    episode_return_min: float
    episode_return_max: float
    episode_length_mean: float
    steps_per_s: float
    time_s: float
    train: TrainMetrics | None = None
    custom: Mapping[str, float] = attrs.field(factory=dict)

    def as_row(self) -> dict[str, float]:
        """A flat `{name: number}` dict, train fields prefixed `train/`, custom metrics
        `custom/`, for loggers."""
        row: dict[str, float] = {
            k: float(v) for k, v in attrs.asdict(self, recurse=False).items()
            if k not in ("train", "custom")
        }
        if self.train is not None:
            row.update({f"train/{k}": float(v) for k, v in self.train.as_dict().items()})
        row.update({f"custom/{k}": float(v) for k, v in self.custom.items()})
        return row


def _floats(values: Sequence[float]) -> tuple[float, ...]:
    return tuple(float(x) for x in values)


def _ints(values: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(x) for x in values)


@attrs.frozen
class EpisodeWindow:
    """The episodes a record's statistics cover (the last ``window`` of them, oldest first):
    what a checkpoint keeps so that a resumed run's records go on from the same window
    instead of starting empty (`resuming`)."""

    returns: tuple[float, ...] = attrs.field(converter=_floats)
    lengths: tuple[int, ...] = attrs.field(converter=_ints)

    def __attrs_post_init__(self) -> None:
        if len(self.returns) != len(self.lengths):
            raise ValueError(f"EpisodeWindow: {len(self.returns)} returns but {len(self.lengths)} lengths")

    def as_dict(self) -> dict[str, list[float] | list[int]]:
        """Plain lists, for a checkpoint."""
        return {"returns": list(self.returns), "lengths": list(self.lengths)}


#: records whose windows an accumulator built in `resuming` keeps: more than the records a
#: pipelined learner's snapshot can lag behind the accumulator
WINDOWS_KEPT = 16

#: (the window accumulators built now start from, the list they are added to): `resuming`
_RESUMING: contextvars.ContextVar[tuple[EpisodeWindow | None, list[MetricsAccumulator]] | None] = (
    contextvars.ContextVar("rxrl_resuming", default=None))


@contextlib.contextmanager
def resuming(window: EpisodeWindow | None) -> Iterator[list[MetricsAccumulator]]:
    """While a plan is built: every `MetricsAccumulator` built in the block starts from
    ``window`` (the episodes of a checkpoint's last record; None: none) and is added to the
    list the block gets, from which `MetricsAccumulator.window_at` reads the window to save.
    ``rxrl.train`` builds a run's plan in it; a plan built outside starts empty."""
    built: list[MetricsAccumulator] = []
    token = _RESUMING.set((window, built))
    try:
        yield built
    finally:
        _RESUMING.reset(token)


class MetricsAccumulator:
    """Turns per-iteration batches and learner reports into cumulative `Metrics`.

    Stateful and driver-side: use its bound methods as plan functions, e.g.
    `ops.map(acc.observe_samples)` (passes the batch on) before the learner and
    `ops.map(acc.observe_train)` (a `TrainMetrics` in, a `Metrics` out) after it. Do not
    put it inside a sharded (per-actor) part of a plan: each actor would get its own copy.
    `clock` returns seconds; inject a fake one for deterministic tests.

    Custom per-episode metrics (a batch's ``episode_metrics``) are averaged per name over
    the last `window` episodes that reported the name (NaN values left out). A record holds
    every name seen so far and the `custom_names` given, NaN until one has a value: pass the
    names the function declares (`rxrl.rl.data.episode_metrics.declared_names`) so that they
    are columns from the first record.
    """

    def __init__(self, window: int = 100, clock: Callable[[], float] = time.perf_counter,
                 custom_names: Sequence[str] = ()) -> None:
        if window < 1:
            raise ValueError(f"MetricsAccumulator: window must be >= 1, got {window}")
        self._clock = clock
        self._window = window
        self._returns: deque[float] = deque(maxlen=window)
        self._lengths: deque[int] = deque(maxlen=window)
        self._custom: dict[str, deque[float]] = {n: deque(maxlen=window) for n in custom_names}
        self._start = self._last_time = clock()
        self._sampled = self._last_sampled = self._trained = self._episodes = 0
        self._iteration = 0
        #: (iteration, returns, lengths) of the last `WINDOWS_KEPT` records, for `window_at`;
        #: None: not kept (built outside `resuming`)
        self._windows: deque[tuple[int, tuple[float, ...], tuple[int, ...]]] | None = None
        resume = _RESUMING.get()
        if resume is not None:  # built for `rxrl.train`: resumed from a window, and read by it
            start, built = resume
            if start is not None:
                self._returns.extend(start.returns)
                self._lengths.extend(start.lengths)
            built.append(self)
            self._windows = deque(maxlen=WINDOWS_KEPT)

    def observe_samples(self, batch: SampleBatch) -> SampleBatch:
        """Record the batch's episodes and env steps; return the batch unchanged."""
        self.observe_episodes(batch)
        return batch

    def observe_episodes(self, batch: Episodes) -> None:
        """Record the episodes and env steps of any `Episodes`: a `SampleBatch`, a
        `TransitionBatch`, or a rows-free summary of either."""
        self._returns.extend(batch.episode_returns.tolist())
        self._lengths.extend(batch.episode_lengths.tolist())
        for name, values in metrics_of(batch).items():
            self._custom.setdefault(name, deque(maxlen=self._window)).extend(
                v for v in np.asarray(values, dtype=np.float64).tolist() if not math.isnan(v))
        self._episodes += len(batch.episode_returns)
        self._sampled += batch.env_steps

    def observe_train(self, train: TrainMetrics) -> Metrics:
        """Record a learner report and return the cumulative record for this iteration."""
        self._trained += train.env_steps_trained
        return self.record(train)

    def record(self, train: TrainMetrics | None = None) -> Metrics:
        """Close an iteration: the cumulative record now, with `train` attached."""
        now = self._clock()
        elapsed = now - self._last_time
        rate = (self._sampled - self._last_sampled) / elapsed if elapsed > 0 else math.nan
        self._last_time, self._last_sampled = now, self._sampled
        self._iteration += 1
        returns = np.asarray(self._returns, dtype=np.float64)
        have = len(returns) > 0
        if self._windows is not None:  # two C-level copies a record; converted if saved
            self._windows.append((self._iteration, tuple(self._returns), tuple(self._lengths)))
        return Metrics(
            iteration=self._iteration,
            env_steps_sampled=self._sampled,
            env_steps_trained=self._trained,
            episodes=self._episodes,
            episode_return_mean=float(returns.mean()) if have else math.nan,
            episode_return_min=float(returns.min()) if have else math.nan,
            episode_return_max=float(returns.max()) if have else math.nan,
            episode_length_mean=float(np.mean(self._lengths)) if have else math.nan,
            steps_per_s=rate,
            time_s=now - self._start,
            train=train,
            custom={n: float(np.mean(v)) if v else math.nan for n, v in self._custom.items()},
        )


    def window_at(self, iteration: int) -> EpisodeWindow | None:
        """The episodes record ``iteration`` (this accumulator's count) covered, if it is one
        of the last `WINDOWS_KEPT` and the accumulator was built in `resuming`; else None."""
        for it, returns, lengths in reversed(self._windows or ()):
            if it == iteration:
                return EpisodeWindow(returns, lengths)
        return None


__all__ = ["EpisodeWindow", "Episodes", "Metrics", "MetricsAccumulator", "SampleMetrics", "TrainMetrics",
           "metrics_of", "resuming"]
