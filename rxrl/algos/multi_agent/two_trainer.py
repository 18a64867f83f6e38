"""Two trainers on one rollout stream: PPO for some policies, DQN for the others, concurrently.

The stream of rounds is split in two: the PPO branch selects the PPO policies' rows,
batches them and trains the PPO learner; the DQN branch selects the DQN policies'
transitions and stores them in a replay actor, from which a DQN learner trains at a fixed
training intensity once ``learning_starts`` transitions are stored (before that the replay
answers ``rxrl.NOT_READY``). Each learner's reply carries the weights of its own policies
only, broadcast to every worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, cast

import attrs
import torch

import rxrl
from rxrl import ops
from rxrl.actors import ActorGroup
from rxrl.algos.common import Start, hosted, instance_of, int_at_least, optional, placed
from rxrl.algos.multi_agent.ma_ppo import (
    LEARNER,
    GreedyReturns,
    MultiAgentSettings,
    MultiAgentWorkerFactory,
    MultiPPOLearnerFactory,
    MultiTrained,
    Progress,
    agents_of,
    env_policies,
    env_steps,
    greedy_returns,
    join_rounds,
    set_policy_weights,
)
from rxrl.algos.spec import Algorithm
from rxrl.plan import Op
from rxrl.rl import DQNConfig, PPOConfig
from rxrl.rl.data.ma_metrics import MultiAgentMetrics
from rxrl.rl.data.multiagent import MultiAgentBatch, PolicyID
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.learners.dqn import Q_UNREPORTED
from rxrl.rl.learners.multi_agent import MultiDQNLearner, MultiPPOLearner, MultiReplay
from rxrl.rl.schedules import epsilon_schedule
from rxrl.rl.workers.multi_agent import MultiAgentRolloutWorker, QPolicySpec

S = TypeVar("S", bound="Snapshotted")


@attrs.frozen(kw_only=True)
class TwoTrainer(MultiAgentSettings):
    """PPO for every policy not in ``dqn_policies``, DQN for those, on one rollout stream.

    PPO (``ppo``) updates every ``train_batch_size`` env steps, as `MultiAgentPPO`. DQN
    (``dqn``: learner, n-step returns, epsilon decaying over ``dqn.exploration_fraction``
    of ``exploration_steps`` env steps, ``dqn.replay``) replays ``dqn.training_intensity``
    transitions per DQN transition stored, ``dqn_steps_per_call`` optimizer steps per learner
    call; the epsilon clock is each worker's count of DQN-agent transitions.

    One branch may run at most ``max_lag`` rounds ahead of the other (the split's bound;
    default: the rounds of one PPO batch). So PPO trains on rounds sampled at most one PPO
    update earlier (on-policy when the PPO branch leads, one update stale when DQN does). A
    smaller bound makes the branches take turns more closely (the DQN branch's store flow
    catches the split up while its replay waits for ``learning_starts``).
    """

    num_envs_per_worker: int = attrs.field(default=4, validator=int_at_least(1))
    fragment_length: int = attrs.field(default=16, validator=int_at_least(1))
    train_batch_size: int = attrs.field(default=1024, validator=int_at_least(1))
    dqn_policies: tuple[str, ...] = attrs.field(default=("cartpole_1",))
    ppo: PPOConfig = attrs.field(default=LEARNER, validator=instance_of(PPOConfig))
    dqn: DQNConfig = attrs.field(factory=DQNConfig, validator=instance_of(DQNConfig))
    dqn_steps_per_call: int = attrs.field(default=16, validator=int_at_least(1))
    exploration_steps: int = attrs.field(default=100_000, validator=int_at_least(1))
    max_lag: int | None = attrs.field(default=None, validator=optional(int_at_least(1)))

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if not self.dqn_policies or not all(isinstance(p, str) and p for p in self.dqn_policies):
            raise ValueError(f"TwoTrainer.dqn_policies must name at least one policy, "
                             f"got {self.dqn_policies!r}")

    @property
    def rounds_per_batch(self) -> int:
        """Rounds in one PPO batch: ``ceil(train_batch_size / round_size)``."""
        return -(-self.train_batch_size // self.round_size)

    @property
    def split_lag(self) -> int:
        """The split's ``max_lag``: ``max_lag``, or the rounds of one PPO batch."""
        return self.max_lag if self.max_lag is not None else self.rounds_per_batch


