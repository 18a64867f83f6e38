"""IMPALA: workers sample continuously; a pipelined V-trace learner trains on their fragments."""

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
from rxrl.rl import IMPALAConfig, IMPALALearner, Metrics

#: The learner settings `IMPALA` starts from: 2 epochs of minibatches of 128 per batch of 512
#: (8 Adam steps: half the SGD of 4 epochs, so the learner keeps up with the workers), Adam lr
#: 1e-3 decaying to 0 over the run, gradient norm 0.5, value coefficient 0.25 (19 of 20 runs
#: reach 450 on CartPole against 18 of 20 at 0.5), no entropy bonus (see docs/algorithms.md
#: for the sweeps).
LEARNER = IMPALAConfig(lr=1e-3, num_epochs=2, minibatch_size=128, vf_coef=0.25, ent_coef=0.0,
                       max_grad_norm=0.5)


@attrs.frozen(kw_only=True)
class IMPALA(VTraceSettings):
    """Importance-weighted actor-learner (the asynchronous settings are in `VTraceSettings`).

    Workers sample with whatever weights they have, each keeping ``max_in_flight`` fragments
    under way (no barrier; only a full learner queue holds them back); the learner trains
    with V-trace once ``train_batch_size`` transitions arrived (``learner.num_epochs`` passes
    of ``learner.minibatch_size``), and the sender of a fragment gets the new weights with
    the learner's reply, at most every ``broadcast_interval`` updates. Each record reports
    its batch's staleness.
    """

    num_envs_per_worker: int = attrs.field(default=8, validator=int_at_least(1))
    fragment_length: int = attrs.field(default=32, validator=int_at_least(1))
    train_batch_size: int = attrs.field(default=512, validator=int_at_least(1))
    lr_decay_steps: int | None = attrs.field(default=300_000, validator=optional(int_at_least(1)))
    learner: IMPALAConfig = attrs.field(default=LEARNER, validator=instance_of(IMPALAConfig))


def groups(config: IMPALA, start: Start | None = None) -> Groups[IMPALALearner]:
    """The plan's actors: ``num_workers`` rollout workers and one `IMPALALearner`."""
    return vtrace_groups(config, IMPALALearner, config.learner, "impala", start)


def plan(config: IMPALA, actors: Groups[IMPALALearner] | None = None) -> rxrl.Plan[Metrics]:
    """IMPALA as a plan: one `Metrics` record per learner update, forever (the dataflow is
    `rxrl.algos.vtrace.common.asynchronous_plan`, APPO's too)."""
    return asynchronous_plan(config, actors or groups(config))


#: Settings that learn faster than the defaults on particular envs (``rxrl train`` applies
#: them for that env; ``--set`` overrides them).
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["SPEC", "IMPALA", "LEARNER", "TUNED", "groups", "plan"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("impala", IMPALA, plan, groups, 300_000, TUNED,
                 "importance-weighted actor-learner (V-trace), asynchronous sampling",
                 records_in_flight=4)
