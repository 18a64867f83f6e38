"""The DQN and Ape-X plans: their shapes, every backend, bit-for-bit reproducibility, readiness
before learning_starts, the training intensity, Ape-X's routing and weight syncs, a Ray run
replayed from its trace, and learning smoke tests."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest

import rxrl
from rxrl import ops
from rxrl.actors import Tagged
from rxrl.algos.qlearning import apex, dqn
from rxrl.algos.qlearning.steps import QProgress, Stored
from rxrl.rl import DQNConfig, DQNLearner, Metrics, QNetConfig, ReplayConfig, TrainMetrics, Weights
from rxrl.training.checkpoint import deterministic_fields
from tests.algos.records import identical, records

DQN_SHAPE = """\
concurrently(mode='round_robin', emit=[0])
├─ from_actors(ReplayShard×1, sample_batches)  [×1 shards]
│  | gather(max_in_flight=1)
│  | call(DQNLearner×1, train_on_batches, max_in_flight=2)
│  | broadcast(QRolloutWorker×2, set_q_weights)
│  | map(QProgress.observe_trained)
└─ from_actors(QRolloutWorker×2, QRolloutWorker.sample)  [×2 shards]
   | barrier()
   | call(ReplayShard×1, store_round)
   | map(QProgress.observe_stored_round)"""

APEX_SHAPE = """\
concurrently(mode='round_robin', emit=[0])
├─ from_actors(ReplayShard×2, sample_batches)  [×2 shards]
│  | gather(max_in_flight=1, tagged=True)
│  | call(DQNLearner×1, train_on_sample, max_in_flight=2)
│  | call(ReplayShard×2, update_priorities, max_in_flight=2)
└─ from_actors(QRolloutWorker×2, QRolloutWorker.sample)  [×2 shards]
   | gather(max_in_flight=2, tagged=True)
   | call(ReplayShard×2, store_sample)
   | map(QProgress.observe_stored)
   | call(DQNLearner×1, weights_if_due, max_in_flight=5)
   | call(QRolloutWorker×2, load_weights_if_sent, max_in_flight=5)
| flat_map(QProgress.report)"""

TINY_NET = QNetConfig(hidden_sizes=(16,))


def small_dqn(**kwargs: Any) -> dqn.DQN:
    """Rounds of 2 workers x 2 envs x 8 steps (32); training from 64 stored transitions on,
    2 calls of 2 batches of 16 per round (intensity 2)."""
    learner = DQNConfig(training_intensity=2.0, target_update_interval=4, q_net=TINY_NET,
                        replay=ReplayConfig(capacity=2000, batch_size=16, learning_starts=64))
    return dqn.DQN(**{"num_envs_per_worker": 2, "fragment_length": 8, "updates_per_call": 2,
                      "exploration_steps": 2000, "learner": learner, **kwargs})


def small_apex(**kwargs: Any) -> apex.ApeX:
    """2 workers sampling 8 steps, 2 prioritized shards training from 32 transitions each on,
    one call of 2 batches of 16 per sample (intensity 4), a record every 2 calls."""
    learner = DQNConfig(training_intensity=4.0, target_update_interval=4, q_net=TINY_NET,
                        replay=ReplayConfig(capacity=2000, batch_size=16, learning_starts=32,
                                            prioritized=True))
    return apex.ApeX(**{"fragment_length": 8, "updates_per_call": 2, "report_every": 2,
                        "learner": learner, **kwargs})


def test_dqn_runs_a_store_flow_beside_a_train_flow() -> None:
    assert rxrl.show(dqn.plan(dqn.DQN())) == DQN_SHAPE
    assert dqn.DQN().calls_per_round == 1.0  # intensity 32 x 32 steps / (128 x 8 per call)
    assert small_dqn().calls_per_round == 2.0


def test_apex_samples_stores_trains_and_routes_asynchronously() -> None:
    assert rxrl.show(apex.plan(apex.ApeX())) == APEX_SHAPE
    assert apex.ApeX().calls_per_sample == 1.0  # intensity 32 x 16 steps / (128 x 4 per call)
    assert apex.ApeX(num_workers=3).reporting == [2]


@pytest.mark.parametrize("backend", ["reference", "rx", "ray"])
@pytest.mark.timeout(180)
def test_dqn_gives_the_same_records_on_every_backend(backend: str, request: pytest.FixtureRequest) -> None:
    """DQN has no choice point (one replay shard, round-robin weights): every backend runs
    the reference's run."""
    if backend == "ray":
        request.getfixturevalue("ray_session")
    expected, _ = records(dqn.plan(small_dqn()), 12)
    got, _ = records(dqn.plan(small_dqn()), 12, backend)
    assert identical(got, expected)
    assert got[-1]["train/num_updates"] == 2 and got[-1]["env_steps_trained"] == 12 * 2 * 16


