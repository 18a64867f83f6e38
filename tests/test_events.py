"""The reference interpreter reports every pull, emit, end, choice and actor call."""

from __future__ import annotations

import logging

import pytest

import rxrl
from rxrl import ops
from tests.conformance.harness import Adder


def test_events_follow_an_item_through_the_plan() -> None:
    events: list[rxrl.Event] = []
    adder = rxrl.actors(Adder, 1)
    plan = rxrl.from_iterable([5]) | ops.map(lambda x: x * 2) | ops.call(adder, Adder.add)
    assert list(rxrl.run(plan, on_event=events.append)) == [10]
    emits = [(e.op, e.item) for e in events if e.kind == "emit"]
    assert emits == [("from_iterable([5])", 5), ("map(<lambda>)", 10),
                     ("call(Adder×1, Adder.add)", 10)]
    calls = [e for e in events if e.kind == "call"]
    assert [(c.shard, c.item, c.detail) for c in calls] == [(0, 10, "Adder[0].Adder.add")]


def test_choice_events_show_the_ready_inputs() -> None:
    events: list[rxrl.Event] = []
    plan = ops.union(rxrl.from_iterable([1]), rxrl.from_iterable([2]), mode="async")
    list(rxrl.run(plan, on_event=events.append))
    choices = [(e.item, e.detail) for e in events if e.kind == "choice"]
    assert choices == [(0, "[0, 1]"), (1, "[0, 1]"), (0, "[0, 1]"), (1, "[1]")]


def test_sharded_events_name_their_shard() -> None:
    events: list[rxrl.Event] = []
    plan = rxrl.from_iterables([[1], [2]]) | ops.map(str) | ops.barrier()
    list(rxrl.run(plan, on_event=events.append))
    assert [(e.shard, e.item) for e in events if e.kind == "emit" and e.op == "map(str)"] == [
        (0, "1"), (1, "2")]


def test_event_ids_match_the_printed_plan() -> None:
    events: list[rxrl.Event] = []
    plan = rxrl.from_iterable([1]) | ops.map(str) | ops.take(1)
    list(rxrl.run(plan, on_event=events.append))
    printed = rxrl.show(plan, ids=True)
    assert printed.splitlines() == ["#2 from_iterable([1])", "| #1 map(str)", "| #0 take(1)"]
    assert {(e.node, e.op) for e in events} == {(0, "take(1)"), (1, "map(str)"),
                                                (2, "from_iterable([1])")}


def test_log_events_writes_one_line_per_event(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="rxrl.events"):
        list(rxrl.run(rxrl.from_iterable([1]), on_event=rxrl.log_events()))
    assert caplog.messages == ["#0 from_iterable([1]) pull", "#0 from_iterable([1]) emit 1",
                               "#0 from_iterable([1]) pull", "#0 from_iterable([1]) end"]
