"""PPO: synchronous on-policy sampling, minibatch SGD on the learner, weights broadcast back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

import rxrl
from rxrl import ops
from rxrl.algos.common import (
    Groups,
    Progress,
    RolloutSettings,
    Start,
    env_spaces,
    instance_of,
    int_at_least,
    join_rounds,
    make_groups,
    rows,
    set_weights,
    train_on_fragments,
)
from rxrl.rl import Metrics, PPOConfig, PPOLearner, RolloutWorker

#: The learner settings `PPO` starts from: CleanRL's PPO with a larger step size, 10 epochs,
#: no entropy bonus and no value clipping, which learns CartPole in ~60k steps (see
#: docs/algorithms.md for the sweep).
LEARNER = PPOConfig(lr=2e-3, num_epochs=10, minibatch_size=256, ent_coef=0.0, clip_vloss=False)


@attrs.frozen(kw_only=True)
class PPO(RolloutSettings):
    """Proximal policy optimization (the rollout settings are in `RolloutSettings`).

    Every round, each of the ``num_workers`` workers samples one fragment with the current
    weights; rounds are concatenated until ``train_batch_size`` transitions, advantages are
    standardized over the batch, the learner runs ``learner.num_epochs`` epochs of minibatch
    SGD, and the new weights reach every worker before its next fragment.
    """

    fragment_length: int = attrs.field(default=64, validator=int_at_least(1))
    train_batch_size: int = attrs.field(default=1024, validator=int_at_least(1))
    learner: PPOConfig = attrs.field(default=LEARNER, validator=instance_of(PPOConfig))

    def __attrs_post_init__(self) -> None:
        if self.learner.minibatch_size > self.train_batch_size:
            raise ValueError(f"PPO.learner.minibatch_size ({self.learner.minibatch_size}) must "
                             f"not exceed PPO.train_batch_size ({self.train_batch_size})")


def groups(config: PPO, start: Start | None = None) -> Groups[PPOLearner]:
    """The plan's actors: ``num_workers`` rollout workers and one `PPOLearner`."""
    env_spaces(config, "ppo")
    return make_groups(config, PPOLearner, config.learner, start)


def plan(config: PPO, actors: Groups[PPOLearner] | None = None) -> rxrl.Plan[Metrics]:
    """PPO as a plan: one `Metrics` record per training iteration, forever."""
    workers, learner = (actors or groups(config)).pair
    progress = Progress()
    rounds = (rxrl.from_actors(workers, RolloutWorker.sample)  # Shards[SampleBatch]: a fragment each
              | ops.barrier())                                # one round, all sampled with one weights
    if config.train_batch_size > config.round_size:             # a batch of several rounds
        rounds = rounds | ops.window(min_size=config.train_batch_size, combine=join_rounds, size=rows)
    return (
        rounds
        | ops.call(learner, train_on_fragments)             # concat, standardize, train: on the learner
        | ops.broadcast(workers, set_weights)               # reaches every worker before it samples
        | ops.map(progress.observe_trained)                 # Metrics
    )


#: Settings that learn faster than the defaults on particular envs (``rxrl train`` applies
#: them for that env; ``--set`` overrides them).
TUNED: Mapping[str, Mapping[str, Any]] = {
    # a short horizon, longer fragments; no global gradient clipping: early value errors are
    # large, and clipping their norm together with the policy's starves the policy update
    "Pendulum-v1": {"gamma": 0.9, "fragment_length": 256, "num_envs_per_worker": 4,
                    "train_batch_size": 2048, "learner.lr": 1e-3, "learner.minibatch_size": 256,
                    "learner.max_grad_norm": None},
}

__all__ = ["LEARNER", "PPO", "TUNED", "groups", "plan"]
