"""What the plans promise about actors: PPO's weights reach every worker between rounds; A3C's
weights go back only to the worker whose gradients produced them."""

from __future__ import annotations

import rxrl
from rxrl import ops
from rxrl.actors import Tagged
from rxrl.algos import a2c, a3c, ppo
from rxrl.rl import PPOConfig


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
