"""IMPALA and APPO as plans: their shapes, what they promise about actors on every backend
(fragments to the learner by reference, weights only to the sender and at most every
``broadcast_interval`` updates, staleness in every record), and Ray and rx runs replayed from
their traces."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

import rxrl
from rxrl import ops
from rxrl.actors import Tagged
from rxrl.algos.common import PlacementSettings
from rxrl.algos.vtrace import appo, impala
from rxrl.algos.vtrace.common import Reply
from rxrl.rl import APPOConfig, IMPALAConfig, Metrics
from rxrl.rl.learners.vtrace import VTraceMetrics
from rxrl.training.checkpoint import deterministic_fields, same

IMPALA_SHAPE = """\
from_actors(RolloutWorker×3, RolloutWorker.sample_fragment)  [×3 shards]
| gather(max_in_flight=1, tagged=True)
| call(IMPALALearner×1, learn_on_batches, max_in_flight=4)
| call(RolloutWorker×3, load_weights_if_sent, max_in_flight=4)
| flat_map(VTraceProgress.observe_reply)"""


def small_impala(**settings: Any) -> impala.IMPALA:
    """2 workers x 2 envs x 8 steps; a batch is two fragments (32 rows)."""
    return impala.IMPALA(**{"num_envs_per_worker": 2, "fragment_length": 8, "train_batch_size": 32,
                            "learner": IMPALAConfig(num_epochs=2, minibatch_size=8), **settings})


def small_appo(**settings: Any) -> appo.APPO:
    return appo.APPO(**{"num_envs_per_worker": 2, "fragment_length": 8, "train_batch_size": 32,
                        "learner": APPOConfig(num_epochs=2, minibatch_size=8), **settings})


def test_impala_gathers_fragments_and_pipelines_the_learner_and_the_replies() -> None:
    config = impala.IMPALA(num_workers=3, num_envs_per_worker=8, fragment_length=32, train_batch_size=512)
    assert (config.fragments_per_batch, config.learner_queue, config.reply_queue) == (2, 4, 4)
    assert rxrl.show(impala.plan(config)) == IMPALA_SHAPE


def test_appo_is_the_same_dataflow_with_its_own_learner() -> None:
    config = appo.APPO(num_workers=3, num_envs_per_worker=8, fragment_length=32, train_batch_size=512)
    assert rxrl.show(appo.plan(config)) == IMPALA_SHAPE.replace("IMPALALearner", "APPOLearner")


def test_a_batch_is_whole_fragments_and_the_learner_queue_holds_two_batches() -> None:
    config = small_impala(train_batch_size=40)  # 40 rows: three fragments of 16
    assert (config.fragments_per_batch, config.batch_rows, config.learner_queue) == (3, 48, 6)


def tag_of(item: Any) -> Tagged[Any]:
    """The routing tag of a call's item: the item itself, or on Ray the tag of its reference."""
    tag = item if isinstance(item, Tagged) else item.tag
    assert isinstance(tag, Tagged)
    return tag


def run(plan: rxrl.Plan[Metrics], backend: str, n: int, **options: Any
        ) -> tuple[list[Metrics], list[rxrl.Event], rxrl.Trace]:
    """``n`` records of ``plan`` on ``backend``, its call events and its trace."""
    events: list[rxrl.Event] = []
    keep = lambda e: events.append(e) if e.kind == "call" else None
    with rxrl.run(plan | ops.take(n), backend, on_event=keep, **options) as r:
        return list(r), events, r.trace


def build(algo: str) -> rxrl.Plan[Metrics]:
    """A fresh small plan of ``algo``."""
    return impala.plan(small_impala()) if algo == "impala" else appo.plan(small_appo())


