"""rxrl.rl: the reinforcement-learning layer — batches, advantage estimation, policies,
rollout workers, learners, replay buffers and metrics. Plain Python objects: no dependency on ray or on the
plan core, so they run in-process under the reference interpreter and inside Ray actors.

Names load on first use (PEP 562), so that a process that needs only the torch-free parts
(a rollout worker acting with numpy weights, `rxrl.rl.workers.rollout.RolloutWorkerFactory`) does not
import torch by importing this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rxrl._lazy import lazy_exports

if TYPE_CHECKING:
    from rxrl.envs.vector import EnvSpaces, make_vector_env
    from rxrl.rl.config import (
        A2CConfig,
        APPOConfig,
        DQNConfig,
        IMPALAConfig,
        PolicyConfig,
        PPOConfig,
        QNetConfig,
        ReplayConfig,
        SACConfig,
        VTraceConfig,
    )
    from rxrl.rl.data.batch import COLUMNS, SampleBatch, standardize
    from rxrl.rl.data.fragment import Fragment
    from rxrl.rl.data.metrics import EpisodeStats, Metrics, MetricsAccumulator, SampleMetrics, TrainMetrics
    from rxrl.rl.data.transitions import TransitionBatch
    from rxrl.rl.learners.actor_critic import A2CLearner, Learner, PPOLearner
    from rxrl.rl.learners.dqn import DQNLearner
    from rxrl.rl.learners.vtrace import (
        APPOLearner,
        IMPALALearner,
        VersionedWeights,
        VTraceLearner,
        VTraceMetrics,
    )
    from rxrl.rl.models.policy import (
        ActorCritic,
        CategoricalActorCritic,
        GaussianActorCritic,
        Weights,
        make_policy,
    )
    from rxrl.rl.models.qnet import QNetwork, make_q_network
    from rxrl.rl.objectives.gae import compute_gae, vtrace
    from rxrl.rl.objectives.losses import Gradients, a2c_loss, ppo_loss
    from rxrl.rl.replay.buffers import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer
    from rxrl.rl.replay.shard import ReplayShard
    from rxrl.rl.replay.sumtree import SumTree
    from rxrl.rl.schedules import LinearSchedule, apex_epsilon, epsilon_schedule
    from rxrl.rl.workers.qworker import QRolloutWorker
    from rxrl.rl.workers.rollout import RolloutWorker

#: where each public name lives
_MODULES: dict[str, str] = {
    "A2CConfig": "rxrl.rl.config",
    "A2CLearner": "rxrl.rl.learners.actor_critic",
    "APPOConfig": "rxrl.rl.config",
    "APPOLearner": "rxrl.rl.learners.vtrace",
    "ActorCritic": "rxrl.rl.models.policy",
    "COLUMNS": "rxrl.rl.data.batch",
    "CategoricalActorCritic": "rxrl.rl.models.policy",
    "DQNConfig": "rxrl.rl.config",
    "DQNLearner": "rxrl.rl.learners.dqn",
    "EnvSpaces": "rxrl.envs.vector",
    "EpisodeStats": "rxrl.rl.data.metrics",
    "Fragment": "rxrl.rl.data.fragment",
    "GaussianActorCritic": "rxrl.rl.models.policy",
    "Gradients": "rxrl.rl.objectives.losses",
    "IMPALAConfig": "rxrl.rl.config",
    "IMPALALearner": "rxrl.rl.learners.vtrace",
    "Learner": "rxrl.rl.learners.actor_critic",
    "LinearSchedule": "rxrl.rl.schedules",
    "Metrics": "rxrl.rl.data.metrics",
    "MetricsAccumulator": "rxrl.rl.data.metrics",
    "PPOConfig": "rxrl.rl.config",
    "PPOLearner": "rxrl.rl.learners.actor_critic",
    "PolicyConfig": "rxrl.rl.config",
    "PrioritizedReplayBuffer": "rxrl.rl.replay.buffers",
    "QNetConfig": "rxrl.rl.config",
    "QNetwork": "rxrl.rl.models.qnet",
    "QRolloutWorker": "rxrl.rl.workers.qworker",
    "ReplayBuffer": "rxrl.rl.replay.buffers",
    "ReplayConfig": "rxrl.rl.config",
    "ReplayShard": "rxrl.rl.replay.shard",
    "RolloutWorker": "rxrl.rl.workers.rollout",
    "SACConfig": "rxrl.rl.config",
    "SampleBatch": "rxrl.rl.data.batch",
    "SampleMetrics": "rxrl.rl.data.metrics",
    "SumTree": "rxrl.rl.replay.sumtree",
    "TrainMetrics": "rxrl.rl.data.metrics",
    "TransitionBatch": "rxrl.rl.data.transitions",
    "VTraceConfig": "rxrl.rl.config",
    "VTraceLearner": "rxrl.rl.learners.vtrace",
    "VTraceMetrics": "rxrl.rl.learners.vtrace",
    "VersionedWeights": "rxrl.rl.learners.vtrace",
    "Weights": "rxrl.rl.models.policy",
    "a2c_loss": "rxrl.rl.objectives.losses",
    "apex_epsilon": "rxrl.rl.schedules",
    "compute_gae": "rxrl.rl.objectives.gae",
    "epsilon_schedule": "rxrl.rl.schedules",
    "make_policy": "rxrl.rl.models.policy",
    "make_q_network": "rxrl.rl.models.qnet",
    "make_replay_buffer": "rxrl.rl.replay.buffers",
    "make_vector_env": "rxrl.envs.vector",
    "ppo_loss": "rxrl.rl.objectives.losses",
    "standardize": "rxrl.rl.data.batch",
    "vtrace": "rxrl.rl.objectives.gae",
}


__getattr__, __dir__ = lazy_exports("rxrl.rl", _MODULES, globals())

__all__ = [
    "COLUMNS",
    "A2CConfig",
    "A2CLearner",
    "APPOConfig",
    "APPOLearner",
    "ActorCritic",
    "CategoricalActorCritic",
    "DQNConfig",
    "DQNLearner",
    "EnvSpaces",
    "EpisodeStats",
    "Fragment",
    "GaussianActorCritic",
    "Gradients",
    "IMPALAConfig",
    "IMPALALearner",
    "Learner",
    "LinearSchedule",
    "Metrics",
    "MetricsAccumulator",
    "PPOConfig",
    "PPOLearner",
    "PolicyConfig",
    "PrioritizedReplayBuffer",
    "QNetConfig",
    "QNetwork",
    "QRolloutWorker",
    "ReplayBuffer",
    "ReplayConfig",
    "ReplayShard",
    "SACConfig",
    "RolloutWorker",
    "SampleBatch",
    "SampleMetrics",
    "SumTree",
    "TrainMetrics",
    "TransitionBatch",
    "VTraceConfig",
    "VTraceLearner",
    "VTraceMetrics",
    "VersionedWeights",
    "Weights",
    "a2c_loss",
    "apex_epsilon",
    "compute_gae",
    "epsilon_schedule",
    "make_policy",
    "make_q_network",
    "make_replay_buffer",
    "make_vector_env",
    "ppo_loss",
    "standardize",
    "vtrace",
]
