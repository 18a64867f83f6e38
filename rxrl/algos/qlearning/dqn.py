"""DQN: workers store rounds in a replay actor; the learner trains from it at a fixed training intensity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, cast

import attrs

import rxrl
from rxrl import ops
from rxrl.algos.common import (
    AutoLearnerPlacement,
    Start,
    episode_metric_names,
    instance_of,
    int_at_least,
    optional,
    positive,
    valid_placement,
)
from rxrl.algos.qlearning.common import (
    Q_STATE,
    DQNGroups,
    QSettings,
    check,
    env_spaces_of,
    greedy,
    greedy_module,
    make_q_groups,
    snapshot,
)
from rxrl.algos.qlearning.steps import (
    QProgress,
    QTrained,
    set_q_weights,
    store_round,
    train_on_batches,
)
from rxrl.algos.spec import Algorithm
from rxrl.rl import DQNConfig, LinearSchedule, Metrics, QRolloutWorker, epsilon_schedule

#: The learner settings `DQN` starts from: `DQNConfig()` (tuned in a plain loop, docs/rl.md)
#: with a target net that follows the online one by Polyak averaging (``tau`` 0.01 every
#: optimizer step) instead of a copy every 100 steps; with `DQN.lr_decay` it reaches 475 within
#: 100k env steps on all of seeds 0-9 (docs/algorithms.md has the screens).
LEARNER = DQNConfig(target_update_interval=1, tau=0.01)



@attrs.frozen(kw_only=True)
class DQN(QSettings):
    """Deep Q-learning (the worker, learner and replay settings are in `QSettings`).

    Every round, each of the ``num_workers`` workers samples one fragment with the current
    weights, epsilon-greedily (epsilon from ``learner.epsilon_start`` to ``epsilon_end``
    over ``learner.exploration_fraction`` of ``exploration_steps`` env steps; ``rxrl train``
    sets it to ``--steps``), and the round is stored in the replay. Once it holds
    ``learner.replay.learning_starts`` transitions, the learner takes ``updates_per_call``
    steps per call on replayed batches, ``calls_per_round`` calls per round (the training
    intensity), and the new weights reach every worker before its next fragment.

    With ``learner_queue`` k > 1 the learner call is pipelined: the driver hands the learner
    its next call before taking the result of the current one, so the workers sample (and
    the replay stores) while the learner trains; the weights a round is sampled with are then
    up to k - 1 calls older. The run stays a function of the seed (the pipeline's order is
    fixed: docs/semantics.md).
    """

    #: ``replay_placement="auto"`` hosts the replay on the driver for small observations
    auto_replay_on_driver: ClassVar[bool] = True
    #: ``learner_placement="auto"`` hosts the learner there too (`learner_on_driver`)
    auto_learner_placement: ClassVar[bool] = True

    #: one choice more than the other algorithms' (their `LearnerPlacement`, which ``--set``
    #: checks against): the type widens here, on purpose
    learner_placement: AutoLearnerPlacement = attrs.field(  # type: ignore[assignment]
        default="auto", validator=valid_placement)

    exploration_steps: int = attrs.field(default=100_000, validator=int_at_least(1))
    learner: DQNConfig = attrs.field(default=LEARNER, validator=instance_of(DQNConfig))
    #: the learning rate decays linearly to 0 over ``lr_decay`` times ``exploration_steps``
    #: env steps (the run's ``--steps`` under ``rxrl train``: 2.0 halves it by the end of the
    #: run), unless ``learner.lr_decay_steps`` says otherwise; None: constant
    lr_decay: float | None = attrs.field(default=2.0, validator=optional(positive))

    def learner_settings(self) -> DQNConfig:
        """``learner`` with the run's learning-rate decay (``lr_decay``) filled in."""
        if self.lr_decay is None or self.learner.lr_decay_steps is not None:
            return self.learner
        steps = max(1, round(self.lr_decay * self.exploration_steps))
        return attrs.evolve(self.learner, lr_decay_steps=steps)

    def epsilon(self, index: int) -> LinearSchedule:
        """Worker ``index``'s epsilon, by its own env steps (each takes its share of the decay)."""
        c = self.learner
        return epsilon_schedule(c.epsilon_start, c.epsilon_end, c.exploration_fraction,
                                self.exploration_steps, self.num_workers)

    @property
    def calls_per_round(self) -> float:
        """Learner calls per round: the round-robin weight of the train flow."""
        return self.calls_per(self.round_size)


def groups(config: DQN, start: Start | None = None) -> DQNGroups:
    """The plan's actors: ``num_workers`` workers, one `DQNLearner`, one replay shard."""
    env_spaces_of(config, "dqn")
    return make_q_groups(attrs.evolve(config, learner=config.learner_settings()), config.epsilon, start)


def plan(config: DQN, actors: DQNGroups | None = None) -> rxrl.Plan[Metrics]:
    """DQN as a plan: one `Metrics` record per learner call, forever."""
    g = actors or groups(config)
    progress = QProgress(custom_names=episode_metric_names(config))
    store = (rxrl.from_actors(g.workers, QRolloutWorker.sample)   # Shards[TransitionBatch]: a fragment each
             | ops.barrier()                                     # one round, all sampled with one weights
             | ops.call(g.replay, store_round)                   # into the replay; episodes come back
             | ops.map(progress.observe_stored_round))           # env steps, episodes
    batches = (rxrl.from_actors(g.replay, config.replay_requests())
               | ops.gather())                  # (until learning_starts; exact_intensity: or ahead)
    if g.learner.size > 1:  # a learner group: each member its share of every batch's rows
        trained = (batches | ops.call_all(g.learner, train_on_batches, max_in_flight=config.learner_queue)
                   | ops.map(first_trained))
    else:
        trained = batches | ops.call(g.learner, train_on_batches,  # a step per batch; target by steps;
                                     max_in_flight=config.learner_queue)  # the next call waits there
    train = (trained
             | ops.broadcast(g.workers, set_q_weights)           # reaches every worker before its next sample
             | ops.map(progress.observe_trained))                # Metrics
    return ops.alongside(train, store, weights=[config.calls_per_round, 1])  # the training intensity


def first_trained(replies: list[QTrained]) -> QTrained:
    """A learner group's reply: its first member's (all members hold the same weights)."""
    return replies[0]


#: Settings that learn faster than the defaults on particular envs (``rxrl train`` applies
#: them for that env; ``--set`` overrides them).
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["SPEC", "DQN", "LEARNER", "TUNED", "first_trained", "groups", "plan"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("dqn", DQN, plan, cast(Any, groups), 100_000, TUNED,
                 "deep Q-learning (double, n-step) from a replay actor at a fixed training intensity",
                 check_env=check("dqn"), snapshot=snapshot(1), greedy=greedy,
                 greedy_module=greedy_module,
                 budget_settings=("exploration_steps",),
                 state_settings=Q_STATE)
