"""Metrics records and the accumulator that makes them cumulative."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rxrl.rl.data.metrics import (
    EpisodeStats,
    EpisodeWindow,
    MetricsAccumulator,
    SampleMetrics,
    TrainMetrics,
    resuming,
)
from tests.rl.helpers import make_batch


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def train_metrics(steps: int) -> TrainMetrics:
    return TrainMetrics(0.1, 0.2, 0.3, 0.01, 0.05, 1.5, 0.5, steps, 4, 0.01)


def test_sample_metrics_from_batch() -> None:
    m = SampleMetrics.from_batch(make_batch(10, episodes=3))  # returns 0, 1, 2; lengths 1, 2, 3
    assert (m.env_steps, m.episodes) == (10, 3)
    assert (m.episode_return_mean, m.episode_return_min, m.episode_return_max) == (1.0, 0.0, 2.0)
    assert m.episode_length_mean == 2.0
    empty = SampleMetrics.from_batch(make_batch(4))
    assert empty.episodes == 0 and math.isnan(empty.episode_return_mean)


def test_accumulator_is_cumulative_with_a_window_of_recent_episodes() -> None:
    clock = FakeClock()
    acc = MetricsAccumulator(window=4, clock=clock)
    batch = make_batch(10, episodes=3)  # returns 0, 1, 2
    assert acc.observe_samples(batch) is batch
    clock.now += 2.0
    m1 = acc.observe_train(train_metrics(10))
    assert (m1.iteration, m1.env_steps_sampled, m1.env_steps_trained, m1.episodes) == (1, 10, 10, 3)
    assert m1.episode_return_mean == 1.0 and m1.steps_per_s == 5.0 and m1.time_s == 2.0
    acc.observe_samples(attrs.evolve(make_batch(6, start=10, episodes=2), env_steps=8))  # 10, 11
    clock.now += 4.0
    m2 = acc.observe_train(train_metrics(6))
    assert (m2.iteration, m2.env_steps_sampled, m2.env_steps_trained, m2.episodes) == (2, 18, 16, 5)
    # window of 4: returns 1, 2, 10, 11
    assert (m2.episode_return_min, m2.episode_return_max, m2.episode_return_mean) == (1.0, 11.0, 6.0)
    assert m2.steps_per_s == 2.0 and m2.time_s == 6.0
    assert m2.train == train_metrics(6)


def test_record_before_any_episode_is_nan_and_rows_are_flat() -> None:
    acc = MetricsAccumulator(clock=FakeClock())
    m = acc.record()
    assert math.isnan(m.episode_return_mean) and math.isnan(m.steps_per_s) and m.train is None
    row = acc.observe_train(train_metrics(3)).as_row()
    assert row["env_steps_trained"] == 3.0 and row["train/grad_norm"] == 1.5
    assert all(isinstance(v, float) for v in row.values())
    assert "train" not in row


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window must be >= 1"):
        MetricsAccumulator(window=0)


def test_metrics_records_are_frozen() -> None:
    m = train_metrics(1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        m.policy_loss = 0.0  # type: ignore[misc]
    assert np.isfinite(m.grad_norm)


episodes = st.lists(st.tuples(st.floats(-1e3, 1e3, width=32), st.integers(1, 500)), max_size=12)


@given(before=episodes, after=st.lists(episodes, min_size=1, max_size=4), window=st.integers(1, 8))
def test_an_accumulator_resumed_from_a_window_reports_what_one_that_saw_its_episodes_would(
        before: list[tuple[float, int]], after: list[list[tuple[float, int]]], window: int) -> None:
    """Law: an accumulator built in `resuming(W)`, W the window a record covered, and then
    fed batches E reports the episode statistics of one that was fed W's episodes and then E;
    and the window of each of its records is what it covered."""
    def stats(eps: list[tuple[float, int]]) -> EpisodeStats:
        return EpisodeStats(np.array([r for r, _ in eps], np.float32),
                            np.array([n for _, n in eps], np.int64), len(eps))

    with resuming(None) as built:
        whole = MetricsAccumulator(window=window, clock=FakeClock())
    assert built == [whole]
    whole.observe_episodes(stats(before))
    saved = whole.window_at(whole.record().iteration)
    assert saved is not None
    assert saved.returns == tuple(float(np.float32(r)) for r, _ in before[-window:])
    assert saved.lengths == tuple(n for _, n in before[-window:])
    with resuming(saved):
        resumed = MetricsAccumulator(window=window, clock=FakeClock())
    for batch in after:
        whole.observe_episodes(stats(batch))
        resumed.observe_episodes(stats(batch))
        a, b = whole.record(), resumed.record()
        fields = ("episode_return_mean", "episode_return_min", "episode_return_max", "episode_length_mean")
        for name in fields:
            assert getattr(a, name) == pytest.approx(getattr(b, name), nan_ok=True), name
        assert resumed.window_at(b.iteration) == whole.window_at(a.iteration)


def test_an_accumulator_built_outside_resuming_keeps_no_windows_and_a_bad_window_is_refused() -> None:
    acc = MetricsAccumulator()
    acc.observe_episodes(EpisodeStats(np.ones(3, np.float32), np.ones(3, np.int64), 3))
    assert acc.window_at(acc.record().iteration) is None
    with pytest.raises(ValueError, match="2 returns but 1 lengths"):
        EpisodeWindow([1.0, 2.0], [3])
