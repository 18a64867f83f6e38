"""rxrl.rl: the reinforcement-learning layer — batches, advantage estimation, policies,
rollout workers, learners and metrics. Plain Python objects: no dependency on ray or on the
plan core, so they run in-process under the reference interpreter and inside Ray actors.
"""

from rxrl.rl.batch import COLUMNS, SampleBatch, standardize
from rxrl.rl.config import A2CConfig, PolicyConfig, PPOConfig
from rxrl.rl.env import EnvSpaces, make_vector_env
from rxrl.rl.gae import compute_gae, vtrace
from rxrl.rl.learner import A2CLearner, Learner, PPOLearner
from rxrl.rl.losses import Gradients, a2c_loss, ppo_loss
from rxrl.rl.metrics import Metrics, MetricsAccumulator, SampleMetrics, TrainMetrics
from rxrl.rl.policy import (
    ActorCritic,
    CategoricalActorCritic,
    GaussianActorCritic,
    Weights,
    make_policy,
)
from rxrl.rl.worker import RolloutWorker

__all__ = [
    "COLUMNS",
    "A2CConfig",
    "A2CLearner",
    "ActorCritic",
    "CategoricalActorCritic",
    "EnvSpaces",
    "GaussianActorCritic",
    "Gradients",
    "Learner",
    "Metrics",
    "MetricsAccumulator",
    "PPOConfig",
    "PPOLearner",
    "PolicyConfig",
    "RolloutWorker",
    "SampleBatch",
    "SampleMetrics",
    "TrainMetrics",
    "Weights",
    "a2c_loss",
    "compute_gae",
    "make_policy",
    "make_vector_env",
    "ppo_loss",
    "standardize",
    "vtrace",
]
