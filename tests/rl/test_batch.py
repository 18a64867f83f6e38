"""SampleBatch: validation, concat, slicing, shuffling, minibatches and standardize."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rxrl.rl.data.batch import COLUMNS, SampleBatch, standardize
from tests.rl.helpers import make_batch


def rows_of(batch: SampleBatch) -> list[int]:
    return [int(a) for a in batch.actions]  # make_batch stores the row number in `actions`


def test_len_and_default_env_steps() -> None:
    batch = make_batch(7)
    assert len(batch) == 7
    assert batch.env_steps == 7


def test_ragged_columns_raise_naming_field_and_shapes() -> None:
    batch = make_batch(4)
    with pytest.raises(ValueError, match=r"\['values'\].*values=\(3,\)"):
        attrs.evolve(batch, values=np.zeros(3, dtype=np.float32))


def test_non_vector_scalar_column_raises() -> None:
    with pytest.raises(ValueError, match=r"'rewards' must be 1-D.*\(4, 1\)"):
        attrs.evolve(make_batch(4), rewards=np.zeros((4, 1), dtype=np.float32))


def test_env_steps_below_length_raises() -> None:
    with pytest.raises(ValueError, match="env_steps=2"):
        attrs.evolve(make_batch(4), env_steps=2)


def test_concat_of_nothing_raises() -> None:
    with pytest.raises(ValueError, match="at least one batch"):
        SampleBatch.concat([])


def test_concat_mismatched_obs_shape_names_field_and_batch() -> None:
    with pytest.raises(
        ValueError, match=r"'obs' is float32\[2, 3\] in batch 0 but float32\[2, 4\] in batch 1"
    ):
        SampleBatch.concat([make_batch(2), make_batch(2, obs_dim=4)])


def test_concat_mismatched_dtype_raises() -> None:
    other = attrs.evolve(make_batch(2), actions=np.zeros(2, dtype=np.float32))
    with pytest.raises(ValueError, match="'actions'"):
        SampleBatch.concat([make_batch(2), other])


@given(st.lists(st.integers(0, 6), min_size=1, max_size=5))
def test_concat_preserves_rows_in_order_and_sums_extras(sizes: list[int]) -> None:
    """Law: concat keeps every row once, in order; episode stats and env steps add up."""
    starts = np.cumsum([0, *sizes[:-1]])
    batches = [make_batch(n, start=int(s), episodes=n % 3) for n, s in zip(sizes, starts, strict=True)]
    joined = SampleBatch.concat(batches)
    assert rows_of(joined) == list(range(sum(sizes)))
    assert joined.env_steps == sum(b.env_steps for b in batches)
    assert len(joined.episode_returns) == sum(n % 3 for n in sizes)
    for name in COLUMNS:
        assert np.array_equal(getattr(joined, name), np.concatenate([getattr(b, name) for b in batches]))


def test_slice_selects_rows_without_episode_stats() -> None:
    part = make_batch(10, episodes=2).slice(3, 6)
    assert rows_of(part) == [3, 4, 5]
    assert len(part.episode_returns) == 0
    assert part.env_steps == 3


def test_shuffle_is_a_row_permutation_keeping_extras() -> None:
    batch = make_batch(50, episodes=2)
    shuffled = batch.shuffle(np.random.default_rng(0))
    rows = rows_of(shuffled)
    assert sorted(rows) == list(range(50)) and rows != list(range(50))
    assert np.array_equal(shuffled.values, np.asarray(rows, dtype=np.float32) * 2)  # rows stay aligned
    assert len(shuffled.episode_returns) == 2


@given(st.integers(0, 40), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_minibatches_partition_the_batch(n: int, size: int, seed: int) -> None:
    """Law: minibatches cover every row exactly once; all but the last have `size` rows."""
    mbs = list(make_batch(n).minibatches(size, np.random.default_rng(seed)))
    rows = [r for mb in mbs for r in rows_of(mb)]
    assert sorted(rows) == list(range(n))
    assert all(len(mb) == size for mb in mbs[:-1])
    assert all(0 < len(mb) <= size for mb in mbs)


def test_minibatches_drop_last_and_order() -> None:
    batch = make_batch(10)
    assert [len(m) for m in batch.minibatches(4, drop_last=True)] == [4, 4]
    assert rows_of(next(batch.minibatches(4))) == [0, 1, 2, 3]  # no rng: in order
    with pytest.raises(ValueError, match="size must be >= 1"):
        next(batch.minibatches(0))


def test_take_and_with_columns() -> None:
    batch = make_batch(5)
    assert rows_of(batch.take(np.array([4, 0]))) == [4, 0]
    with pytest.raises(ValueError, match="unknown fields \\['advantage'\\]"):
        batch.with_columns(advantage=np.zeros(5))


@given(st.lists(st.floats(-1e3, 1e3, width=32), min_size=2, max_size=50))
def test_standardize_gives_zero_mean_unit_std(values: list[float]) -> None:
    """Law: a standardized column has mean 0 and std 1; a (near-)constant column, whose std
    is under the eps floor, is scaled by 1/eps instead and so keeps a std below 1."""
    column = np.asarray(values, dtype=np.float32)
    batch = make_batch(len(values)).with_columns(advantages=column)
    out = standardize("advantages")(batch).advantages
    assert out.dtype == np.float32
    assert abs(float(out.mean())) < 1e-3
    std = float(out.std())
    assert std < 1.0 + 1e-3
    if column.std() > 1e-4:
        assert abs(std - 1.0) < 1e-3


def test_standardize_leaves_other_columns_and_rejects_unknown_fields() -> None:
    batch = make_batch(6)
    out = standardize("advantages")(batch)
    assert out.values is batch.values
    assert standardize("advantages")(make_batch(0)).advantages.shape == (0,)
    with pytest.raises(ValueError, match="'obs' is not a float column"):
        standardize("obs")
