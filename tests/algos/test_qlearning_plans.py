"""The DQN and Ape-X plans: their shapes, every backend, bit-for-bit reproducibility, readiness
before learning_starts, the training intensity, Ape-X's routing and weight syncs, a Ray run
replayed from its trace, learning smoke tests, and workers and replay shards without torch."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import torch

import rxrl
from rxrl import ops
from rxrl.actors import Tagged
from rxrl.algos.common import AutoLearnerPlacement, Start
from rxrl.algos.qlearning import apex, dqn, sac
from rxrl.algos.qlearning.common import (
    EnvSteps,
    Pickled,
    QWorkerFactory,
    ReplayPlacement,
    ShardFactory,
    learner_state_if_due,
    shard_state_if_due,
    snapshot,
)
from rxrl.algos.qlearning.sac import plan as sac_plan
from rxrl.algos.qlearning.steps import QProgress, Stored
from rxrl.algos.spec import Snapshot
from rxrl.rl import DQNConfig, DQNLearner, Metrics, QNetConfig, ReplayConfig, TrainMetrics, Weights
from rxrl.rl.models.qforward import NumpyQNetwork
from rxrl.rl.models.qnet import QNetwork
from rxrl.training.checkpoint import CheckpointClock, deterministic_fields, tensors_of
from rxrl.training.setup import TORCH_FREE_PRELOAD, WORKER_PRELOAD, ray_init_options
from tests.algos.records import identical, records
from tests.cli.helpers import ROOT, environment
from tests.rl import torch_probe
from tests.rl.test_cnn import PIXELS_ID

DQN_SHAPE = """\
concurrently(mode='round_robin', emit=[0])
├─ from_actors(ReplayShard×1 on the driver, sample_batches)  [×1 shards]
│  | gather(max_in_flight=1)
│  | call(DQNLearner×1 on the driver, train_on_batches, max_in_flight=2)
│  | broadcast(QRolloutWorker×2, set_q_weights)
│  | map(QProgress.observe_trained)
└─ from_actors(QRolloutWorker×2, QRolloutWorker.sample)  [×2 shards]
   | barrier()
   | call(ReplayShard×1 on the driver, store_round)
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


@pytest.mark.parametrize(("backend", "placement", "replay"), [
    ("reference", "auto", "auto"), ("rx", "auto", "auto"), ("ray", "auto", "auto"), ("ray", "actor", "auto"),
    ("ray", "actor", "actor"), ("ray", "driver", "actor"), ("ray", "driver", "driver")])
@pytest.mark.timeout(180)
def test_dqn_gives_the_same_records_on_every_backend(backend: str, placement: AutoLearnerPlacement,
                                                     replay: ReplayPlacement,
                                                     request: pytest.FixtureRequest) -> None:
    """DQN has no choice point (one replay shard, round-robin weights): every backend runs
    the reference's run, with its learner (and its replay) in a process or on the driver
    (``"auto"``: CartPole's replay, and so its learner, on the driver)."""
    if backend == "ray":
        request.getfixturevalue("ray_session")
    expected, _ = records(dqn.plan(small_dqn()), 12)
    config = small_dqn(learner_placement=placement, replay_placement=replay)
    assert ("ReplayShard×1 on the driver" in rxrl.show(dqn.plan(config))) is (replay != "actor")
    got, _ = records(dqn.plan(config), 12, backend)
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


