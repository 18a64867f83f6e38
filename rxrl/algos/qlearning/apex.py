"""Ape-X: epsilon-greedy workers sample asynchronously into prioritized replay shards; a pipelined learner."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, cast

import attrs

import rxrl
from rxrl import ops
from rxrl.actors import Tagged
from rxrl.algos.common import (
    AggregateBy,
    Start,
    aggregate_parts,
    check_aggregation,
    episode_metric_names,
    float_in,
    instance_of,
    int_at_least,
)
from rxrl.algos.qlearning import dqn
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
    is_due,
    load_weights_if_sent,
    store_sample,
    store_samples,
    train_on_sample,
    update_priorities,
    weights_if_due,
)
from rxrl.algos.spec import Algorithm
from rxrl.rl import DQNConfig, Metrics, QRolloutWorker, ReplayConfig, TransitionBatch, apex_epsilon

#: The learner settings `ApeX` starts from: DQN's (`rxrl.algos.qlearning.dqn.LEARNER`: the target net
#: copied every 50 optimizer steps) with prioritized replay (alpha 0.6, beta 0.4, as in the
#: Ape-X paper).
LEARNER = attrs.evolve(dqn.LEARNER, replay=ReplayConfig(prioritized=True))


@attrs.frozen(kw_only=True)
class ApeX(QSettings):
    """Ape-X DQN (the worker, learner and replay settings are in `QSettings`).

    Worker i of N explores with the fixed epsilon ``epsilon_base ** (1 + epsilon_exponent *
    i / (N - 1))`` and keeps ``max_in_flight`` samples under way; each sample is stored in
    one of ``num_shards`` prioritized replay shards (in turn), and its worker gets the
    learner's current weights once ``max_weight_sync_delay`` of its env steps passed since
    its last ones (1, the default: after every sample, as ``bench/dqn_loop.py --apex`` was
    tuned). Shards answer in completion order; the learner, ``learner_queue`` calls
    ahead, takes ``updates_per_call`` steps on one shard's batches per call and the new
    priorities go back to that shard. ``calls_per_sample`` learner calls per sample keep the
    training intensity. A record is reported every ``report_every`` learner calls, with the
    episodes of the workers of the lowest epsilon. ``learner.epsilon_*`` do not apply.

    With ``num_aggregators`` A > 0, A aggregator actors (``ops.aggregate``) gather the samples
    of their part of the workers into lists of one sample per worker of the part, and a list is
    stored in a shard at once; only the workers due new weights are then called (the driver
    handles ``1 / (workers per part)`` of the gathers and stores it did, and as many weight
    syncs as before).
    """

    num_shards: int = attrs.field(default=2, validator=int_at_least(1))
    #: aggregator actors between the workers and the driver (0: none), see above
    num_aggregators: int = attrs.field(default=0, validator=int_at_least(0))
    #: how the workers are split among the aggregators (``"index"`` or ``"placement"``: one
    #: per placement of ``placement.workers``, ``"zone=a|zone=b"``)
    aggregate_by: AggregateBy = "index"
    max_in_flight: int = attrs.field(default=2, validator=int_at_least(1))
    max_weight_sync_delay: int = attrs.field(default=1, validator=int_at_least(1))
    updates_per_call: int = attrs.field(default=4, validator=int_at_least(1))
    report_every: int = attrs.field(default=8, validator=int_at_least(1))
    epsilon_base: float = attrs.field(default=0.4, validator=float_in(0.0, 1.0))
    epsilon_exponent: float = attrs.field(default=7.0, validator=float_in(0.0, 100.0))
    learner: DQNConfig = attrs.field(default=LEARNER, validator=instance_of(DQNConfig))

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        check_aggregation(self, self.num_aggregators, self.aggregate_by)
        if self.learner.num_learners != 1:
            raise ValueError("ApeX.learner.num_learners must be 1: Ape-X trains with one learner "
                             "(learner groups: ppo, impala, appo, dqn)")

    def epsilon(self, index: int) -> float:
        """Worker ``index``'s fixed epsilon."""
        return apex_epsilon(index, self.num_workers, self.epsilon_base, self.epsilon_exponent)

    @property
    def calls_per_sample(self) -> float:
        """Learner calls per worker sample: the round-robin weight of the train flow."""
        return self.calls_per(self.sample_size)

    @property
    def reporting(self) -> list[int]:
        """The workers whose episodes are reported: those of the lowest epsilon."""
        lowest = min(self.epsilon(i) for i in range(self.num_workers))
        return [i for i in range(self.num_workers) if self.epsilon(i) == lowest]

    @property
    def reply_queue(self) -> int:
        """Weight replies under way: one waits behind its worker's samples in flight."""
        return self.num_workers * self.max_in_flight + 1


