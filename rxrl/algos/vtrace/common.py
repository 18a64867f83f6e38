"""What the asynchronous V-trace plans (IMPALA, APPO) share: settings, actors, and the items they pass.

The plans (``impala.py``, ``appo.py``) read::

    from_actors(workers, RolloutWorker.sample_fragment)   # raw fragments, behaviour log-probs
    | gather(max_in_flight, tagged=True)                  # completion order, tagged with the worker
    | call(learner, learn_on_batches(config), max_in_flight=config.learner_queue)
      # with learner.num_learners = n > 1: | call_all(learners, ...) | map(first_reply)
    | call(workers, load_weights_if_sent, max_in_flight=config.reply_queue)
    | flat_map(progress.observe_reply)                    # one Metrics record per update

With ``num_aggregators = A > 0`` the workers are split among A aggregator actors
(``ops.aggregate``), each gathering its part's fragments into lists of a batch's worth, so the
driver handles one item per batch::

    aggregate(from_actors(workers, RolloutWorker.sample_fragment),
              part | gather(max_in_flight, tagged=True) | window(fragments_per_batch), A)
    | gather()
    | call(learner, learn_on_fragments(config), max_in_flight=2)   # a Reply per fragment
    then, side by side (split):
      flat_map(replies with weights) | call(workers, load_weights_if_sent)   # the senders due
      flat_map(progress.observe_replies)                                      # the records

Fragments go worker → learner as object refs on Ray (the driver reads only the tags); the
learner buffers them into batches of ``train_batch_size`` rows, trains, and answers each
fragment with a `Reply` that carries new weights when the sender is due some; the reply goes
learner → sender, which loads them; only the reply's small rest (episodes, the report)
reaches the driver.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar

import attrs

import rxrl
from rxrl import ops
from rxrl.actors import Tagged
from rxrl.algos.common import (
    AggregateBy,
    Groups,
    IterationSample,
    Progress,
    RolloutSettings,
    Start,
    aggregate_parts,
    check_aggregation,
    env_spaces,
    episode_metric_names,
    episodes_of,
    int_at_least,
    make_groups,
    optional,
    set_learning_rate,
    times,
)
from rxrl.rl import EpisodeStats, Metrics, RolloutWorker
from rxrl.rl.data.fragment import Fragment
from rxrl.rl.learners.vtrace import VersionedWeights, VTraceLearner, VTraceMetrics


@attrs.frozen(kw_only=True)
class VTraceSettings(RolloutSettings):
    """Settings of the asynchronous V-trace plans (the rollout settings are in `RolloutSettings`).

    Each of the ``num_workers`` workers keeps ``max_in_flight`` fragments (``num_envs_per_worker``
    × ``fragment_length`` transitions each) under way and samples with whatever weights it has;
    the learner trains once ``train_batch_size`` transitions of whole fragments arrived, and a
    worker is sent new weights with the reply to its next fragment once ``broadcast_interval``
    updates passed since its last ones. ``gamma`` and ``lam`` are V-trace's discount and trace
    coefficient (``c = lam * min(c_clip, ratio)``; the workers compute no advantages). The
    learning rate decays linearly from ``learner.lr`` to 0 over ``lr_decay_steps`` trained
    transitions (``rxrl train`` sets it to ``--steps``); None keeps it constant.

    A recurrent policy (``policy.recurrent``) trains on whole fragments as its sequences: each
    env's ``fragment_length`` steps from the state the worker started them in, so
    ``policy.sequence_length`` is unset or ``fragment_length``.
    """

    supports_normalization: ClassVar[bool] = True
    supports_recurrence: ClassVar[bool] = True

    max_in_flight: int = attrs.field(default=1, validator=int_at_least(1))
    train_batch_size: int = attrs.field(default=512, validator=int_at_least(1))
    broadcast_interval: int = attrs.field(default=1, validator=int_at_least(1))
    lr_decay_steps: int | None = attrs.field(default=None, validator=optional(int_at_least(1)))
    #: aggregator actors, each gathering the fragments of its part of the workers into a
    #: batch's worth (``ops.aggregate``), so that the driver handles one item per batch;
    #: 0: none, the driver gathers every fragment
    num_aggregators: int = attrs.field(default=0, validator=int_at_least(0))
    #: how the workers are split among the aggregators: ``"index"``, contiguous runs of
    #: worker indices; ``"placement"``, one aggregator per placement of ``placement.workers``
    #: (``"zone=a|zone=b"``), on a node of that placement beside its workers
    aggregate_by: AggregateBy = "index"

    def __attrs_post_init__(self) -> None:
        name, learner = type(self).__name__, getattr(self, "learner", None)
        check_aggregation(self, self.num_aggregators, self.aggregate_by)
        length = self.policy.sequence_length
        if self.policy.is_recurrent and length not in (None, self.fragment_length):
            raise ValueError(f"{name}.policy.sequence_length ({length}) must be unset or "
                             f"fragment_length ({self.fragment_length}): {name} trains a recurrent "
                             "policy on whole fragments")
        super().__attrs_post_init__()
        minibatch = getattr(learner, "minibatch_size", None)
        if minibatch is not None:
            if minibatch % self.fragment_length:
                raise ValueError(f"{name}.learner.minibatch_size ({minibatch}) must be a multiple of "
                                 f"{name}.fragment_length ({self.fragment_length}): minibatches "
                                 "are whole sequences")
            if minibatch > self.batch_rows:
                raise ValueError(f"{name}.learner.minibatch_size ({minibatch}) must not exceed a "
                                 f"batch ({self.batch_rows} transitions: {name}.train_batch_size "
                                 "rounded up to whole fragments)")

    @property
    def fragment_size(self) -> int:
        """Transitions in one worker fragment."""
        return self.num_envs_per_worker * self.fragment_length

    @property
    def fragments_per_batch(self) -> int:
        """Whole fragments in one train batch."""
        return math.ceil(self.train_batch_size / self.fragment_size)

    @property
    def batch_rows(self) -> int:
        """Transitions in one train batch (``train_batch_size`` rounded up to whole fragments)."""
        return self.fragments_per_batch * self.fragment_size

    def iteration_sample(self) -> IterationSample:
        """One train batch: ``train_batch_size`` rounded up to whole fragments."""
        return IterationSample(self.batch_rows, times(
            (self.fragments_per_batch, "fragments"), (self.num_envs_per_worker, "envs"),
            (self.fragment_length, "steps")),
            ("train_batch_size", "num_envs_per_worker", "fragment_length"))

    @property
    def learner_queue(self) -> int:
        """Fragments submitted to the learner ahead of its oldest reply: two batches' worth, so
        that the next batch is waiting while the learner trains."""
        return 2 * self.fragments_per_batch

    @property
    def reply_queue(self) -> int:
        """Replies submitted to workers ahead of the oldest one's answer: a reply waits behind
        its worker's ``max_in_flight`` samples, so the driver must not wait for it."""
        return self.num_workers * self.max_in_flight + 1


