"""What the plans promise about actors: PPO's weights reach every worker between rounds; A3C's
weights go back only to the worker whose gradients produced them; assembling the batch on
the learner changes nothing but where it happens."""

from __future__ import annotations

import pytest

import rxrl
from rxrl import ops
from rxrl.actors import Tagged
from rxrl.algos.common import Progress, set_weights, train_and_get_weights
from rxrl.algos.on_policy import a2c, a3c, ppo
from rxrl.rl import Metrics, PPOConfig, RolloutWorker, SampleBatch, standardize
from rxrl.training.checkpoint import deterministic_fields


def test_ppo_broadcasts_the_new_weights_to_every_worker_before_its_next_fragment() -> None:
    config = ppo.PPO(num_envs_per_worker=2, fragment_length=16, train_batch_size=64,
                     learner=PPOConfig(minibatch_size=32, num_epochs=1))
    events: list[rxrl.Event] = []
    list(rxrl.run(ppo.plan(config) | ops.take(3), on_event=events.append))
    # per worker: the sequence of samples (emits of the source) and weight loads (broadcasts)
    for shard in (0, 1):
        seq = [("sample" if e.kind == "emit" else "weights") for e in events
               if e.shard == shard and ((e.kind == "emit" and e.op.startswith("from_actors"))
                                        or (e.kind == "call" and e.op.startswith("broadcast")))]
        # 64 rows = one round of 2 workers x 2 envs x 16 steps: one fragment per update
        assert seq == ["sample", "weights"] * 3


def test_a2c_with_a_batch_of_two_rounds_samples_twice_per_update() -> None:
    config = a2c.A2C(num_envs_per_worker=2, fragment_length=16, train_batch_size=128)
    events: list[rxrl.Event] = []
    list(rxrl.run(a2c.plan(config) | ops.take(2), on_event=events.append))
    seq = [("sample" if e.kind == "emit" else "weights") for e in events
           if e.shard == 0 and ((e.kind == "emit" and e.op.startswith("from_actors"))
                                or (e.kind == "call" and e.op.startswith("broadcast")))]
    assert seq == ["sample", "sample", "weights"] * 2


def test_a3c_sends_weights_only_to_the_worker_that_sent_the_gradients() -> None:
    config = a3c.A3C(num_workers=3, num_envs_per_worker=2, fragment_length=8)
    events: list[rxrl.Event] = []
    records = list(rxrl.run(a3c.plan(config) | ops.take(9), schedule=rxrl.Schedule.random(2),
                            on_event=events.append))
    assert [m.train.num_updates if m.train else 0 for m in records] == [1] * 9
    replies = [e for e in events if e.kind == "call" and "set_weights_of_sender" in e.op]
    assert len(replies) == 9
    for e in replies:
        assert isinstance(e.item, Tagged)
        assert e.shard == e.item.shard  # the reply went to the sender, and to nobody else
    assert {e.shard for e in replies} == {0, 1, 2}
    assert not [e for e in events if e.kind == "call" and e.op.startswith("broadcast")]


def driver_side_ppo(config: ppo.PPO) -> rxrl.Plan[Metrics]:
    """PPO as it reads in textbook form: the batch is assembled and standardized on the
    driver, then sent to the learner (what `ppo.plan` does on the learner instead)."""
    workers, learner = ppo.groups(config).pair
    progress = Progress()
    return (rxrl.from_actors(workers, RolloutWorker.sample) | ops.barrier()
            | ops.map(SampleBatch.concat)
            | ops.window(min_size=config.train_batch_size, combine=SampleBatch.concat)
            | ops.map(standardize("advantages")) | ops.tap(progress.observe_samples)
            | ops.call(learner, train_and_get_weights) | ops.broadcast(workers, set_weights)
            | ops.map(progress.observe_trained))


@pytest.mark.parametrize("train_batch_size", [64, 96, 128])
def test_assembling_the_batch_on_the_learner_trains_exactly_as_on_the_driver(
        train_batch_size: int) -> None:
    """Law: `ppo.plan` (fragments to the learner, concatenated and standardized there) yields
    the same records as the driver-side pipeline, for batches of one round (64 rows) and of
    several (96 and 128 rows: two rounds each)."""
    config = ppo.PPO(num_envs_per_worker=2, fragment_length=16, train_batch_size=train_batch_size,
                     learner=PPOConfig(minibatch_size=32, num_epochs=2), seed=5)
    ours = [deterministic_fields(m) for m in rxrl.run(ppo.plan(config) | ops.take(3))]
    textbook = [deterministic_fields(m) for m in rxrl.run(driver_side_ppo(config) | ops.take(3))]
    assert ours == textbook
    assert ours[-1]["env_steps_trained"] == 3 * (64 if train_batch_size == 64 else 128)
