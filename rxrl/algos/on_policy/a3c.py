"""A3C: workers compute gradients asynchronously; the learner applies each and replies to its sender."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

import rxrl
from rxrl import ops
from rxrl.actors import Tagged
from rxrl.algos.common import (
    Groups,
    Progress,
    RolloutSettings,
    Start,
    Trained,
    WorkerGradients,
    env_spaces,
    episode_metric_names,
    instance_of,
    int_at_least,
    make_groups,
    optional,
    set_learning_rate,
)
from rxrl.algos.spec import Algorithm
from rxrl.rl import A2CConfig, A2CLearner, Metrics, RolloutWorker, TrainMetrics, standardize

#: The loss settings of the workers and the learner's optimizer (see docs/algorithms.md).
LEARNER = A2CConfig(lr=2e-3, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
                    normalize_advantages=True)


@attrs.frozen(kw_only=True)
class A3C(RolloutSettings):
    """Asynchronous advantage actor-critic (the rollout settings are in `RolloutSettings`).

    Each worker samples a fragment and computes the A2C loss gradients on it; the learner
    applies gradients in the order they arrive and sends the new weights back to the
    worker that computed them only. A worker keeps ``max_in_flight`` fragments under way,
    so its gradients are up to ``max_in_flight`` updates stale (A3C's asynchrony, bounded).
    The learning rate decays linearly from ``learner.lr`` to 0 over ``lr_decay_steps`` env
    steps (``rxrl train`` sets it to ``--steps``); None keeps it constant.
    """

    num_envs_per_worker: int = attrs.field(default=4, validator=int_at_least(1))
    fragment_length: int = attrs.field(default=32, validator=int_at_least(1))
    max_in_flight: int = attrs.field(default=1, validator=int_at_least(1))
    lr_decay_steps: int | None = attrs.field(default=200_000, validator=optional(int_at_least(1)))
    learner: A2CConfig = attrs.field(default=LEARNER, validator=instance_of(A2CConfig))


def compute_gradients(config: A2CConfig) -> Callable[[RolloutWorker], WorkerGradients]:
    """The worker side: sample a fragment and return the loss gradients on it."""

    def sample_and_compute_gradients(worker: RolloutWorker) -> WorkerGradients:
        """One fragment, its advantages standardized if configured, and its gradients."""
        batch = worker.sample()
        if config.normalize_advantages:
            batch = standardize("advantages")(batch)
        return WorkerGradients.of(worker.compute_gradients(batch, config), batch)

    return sample_and_compute_gradients


def apply_gradients(config: A3C) -> Callable[[A2CLearner, Tagged[WorkerGradients]], Tagged[Trained]]:
    """The learner side: one optimizer step per worker fragment, at the decayed learning rate."""
    rows = config.num_envs_per_worker * config.fragment_length

    def apply_gradients(learner: A2CLearner, item: Tagged[WorkerGradients]) -> Tagged[Trained]:
        """One optimizer step with a worker's gradients; the tag routes the weights back to it."""
        if config.lr_decay_steps is not None:
            done = learner.num_updates * rows / config.lr_decay_steps
            set_learning_rate(learner, config.learner.lr * max(0.0, 1.0 - done))
        weights = learner.apply_gradients(item.value.gradients)
        report = attrs.evolve(item.value.gradients.metrics, num_updates=1)
        return item.with_value(Trained(report, weights))

    return apply_gradients


def set_weights_of_sender(worker: RolloutWorker, item: Tagged[Trained]) -> TrainMetrics:
    """Load the weights on the worker the gradients came from; pass the report on."""
    worker.set_weights({k: v.copy() for k, v in item.value.weights.items()})
    return item.value.metrics


def groups(config: A3C, start: Start | None = None) -> Groups[A2CLearner]:
    """The plan's actors: ``num_workers`` rollout workers and one `A2CLearner`."""
    env_spaces(config, "a3c")
    return make_groups(config, A2CLearner, config.learner, start)


def plan(config: A3C, actors: Groups[A2CLearner] | None = None) -> rxrl.Plan[Metrics]:
    """A3C as a plan: one `Metrics` record per applied gradient, forever."""
    workers, learner = (actors or groups(config)).pair
    progress = Progress(custom_names=episode_metric_names(config))
    return (
        rxrl.from_actors(workers, compute_gradients(config.learner))  # sample + backprop on the worker
        | ops.gather(config.max_in_flight, tagged=True)     # completion order, tagged with the worker
        | ops.map(progress.observe_gradients)               # episodes, env steps (driver side)
        | ops.call(learner, apply_gradients(config))        # one optimizer step, same tag
        | ops.call(workers, set_weights_of_sender)          # routed by the tag: the sender only
        | ops.map(progress.observe_train)                   # Metrics
    )


#: Settings that learn faster than the defaults on particular envs (``rxrl train`` applies
#: them for that env; ``--set`` overrides them).
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["SPEC", "A3C", "LEARNER", "TUNED", "apply_gradients", "compute_gradients", "groups", "plan",
           "set_weights_of_sender"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("a3c", A3C, plan, groups, 200_000, TUNED,
                 "advantage actor-critic, asynchronous gradients")