@pytest.mark.parametrize("backend", ["reference", "rx", "ray"])
@pytest.mark.timeout(180)
def test_with_exact_intensity_the_learner_never_trains_ahead_of_the_samples(
        backend: str, request: pytest.FixtureRequest) -> None:
    """``exact_intensity``: at every record, the transitions replayed are at most the intensity
    (2) times the env steps stored past ``learning_starts`` (64), on every backend; without
    it the plan's first call already exceeds that (it trains from the round the replay is
    ready); on the reference, the learner keeps within one round of the limit."""
    if backend == "ray":
        request.getfixturevalue("ray_session")
    assert "from_actors(ReplayShard×1 on the driver, sample_batches_within_intensity)" in rxrl.show(
        dqn.plan(small_dqn(exact_intensity=True)))
    got, _ = records(dqn.plan(small_dqn(exact_intensity=True)), 24, backend)
    # a concurrent backend may report a call before the round it was granted on: the replay
    # got the round, the driver's count not yet (one store call in flight: one round, 32 steps)
    unseen = 0 if backend == "reference" else 32
    lead = 64  # learner_queue 2: two calls (2 batches of 16 each) may be granted ahead
    assert all(r["env_steps_trained"] <= 2 * max(0, r["env_steps_sampled"] + unseen - 64) + lead
               for r in got)
    # the round robin counts rounds of 32 env steps; they hold ~30 (an episode's autoreset step
    # stores no transition): without the limit the learner drifts past it within 24 calls
    plain, _ = records(dqn.plan(small_dqn()), 24)
    assert any(r["env_steps_trained"] > 2 * max(0, r["env_steps_sampled"] - 64) + lead for r in plain)
    if backend == "reference":
        last = got[-1]
        assert last["env_steps_trained"] >= 2 * (last["env_steps_sampled"] - 64) - 2 * 32


def test_apex_with_exact_intensity_holds_each_shard_to_it() -> None:
    """Ape-X's shards each hold the learner to the intensity (4) by their own env steps past
    ``learning_starts`` (32): the run goes on (no deadlock), never past 4 per env step stored
    beyond 32 plus ``learner_queue`` calls (32 each) per shard ahead (the shards' budgets add
    up to at most that),
    and it samples more before each call than the plain plan, which trains by turns."""
    got, _ = records(apex.plan(small_apex(exact_intensity=True)), 24)
    plain, _ = records(apex.plan(small_apex()), 24)
    assert [r["env_steps_trained"] for r in got] == [r["env_steps_trained"] for r in plain]
    ahead = 2 * small_apex().learner_queue * 32  # 2 shards
    assert all(r["env_steps_trained"] <= 4 * max(0, r["env_steps_sampled"] - 32) + ahead for r in got)
    sampled = [(r["env_steps_sampled"], p["env_steps_sampled"]) for r, p in zip(got, plain, strict=True)]
    assert all(a >= b for a, b in sampled) and any(a > b for a, b in sampled)


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


# -- torch-free workers and replay (issue 23: memory) ------------------------------------------


def test_dqn_and_apex_workers_and_shards_are_torch_free_and_their_ray_preloads_no_torch() -> None:
    """An MLP Q-network's workers act in numpy from `InitialWeights` (the learner's initial
    weights) and the shards need no torch: both factories say so through `Pickled`, so the
    local Ray preloads no torch; SAC's torch workers keep it, and a CNN's workers are torch's."""
    dqn_groups, apex_groups = dqn.groups(small_dqn()), apex.groups(small_apex())
    plans = (dqn.plan(small_dqn(), dqn_groups), apex.plan(small_apex(), apex_groups))
    for plan, g in zip(plans, (dqn_groups, apex_groups), strict=True):
        for group in (g.workers, g.replay):
            assert isinstance(group.make, Pickled) and group.make.torch_free, group
        assert not getattr(g.learner.make, "torch_free", False)
        options = ray_init_options(plan)
        assert options["_system_config"]["preload_python_modules"] == list(TORCH_FREE_PRELOAD)
    factory = QWorkerFactory(small_dqn(), small_dqn().epsilon)
    assert factory.torch_free and factory.initial is not None
    worker = factory(1)
    assert isinstance(worker.q_net, NumpyQNetwork)
    initial = DQNLearner("CartPole-v1", small_dqn().learner, seed=0).get_weights()
    assert all(np.array_equal(v, worker.get_weights()[k]) for k, v in initial.items())
    options = ray_init_options(sac_plan(sac.SAC()))
    assert options["_system_config"]["preload_python_modules"] == list(WORKER_PRELOAD)
    cnn = QWorkerFactory(small_dqn(env=PIXELS_ID), small_dqn().epsilon)
    assert not cnn.torch_free and cnn.initial is None and isinstance(cnn(0).q_net, QNetwork)


