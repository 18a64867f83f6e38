"""PPO: synchronous on-policy sampling, minibatch SGD on the learner, weights broadcast back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

import rxrl
from rxrl.algos.common import (
    Groups,
    LearnerPlacement,
    RolloutSettings,
    Start,
    Trained,
    env_spaces,
    instance_of,
    int_at_least,
    make_groups,
    optional,
    valid_placement,
)
from rxrl.algos.on_policy import common
from rxrl.algos.on_policy.common import B, L, on_policy_plan
from rxrl.algos.spec import Algorithm
from rxrl.rl import Metrics, PPOConfig
from rxrl.rl.models.initial import LazyClass

if TYPE_CHECKING:
    from rxrl.rl.learners.actor_critic import PPOLearner

#: the learner, imported where the learner is built (on the driver, PPO's and A2C's default,
#: once the run starts; a driver that only builds this plan does without torch:
#: docs/design-notes.md, "The start-up's critical path")
LEARNER_CLASS: LazyClass[PPOLearner] = LazyClass("rxrl.rl.learners.actor_critic", "PPOLearner")

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

    With ``lr_decay_steps`` the learning rate decays linearly from ``learner.lr`` to 0 over
    that many trained env steps (CleanRL's annealing; ``rxrl train`` sets it to ``--steps``
    when it is not None, as the MuJoCo settings in `TUNED` have it); None keeps it constant.
    """

    supports_normalization: ClassVar[bool] = True
    supports_recurrence: ClassVar[bool] = True

    fragment_length: int = attrs.field(default=64, validator=int_at_least(1))
    train_batch_size: int = attrs.field(default=1024, validator=int_at_least(1))
    learner: PPOConfig = attrs.field(default=LEARNER, validator=instance_of(PPOConfig))
    lr_decay_steps: int | None = attrs.field(default=None, validator=optional(int_at_least(1)))
    #: synchronous: the workers wait for the learner's weights, so it runs on the driver
    learner_placement: LearnerPlacement = attrs.field(default="driver", validator=valid_placement)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.learner.minibatch_size > self.train_batch_size:
            raise ValueError(f"PPO.learner.minibatch_size ({self.learner.minibatch_size}) must "
                             f"not exceed PPO.train_batch_size ({self.train_batch_size})")


def groups(config: PPO, start: Start | None = None) -> Groups[PPOLearner]:
    """The plan's actors: ``num_workers`` rollout workers and one `PPOLearner`."""
    env_spaces(config, "ppo")
    return make_groups(config, LEARNER_CLASS, config.learner, start, torch_free=True)


def plan(config: PPO, actors: Groups[PPOLearner] | None = None) -> rxrl.Plan[Metrics]:
    """PPO as a plan: one `Metrics` record per training iteration, forever.

    The dataflow (`rxrl.algos.on_policy.common.synchronous_plan`, A2C's too)::

        from_actors(workers, RolloutWorker.sample) | barrier()   # one round, one weights
        [| window(min_size=train_batch_size)]                     # several rounds a batch
        | call(learner, train_on_fragments)                       # concat, standardize, train
        | broadcast(workers, set_weights)                         # before the next round
        | map(progress.observe_trained)                           # Metrics
    """
    return on_policy_plan(config, actors or groups(config))


def decayed(config: PPO, train: Callable[[L, list[B]], Trained]) -> Callable[[L, list[B]], Trained]:
    """``train`` at ``config``'s learning-rate schedule (`rxrl.algos.on_policy.common.decayed`,
    which A2C shares; kept here under its earlier name)."""
    return common.decayed(config.lr_decay_steps, config.learner.lr, train)


#: CleanRL's continuous-control PPO (ppo_continuous_action.py): 2048 steps per batch (two
#: workers of one env, 1024 steps each), 10 epochs of minibatches of 64, lr 3e-4 annealed to 0
#: over the run, value clipping, no entropy bonus, observations normalized and rewards scaled
#: with running statistics synced through the learner (docs/algorithms.md, "PPO on MuJoCo")
MUJOCO: Mapping[str, Any] = {
    "num_envs_per_worker": 1, "fragment_length": 1024, "train_batch_size": 2048,
    "gamma": 0.99, "lam": 0.95, "lr_decay_steps": 1_000_000,
    "learner.lr": 3e-4, "learner.num_epochs": 10, "learner.minibatch_size": 64,
    "learner.clip_vloss": True, "learner.ent_coef": 0.0, "learner.max_grad_norm": 0.5,
    "policy.normalize_obs": True, "policy.scale_rewards": True,
}
MUJOCO_ENVS = ("Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Humanoid-v5", "HumanoidStandup-v5",
               "Swimmer-v5", "Walker2d-v5")