def vtrace_groups(config: VTraceSettings, cls: Callable[..., VTraceLearner], learner_config: Any,
                  algorithm: str, start: Start | None = None) -> Groups[Any]:
    """The plan's actors: rollout workers and one V-trace learner (discount and trace from
    ``config``); the env is checked first."""
    env_spaces(config, algorithm)
    return make_groups(config, cls, learner_config, start, gamma=config.gamma, lam=config.lam)


# ------------------------------------------------------------------ items and plan functions


@attrs.frozen(eq=False)
class Reply:
    """The learner's answer to one fragment: the fragment's episodes (rows dropped), the
    report when the fragment completed a batch, and new weights for the sender when due."""

    episodes: EpisodeStats
    report: VTraceMetrics | None = None
    weights: VersionedWeights | None = None


def learn_on_batches(config: VTraceSettings) -> Callable[[VTraceLearner, Tagged[Fragment]], Tagged[Reply]]:
    """The learner side: buffer each fragment, train on every full batch, weights for the sender."""

    def learn_on_batches(learner: VTraceLearner, item: Tagged[Fragment]) -> Tagged[Reply]:
        """Add the fragment; train once ``train_batch_size`` rows wait; reply to the sender."""
        if config.lr_decay_steps is not None:
            done = learner.env_steps_trained / config.lr_decay_steps
            set_learning_rate(learner, learner.config.lr * max(0.0, 1.0 - done))
        report = learner.add_fragment(item.value, config.train_batch_size)
        weights = learner.weights_for(item.shard, config.broadcast_interval)
        if learner.collective is not None and learner.collective.rank > 0:
            weights = None  # a learner group's first member answers for all of them
        return item.with_value(Reply(episodes_of(item.value.batch), report, weights))

    return learn_on_batches


def load_weights_if_sent(worker: RolloutWorker, item: Tagged[Reply]) -> Reply:
    """On the sender: load the reply's weights (and their version), if any; pass the rest on."""
    sent = item.value.weights
    if sent is None:
        return item.value
    # a writable copy: weights that arrive through Ray's object store are read-only views
    worker.set_weights({k: v.copy() for k, v in sent.weights.items()}, version=sent.version)
    return attrs.evolve(item.value, weights=None)


class VTraceProgress(Progress):
    """`Progress` for the V-trace plans: episodes from every reply, a record per update."""

    def observe_reply(self, reply: Reply) -> list[Metrics]:
        """Count the fragment's episodes and env steps; a `Metrics` record if it was trained on."""
        self.observe_episodes(reply.episodes)
        return [] if reply.report is None else [self.observe_train(reply.report)]

    def observe_replies(self, replies: list[Tagged[Reply]]) -> list[Metrics]:
        """``observe_reply`` of each of an aggregated batch's replies, in order."""
        return [m for reply in replies for m in self.observe_reply(reply.value)]



