"""Schedules and traces: round robin, seeded random, record, save/load, replay and mismatches."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rxrl
from rxrl import ops


def three_sources() -> rxrl.Plan[str]:
    return ops.union(*(rxrl.from_iterable([f"{c}{i}" for i in range(3)]) for c in "abc"),
                     mode="async")


def test_round_robin_cycles_through_ready_inputs() -> None:
    assert list(rxrl.run(three_sources())) == [
        "a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]


def test_round_robin_skips_inputs_that_are_no_longer_ready() -> None:
    s = rxrl.Schedule.round_robin()
    assert [s.choose(0, [0, 1, 2]), s.choose(0, [0, 2]), s.choose(0, [0, 2]), s.choose(0, [1])] == [
        0, 2, 0, 1]


@given(st.integers(0, 2**32))
def test_a_seeded_random_schedule_is_reproducible(seed: int) -> None:
    """Law: the same seed gives the same output."""
    first = list(rxrl.run(three_sources(), schedule=rxrl.Schedule.random(seed)))
    assert list(rxrl.run(three_sources(), schedule=rxrl.Schedule.random(seed))) == first


def test_the_trace_records_each_choice_including_ends() -> None:
    run = rxrl.run(ops.union(rxrl.from_iterable([1]), rxrl.from_iterable([2]), mode="async"))
    assert list(run) == [1, 2]
    # choice point 0 chose: input 0 (item 1), input 1 (item 2), input 0 (end), input 1 (end)
    assert run.trace.choices == {0: (0, 1, 0, 1)}
    assert run.trace.backend == "reference"


def test_traces_survive_json(tmp_path: Path) -> None:
    first = rxrl.run(three_sources(), schedule=rxrl.Schedule.random(3))
    out = list(first)
    path = tmp_path / "run.trace.json"
    first.trace.save(path)
    loaded = rxrl.Trace.load(path)
    assert loaded == first.trace
    assert list(rxrl.run(three_sources(), schedule=loaded)) == out


def test_a_trace_of_another_plan_is_refused() -> None:
    run = rxrl.run(three_sources())
    list(run)
    other = ops.union(rxrl.from_iterable([1]), rxrl.from_iterable([2]))
    with pytest.raises(rxrl.ScheduleError, match="recorded for a different plan"):
        rxrl.run(other, schedule=run.trace)


def test_a_trace_that_runs_out_says_so() -> None:
    run = rxrl.run(three_sources())
    next(run)
    with pytest.raises(rxrl.ScheduleError, match="only 1 choices for choice point 0"):
        list(rxrl.run(three_sources(), schedule=run.trace))


def test_a_trace_that_diverges_says_so() -> None:
    trace = rxrl.Trace({0: (0, 0, 0, 0, 0)}, "")  # input 0 has only 3 items, then it ends
    with pytest.raises(rxrl.ScheduleError, match="not ready here"):
        list(rxrl.run(three_sources(), schedule=trace))


@pytest.mark.parametrize("text", ["", "{}", '{"format": "rxrl-trace/1"}', '{"format": "x"}'])
def test_corrupt_trace_documents_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="not an rxrl trace"):
        rxrl.Trace.from_json(text)