#: Atari (``ALE/*``): CleanRL's ``ppo_atari`` — 8 envs (2 workers × 4) × 128 steps, 4 epochs of
#: minibatches of 256, clip 0.1, entropy 0.01, clipped value loss, lr 2.5e-4 decayed to 0 over
#: the run — with a 2-thread learner (it trains while the workers wait for its weights)
ATARI: Mapping[str, Any] = {
    "num_envs_per_worker": 4, "fragment_length": 128, "train_batch_size": 1024,
    "gamma": 0.99, "lam": 0.95, "lr_decay_steps": 10_000_000, "learner_threads": 2,
    "learner.lr": 2.5e-4, "learner.num_epochs": 4, "learner.minibatch_size": 256,
    "learner.clip_coef": 0.1, "learner.clip_vloss": True, "learner.ent_coef": 0.01,
    "learner.vf_coef": 0.5, "learner.max_grad_norm": 0.5,
}
#: MinAtar (``MinAtar/*``): PPO in the style of PureJaxRL's MinAtar PPO (pgx's example of it: lr
#: 3e-4, 3 epochs, 4,096 envs) on CPU-sized batches — 16 envs (2 × 8) ×
#: 128 steps, 4 epochs of minibatches of 256, clip 0.2, entropy 0.01, lr 5e-4 decayed to 0
MINATAR: Mapping[str, Any] = {
    "num_envs_per_worker": 8, "fragment_length": 128, "train_batch_size": 2048,
    "gamma": 0.99, "lam": 0.95, "lr_decay_steps": 1_000_000,
    "learner.lr": 5e-4, "learner.num_epochs": 4, "learner.minibatch_size": 256,
    "learner.clip_coef": 0.2, "learner.ent_coef": 0.01, "learner.vf_coef": 0.5,
    "learner.max_grad_norm": 0.5,
}

#: Settings that learn faster than the defaults on particular envs (``rxrl train`` applies
#: them for that env; ``--set`` overrides them; ``*`` keys are patterns:
#: `rxrl.algos.spec.Algorithm.tuned_for`).
TUNED: Mapping[str, Mapping[str, Any]] = {
    **{env: MUJOCO for env in MUJOCO_ENVS},
    # a memory task (docs/algorithms.md, "Recurrent policies"): an LSTM, sequences of 16
    # steps, normalized observations (position and angle move by ~1e-2 a step), a shorter
    # horizon and GAE lambda (SB3 Zoo's CartPole settings), a step size decayed to 0 (5e-4:
    # 1e-3 reached 450 as often but fell back from it, 3 seeds each)
    "rxrl/StatelessCartPole-v0": {"policy.recurrent": "lstm", "policy.sequence_length": 16,
                                  "policy.normalize_obs": True, "gamma": 0.98, "lam": 0.8,
                                  "learner.lr": 5e-4, "lr_decay_steps": 500_000},
    # a short horizon, longer fragments; no global gradient clipping: early value errors are
    # large, and clipping their norm together with the policy's starves the policy update
    "Pendulum-v1": {"gamma": 0.9, "fragment_length": 256, "num_envs_per_worker": 4,
                    "train_batch_size": 2048, "learner.lr": 1e-3, "learner.minibatch_size": 256,
                    "learner.max_grad_norm": None},
    "ALE/*": ATARI,
    "MinAtar/*": MINATAR,
}

__all__ = ["SPEC", "ATARI", "LEARNER", "LEARNER_CLASS", "MINATAR", "MUJOCO", "MUJOCO_ENVS", "PPO", "TUNED",
           "decayed", "groups", "plan"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("ppo", PPO, plan, groups, 100_000, TUNED,
                 "proximal policy optimization, synchronous")