@pytest.mark.parametrize("backend", ["reference", "rx", "ray"])
@pytest.mark.parametrize("algo", ["impala", "appo"])
@pytest.mark.timeout(180)
def test_on_every_backend_fragments_reach_the_learner_and_replies_only_their_sender(
        algo: str, backend: str, request: pytest.FixtureRequest) -> None:
    """...and a run on a concurrent backend (Ray, rx) is replayed exactly from its trace."""
    if backend == "ray":
        request.getfixturevalue("ray_session")
    records, events, trace = run(build(algo), backend, 8)
    assert [r.env_steps_trained for r in records] == [32 * (i + 1) for i in range(8)]
    reports = [r.train for r in records]
    assert all(isinstance(t, VTraceMetrics) and t.fragments == 2 and t.staleness_min >= 0
               for t in reports)
    # the workers are given new weights: the last batch holds a fragment sampled with newer
    # weights than the initial ones (those would be len(reports) - 1 updates stale by now; how
    # much fresher depends on the machine's load, so no tighter bound is asserted)
    last = reports[-1]
    assert isinstance(last, VTraceMetrics) and last.staleness_min < len(reports) - 1
    learned = [e for e in events if "learn_on_batches" in e.op]
    replies = [e for e in events if "load_weights_if_sent" in e.op]
    assert len(replies) <= len(learned) and len(replies) >= 16
    if backend == "reference":  # (elsewhere one worker may deliver every fragment of a short run)
        assert {e.shard for e in replies} == {0, 1}
    for e in replies:
        assert e.shard == tag_of(e.item).shard  # to the worker that sent the fragment only
    if backend == "ray":  # the driver handled references to the fragments, never the fragments
        assert all(isinstance(e.item, Tagged) and type(e.item.value).__name__ == "Ref"
                   and e.item.value.local is None for e in learned)
    sampled = records[-1].env_steps_sampled
    assert sampled >= 8 * 32  # the env steps of every fragment replied to (surplus steps too)
    if backend != "reference":  # the completion order is the trace: the reference replays it
        assert sum(len(c) for c in trace.choices.values()) >= 16
        replayed = list(rxrl.run(build(algo) | ops.take(8), "reference", schedule=trace))
        for rerun, recorded in zip(replayed, records, strict=True):
            a, b = deterministic_fields(rerun), deterministic_fields(recorded)
            assert a.keys() == b.keys() and all(same(a[k], b[k]) for k in a), (a, b)


@pytest.mark.parametrize("interval", [1, 3])
def test_a_worker_gets_new_weights_at_most_every_broadcast_interval_updates(interval: int) -> None:
    _, events, _ = run(impala.plan(small_impala(broadcast_interval=interval)), "reference", 12)
    sent: dict[int, list[int]] = {0: [], 1: []}
    for e in events:
        if "load_weights_if_sent" in e.op and isinstance(e.item.value, Reply) and e.item.value.weights:
            assert e.shard is not None
            sent[e.shard].append(e.item.value.weights.version)
    for versions in sent.values():
        assert versions and versions[0] >= interval
        assert all(b - a >= interval for a, b in itertools.pairwise(versions))
        if interval == 1:  # every update reaches every worker (in order, none skipped twice)
            assert versions == sorted(versions) and versions[-1] >= 9


def test_each_record_reports_its_batch_staleness_in_the_metrics_row() -> None:
    records, _, _ = run(impala.plan(small_impala()), "reference", 6)
    row = records[-1].as_row()
    assert {"train/staleness_mean", "train/staleness_min", "train/staleness_max",
            "train/fragments", "train/rho_mean"} <= set(row)
    assert row["train/staleness_max"] >= row["train/staleness_mean"] >= row["train/staleness_min"] >= 0
    first = records[0].train
    assert isinstance(first, VTraceMetrics) and first.staleness_max == 0  # the initial weights


