"""APPO: IMPALA's asynchronous dataflow with PPO's clipped surrogate on V-trace advantages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

import rxrl
from rxrl.algos.common import Groups, Start, instance_of, int_at_least, optional
from rxrl.algos.spec import Algorithm
from rxrl.algos.vtrace.common import (
    VTraceSettings,
    asynchronous_plan,
    vtrace_groups,
)
from rxrl.rl import APPOConfig, APPOLearner, Metrics

#: The learner settings `APPO` starts from: the clipped surrogate (0.4) against a target network
#: refreshed every update, 4 epochs of minibatches of 128 per batch of 512, Adam lr 1e-3
#: decaying to 0 over the run, gradient norm 0.5, a KL penalty to the target network (1.0), no
#: entropy bonus (see docs/algorithms.md for the sweep). The KL penalty keeps a run from
#: collapsing after a long stretch of perfect episodes (the clip bounds one update, not a run
#: of them: docs/design-notes.md, "Why APPO collapsed").
LEARNER = APPOConfig(lr=1e-3, num_epochs=4, minibatch_size=128, vf_coef=0.5, ent_coef=0.0,
                     max_grad_norm=0.5, clip_coef=0.4, target_update_interval=1, kl_coef=1.0)


@attrs.frozen(kw_only=True)
class APPO(VTraceSettings):
    """Asynchronous PPO (the asynchronous settings are in `VTraceSettings`).

    IMPALA's dataflow: workers keep ``max_in_flight`` fragments under way, with no barrier
    (only a full learner queue holds them back); the learner trains once ``train_batch_size``
    transitions arrived and sends the
    sender new weights with its reply, at most every ``broadcast_interval`` updates. The
    update is PPO's clipped surrogate on V-trace advantages against a target network
    (``learner.target_update_interval``), ``learner.num_epochs`` passes of
    ``learner.minibatch_size``, with an optional KL penalty (``learner.kl_coef``).
    """

    num_envs_per_worker: int = attrs.field(default=8, validator=int_at_least(1))
    fragment_length: int = attrs.field(default=32, validator=int_at_least(1))
    train_batch_size: int = attrs.field(default=512, validator=int_at_least(1))
    lr_decay_steps: int | None = attrs.field(default=200_000, validator=optional(int_at_least(1)))
    learner: APPOConfig = attrs.field(default=LEARNER, validator=instance_of(APPOConfig))


def groups(config: APPO, start: Start | None = None) -> Groups[APPOLearner]:
    """The plan's actors: ``num_workers`` rollout workers and one `APPOLearner`."""
    return vtrace_groups(config, APPOLearner, config.learner, "appo", start)


def plan(config: APPO, actors: Groups[APPOLearner] | None = None) -> rxrl.Plan[Metrics]:
    """APPO as a plan: IMPALA's (`rxrl.algos.vtrace.common.asynchronous_plan`), one `Metrics`
    record per learner update, forever; the learner's update is what differs."""
    return asynchronous_plan(config, actors or groups(config))


#: Settings that learn faster than the defaults on particular envs (``rxrl train`` applies
#: them for that env; ``--set`` overrides them).
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["SPEC", "APPO", "LEARNER", "TUNED", "groups", "plan"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("appo", APPO, plan, groups, 200_000, TUNED,
                 "asynchronous PPO (clipped surrogate on V-trace), asynchronous sampling",
                 records_in_flight=4)