def learner_weights(learner: DQNLearner, _: Metrics) -> Weights:
    """The learner's weights after the call a record reports."""
    return learner.get_weights()


def dqn_run(seed: int) -> tuple[list[dict[str, float]], Weights]:
    """Ten records of a small DQN run and the learner's final weights."""
    config = small_dqn(seed=seed)
    actors = dqn.groups(config)
    seen: list[dict[str, float]] = []
    plan = (dqn.plan(config, actors) | ops.tap(lambda m: seen.append(deterministic_fields(m)))
            | ops.call(actors.learner, learner_weights) | ops.take(10))
    return seen, list(rxrl.run(plan, "reference"))[-1]


def test_dqn_is_reproducible_bit_for_bit_from_its_seed() -> None:
    first, weights = dqn_run(seed=3)
    again, weights_again = dqn_run(seed=3)
    assert identical(first, again)
    assert all(np.array_equal(weights[k], weights_again[k]) for k in weights)
    other, other_weights = dqn_run(seed=4)
    assert not identical(first, other)
    assert not all(np.array_equal(weights[k], other_weights[k]) for k in weights)


def test_nothing_is_replayed_before_the_replay_holds_learning_starts() -> None:
    """The replay answers NOT_READY below learning_starts: the first learner call follows the
    round that brought it to 64 transitions (two rounds of 32, less the n-step hold-back:
    three), and no sample is taken from it before."""
    events: list[rxrl.Event] = []
    list(rxrl.run(dqn.plan(small_dqn()) | ops.take(2), on_event=events.append))
    calls = [e.op for e in events if e.kind == "call"]
    first_train = next(i for i, op in enumerate(calls) if "train_on_batches" in op)
    assert sum("store_round" in op for op in calls[:first_train]) == 3
    samples = [e for e in events if e.kind == "emit" and "sample_batches" in e.op]
    assert samples and all(len(e.item) == 2 for e in samples)  # updates_per_call batches each
    not_ready = [e for e in events if e.kind == "not_ready" and "sample_batches" in e.op]
    assert not_ready  # asked while filling, once per store, never polled in a loop
    assert len(not_ready) <= 3


def test_the_training_intensity_holds_exactly() -> None:
    """After learning starts, each round (2 workers x 2 envs x 8 steps) is followed by 2 learner
    calls of 2 x 16 replayed transitions: 2 replayed per env step sampled, the intensity."""
    got, _ = records(dqn.plan(small_dqn()), 40)
    assert [r["env_steps_trained"] for r in got] == [32.0 * k for k in range(1, 41)]
    rounds = [r["env_steps_sampled"] for r in got]
    assert rounds[::2] == rounds[1::2]  # two calls per round
    assert all(0 < b - a <= 32 for a, b in zip(rounds[::2], rounds[2::2], strict=False))


def test_dqn_workers_sample_only_with_the_latest_weights() -> None:
    """Once training runs, every worker receives the new weights between two of its samples."""
    events: list[rxrl.Event] = []
    list(rxrl.run(dqn.plan(small_dqn()) | ops.take(8), on_event=events.append))
    for shard in (0, 1):
        seq = "".join("s" if e.kind == "emit" else "w" for e in events if e.shard == shard and (
            (e.kind == "emit" and e.op.startswith("from_actors(QRolloutWorker"))
            or (e.kind == "call" and e.op.startswith("broadcast"))))
        assert seq.startswith("sss") and "ss" not in seq[2:] and seq.count("w") == 8