def split_policies(config: TwoTrainer, algorithm: str = "two-trainer"
                   ) -> tuple[list[PolicyID], list[PolicyID]]:
    """The PPO and DQN policy ids of ``config`` (ValueError naming an unknown DQN policy, or
    a split that leaves one trainer without policies)."""
    policies = list(env_policies(config, algorithm))
    unknown = sorted(set(config.dqn_policies) - set(policies))
    if unknown:
        raise ValueError(f"{algorithm}: dqn_policies names {unknown}, which are not policies of {config.env} "
                         f"with policy_mapping={config.policy_mapping!r} (policies {policies})")
    ppo = [p for p in policies if p not in config.dqn_policies]
    if not ppo:
        raise ValueError(f"{algorithm}: every policy ({policies}) is in dqn_policies; leave some to PPO")
    return ppo, sorted(config.dqn_policies)


def q_specs(config: TwoTrainer) -> dict[PolicyID, QPolicySpec]:
    """How the workers act for the DQN policies (epsilon decays over each worker's own steps)."""
    d = config.dqn
    epsilon = epsilon_schedule(d.epsilon_start, d.epsilon_end, d.exploration_fraction,
                               config.exploration_steps, config.num_workers)
    return {p: QPolicySpec(d.q_net, d.n_step, d.gamma, epsilon) for p in config.dqn_policies}


@attrs.frozen
class DQNLearnerFactory:
    """``index -> MultiDQNLearner`` for the DQN policies of ``settings``."""

    settings: TwoTrainer
    start: Start | None = None

    def __call__(self, index: int) -> MultiDQNLearner:
        s = self.settings
        torch.set_num_threads(s.learner_threads)
        spaces = env_policies(s, "two-trainer")
        learner = MultiDQNLearner({p: spaces[p] for p in s.dqn_policies}, s.dqn, seed=s.seed)
        if self.start is not None:
            learner.load_state_dict(self.start.learner_state["dqn"])
        return learner


@attrs.frozen
class ReplayFactory:
    """``index -> MultiReplay`` for the DQN policies of ``settings``, restoring the replay a
    checkpoint ``start`` holds (``"dqn_replay"``; a checkpoint without one starts empty)."""

    settings: TwoTrainer
    start: Start | None = None

    def __call__(self, index: int) -> MultiReplay:
        s = self.settings
        replay = MultiReplay(sorted(s.dqn_policies), s.dqn.replay, seed=s.seed, steps=s.dqn_steps_per_call)
        saved = saved_replay(self.start)
        if saved is not None:
            replay.load_state_dict(saved)
        return replay


def saved_replay(start: Start | None) -> Mapping[str, Any] | None:
    """The replay state in a checkpoint ``start`` (None: no start, or a checkpoint from before
    replays were kept)."""
    return None if start is None else start.learner_state.get("dqn_replay")


def resumed_q_steps(config: TwoTrainer, start: Start | None) -> dict[PolicyID, int]:
    """Each worker's share of the transitions a checkpoint's replay stored per DQN policy: the
    exploration clock (epsilon) a resumed worker continues from."""
    saved = saved_replay(start)
    if saved is None:
        return {}
    return {pid: int(shard["buffer"]["num_added"]) // config.num_workers
            for pid, shard in saved["shards"].items()}


def resumed_stored(start: Start | None) -> int:
    """The transitions a checkpoint's replay had stored in all (what `store` counts from)."""
    saved = saved_replay(start)
    if saved is None:
        return 0
    return sum(int(shard["buffer"]["num_added"]) for shard in saved["shards"].values())


@attrs.frozen
class TwoTrainerGroups:
    """The actors: rollout workers, the PPO learner (``learner``), the DQN learner, the replay;
    ``stored``: the transitions a resumed replay had stored in all (0 for a new run)."""

    workers: ActorGroup[MultiAgentRolloutWorker]
    learner: ActorGroup[MultiPPOLearner]
    dqn_learner: ActorGroup[MultiDQNLearner]
    replay: ActorGroup[MultiReplay]
    stored: int = 0


def check(config: TwoTrainer, learner_state: Mapping[str, Any] | None = None) -> None:
    """The env, the policy split, and that a checkpoint holds both learners' policies."""
    ppo, dqn = split_policies(config)
    if learner_state is not None:
        dqn_state = learner_state.get("dqn", {})
        saved = (sorted(learner_state.get("learners", {})), sorted(dqn_state.get("learners", {})))
        if saved != (sorted(ppo), dqn):
            raise ValueError(f"the checkpoint has PPO policies {saved[0]} and DQN policies {saved[1]}, the "
                             f"config {sorted(ppo)} and {dqn}")