def first_reply(replies: list[Tagged[Reply]]) -> Tagged[Reply]:
    """A learner group's answer to a fragment: its first member's (the others' carry no weights)."""
    return replies[0]


def first_replies(replies: list[list[Tagged[Reply]]]) -> list[Tagged[Reply]]:
    """A learner group's answer to an aggregated batch: its first member's."""
    return replies[0]


def learn_on_fragments(config: VTraceSettings
                       ) -> Callable[[VTraceLearner, list[Tagged[Fragment]]], list[Tagged[Reply]]]:
    """``learn_on_batches`` for an aggregator's list of fragments: a reply to each, in order."""
    learn = learn_on_batches(config)

    def learn_on_fragments(learner: VTraceLearner, items: list[Tagged[Fragment]]) -> list[Tagged[Reply]]:
        """Add each fragment (training on every full batch); a reply to each sender."""
        return [learn(learner, item) for item in items]

    return learn_on_fragments


def with_weights(replies: list[Tagged[Reply]]) -> list[Tagged[Reply]]:
    """The replies that carry weights (those go back to their senders)."""
    return [r for r in replies if r.value.weights is not None]


def batches_of_part(max_in_flight: int, fragments: int, part: rxrl.Shards[Fragment]
                    ) -> rxrl.Plan[list[Tagged[Fragment]]]:
    """An aggregator's sub-plan: its workers' fragments in completion order, tagged with their
    worker, in lists of ``fragments`` (a train batch's worth)."""
    return part | ops.gather(max_in_flight, tagged=True) | ops.window(fragments)


def aggregated_plan(config: VTraceSettings, actors: Groups[Any]) -> rxrl.Plan[Metrics]:
    """`asynchronous_plan` with ``num_aggregators`` aggregators between the workers and the
    driver (see the module docstring): the same learner calls and replies, a batch at a time."""
    workers, learner = actors.pair
    progress = VTraceProgress(custom_names=episode_metric_names(config))
    parts = aggregate_parts(config, config.num_aggregators, config.aggregate_by)
    batches = ops.aggregate(rxrl.from_actors(workers, RolloutWorker.sample_fragment),
                            functools.partial(batches_of_part, config.max_in_flight,
                                              config.fragments_per_batch), **parts) | ops.gather()
    learn = learn_on_fragments(config)
    if learner.size > 1:  # a learner group: every member buffers every fragment, trains its share
        replies = batches | ops.call_all(learner, learn, max_in_flight=2) | ops.map(first_replies)
    else:
        replies = batches | ops.call(learner, learn, max_in_flight=2)  # the next batch waiting
    # the loads keep pace with the records: a batch's records are one item, its loads up to
    # one per fragment; were the loads branch to lag (up to a split's max_lag batches), the
    # workers would get their weights that many updates late
    to_senders, to_records = ops.split(replies, 2, max_lag=2)
    loads = (to_senders | ops.flat_map(with_weights)                  # routed by the tag
             | ops.call(workers, load_weights_if_sent, max_in_flight=config.reply_queue))
    return ops.alongside(to_records | ops.flat_map(progress.observe_replies), loads,
                         weights=[1, config.fragments_per_batch])


def asynchronous_plan(config: VTraceSettings, actors: Groups[Any]) -> rxrl.Plan[Metrics]:
    """IMPALA's dataflow, APPO's too: fragments in completion order to a pipelined learner, its
    reply (new weights, at most every ``broadcast_interval`` updates) to the sender only; one
    `Metrics` record per learner update, forever."""
    if config.num_aggregators:
        return aggregated_plan(config, actors)
    workers, learner = actors.pair
    progress = VTraceProgress(custom_names=episode_metric_names(config))
    fragments = (rxrl.from_actors(workers, RolloutWorker.sample_fragment)  # raw, behaviour log-probs
                 | ops.gather(config.max_in_flight, tagged=True))  # completion order, tagged: the worker
    learn = learn_on_batches(config)
    if learner.size > 1:  # a learner group: every member buffers every fragment, trains its share
        replies = (fragments | ops.call_all(learner, learn, max_in_flight=config.learner_queue)
                   | ops.map(first_reply))
    else:
        replies = fragments | ops.call(learner, learn,       # batches, V-trace steps: on the learner,
                                       max_in_flight=config.learner_queue)  # the next batch waiting
    return (
        replies
        | ops.call(workers, load_weights_if_sent,             # routed by the tag: the sender only
                   max_in_flight=config.reply_queue)          # (the driver never waits for a worker)
        | ops.flat_map(progress.observe_reply)                # a Metrics record per update
    )


__all__ = ["Reply", "VTraceProgress", "VTraceSettings", "aggregated_plan", "asynchronous_plan",
           "batches_of_part", "first_replies", "first_reply", "learn_on_batches", "learn_on_fragments",
           "load_weights_if_sent", "vtrace_groups", "with_weights"]
