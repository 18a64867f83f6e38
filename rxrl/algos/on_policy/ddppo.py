"""DD-PPO: decentralized distributed PPO — no central learner; every worker samples, computes
its gradients, sums them with its peers' (an allreduce) and steps.

Wijmans et al. 2020 ("DD-PPO: learning near-perfect PointGoal navigators from 2.5 billion
frames"). Each of the ``num_workers`` members is a `DDPPOLearner`: a `PPOLearner` in a learner
group (`rxrl.rl.learners.collective`, ``local_data``) with a rollout worker of its own. One
iteration is one ``call_all`` on the members: each samples a fragment with its own policy,
runs PPO's epochs of minibatches on it, and before every optimizer step the members sum their
gradients (each weighted 1 / n), so every member takes the same step and they stay equal
(in lockstep, tests/algos/test_ddppo.py) without any weights crossing the driver.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

import attrs
import numpy as np

import rxrl
from rxrl import ops
from rxrl.actors import ActorGroup
from rxrl.algos.common import (
    Groups,
    LearnerFactory,
    Progress,
    RolloutSettings,
    Start,
    Trained,
    env_spaces,
    episode_metric_names,
    instance_of,
    int_at_least,
    placed,
    torch_free_workers,
)
from rxrl.algos.spec import Algorithm
from rxrl.rl import Metrics, PPOConfig, RolloutWorker
from rxrl.rl.data.metrics import EpisodeStats
from rxrl.rl.models.initial import LazyClass

#: the member class, imported where a member is built (its actor's process)
MEMBER_CLASS: LazyClass[Any] = LazyClass("rxrl.algos.on_policy.ddppo_member", "DDPPOLearner")

#: PPO's CartPole settings (`rxrl.algos.on_policy.ppo.LEARNER`) per member: minibatches of 128 of
#: a member's 512 steps, so that the group's step sees 256 rows as PPO's does
LEARNER = PPOConfig(lr=2e-3, num_epochs=10, minibatch_size=128, ent_coef=0.0, clip_vloss=False)


@attrs.frozen(kw_only=True)
class DDPPO(RolloutSettings):
    """Decentralized distributed PPO (the rollout settings are in `RolloutSettings`).

    Each of the ``num_workers`` members steps ``num_envs_per_worker`` envs ``fragment_length``
    times with its own copy of the policy, then runs ``learner.num_epochs`` epochs of
    minibatches of ``learner.minibatch_size`` of its own steps; the members' gradients are
    summed (an allreduce, gloo on the CPU) before every step, so all copies stay equal. The
    group's batch per iteration is ``num_workers * num_envs_per_worker * fragment_length``.
    """

    supports_normalization: ClassVar[bool] = False
    supports_recurrence: ClassVar[bool] = False

    fragment_length: int = attrs.field(default=64, validator=int_at_least(1))
    learner: PPOConfig = attrs.field(default=LEARNER, validator=instance_of(PPOConfig))

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        local = self.num_envs_per_worker * self.fragment_length
        if self.learner.minibatch_size > local:
            raise ValueError(f"DDPPO.learner.minibatch_size ({self.learner.minibatch_size}) must not "
                             f"exceed a member's batch, num_envs_per_worker * fragment_length ({local})")
        if self.learner.num_learners != 1:
            raise ValueError("DDPPO.learner.num_learners does not apply: every one of the "
                             "num_workers members is a learner")
        if self.learner_placement != "actor" or self.learner_device != "cpu":
            raise ValueError("DDPPO's members are actors that train on the CPU: leave "
                             "learner_placement and learner_device at their defaults")


def groups(config: DDPPO, start: Start | None = None) -> Groups[Any]:
    """The members (``num_workers`` of them), as both the plan's workers and its learners."""
    from rxrl.rl.learners.collective import Rendezvous  # torch: the members meet on the driver

    env_spaces(config, "ddppo")
    factory = LearnerFactory(MEMBER_CLASS, config, config.learner, start,
                             {"workers": torch_free_workers(config, start)},
                             Rendezvous.open(config.num_workers))
    members = placed(rxrl.indexed_actors(factory, config.num_workers, name="DDPPOLearner-allreduce"),
                     config.placement.workers)
    # a member is no RolloutWorker; the plan and rxrl train use `learner` alone
    return Groups(cast(ActorGroup[RolloutWorker], members), members)


def sample_and_train(member: Any, _: int) -> Trained:
    """On a member: sample a fragment with its own policy, train on it with the group
    (`DDPPOLearner.step`)."""
    step: Callable[[], Trained] = member.step
    return step()


def combine(results: list[Trained]) -> Trained:
    """The members' reports as one: the group's loss statistics (every member holds the same
    sums), the env steps and episodes of all of them."""
    first = results[0].metrics
    metrics = attrs.evolve(first, env_steps_trained=sum(r.metrics.env_steps_trained for r in results),
                           learner_time_s=max(r.metrics.learner_time_s for r in results),
                           explained_variance=float(np.mean([r.metrics.explained_variance for r in results])))
    episodes = EpisodeStats.of([r.episodes for r in results if r.episodes is not None])
    return Trained(metrics, {}, episodes)


def plan(config: DDPPO, actors: Groups[Any] | None = None) -> rxrl.Plan[Metrics]:
    """DD-PPO as a plan: one `Metrics` record per iteration of the group, forever::

        from_iterable(count()) | call_all(members, sample_and_train)   # sample, train, allreduce
        | map(combine) | map(progress.observe_trained)
    """
    members = (actors or groups(config)).learner
    progress = Progress(custom_names=episode_metric_names(config))
    return (rxrl.from_iterable(itertools.count())
            | ops.call_all(members, sample_and_train)   # every member at once: they meet each step
            | ops.map(combine)
            | ops.map(progress.observe_trained))


#: Settings that learn faster than the defaults on particular envs
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["DDPPO", "LEARNER", "MEMBER_CLASS", "SPEC", "TUNED", "combine", "groups", "plan",
           "sample_and_train"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("ddppo", DDPPO, plan, groups, 150_000, TUNED,
                 "decentralized distributed PPO: every worker a learner, gradients allreduced")
