"""What a synchronous learner sends back to the driver and the rollout workers: `Trained`
(its report, the new weights, and the episodes behind the update) and `set_weights`, which
loads them into a worker. Torch-free, like everything a rollout worker receives
(`rxrl.rl.workers.rollout.RolloutWorkerFactory`): both are imported where they are used, here."""

from __future__ import annotations

import attrs
import numpy as np

from rxrl.rl.data.metrics import EpisodeStats, TrainMetrics
from rxrl.rl.models.forward import Weights
from rxrl.rl.workers.rollout import RolloutWorker


@attrs.frozen(eq=False)
class Trained:
    """A learner's report after an update, with the weights to send to the workers.

    ``episodes``: the episodes and env steps behind the update (rows dropped), when the
    learner assembled the batch itself (`train_on_fragments`); the driver counts them.
    """

    metrics: TrainMetrics
    weights: Weights
    episodes: EpisodeStats | None = None


def set_weights(worker: RolloutWorker, trained: Trained) -> None:
    """Load the learner's new weights into ``worker``."""
    # a writable copy: weights that arrive through Ray's object store are read-only views
    worker.set_weights({k: np.array(v) for k, v in trained.weights.items()})


__all__ = ["Trained", "set_weights"]
