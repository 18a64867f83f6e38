"""The shared kernels: split's tee and weighted round-robin turns, against their stated laws."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rxrl.backends.kernels import Clock, Tee, Turns, round_robin_next
from rxrl.ready import END, NOT_READY


class Source:
    """0, 1, 2, ... up to ``n`` (then END), or raising at item ``fail``."""

    def __init__(self, n: int, fail: int | None = None) -> None:
        self.n, self.fail, self.pulled = n, fail, 0

    def __call__(self) -> object:
        if self.pulled == self.fail:
            raise ValueError("boom")
        if self.pulled >= self.n:
            return END
        self.pulled += 1
        return self.pulled - 1


@given(st.integers(2, 4), st.integers(1, 5), st.lists(st.integers(0, 3), max_size=80))
def test_tee_branches_take_the_source_in_order_within_max_lag(n: int, lag: int,
                                                             pulls: list[int]) -> None:
    """For any order of branch pulls: each branch's items are a prefix of the source's, taken
    items never differ by more than max_lag, buffers hold at most max_lag items, and the
    source is pulled once per item."""
    tee, source = Tee(n, lag), Source(50)
    got: list[list[object]] = [[] for _ in range(n)]
    for i in (p % n for p in pulls):
        x = tee.next(i, source)
        if x is NOT_READY:
            assert tee.lagging(i) and tee.lag(i) == lag
        elif x is not END:
            got[i].append(x)
        assert max(map(len, got)) - min(map(len, got)) <= lag
        assert all(len(b) <= lag for b in tee.buffers)
    for items in got:
        assert items == list(range(len(items)))
    assert source.pulled == max(map(len, got))


def test_tee_source_error_reaches_every_branch_where_it_occurred() -> None:
    tee, source = Tee(3, 4), Source(10, fail=2)
    assert [tee.next(0, source) for _ in range(2)] == [0, 1]
    with pytest.raises(ValueError, match="boom"):
        tee.next(0, source)  # branch 0 meets it first
    assert tee.next(0, source) is END
    for i in (1, 2):  # the others get the items before it, then the same error
        assert [tee.next(i, source) for _ in range(2)] == [0, 1]
        with pytest.raises(ValueError, match="boom"):
            tee.next(i, source)


def test_a_closed_branch_no_longer_holds_the_others_back() -> None:
    tee, source = Tee(2, 1), Source(10)
    assert tee.next(0, source) == 0
    assert tee.next(0, source) is NOT_READY  # branch 1 has taken nothing
    assert not tee.close(1)
    assert [tee.next(0, source) for _ in range(3)] == [1, 2, 3]
    assert tee.close(0)  # every branch closed: the source may stop


def turn_ends(w: float, n: int) -> list[int]:
    """Items taken after each turn that takes any: the distinct positive values of floor(k w)."""
    exact = Fraction(w).limit_denominator(10**6)
    values = sorted({math.floor(k * exact) for k in range(1, 4 * n + 8)} - {0})
    return values[:n]


weights = st.lists(st.sampled_from([1, 2, 3, 0.5, 2.5, 0.25, 1.5, 3.75]), min_size=1, max_size=4)


@given(weights, st.lists(st.booleans(), max_size=200))
def test_round_robin_turns_take_exact_quotas_whatever_is_not_ready(ws: list[float],
                                                                  not_ready: list[bool]) -> None:
    """Law: after its k-th turn, input i has given floor(k w_i) items in all, whichever
    attempts answered NOT_READY: weights count items taken, not attempts (a not-ready input's
    turn continues when the union comes back to it; turns of 0 items take nothing)."""
    turns = Turns(ws)
    answers = iter(not_ready)
    taken = [0] * len(ws)
    ends: list[list[int]] = [[] for _ in ws]

    def pull(i: int) -> object:
        return NOT_READY if next(answers, False) else i

    for _ in range(150):
        x = round_robin_next(turns, pull, lambda i: True, Clock())
        if x is NOT_READY:
            continue
        assert isinstance(x, int)
        taken[x] += 1
        if turns.left[x] is None:  # its turn is over
            ends[x].append(taken[x])
    for i, w in enumerate(ws):
        assert ends[i] == turn_ends(w, len(ends[i]))


def test_round_robin_is_not_ready_only_when_every_live_input_was() -> None:
    answers = {0: [NOT_READY, 5], 1: [NOT_READY, NOT_READY, 7]}
    turns = Turns([1, 0.5])

    def pull(i: int) -> object:
        return answers[i].pop(0) if answers[i] else END

    # input 1 has a turn of 0 items first: it is not skipped as "tried" before it was asked
    clock = Clock()
    assert round_robin_next(turns, pull, lambda i: True, clock) is NOT_READY
    assert answers == {0: [5], 1: [NOT_READY, 7]}
    assert round_robin_next(turns, pull, lambda i: True, clock) == 5


def test_round_robin_asks_a_not_ready_input_again_once_the_clock_moved() -> None:
    """An input that answered NOT_READY is passed over only while nothing has moved."""
    clock, turns = Clock(), Turns([1, 1])
    answers = {0: [NOT_READY, 5], 1: [NOT_READY, 7]}

    def pull(i: int) -> object:
        x = answers[i].pop(0)
        if i == 1:
            clock.tick()  # input 1 moved something (a side flow stored) before it answered
        return x

    assert round_robin_next(turns, pull, lambda i: True, clock) == 5