def test_apex_routes_priorities_to_their_shard_and_weights_to_their_worker() -> None:
    events: list[rxrl.Event] = []
    list(rxrl.run(apex.plan(small_apex()) | ops.take(10), schedule=rxrl.Schedule.random(4),
                  on_event=events.append))
    routed = {"update_priorities": [], "load_weights_if_sent": []}  # type: dict[str, list[rxrl.Event]]
    for e in events:
        for name, seen in routed.items():
            if e.kind == "call" and f", {name}" in e.op:
                seen.append(e)
    for seen in routed.values():
        assert {e.shard for e in seen} == {0, 1}
        assert all(isinstance(e.item, Tagged) and e.item.shard == e.shard for e in seen)
    # max_weight_sync_delay 1: every sample brings its worker new weights
    sent = [e.item.value is not None for e in routed["load_weights_if_sent"]]
    assert all(sent)


def test_apex_syncs_a_worker_once_max_weight_sync_delay_steps_passed() -> None:
    events: list[rxrl.Event] = []
    list(rxrl.run(apex.plan(small_apex(max_weight_sync_delay=20)) | ops.take(10), on_event=events.append))
    for worker in (0, 1):
        sent = ["w" if e.item.value is not None else "-" for e in events
                if e.kind == "call" and ", load_weights_if_sent" in e.op and e.shard == worker]
        # samples of at most 8 steps (fewer when an episode ended): at least 3 to reach 20
        text = "".join(sent)
        assert text.count("w") >= 2
        assert all(text[max(0, i - 2):i] == "--" for i, c in enumerate(text) if c == "w")


def test_apex_reports_the_episodes_of_the_lowest_epsilon_workers_and_every_env_step() -> None:
    progress = QProgress(num_workers=3, reporting=[2], sync_delay=100)
    returns, lengths = np.array([10.0], np.float32), np.array([10])
    for worker in (0, 1, 2):
        due = progress.observe_stored(Tagged(Stored(returns * (worker + 1), lengths, 8), worker))
        assert due.value is False and due.shard == worker
    record = progress.report(TrainMetrics(0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.5, 16, 1, 0.01))[0]
    assert record.env_steps_sampled == 24 and record.episodes == 1
    assert record.episode_return_mean == 30.0 and record.env_steps_trained == 16


@pytest.mark.parametrize("backend", ["rx", "ray"])
@pytest.mark.timeout(180)
def test_a_concurrent_apex_run_is_replayed_exactly_from_its_trace(backend: str,
                                                                  request: pytest.FixtureRequest) -> None:
    if backend == "ray":
        request.getfixturevalue("ray_session")
    got, trace = records(apex.plan(small_apex()), 12, backend)
    assert trace.backend == backend and len(trace) > 12
    replayed, _ = records(apex.plan(small_apex()), 12, schedule=trace)
    assert identical(replayed, got)
    assert got[-1]["env_steps_trained"] == 12 * 2 * 2 * 16  # report_every x updates x batch


def test_dqn_learns_cartpole_a_little_in_a_few_thousand_steps() -> None:
    """Smoke test: 7k env steps of training lift the mean return from a random policy's ~20
    to over 50 (exploration decays over the first 3k steps)."""
    config = dqn.DQN(exploration_steps=30_000, learner=attrs.evolve(
        DQNConfig(), replay=ReplayConfig(capacity=10_000, batch_size=64, learning_starts=1000),
        q_net=QNetConfig(hidden_sizes=(64, 64))))
    plan = dqn.plan(config) | ops.filter(lambda m: m.env_steps_sampled >= 8000) | ops.take(1)
    first = next(iter(rxrl.run(dqn.plan(config) | ops.take(1))))
    last = next(iter(rxrl.run(plan)))
    assert first.episode_return_mean < 25 and first.env_steps_sampled < 1100
    assert last.episode_return_mean > 50
