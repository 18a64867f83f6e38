"""What the synchronous on-policy plans (PPO, A2C) share: their dataflow."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import rxrl
from rxrl import ops
from rxrl.algos.common import (
    Groups,
    Progress,
    Trained,
    episode_metric_names,
    join_rounds,
    rows,
    set_learning_rate,
    set_weights,
    train_on_fragments,
    train_on_sequences,
)
from rxrl.rl import Metrics, PolicyConfig, RolloutWorker, SampleBatch
from rxrl.rl.data.sequences import SequenceBatch

#: a worker's fragment: flat transitions (`RolloutWorker.sample`) or sequences
#: (`RolloutWorker.sample_sequences`, a recurrent policy's)
B = TypeVar("B", SampleBatch, SequenceBatch)

if TYPE_CHECKING:
    from rxrl.rl.learners.actor_critic import Learner

#: an on-policy learner (PPO's, A2C's): it counts the env steps it trained on
L = TypeVar("L", bound="Learner")


class Batched(Protocol):
    """The settings the dataflow reads: env steps per batch and per barrier round."""

    @property
    def train_batch_size(self) -> int:
        """Env steps a learner batch holds at least."""

    @property
    def round_size(self) -> int:
        """Env steps one barrier round samples."""


class LearningRate(Protocol):
    """A learner config: its (initial) learning rate."""

    @property
    def lr(self) -> float:
        """The optimizer's learning rate (where a schedule starts)."""


class OnPolicy(Batched, Protocol):
    """What `on_policy_plan` reads besides `Batched`: the policy (recurrent or not) and the
    learning-rate schedule."""

    @property
    def policy(self) -> PolicyConfig:
        """The policy: a recurrent one trains on sequences."""

    @property
    def lr_decay_steps(self) -> int | None:
        """Trained env steps over which the learning rate decays to 0 (None: constant)."""

    @property
    def learner(self) -> LearningRate:
        """The learner's settings."""


def on_policy_plan(config: OnPolicy, actors: Groups[Any]) -> rxrl.Plan[Metrics]:
    """PPO's and A2C's plan: `synchronous_plan` with flat fragments, or sequences for a
    recurrent policy, trained at the learning rate of `decayed`."""
    steps, lr = config.lr_decay_steps, config.learner.lr
    if config.policy.is_recurrent:  # sequences from the workers to the learner
        return synchronous_plan(config, actors, decayed(steps, lr, train_on_sequences),
                                RolloutWorker.sample_sequences)
    return synchronous_plan(config, actors, decayed(steps, lr, train_on_fragments), RolloutWorker.sample)


def synchronous_plan(config: Batched, actors: Groups[Any], train: Callable[[Any, list[B]], Trained],
                     sample: Callable[[RolloutWorker], B]) -> rxrl.Plan[Metrics]:
    """PPO's and A2C's dataflow: a barrier round of fragments (several, windowed, up to
    ``train_batch_size``) trained on the learner by ``train``, the weights broadcast to every
    worker before it samples again; one `Metrics` record per batch, forever.

    ``sample`` is the workers' method: `RolloutWorker.sample` (flat batches), or
    `RolloutWorker.sample_sequences` for a recurrent policy, whose ``train`` then takes
    sequence batches (`rxrl.algos.common.train_on_sequences`): mypy refuses a mix."""
    workers, learner = actors.pair
    progress = Progress(custom_names=episode_metric_names(config))
    rounds = (rxrl.from_actors(workers, sample)  # Shards[B]: a fragment each
              | ops.barrier())                   # one round, all sampled with one weights
    if config.train_batch_size > config.round_size:             # a batch of several rounds
        joined: Callable[[list[list[B]]], list[B]] = join_rounds
        counted: Callable[[list[B]], int] = rows
        rounds = rounds | ops.window(min_size=config.train_batch_size, combine=joined, size=counted)
    if learner.size > 1:  # a learner group: every member trains on its share, one allreduce a step
        trained = rounds | ops.call_all(learner, train) | ops.map(lead)
    else:
        trained = rounds | ops.call(learner, train)         # concat, standardize, train: on the learner
    return (
        trained
        | ops.broadcast(workers, set_weights)               # reaches every worker before it samples
        | ops.map(progress.observe_trained)                 # Metrics
    )


def lead(results: list[Trained]) -> Trained:
    """A learner group's report: its first member's (all members hold the same weights)."""
    return results[0]


def decayed(lr_decay_steps: int | None, lr: float, train: Callable[[L, list[B]], Trained]
            ) -> Callable[[L, list[B]], Trained]:
    """``train`` at a learning rate decayed linearly from ``lr`` to 0 over ``lr_decay_steps``
    trained env steps (CleanRL's annealing; ``train`` itself when ``lr_decay_steps`` is None).
    PPO's and A2C's."""
    if lr_decay_steps is None:
        return train
    steps = lr_decay_steps

    def train_on_fragments_decayed(learner: L, fragments: list[B]) -> Trained:
        """Set the decayed learning rate, then concatenate, standardize and train."""
        set_learning_rate(learner, lr * max(0.0, 1.0 - learner.env_steps_trained / steps))
        return train(learner, fragments)

    return train_on_fragments_decayed


__all__ = ["B", "Batched", "L", "LearningRate", "OnPolicy", "decayed", "lead", "on_policy_plan",
           "synchronous_plan"]
