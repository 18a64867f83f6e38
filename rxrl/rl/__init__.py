"""rxrl.rl: the reinforcement-learning layer — batches, advantage estimation, policies,
rollout workers, learners, replay buffers and metrics. Plain Python objects: no dependency on ray or on the
plan core, so they run in-process under the reference interpreter and inside Ray actors.

Names load on first use (PEP 562), so that a process that needs only the torch-free parts
(a rollout worker acting with numpy weights, `rxrl.rl.worker.RolloutWorkerFactory`) does not
import torch by importing this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rxrl.rl.batch import COLUMNS, SampleBatch, standardize
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
    from rxrl.rl.dqn import DQNLearner
    from rxrl.rl.env import EnvSpaces, make_vector_env
    from rxrl.rl.fragment import Fragment
    from rxrl.rl.gae import compute_gae, vtrace
    from rxrl.rl.impala import APPOLearner, IMPALALearner, VersionedWeights, VTraceLearner, VTraceMetrics
    from rxrl.rl.learner import A2CLearner, Learner, PPOLearner
    from rxrl.rl.losses import Gradients, a2c_loss, ppo_loss
    from rxrl.rl.metrics import EpisodeStats, Metrics, MetricsAccumulator, SampleMetrics, TrainMetrics
    from rxrl.rl.policy import (
        ActorCritic,
        CategoricalActorCritic,
        GaussianActorCritic,
        Weights,
        make_policy,
    )
    from rxrl.rl.qnet import QNetwork, make_q_network
    from rxrl.rl.qworker import QRolloutWorker
    from rxrl.rl.replay import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer
    from rxrl.rl.schedules import LinearSchedule, apex_epsilon, epsilon_schedule
    from rxrl.rl.shard import ReplayShard
    from rxrl.rl.sumtree import SumTree
    from rxrl.rl.transitions import TransitionBatch
    from rxrl.rl.worker import RolloutWorker

#: where each public name lives
_MODULES: dict[str, str] = {
    "A2CConfig": "rxrl.rl.config",
    "A2CLearner": "rxrl.rl.learner",
    "APPOConfig": "rxrl.rl.config",
    "APPOLearner": "rxrl.rl.impala",
    "ActorCritic": "rxrl.rl.policy",
    "COLUMNS": "rxrl.rl.batch",
    "CategoricalActorCritic": "rxrl.rl.policy",
    "DQNConfig": "rxrl.rl.config",
    "DQNLearner": "rxrl.rl.dqn",
    "EnvSpaces": "rxrl.rl.env",
    "EpisodeStats": "rxrl.rl.metrics",
    "Fragment": "rxrl.rl.fragment",
    "GaussianActorCritic": "rxrl.rl.policy",
    "Gradients": "rxrl.rl.losses",
    "IMPALAConfig": "rxrl.rl.config",
    "IMPALALearner": "rxrl.rl.impala",
    "Learner": "rxrl.rl.learner",
    "LinearSchedule": "rxrl.rl.schedules",
    "Metrics": "rxrl.rl.metrics",
    "MetricsAccumulator": "rxrl.rl.metrics",
    "PPOConfig": "rxrl.rl.config",
    "PPOLearner": "rxrl.rl.learner",
    "PolicyConfig": "rxrl.rl.config",
    "PrioritizedReplayBuffer": "rxrl.rl.replay",
    "QNetConfig": "rxrl.rl.config",
    "QNetwork": "rxrl.rl.qnet",
    "QRolloutWorker": "rxrl.rl.qworker",
    "ReplayBuffer": "rxrl.rl.replay",
    "ReplayConfig": "rxrl.rl.config",
    "ReplayShard": "rxrl.rl.shard",
    "RolloutWorker": "rxrl.rl.worker",
    "SACConfig": "rxrl.rl.config",
    "SampleBatch": "rxrl.rl.batch",
    "SampleMetrics": "rxrl.rl.metrics",
    "SumTree": "rxrl.rl.sumtree",
    "TrainMetrics": "rxrl.rl.metrics",
    "TransitionBatch": "rxrl.rl.transitions",
    "VTraceConfig": "rxrl.rl.config",
    "VTraceLearner": "rxrl.rl.impala",
    "VTraceMetrics": "rxrl.rl.impala",
    "VersionedWeights": "rxrl.rl.impala",
    "Weights": "rxrl.rl.policy",
    "a2c_loss": "rxrl.rl.losses",
    "apex_epsilon": "rxrl.rl.schedules",
    "compute_gae": "rxrl.rl.gae",
    "epsilon_schedule": "rxrl.rl.schedules",
    "make_policy": "rxrl.rl.policy",
    "make_q_network": "rxrl.rl.qnet",
    "make_replay_buffer": "rxrl.rl.replay",
    "make_vector_env": "rxrl.rl.env",
    "ppo_loss": "rxrl.rl.losses",
    "standardize": "rxrl.rl.batch",
    "vtrace": "rxrl.rl.gae",
}


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` (see the module docstring)."""
    try:
        module = _MODULES[name]
    except KeyError:
        raise AttributeError(f"module 'rxrl.rl' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULES})


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
