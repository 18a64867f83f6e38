"""SumTree: partial sums, prefix-sum search and bad input, against a plain numpy model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rxrl.rl.replay.sumtree import SumTree

# Small integers as values: every sum is exact in float64, so the tree and np.cumsum agree
# exactly whatever order they add in, and boundaries can be tested without tolerances.
values = st.integers(0, 1000).map(float)


@st.composite
def update_sequences(draw: st.DrawFn) -> tuple[int, list[tuple[str, int, list[float]]]]:
    capacity = draw(st.integers(1, 70))
    ops: list[tuple[str, int, list[float]]] = []
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            leaves = draw(st.lists(st.integers(0, capacity - 1), min_size=1, max_size=20))
            ops.append(
                (
                    "update",
                    0,
                    [float(i) for i in leaves]
                    + draw(st.lists(values, min_size=len(leaves), max_size=len(leaves))),
                )
            )
        else:
            start = draw(st.integers(0, capacity - 1))
            ops.append(("range", start, draw(st.lists(values, min_size=0, max_size=capacity - start))))
    return capacity, ops


def apply(capacity: int, ops: list[tuple[str, int, list[float]]]) -> tuple[SumTree, np.ndarray]:
    tree, model = SumTree(capacity), np.zeros(capacity)
    for kind, start, payload in ops:
        if kind == "update":
            half = len(payload) // 2
            leaves, vals = np.array(payload[:half], dtype=np.intp), np.array(payload[half:])
            tree.update(leaves, vals)
            for leaf, value in zip(leaves, vals, strict=True):  # last write wins, as documented
                model[leaf] = value
        else:
            tree.set_range(start, payload)
            model[start : start + len(payload)] = payload
    return tree, model


@given(update_sequences())
def test_prefix_sums_equal_a_slow_cumulative_sum_after_any_updates(
    case: tuple[int, list[tuple[str, int, list[float]]]],
) -> None:
    """Law: after any sequence of `update` / `set_range`, the leaves equal the model, the
    total is their sum and `prefix_sums(i)` is `sum(leaves[:i])` for every leaf i."""
    tree, model = apply(*case)
    np.testing.assert_array_equal(tree.values, model)
    assert tree.total == model.sum()
    exclusive = np.concatenate([[0.0], np.cumsum(model)[:-1]])
    np.testing.assert_array_equal(tree.prefix_sums(np.arange(len(model))), exclusive)


@given(update_sequences(), st.lists(st.integers(0, 2 * 70 * 1000), min_size=1, max_size=30))
def test_find_is_the_first_leaf_whose_inclusive_prefix_sum_exceeds_u(
    case: tuple[int, list[tuple[str, int, list[float]]]], raw: list[int]
) -> None:
    """Law: `find(u) = searchsorted(cumsum(leaves), u, side="right")` for u in [0, total),
    so leaf i is found for exactly `leaves[i]` worth of u, and never a zero leaf."""
    tree, model = apply(*case)
    if model.sum() == 0:
        with pytest.raises(ValueError, match=r"every leaf is 0"):
            tree.find(np.array([0.0]))
        return
    u = np.array([r % int(model.sum()) for r in raw], dtype=np.float64) + 0.5 * (np.array(raw) % 2)
    u = np.minimum(u, model.sum() - 0.5)
    found = tree.find(u)
    np.testing.assert_array_equal(found, np.searchsorted(np.cumsum(model), u, side="right"))
    assert (model[found] > 0).all()


def test_find_clips_u_into_the_total_and_never_returns_padding() -> None:
    tree = SumTree(5)  # 8 leaves of storage: 3 of padding
    tree.update(np.arange(5), np.array([0.0, 1.0, 0.0, 2.0, 0.0]))
    assert tree.find(np.array([-1.0, 0.0, 2.999, 3.0, 1e9])).tolist() == [1, 1, 3, 3, 3]


def test_find_never_rounds_into_a_zero_leaf() -> None:
    """With u just below the total, `u - left` can round up to the right subtree's whole sum
    (here fl(3.8608... - 0.9616...) == 2.8991...), which would walk on into the zero leaf
    beside it; `find` redoes such draws with a descent that avoids zero subtrees."""
    left, right = 0.9616571936637868, 2.8991597630941346
    tree = SumTree(4)
    tree.update(np.arange(4), np.array([left, 0.0, right, 0.0]))
    u = np.nextafter(tree.total, 0.0)
    assert u - left >= right  # the rounding this test is about
    assert tree.find(np.array([u, 0.0, left, tree.total])).tolist() == [2, 0, 2, 2]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0])
def test_bad_values_are_refused(bad: float) -> None:
    tree = SumTree(4)
    with pytest.raises(ValueError, match=r"finite and >= 0"):
        tree.update(np.array([1]), np.array([bad]))
    with pytest.raises(ValueError, match=r"finite and >= 0"):
        tree.set_range(0, [bad])
    assert tree.total == 0.0


def test_out_of_range_leaves_and_capacity_are_refused() -> None:
    with pytest.raises(ValueError, match=r"capacity must be >= 1"):
        SumTree(0)
    tree = SumTree(3)
    with pytest.raises(ValueError, match=r"leaf indices must be in 0\.\.2"):
        tree.update(np.array([3]), np.array([1.0]))
    with pytest.raises(ValueError, match=r"outside"):
        tree.set_range(2, [1.0, 1.0])


def test_a_capacity_of_one_works() -> None:
    tree = SumTree(1)
    tree.set_range(0, [2.5])
    assert tree.total == 2.5 and tree.find(np.array([0.0, 2.4])).tolist() == [0, 0]
