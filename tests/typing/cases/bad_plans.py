"""Plans mypy --strict must reject; each `# E:` names a substring of the expected error."""

import rxrl
from rxrl import ops


class Worker:
    def __init__(self, env: str) -> None:
        self.env = env

    def sample(self) -> list[float]:
        return [1.0]


workers = rxrl.actors(Worker, 2, env=3)  # E: Argument "env" to "actors" has incompatible type "int"
good = rxrl.actors(Worker, 2, env="x")
shards = rxrl.from_actors(good, Worker.sample)
plan = shards | ops.barrier()

# zipping then mapping with a function of the wrong argument type
zipped = ops.zip(rxrl.from_iterable([1]), rxrl.from_iterable(["a"]))
bad_zip = zipped | ops.map(lambda t: t + 1)  # E: No overload variant of "__add__" of "tuple" matches argument type "int"

# piping Shards into an op that needs a driver Plan
bad_shards = shards | ops.broadcast(good, lambda w, x: None)  # E: No overload variant of "__or__" of "Shards"

# a Plan piped into a collector
bad_collect = plan | ops.barrier()  # E: Unsupported operand types for | ("Plan[list[list[float]]]"

# window output used as a single item
bad_window = rxrl.from_iterable([1, 2]) | ops.window(2) | ops.map(lambda x: x + 1)  # E: No overload variant of "__add__" of "list" matches argument type "int"

# running Shards directly
bad_run = rxrl.run(shards)  # E: Argument 1 to "run" has incompatible type "Shards[list[float]]"

# an actor method that does not fit the items
bad_call = rxrl.from_iterable(["s"]) | ops.call(good, lambda w, x: w.sample() + x)  # E: No overload variant of "__add__" of "list" matches argument type "str"

# a driver segment cannot run inside shards
bad_segment = shards | (ops.map(len) | ops.broadcast(good, lambda w, n: None))  # E: No overload variant of "__or__" of "Shards"

# split takes a driver Plan, not Shards
bad_split = ops.split(shards, 2)  # E: No overload variant of "split" matches argument types "Shards[list[float]]", "int"

# a split branch is typed as its source
left, right = ops.split(rxrl.from_iterable([1]), 2)
bad_branch = right | ops.map(lambda s: s.upper())  # E: "int" has no attribute "upper"

# a pipelined call is typed like call
bad_pipelined = rxrl.from_iterable(["s"]) | ops.call(good, lambda w, x: w.sample() + x, max_in_flight=2)  # E: No overload variant of "__add__" of "list" matches argument type "str"

# ---- recurrent policies (issue 24): sequences and flat batches do not mix
from rxrl.algos.common import train_on_fragments, train_on_sequences  # noqa: E402
from rxrl.rl.learners.actor_critic import PPOLearner  # noqa: E402
from rxrl.rl.workers.rollout import RolloutWorker  # noqa: E402

rollout_workers = rxrl.actors(RolloutWorker, 2, env="CartPole-v1")
ppo_learner = rxrl.actors(PPOLearner, 1, env="CartPole-v1")
flat_rounds = rxrl.from_actors(rollout_workers, RolloutWorker.sample) | ops.barrier()
sequence_rounds = rxrl.from_actors(rollout_workers, RolloutWorker.sample_sequences) | ops.barrier()
flat_to_sequence_learner = flat_rounds | ops.call(ppo_learner, train_on_sequences)  # E: expected "Callable[[PPOLearner, list[SampleBatch]], Trained]"
sequences_to_flat_learner = sequence_rounds | ops.call(ppo_learner, train_on_fragments)  # E: expected "Callable[[PPOLearner, list[SequenceBatch]], Trained]"
flat_minibatch = sequence_rounds | ops.map(lambda b: b[0]) | ops.call(ppo_learner, PPOLearner.train)  # E: expected "Callable[[PPOLearner, SequenceBatch], TrainMetrics]"

# ---- learner groups (issue 25): call_all emits a list, one result per member
group_rounds = flat_rounds | ops.call_all(ppo_learner, train_on_fragments)
group_as_one = group_rounds | ops.map(lambda t: t.weights)  # E: "list[Trained]" has no attribute "weights"
group_of_sequences = sequence_rounds | ops.call_all(ppo_learner, train_on_fragments)  # E: expected "Callable[[PPOLearner, list[SequenceBatch]], Trained]"

# ---- aggregators (issue 25): a sub-plan is typed from its part to its output
def concat(part: rxrl.Shards[list[float]]) -> rxrl.Plan[list[list[float]]]:
    return part | ops.gather() | ops.window(2)


aggregated = ops.aggregate(shards, concat, num_aggregators=2)
aggregated_as_floats = aggregated | ops.gather() | ops.map(lambda b: b + 1.0)  # E: No overload variant of "__add__" of "list" matches argument type "float"
aggregate_a_plan = ops.aggregate(plan, concat, num_aggregators=2)  # E: Argument 1 to "aggregate" has incompatible type "Plan[list[list[float]]]"
body_of_strings = ops.aggregate(rxrl.from_iterables([["a"]]), concat, num_aggregators=1)  # E: Argument 2 to "aggregate" has incompatible type
body_without_a_plan = ops.aggregate(shards, lambda part: part, num_aggregators=2)  # E: Incompatible return value type
subset_then_driver_op = shards.subset([0]) | ops.broadcast(good, lambda w, x: None)  # E: No overload variant of "__or__" of "Shards"
placed_on_a_number = shards.subset_on(3)  # E: Argument 1 to "subset_on" of "Shards" has incompatible type "int"