def groups(config: TwoTrainer, start: Start | None = None) -> TwoTrainerGroups:
    """The plan's actors (a checkpoint ``start`` restores both learners, the replay, and the
    workers' weights and exploration clocks)."""
    check(config, None if start is None else start.learner_state)
    ppo, _ = split_policies(config)
    starts: tuple[Start, ...] = ()
    if start is not None:
        starts = (start, attrs.evolve(start, learner_state=start.learner_state["dqn"]))
    workers = rxrl.indexed_actors(MultiAgentWorkerFactory(config, q_specs(config), starts,
                                                          resumed_q_steps(config, start)),
                                  config.num_workers, name="MultiAgentRolloutWorker")
    learner = hosted(rxrl.indexed_actors(MultiPPOLearnerFactory(config, config.ppo, tuple(ppo), start), 1,
                                         name="MultiPPOLearner"), config)
    dqn_learner = rxrl.indexed_actors(DQNLearnerFactory(config, start), 1, name="MultiDQNLearner")
    replay = rxrl.indexed_actors(ReplayFactory(config, start), 1, name="MultiReplay")
    where = config.placement
    return TwoTrainerGroups(placed(workers, where.workers), placed(learner, where.learner),
                            placed(dqn_learner, where.learner), placed(replay, where.replay),
                            resumed_stored(start))


def train_ppo(learner: MultiPPOLearner, rounds: list[MultiAgentBatch]) -> MultiTrained:
    """On the PPO learner: train its policies on the rounds' rows; reply with their weights."""
    return MultiTrained(learner.train(MultiAgentBatch.concat(rounds)), learner.get_weights())


def store(replay: MultiReplay, rounds: list[MultiAgentBatch]) -> int:
    """On the replay: store the DQN policies' transitions of a round; the total stored so far."""
    added = 0
    for batch in rounds:
        added = replay.add(batch)
    return added


def train_dqn(steps: int) -> Callable[[MultiDQNLearner, Mapping[PolicyID, TransitionBatch]], MultiTrained]:
    """On the DQN learner: ``steps`` optimizer steps per policy; reply with its policies' weights."""

    def train_dqn_steps(learner: MultiDQNLearner, batches: Mapping[PolicyID, TransitionBatch]
                        ) -> MultiTrained:
        """``steps`` DQN updates on one replayed sample per policy."""
        return MultiTrained(learner.train(batches, steps), learner.get_weights())

    return train_dqn_steps


class IntensityClock:
    """Driver side: one token per ``batch_size`` transitions stored, so that a round-robin
    weight of ``training_intensity / steps_per_call`` replays exactly ``training_intensity``
    transitions per stored one (counted in whole minibatches). ``stored``: the transitions a
    resumed replay holds from before this run (`resumed_stored`), whose tokens the first run
    issued: the replay counts them in its totals, and without this a resume would issue one
    token per minibatch ever stored at once — the DQN branch then trains on them for many
    iterations while no env step is sampled (the round robin pulls a buffered token instead
    of storing a new round)."""

    def __init__(self, batch_size: int, stored: int = 0) -> None:
        self.batch_size, self.issued = batch_size, stored // batch_size

    def tokens(self, stored: int) -> list[int]:
        """The tokens due now that ``stored`` transitions have been stored in all."""
        due = stored // self.batch_size - self.issued
        self.issued += max(due, 0)
        return list(range(max(due, 0)))


def select(policies: list[PolicyID]) -> Callable[[list[MultiAgentBatch]], list[MultiAgentBatch]]:
    """A plan function: each batch of a round with only ``policies``' rows."""

    def select_policies(rounds: list[MultiAgentBatch]) -> list[MultiAgentBatch]:
        """``batch.select(policies)`` for every batch of the round."""
        return [batch.select(policies) for batch in rounds]

    select_policies.__name__ = select_policies.__qualname__ = f"select_{'_'.join(policies)}"
    return select_policies