@pytest.mark.parametrize(("settings", "message"), [
    ({"learner": IMPALAConfig(minibatch_size=12)},
     r"IMPALA.learner.minibatch_size \(12\) must be a multiple of IMPALA.fragment_length \(8\)"),
    ({"learner": IMPALAConfig(minibatch_size=64)},
     r"IMPALA.learner.minibatch_size \(64\) must not exceed a batch \(32 transitions"),
    ({"broadcast_interval": 0}, r"IMPALA.broadcast_interval must be an integer >= 1, got 0"),
    ({"max_in_flight": 0}, r"IMPALA.max_in_flight must be an integer >= 1, got 0"),
    ({"lam": 1.5}, r"IMPALA.lam must be a number in \[0.0, 1.0\], got 1.5"),
])
def test_bad_settings_name_the_field(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        small_impala(**settings)


AGGREGATED_SHAPE = """\
from_actors(RolloutWorker×4, RolloutWorker.sample_fragment)  [×4 shards]
| subset(0..1)  [×2 shards]
| gather(max_in_flight=1, tagged=True)
| window(2)"""


@pytest.mark.parametrize(("algo", "backend"), [("impala", "reference"), ("impala", "rx"),
                                               ("impala", "ray"), ("appo", "reference")])
@pytest.mark.timeout(180)
def test_with_aggregators_the_driver_handles_one_item_per_batch(
        algo: str, backend: str, request: pytest.FixtureRequest) -> None:
    """``num_aggregators``: each aggregator gathers its part's fragments into a batch's worth;
    the learner gets each batch whole (on Ray by reference: the driver never holds it), the
    senders due get weights, and a concurrent backend's run replays from its trace."""
    if backend == "ray":
        request.getfixturevalue("ray_session")
    settings: dict[str, Any] = {"num_workers": 4, "num_aggregators": 2}

    def build() -> rxrl.Plan[Metrics]:
        if algo == "impala":
            return impala.plan(small_impala(**settings))
        return appo.plan(small_appo(**settings))

    shown = [line.lstrip("│├└─ ") for line in rxrl.show(build()).splitlines()]
    assert "\n".join(shown[4:8]) == AGGREGATED_SHAPE  # the first sub-plan
    assert shown[3] == "aggregate(batches_of_part(1, 2, ...), num_aggregators=2)  [×2 shards]"
    records, events, trace = run(build(), backend, 6)
    assert [r.env_steps_trained for r in records] == [32 * (i + 1) for i in range(6)]
    learned = [e for e in events if "learn_on_fragments" in e.op]
    assert len(learned) >= 6  # one call per batch of two fragments, not one per fragment
    if backend != "ray":
        assert all(len(e.item) == 2 and {t.shard // 2 for t in e.item} in ({0}, {1}) for e in learned)
    else:
        assert all(type(e.item).__name__ == "Ref" and e.item.local is None for e in learned)
    replies = [e for e in events if "load_weights_if_sent" in e.op]
    assert replies and all(e.shard == tag_of(e.item).shard for e in replies)
    assert all(tag_of(e.item).value.weights is not None for e in replies)  # only replies with weights
    if backend != "reference":
        replayed = list(rxrl.run(build() | ops.take(6), "reference", schedule=trace))
        for rerun, recorded in zip(replayed, records, strict=True):
            a, b = deterministic_fields(rerun), deterministic_fields(recorded)
            assert a.keys() == b.keys() and all(same(a[k], b[k]) for k in a), (a, b)


@pytest.mark.parametrize("backend", ["reference", "ray"])
@pytest.mark.timeout(180)
def test_aggregated_by_placement_each_aggregator_reads_the_workers_placed_alike(
        backend: str, request: pytest.FixtureRequest) -> None:
    """``aggregate_by="placement"`` with ``placement.workers="rack=r1|disk=ssd"`` (labels the
    test session's Ray node has both of): workers 0 and 2 under one aggregator, 1 and 3 under
    the other; a Ray run replays from its trace."""
    if backend == "ray":
        request.getfixturevalue("ray_session")
    config = small_impala(num_workers=4, num_aggregators=2, aggregate_by="placement",
                          placement=PlacementSettings(workers="rack=r1|disk=ssd"))
    shown = [line.lstrip("│├└─ ") for line in rxrl.show(impala.plan(config)).splitlines()]
    assert shown[3] == "aggregate(batches_of_part(1, 2, ...), placements=[rack=r1, disk=ssd])  [×2 shards]"
    assert shown[5] == "| subset(0, 2)  [×2 shards]"
    records, events, trace = run(impala.plan(config), backend, 6)
    assert [r.env_steps_trained for r in records] == [32 * (i + 1) for i in range(6)]
    if backend == "reference":
        learned = [e for e in events if "learn_on_fragments" in e.op]
        assert learned and all({t.shard % 2 for t in e.item} in ({0}, {1}) for e in learned)
    else:
        replayed = list(rxrl.run(impala.plan(config) | ops.take(6), "reference", schedule=trace))
        for rerun, recorded in zip(replayed, records, strict=True):
            a, b = deterministic_fields(rerun), deterministic_fields(recorded)
            assert a.keys() == b.keys() and all(same(a[k], b[k]) for k in a), (a, b)


@pytest.mark.parametrize(("settings", "message"), [
    ({"num_aggregators": 2, "aggregate_by": "placement"}, "needs a placement per worker"),
    ({"num_aggregators": 3, "aggregate_by": "placement", "placement": PlacementSettings(workers="a=1|b=2")},
     r"num_aggregators \(3\) must be the number of the workers' placements \(2: a=1, b=2\)"),
    ({"aggregate_by": "node"}, r"aggregate_by must be one of \['index', 'placement'\]"),
])
def test_bad_aggregation_settings_are_one_line(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        small_impala(num_workers=4, **settings)
    with pytest.raises(ValueError, match="a placement per actor takes node labels only"):
        PlacementSettings(workers="zone=a|spread")


def test_more_aggregators_than_workers_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"IMPALA.num_aggregators \(3\) must not exceed num_workers \(2\)"):
        small_impala(num_aggregators=3)
