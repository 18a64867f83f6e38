"""A2C: synchronous advantage actor-critic, one gradient step per batch on the learner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

import rxrl
from rxrl.algos.common import (
    Groups,
    LearnerPlacement,
    RolloutSettings,
    Start,
    env_spaces,
    instance_of,
    int_at_least,
    make_groups,
    optional,
    valid_placement,
)
from rxrl.algos.on_policy.common import on_policy_plan
from rxrl.algos.spec import Algorithm
from rxrl.rl import A2CConfig, Metrics
from rxrl.rl.models.initial import LazyClass

if TYPE_CHECKING:
    from rxrl.rl.learners.actor_critic import A2CLearner

#: the learner, imported where the learner is built (on the driver, PPO's and A2C's default,
#: once the run starts; a driver that only builds this plan does without torch:
#: docs/design-notes.md, "The start-up's critical path")
LEARNER_CLASS: LazyClass[A2CLearner] = LazyClass("rxrl.rl.learners.actor_critic", "A2CLearner")

#: The learner settings `A2C` starts from (see docs/algorithms.md for how they were chosen).
LEARNER = A2CConfig(lr=1.5e-3, ent_coef=0.0, vf_coef=0.25, max_grad_norm=0.5)


@attrs.frozen(kw_only=True)
class A2C(RolloutSettings):
    """Advantage actor-critic, synchronous (the rollout settings are in `RolloutSettings`).

    Every round, each worker samples a short fragment with the current weights; rounds
    are concatenated until ``train_batch_size`` transitions, advantages are standardized,
    the learner takes one gradient step, and the new weights reach every worker before
    its next fragment.

    With ``lr_decay_steps`` the learning rate decays linearly from ``learner.lr`` to 0 over
    that many trained env steps (``rxrl train`` sets it to ``--steps`` when it is not None);
    None keeps it constant.
    """

    supports_normalization: ClassVar[bool] = True
    supports_recurrence: ClassVar[bool] = True

    num_envs_per_worker: int = attrs.field(default=4, validator=int_at_least(1))
    fragment_length: int = attrs.field(default=32, validator=int_at_least(1))
    train_batch_size: int = attrs.field(default=256, validator=int_at_least(1))
    learner: A2CConfig = attrs.field(default=LEARNER, validator=instance_of(A2CConfig))
    lr_decay_steps: int | None = attrs.field(default=None, validator=optional(int_at_least(1)))
    #: synchronous: the workers wait for the learner's weights, so it runs on the driver
    learner_placement: LearnerPlacement = attrs.field(default="driver", validator=valid_placement)


def groups(config: A2C, start: Start | None = None) -> Groups[A2CLearner]:
    """The plan's actors: ``num_workers`` rollout workers and one `A2CLearner`."""
    env_spaces(config, "a2c")
    return make_groups(config, LEARNER_CLASS, config.learner, start, torch_free=True)


def plan(config: A2C, actors: Groups[A2CLearner] | None = None) -> rxrl.Plan[Metrics]:
    """A2C as a plan: one `Metrics` record per gradient step, forever (PPO's dataflow:
    `rxrl.algos.on_policy.common.synchronous_plan`)."""
    return on_policy_plan(config, actors or groups(config))


#: Settings that learn faster than the defaults on particular envs (``rxrl train`` applies
#: them for that env; ``--set`` overrides them).
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["SPEC", "A2C", "LEARNER", "LEARNER_CLASS", "TUNED", "groups", "plan"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("a2c", A2C, plan, groups, 200_000, TUNED,
                 "advantage actor-critic, synchronous")