def plan(config: TwoTrainer, actors: TwoTrainerGroups | None = None) -> rxrl.Plan[MultiAgentMetrics]:
    """PPO and DQN on one stream of rounds: a `MultiAgentMetrics` record per learner reply, forever."""
    g = actors or groups(config)
    ppo_ids, dqn_ids = split_policies(config)
    progress = Progress(agents_of(config), ppo_ids + dqn_ids,
                        unreported={pid: Q_UNREPORTED for pid in dqn_ids})
    clock = IntensityClock(config.dqn.replay.batch_size, g.stored)
    rounds = (rxrl.from_actors(g.workers, MultiAgentRolloutWorker.sample) | ops.barrier()
              | ops.map(progress.observe_rounds))                       # episodes counted once, here
    to_ppo, to_dqn = ops.split(rounds, 2, max_lag=config.split_lag)
    ppo_rounds = to_ppo | ops.map(select(ppo_ids))
    if config.train_batch_size > config.round_size:
        ppo_rounds = ppo_rounds | ops.window(min_size=config.train_batch_size, combine=join_rounds,
                                             size=env_steps)
    ppo = (ppo_rounds
           | ops.call(g.learner, train_ppo)                          # PPO on its policies' rows
           | ops.broadcast(g.workers, set_policy_weights)            # the PPO policies' weights only
           | ops.map(progress.observe_trained))
    stored = (to_dqn | ops.map(select(dqn_ids))
              | ops.call(g.replay, store)                            # DQN transitions into replay
              | ops.flat_map(clock.tokens))                          # a token per minibatch stored
    dqn = (rxrl.from_actors(g.replay, MultiReplay.sample) | ops.gather()  # NOT_READY until learning_starts
           | ops.call(g.dqn_learner, train_dqn(config.dqn_steps_per_call), max_in_flight=2)
           | ops.broadcast(g.workers, set_policy_weights)            # the DQN policies' weights only
           | ops.map(progress.observe_trained))
    intensity = config.dqn.training_intensity / config.dqn_steps_per_call  # learner calls per token
    return ops.union(ppo, ops.alongside(dqn, stored, weights=[intensity, 1]), mode="async")


class Snapshotted(Protocol):
    """What `rxrl train`'s checkpoint records have: whether one is due, and the state."""

    @property
    def due(self) -> bool:
        """Whether this record is checkpointed."""
        ...

    @property
    def state(self) -> Mapping[str, Any] | None:
        """The learners' state, once attached."""
        ...


def ppo_state_if_due(learner: MultiPPOLearner, snapshot: S) -> S:
    """On the PPO learner: its state on a due record."""
    return attrs.evolve(snapshot, state=learner.state_dict()) if snapshot.due else snapshot  # type: ignore[misc]


def dqn_state_if_due(learner: MultiDQNLearner, snapshot: S) -> S:
    """On the DQN learner: its state added (``"dqn"``) to a due record's."""
    if not snapshot.due or snapshot.state is None:
        return snapshot
    return attrs.evolve(snapshot, state={**snapshot.state, "dqn": learner.state_dict()})  # type: ignore[misc]


def replay_state_if_due(replay: MultiReplay, snapshot: S) -> S:
    """On the replay: its state added (``"dqn_replay"``) to a due record's."""
    if not snapshot.due or snapshot.state is None:
        return snapshot
    return attrs.evolve(snapshot, state={**snapshot.state, "dqn_replay": replay.state_dict()})  # type: ignore[misc]


def snapshot(actors: TwoTrainerGroups) -> Op[Any, Any]:
    """``rxrl train``'s checkpoint step: both learners' states and the DQN replay (a resumed
    run continues with the replay, and its workers' epsilon from their share of it)."""
    return (ops.call(actors.learner, ppo_state_if_due) | ops.call(actors.dqn_learner, dqn_state_if_due)
            | ops.call(actors.replay, replay_state_if_due))


def evaluate(config: TwoTrainer, learner_state: Mapping[str, Any], episodes: int, seed: int) -> GreedyReturns:
    """``rxrl eval`` of a two-trainer checkpoint: the PPO policies' mean actions and the DQN
    policies' argmax, together on one env (`rxrl.algos.multi_agent.ma_ppo.greedy_returns`)."""
    check(config, learner_state)
    starts = (Start(learner_state), Start(learner_state["dqn"]))
    return greedy_returns(MultiAgentWorkerFactory(config, q_specs(config), starts), episodes, seed)


#: what a two-trainer checkpoint's learners and replay depend on (`Algorithm.state_settings`)
TWO_TRAINER_STATE = ("policy.", "policies", "policy_mapping", "dqn_policies", "dqn.q_net.",
                     "dqn.n_step", "dqn.replay.capacity", "dqn.replay.prioritized")

#: settings that learn faster than the defaults on particular envs
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["SPEC", "TUNED", "TWO_TRAINER_STATE", "DQNLearnerFactory", "IntensityClock", "ReplayFactory",
           "TwoTrainer", "TwoTrainerGroups",
           "check", "replay_state_if_due", "resumed_q_steps", "resumed_stored", "saved_replay",
           "dqn_state_if_due", "evaluate", "groups", "plan", "ppo_state_if_due", "q_specs", "select",
           "snapshot", "split_policies", "store", "train_dqn", "train_ppo"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("two-trainer", TwoTrainer, plan, cast(Any, groups), 300_000, TUNED,
                 "PPO and DQN policies trained concurrently on one multi-agent stream",
                 check_env=check, snapshot=snapshot, evaluate=evaluate,
                 state_settings=TWO_TRAINER_STATE)