def groups(config: ApeX, start: Start | None = None) -> DQNGroups:
    """The plan's actors: ``num_workers`` workers, one `DQNLearner`, ``num_shards`` shards."""
    env_spaces_of(config, "apex")
    return make_q_groups(config, config.epsilon, start, config.num_shards)


def plan(config: ApeX, actors: DQNGroups | None = None) -> rxrl.Plan[Metrics]:
    """Ape-X as a plan: one `Metrics` record per ``report_every`` learner calls, forever."""
    g = actors or groups(config)
    progress = QProgress(config.num_workers, config.reporting, config.max_weight_sync_delay,
                         config.report_every, episode_metric_names(config))
    store: rxrl.Plan[object]  # a side flow: its items count, not what they are
    if config.num_aggregators:
        store = aggregated_store(config, g, progress)
    else:
        store = (rxrl.from_actors(g.workers, QRolloutWorker.sample)   # epsilon-greedy, each its own
                 | ops.gather(config.max_in_flight, tagged=True)  # completion order, tagged with the worker
                 | ops.call(g.replay, store_sample)               # shards in turn; the worker's tag kept
                 | ops.map(progress.observe_stored)               # env steps, episodes; weights due?
                 | ops.call(g.learner, weights_if_due, max_in_flight=config.reply_queue)
                 | ops.call(g.workers, load_weights_if_sent,      # routed by the tag: the sender only
                            max_in_flight=config.reply_queue))
    train = (rxrl.from_actors(g.replay, config.replay_requests())
             | ops.gather(tagged=True)                            # completion order, tagged with the shard
             | ops.call(g.learner, train_on_sample,               # pipelined: the next call waits
                        max_in_flight=config.learner_queue)
             | ops.call(g.replay, update_priorities,              # routed by the tag: back to its shard
                        max_in_flight=config.learner_queue))
    return (ops.alongside(train, store, weights=[config.calls_per_sample, 1])  # the training intensity
            | ops.flat_map(progress.report))


def samples_of_part(max_in_flight: int, part: rxrl.Shards[TransitionBatch]
                    ) -> rxrl.Plan[list[Tagged[TransitionBatch]]]:
    """An aggregator's sub-plan: its workers' samples in completion order, tagged with their
    worker, in lists of as many as it has workers."""
    return part | ops.gather(max_in_flight, tagged=True) | ops.window(part.num_shards)


def aggregated_store(config: ApeX, g: DQNGroups, progress: QProgress) -> rxrl.Plan[Tagged[bool]]:
    """The store flow through ``num_aggregators`` aggregators: a list of samples per store
    call; the weights go to the workers due them (one item per sample, for the intensity)."""
    stored = (ops.aggregate(rxrl.from_actors(g.workers, QRolloutWorker.sample),
                            functools.partial(samples_of_part, config.max_in_flight),
                            **aggregate_parts(config, config.num_aggregators, config.aggregate_by))
              | ops.gather()
              | ops.call(g.replay, store_samples)                # a list at a time, shards in turn
              | ops.flat_map(progress.observe_stored_each))      # per sample: its worker due weights?
    counted, synced = ops.split(stored, 2)
    sync: rxrl.Plan[bool] = (synced | ops.filter(is_due)
            | ops.call(g.learner, weights_if_due, max_in_flight=config.reply_queue)
            | ops.call(g.workers, load_weights_if_sent, max_in_flight=config.reply_queue))
    return ops.alongside(counted, sync)


#: Settings that learn faster than the defaults on particular envs (``rxrl train`` applies
#: them for that env; ``--set`` overrides them).
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["SPEC", "LEARNER", "TUNED", "ApeX", "aggregated_store", "groups", "plan", "samples_of_part"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("apex", ApeX, plan, cast(Any, groups), 200_000, TUNED,
                 "Ape-X DQN: asynchronous epsilon-greedy workers, prioritized replay shards, "
                 "a pipelined learner", check_env=check("apex"), snapshot=snapshot(4), greedy=greedy,
                 greedy_module=greedy_module,
                 state_settings=(*Q_STATE, "num_shards"))
