"""Plans that must type-check under mypy --strict, with the item types mypy must infer."""

from collections.abc import Sized
from typing import assert_type

import rxrl
from rxrl import ops


class Worker:
    def __init__(self, env: str, seed: int = 0) -> None:
        self.env = env

    def sample(self) -> list[float]:
        return [1.0]

    def set_weights(self, w: dict[str, float]) -> None:
        pass


class Learner:
    def train(self, batch: list[float]) -> dict[str, float]:
        return {"loss": sum(batch)}


workers = rxrl.actors(Worker, 2, env="CartPole-v1", seed=3)
assert_type(workers, rxrl.ActorGroup[Worker])
learner = rxrl.actors(Learner, 1)

shards = rxrl.from_actors(workers, Worker.sample)
assert_type(shards, rxrl.Shards[list[float]])
local = shards | ops.map(lambda b: len(b))
assert_type(local, rxrl.Shards[int])

def concat(bs: list[list[float]]) -> list[float]:
    return [x for b in bs for x in b]


rounds = shards | ops.barrier()
assert_type(rounds, rxrl.Plan[list[list[float]]])
flat = rounds | ops.map(lambda bs: concat(bs))
assert_type(flat, rxrl.Plan[list[float]])
sized = flat | ops.window(min_size=100, combine=concat)
assert_type(sized, rxrl.Plan[list[float]])
trained = sized | ops.call(learner, Learner.train)
assert_type(trained, rxrl.Plan[dict[str, float]])
synced = trained | ops.broadcast(workers, lambda w, m: w.set_weights(m))
assert_type(synced, rxrl.Plan[dict[str, float]])

tagged = shards | ops.gather(2, tagged=True)
assert_type(tagged, rxrl.Plan[rxrl.Tagged[list[float]]])
untagged = shards | ops.gather()
assert_type(untagged, rxrl.Plan[list[float]])
routed = tagged | ops.call(workers, lambda w, t: t.with_value(len(t.value)))
assert_type(routed, rxrl.Plan[rxrl.Tagged[int]])

pairs = ops.zip(rxrl.from_iterable([1, 2]), rxrl.from_iterable(["a"]))
assert_type(pairs, rxrl.Plan[tuple[int, str]])
triples = ops.zip(pairs, rxrl.from_iterable([1.0]), rxrl.from_iterable([b""]))
assert_type(triples, rxrl.Plan[tuple[tuple[int, str], float, bytes]])
mixed = ops.union(rxrl.from_iterable([1]), rxrl.from_iterable([2]), mode="async")
assert_type(mixed, rxrl.Plan[int])
main = ops.alongside(pairs, rxrl.from_iterable([None]))
assert_type(main, rxrl.Plan[tuple[int, str]])
windows = rxrl.from_iterable("abc") | ops.window(2)
assert_type(windows, rxrl.Plan[list[str]])
totals = rxrl.from_iterable([1, 2]) | ops.scan(lambda acc, x: acc + x, 0.0)
assert_type(totals, rxrl.Plan[float])
run = rxrl.run(totals | ops.take(1))
assert_type(run, rxrl.Run[float])

# reusable segments
segment = ops.map(len) | ops.map(float)
assert_type(segment, rxrl.LocalOp[Sized, float])
assert_type(shards | segment, rxrl.Shards[float])
driver_segment = ops.map(concat) | ops.call(learner, Learner.train)
assert_type(rounds | driver_segment, rxrl.Plan[dict[str, float]])


# ---- fan-out, pipelined calls, readiness (issue 10)
class Replay:
    def add(self, batch: list[float]) -> int:
        return len(batch)

    def sample(self) -> list[float] | rxrl.NotReady:
        return rxrl.NOT_READY


replay = rxrl.actors(Replay, 1)
rollouts = rxrl.from_actors(workers, Worker.sample) | ops.gather()
to_ppo, to_dqn = ops.split(rollouts, 2)
assert_type(to_ppo, rxrl.Plan[list[float]])
assert_type(to_dqn, rxrl.Plan[list[float]])
three = ops.split(rollouts, 3, max_lag=4)
assert_type(three, tuple[rxrl.Plan[list[float]], rxrl.Plan[list[float]], rxrl.Plan[list[float]]])
many = ops.split(rollouts, 5)
assert_type(many, tuple[rxrl.Plan[list[float]], ...])
replayed = rxrl.from_actors(replay, Replay.sample)  # NotReady is not part of the item type
assert_type(replayed, rxrl.Shards[list[float]])
pipelined = (replayed | ops.gather()) | ops.call(learner, Learner.train, max_in_flight=2)
assert_type(pipelined, rxrl.Plan[dict[str, float]])
stored = to_dqn | ops.call(replay, Replay.add)
sizes = pipelined | ops.map(len)
mixed = ops.concurrently(stored, sizes, weights=[1, 2.5])  # training intensity 2.5
assert_type(mixed, rxrl.Plan[int])


# ---- recurrent policies (issue 24): sequences from the workers to a learner that takes them
from rxrl.algos.common import Trained, train_on_sequences  # noqa: E402
from rxrl.rl.data.sequences import SequenceBatch  # noqa: E402
from rxrl.rl.learners.actor_critic import PPOLearner  # noqa: E402
from rxrl.rl.workers.rollout import RolloutWorker  # noqa: E402

rollout_workers = rxrl.actors(RolloutWorker, 2, env="CartPole-v1")
ppo_learner = rxrl.actors(PPOLearner, 1, env="CartPole-v1")
sequence_rounds = rxrl.from_actors(rollout_workers, RolloutWorker.sample_sequences) | ops.barrier()
assert_type(sequence_rounds, rxrl.Plan[list[SequenceBatch]])
assert_type(sequence_rounds | ops.call(ppo_learner, train_on_sequences), rxrl.Plan[Trained])


# ---- learner groups (issue 25): a call on every member, one reply taken
def first_of(results: list[int]) -> int:
    return results[0]


members = rxrl.indexed_actors(lambda i: i, 2)
grouped: rxrl.Plan[int] = rxrl.from_iterable([1, 2]) | ops.call_all(members, lambda m, x: m + x, max_in_flight=2) | ops.map(first_of)


# ---- aggregators (issue 25): sub-plans over parts of a Shards, then collected as shards
def part_totals(part: rxrl.Shards[int]) -> rxrl.Plan[int]:
    return part | ops.barrier() | ops.map(sum)


counts = rxrl.from_iterables([[1, 2], [3], [4]])
assert_type(ops.aggregate(counts, part_totals, num_aggregators=2), rxrl.Shards[int])
assert_type(ops.aggregate(counts.subset([2, 0]), part_totals, num_aggregators=1) | ops.gather(tagged=True),
            rxrl.Plan[rxrl.Tagged[int]])
assert_type(ops.aggregate(counts, part_totals, placements=["zone=a", rxrl.Placement.parse("zone=b")]),
            rxrl.Shards[int])
assert_type(counts.subset_on("zone=a"), rxrl.Shards[int])
