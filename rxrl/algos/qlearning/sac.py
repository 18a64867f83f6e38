"""SAC: workers store rounds in a replay actor; the learner trains from it at a fixed update-to-data ratio.

The plan is DQN's (``rxrl/algos/qlearning/dqn.py``) with SAC's actors: a store flow (sample, barrier,
into the replay) beside a train flow (replayed batches, or ``NOT_READY`` before
``learning_starts``; a pipelined learner call; the new actor weights broadcast), weighted so
that the learner takes ``learner.updates_per_step`` optimizer steps per env step sampled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import attrs
import gymnasium as gym
import numpy as np
import numpy.typing as npt

import rxrl
from rxrl import ops
from rxrl.algos.common import (
    RolloutSettings,
    Start,
    episode_metric_names,
    for_workers,
    hosted,
    instance_of,
    int_at_least,
    placed,
    registered_id,
    spaces_of,
    worker_seed,
)
from rxrl.algos.qlearning.common import (
    Pickled,
    QGroups,
    ReplayLearnerFactory,
    ShardFactory,
    check_replay,
    refuse_unused,
    resumed,
    snapshot,
)
from rxrl.algos.qlearning.steps import QProgress, sample_batches, set_q_weights, store_round, train_on_batches
from rxrl.algos.spec import Algorithm
from rxrl.rl import EnvSpaces, Metrics, SACConfig
from rxrl.rl.learners.sac import SACLearner, SACRolloutWorker, SquashedGaussianActor
from rxrl.rl.models.greedy import GreedyPolicy, squashed_actor_greedy

#: the `RolloutSettings` fields SAC does not read, and where the setting lives
_NOT_HERE = {"gamma": "learner.gamma", "lam": "nothing (no GAE in SAC)",
             "policy": "learner.hidden_sizes"}

#: the actors of a SAC plan
SACGroups = QGroups[SACRolloutWorker, SACLearner]


@attrs.frozen(kw_only=True)
class SAC(RolloutSettings):
    """Soft actor-critic (the learner's, replay's and workers' settings are in ``learner``:
    `SACConfig`; the env, seed and worker counts in `RolloutSettings`).

    Every round, each of the ``num_workers`` workers steps ``num_envs_per_worker`` envs
    ``fragment_length`` times (uniformly random actions for its share of
    ``learner.replay.learning_starts`` env steps, then the policy's samples) and the round is
    stored in the replay. Once it holds ``learning_starts`` transitions, the learner takes
    ``updates_per_call`` steps per call, each on a batch of ``learner.replay.batch_size``, as
    many calls as keep ``learner.updates_per_step`` steps per env step sampled, and the new
    actor weights reach every worker before its next fragment. With ``learner_queue`` k > 1
    the learner call is pipelined (as DQN's: the workers sample while the learner trains;
    the weights a round is sampled with are up to k - 1 calls older).

    ``gamma``, ``lam`` and ``policy`` of `RolloutSettings` do not apply: setting one is an
    error naming the setting to use. The learner trains on the CPU.
    """

    env: str = attrs.field(default="Pendulum-v1")
    num_envs_per_worker: int = attrs.field(default=1, validator=int_at_least(1))
    fragment_length: int = attrs.field(default=32, validator=int_at_least(1))
    updates_per_call: int = attrs.field(default=32, validator=int_at_least(1))
    learner_queue: int = attrs.field(default=2, validator=int_at_least(1))
    learner: SACConfig = attrs.field(factory=SACConfig, validator=instance_of(SACConfig))

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        refuse_unused(self, _NOT_HERE, "SAC", "SACLearner")

    @property
    def calls_per_round(self) -> float:
        """Learner calls per round (the train flow's round-robin weight): the update-to-data
        ratio ``updates_per_step * round_size / updates_per_call``."""
        return self.learner.updates_per_step * self.round_size / self.updates_per_call

    def random_steps(self) -> int:
        """A worker's uniformly random env steps: its share of ``learning_starts``."""
        return -(-self.learner.replay.learning_starts // self.num_workers)


# ---------------------------------------------------------------------------- environments


def env_spaces_of(config: SAC) -> EnvSpaces:
    """The env's spaces; ValueError (one line) unless the observations are a 1-D Box and the
    actions a bounded 1-D Box, or the env id is unknown."""
    try:
        gym.spec(registered_id(config.env))
    except ImportError as e:
        raise ValueError(f"cannot import the module of env {config.env!r}: {e}") from e
    except gym.error.Error as e:
        raise ValueError(f"unknown env id {config.env!r}: {e}") from e
    spaces = spaces_of(config.env, config.env_kwargs)
    action, obs = spaces.action, spaces.observation
    if not (isinstance(action, gym.spaces.Box) and len(action.shape) == 1
            and np.all(np.isfinite(action.low)) and np.all(np.isfinite(action.high))):
        raise ValueError(f"sac does not support the action space {action} of {config.env}: it "
                         "needs a bounded 1-D Box (continuous actions)")
    if not (isinstance(obs, gym.spaces.Box) and len(obs.shape) == 1):
        raise ValueError(f"sac does not support the observation space {obs} of {config.env}: "
                         "it needs a 1-D Box")
    return spaces


def check(config: SAC, state: Mapping[str, Any] | None) -> None:
    """``rxrl train``'s check of the env and of a checkpoint's state against ``config``."""
    spaces = env_spaces_of(config)
    if state is None:
        return
    own = SquashedGaussianActor(spaces, config.learner, config.seed).state_dict()
    saved = state["policy"]
    if {k: tuple(v.shape) for k, v in own.items()} != {
            k: tuple(getattr(v, "shape", ())) for k, v in saved.items()}:
        raise ValueError(f"its actor does not fit the config (learner.hidden_sizes "
                         f"{list(config.learner.hidden_sizes)}): resume with the settings it was "
                         "trained with")
    check_replay(config, state)


# ------------------------------------------------------------------------ actors of a plan


@attrs.frozen
class SACWorkerFactory:
    """``index -> SACRolloutWorker``; picklable. From a checkpoint (``start``): reseeded as
    `torch_workers` does, the checkpoint's actor and env step count (no random steps again)."""

    settings: SAC
    start: Start | None = attrs.field(default=None, converter=for_workers)

    def __call__(self, index: int) -> SACRolloutWorker:
        s, start = self.settings, self.start
        worker = SACRolloutWorker(registered_id(s.env), s.num_envs_per_worker, s.fragment_length,
                                  seed=worker_seed(s, start), worker_index=index,
                                  random_steps=s.random_steps(), config=s.learner,
                                  env_kwargs=s.env_kwargs, episode_metrics=s.episode_metrics)
        return resumed(worker, start, s.num_workers)


def groups(config: SAC, start: Start | None = None) -> SACGroups:
    """The plan's actors: ``num_workers`` workers, one `SACLearner`, one replay shard."""
    env_spaces_of(config)
    workers = rxrl.indexed_actors(Pickled.of(SACWorkerFactory(config, start)), config.num_workers,
                                  name="SACRolloutWorker")
    learner = hosted(rxrl.indexed_actors(Pickled.of(ReplayLearnerFactory(SACLearner, config, start)), 1,
                                         name="SACLearner"), config)
    replay = rxrl.indexed_actors(Pickled.of(ShardFactory(config, start)), 1, name="ReplayShard")
    where = config.placement
    return QGroups(placed(workers, where.workers), placed(learner, where.learner),
                   placed(replay, where.replay), start, config.learner_queue)


def plan(config: SAC, actors: SACGroups | None = None) -> rxrl.Plan[Metrics]:
    """SAC as a plan: one `Metrics` record per learner call, forever."""
    g = actors or groups(config)
    progress = QProgress(custom_names=episode_metric_names(config))
    store = (rxrl.from_actors(g.workers, SACRolloutWorker.sample)  # Shards[TransitionBatch]: a fragment each
             | ops.barrier()                                      # one round, all sampled with one actor
             | ops.call(g.replay, store_round)                    # into the replay; episodes come back
             | ops.map(progress.observe_stored_round))            # env steps, episodes
    train = (rxrl.from_actors(g.replay, sample_batches(config.updates_per_call))  # or NOT_READY
             | ops.gather()                                       # (until learning_starts)
             | ops.call(g.learner, train_on_batches,               # a SAC step per batch
                        max_in_flight=config.learner_queue)       # the next call waits at the learner
             | ops.broadcast(g.workers, set_q_weights)            # the new actor, before the next sample
             | ops.map(progress.observe_trained))                 # Metrics
    return ops.alongside(train, store, weights=[config.calls_per_round, 1])  # the update-to-data ratio


# ------------------------------------------------------------------------------------ eval


def load_actor(config: SAC, state: Mapping[str, Any]) -> SquashedGaussianActor:
    """The actor of a checkpoint's learner state; ValueError (one line) if it does not fit."""
    actor = SquashedGaussianActor(env_spaces_of(config), config.learner, config.seed)
    try:
        actor.load_state_dict(state["policy"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise ValueError(f"the actor does not fit its config ({' '.join(str(e).split())[:200]})") from e
    return actor


def greedy(config: SAC, state: Mapping[str, Any]) -> Callable[..., Any]:
    """``rxrl eval``'s policy of a checkpoint: the actor's squashed mean action."""
    actor = load_actor(config, state)

    def act(obs: npt.NDArray[Any], deterministic: bool = True) -> tuple[npt.NDArray[np.float32], None, None]:
        """The deterministic actions of a batch of observations."""
        return actor.act(obs, deterministic=True)

    return act


def greedy_module(config: SAC, state: Mapping[str, Any]) -> GreedyPolicy:
    """``rxrl export``'s policy of a checkpoint: the actor's squashed mean, as one torch module."""
    spaces = env_spaces_of(config)
    return squashed_actor_greedy(load_actor(config, state), spaces.observation, spaces.action)


#: what a SAC checkpoint's learner and replay state depend on (`Algorithm.state_settings`)
SAC_STATE = ("policy.", "learner.hidden_sizes", "learner.log_std_min", "learner.log_std_max",
             "learner.n_step", "learner.replay.capacity", "learner.replay.prioritized")

#: Settings that learn faster than the defaults on particular envs (``rxrl train`` applies
#: them for that env; ``--set`` overrides them).
TUNED: Mapping[str, Mapping[str, Any]] = {
    # a short task: start learning after 1k random steps (of the 20k the target allows)
    "Pendulum-v1": {"learner.replay.capacity": 100_000, "learner.replay.learning_starts": 1_000},
}

__all__ = ["SPEC", "SAC", "SAC_STATE", "SACGroups", "SACWorkerFactory", "TUNED", "check",
           "env_spaces_of", "greedy", "greedy_module", "groups", "load_actor", "plan"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("sac", SAC, plan, cast(Any, groups), 100_000, TUNED,
                 "soft actor-critic (twin Q, automatic entropy tuning) from a replay actor at a "
                 "fixed update-to-data ratio", check_env=check, snapshot=snapshot(1), greedy=greedy,
                 greedy_module=greedy_module,
                 state_settings=SAC_STATE)