def a_record() -> Metrics:
    """A record of nothing done yet."""
    return Metrics(0, 0, 0, 0, float("nan"), float("nan"), float("nan"), float("nan"), 0.0, 0.0)


#: run in a fresh process with the pickles of a DQN plan's worker and shard factories (new and
#: resumed), a learner's weights and a due record carrying its state: what the actors' processes
#: do with them, and whether that imported torch
ACTORS_WITHOUT_TORCH = """
import pickle, sys
from rxrl.algos.qlearning.common import shard_state_if_due
blobs = pickle.loads(open(sys.argv[1], "rb").read())
for workers, shards in blobs["factories"]:
    worker, shard = pickle.loads(workers)(1), pickle.loads(shards)(0)
    for _ in range(6):  # past learning_starts
        shard.add(worker.sample())
    worker.set_weights(pickle.loads(blobs["weights"]))
    assert len(shard.sample()) == 16
    record = shard_state_if_due(shard, pickle.loads(blobs["record"]))
    shard.load_state_dict(pickle.loads(pickle.dumps(record.state["replay"][-1])))
print("torch" in sys.modules)
"""


def test_a_dqn_worker_and_shard_built_from_their_factories_never_import_torch(tmp_path: Path) -> None:
    """Their processes build them from the factories' pickles, sample, store, replay, load
    weights and add the replay to a checkpoint record (whose learner state is packed: its
    tensors stay unpickled), new or resumed from a checkpoint holding tensors: no torch."""
    config = small_dqn()
    learner = DQNLearner("CartPole-v1", config.learner, seed=0)
    shard = ShardFactory(config)(0)
    shard.add(QWorkerFactory(config, config.epsilon)(0).sample())
    state = {**learner.state_dict(), "replay": [tensors_of(shard.state_dict())], "env_steps_sampled": 64}
    factories = []
    for start in (None, Start(state, reseed=1)):
        g = dqn.groups(config, start)
        factories.append((pickle.dumps(g.workers.make), pickle.dumps(g.replay.make)))
    due = learner_state_if_due(learner, Snapshot(a_record(), True))
    blob = {"factories": factories, "weights": pickle.dumps(learner.get_weights()),
            "record": pickle.dumps(due)}
    (tmp_path / "blobs.pkl").write_bytes(pickle.dumps(blob))
    done = subprocess.run([sys.executable, "-c", ACTORS_WITHOUT_TORCH, str(tmp_path / "blobs.pkl")], cwd=ROOT,
                          env=environment(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_a_checkpoint_record_holds_the_learner_state_unpacked_and_the_replay() -> None:
    """What the shards pass on packed (`PackedState`), the driver's last step unpacks: the
    record's state is the learner's state dict, the shards' buffers and the env steps."""
    config = small_dqn()
    learner, shard = DQNLearner("CartPole-v1", config.learner, seed=0), ShardFactory(config)(0)
    shard.add(QWorkerFactory(config, config.epsilon)(0).sample())
    assert shard.num_added > 0
    record = shard_state_if_due(shard, learner_state_if_due(learner, Snapshot(a_record(), True)))
    state = EnvSteps(100)(record).state
    assert state is not None and state.keys() == {*learner.state_dict(), "replay", "env_steps_sampled"}
    assert state["env_steps_sampled"] == 100 and state["replay"][0]["buffer"]["num_added"] == shard.num_added
    for name, tensor in learner.state_dict()["policy"].items():
        assert torch.equal(state["policy"][name], tensor), name


def no_probes(_: Snapshot) -> list[bool]:
    """The probes' results so far: none."""
    return []


@pytest.mark.timeout(300)
def test_dqn_on_ray_runs_workers_and_a_shard_that_never_import_torch(ray_session: None) -> None:
    """A DQN run on Ray with checkpoint records (the learner's state passing the shard): its
    workers' and shard's processes have no torch (the shard in a process of its own)."""
    config = small_dqn(replay_placement="actor")
    g = dqn.groups(config)
    clock = CheckpointClock(every=32, final=10**6)
    plan = (dqn.plan(config, g) | ops.map(clock.mark) | snapshot(1)(g)
            | ops.filter(lambda s: s.metrics.env_steps_trained > 0 and s.state is not None) | ops.take(2)
            | ops.map(no_probes)  # not the record: its state (tensors) is the driver's
            | ops.call(g.replay, torch_probe.torch_loaded)
            | ops.call(g.workers, torch_probe.torch_loaded, route=torch_probe.To(0))
            | ops.call(g.workers, torch_probe.torch_loaded, route=torch_probe.To(1)))
    with rxrl.run(plan, "ray") as run:
        seen = list(run)
    assert seen and all(record == [False, False, False] for record in seen), seen


def test_dqn_decays_its_learning_rate_over_twice_the_run_unless_told_otherwise() -> None:
    """`DQN.lr_decay` (2.0): the learner's rate reaches 0 after twice ``exploration_steps`` (the
    run's ``--steps``), halfway by the end of the run; None keeps it constant; a learner
    setting of its own wins; anything but a positive number is refused in one line."""
    assert dqn.DQN(exploration_steps=1000).learner_settings().lr_decay_steps == 2000
    assert dqn.DQN(exploration_steps=1000, lr_decay=None).learner_settings().lr_decay_steps is None
    own = dqn.DQN(exploration_steps=1000, learner=attrs.evolve(dqn.LEARNER, lr_decay_steps=7))
    assert own.learner_settings().lr_decay_steps == 7
    for bad in (0, -1.0, float("nan"), True):
        with pytest.raises(ValueError, match=r"^DQN.lr_decay must be a positive number, got "):
            dqn.DQN(lr_decay=bad)


# -- Ape-X with aggregators (issue 25) ---------------------------------------------------------


@pytest.mark.parametrize("backend", ["reference", "rx", "ray"])
@pytest.mark.timeout(180)
def test_apex_with_aggregators_stores_a_list_per_driver_item_and_replays(
        backend: str, request: pytest.FixtureRequest) -> None:
    """``num_aggregators``: each aggregator gathers its part's samples into lists, a list is
    stored at once, weights go to the workers due them only; a concurrent run replays."""
    if backend == "ray":
        request.getfixturevalue("ray_session")

    def build() -> rxrl.Plan[Metrics]:
        return apex.plan(small_apex(num_workers=4, num_aggregators=2, max_weight_sync_delay=20))

    shown = rxrl.show(build())
    assert "aggregate(samples_of_part(2, ...), num_aggregators=2)" in shown
    events: list[rxrl.Event] = []
    keep = lambda e: events.append(e) if e.kind == "call" else None
    schedule = rxrl.Schedule.random(3) if backend == "reference" else None
    with rxrl.run(build() | ops.take(8), backend, on_event=keep, schedule=schedule) as run:
        got = list(run)
        trace = run.trace
    stores = [e for e in events if ", store_samples" in e.op]
    loads = [e for e in events if ", load_weights_if_sent" in e.op]
    assert stores and (backend == "ray" or all(len(e.item) == 2 for e in stores))
    tags = [e.item if isinstance(e.item, Tagged) else e.item.tag for e in loads]  # Ray: a Ref's tag
    assert loads and all(t.shard == e.shard for t, e in zip(tags, loads, strict=True))
    assert backend == "ray" or all(e.item.value is not None for e in loads)  # the due ones only
    assert got[-1].env_steps_trained == 8 * 2 * 2 * 16
    if backend != "reference":
        replayed, _ = records(build(), 8, schedule=trace)
        assert identical(replayed, [deterministic_fields(m) for m in got])


def test_apex_refuses_more_aggregators_than_workers() -> None:
    with pytest.raises(ValueError, match=r"ApeX.num_aggregators \(3\) must not exceed num_workers \(2\)"):
        small_apex(num_aggregators=3)
