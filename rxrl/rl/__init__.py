"""rxrl.rl: the reinforcement-learning layer — batches, advantage estimation, policies,
rollout workers, learners, replay buffers and metrics. Plain Python objects: no dependency on ray or on the
plan core, so they run in-process under the reference interpreter and inside Ray actors.
"""

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
