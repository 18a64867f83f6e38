"""A DD-PPO member (`rxrl.algos.on_policy.ddppo`): a `PPOLearner` of a learner group with a rollout
worker of its own. Imports torch: only the members' processes import this module."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rxrl.algos.common import Trained, train_on_fragments
from rxrl.envs.vector import EnvSpaces
from rxrl.rl import PolicyConfig, PPOConfig, RolloutWorker
from rxrl.rl.learners.actor_critic import Device, PPOLearner
from rxrl.rl.learners.collective import Collective


class DDPPOLearner(PPOLearner):
    """Rank ``collective.rank`` of a DD-PPO group: samples with its own policy
    (``workers(rank)``: its envs, seeded by its index), trains on its own batch with the
    group's summed gradients (``collective`` with ``local_data``), and acts with the new
    weights next time. Every member starts from the same weights (one seed) and takes the
    same steps."""

    def __init__(self, env: str | EnvSpaces, config: PPOConfig | None = None,
                 policy: PolicyConfig | None = None, seed: int = 0,
                 env_kwargs: Mapping[str, Any] | None = None, device: Device = "cpu",
                 collective: Collective | None = None, *,
                 workers: Callable[[int], RolloutWorker]) -> None:
        if collective is None:
            raise ValueError("DDPPOLearner: a member needs its group's collective")
        collective.local_data = True
        super().__init__(env, config, policy, seed, env_kwargs, device, collective)
        self.worker = workers(collective.rank)
        self.worker.set_weights(self.get_weights())

    def step(self) -> Trained:
        """Sample one fragment, train on it with the group; the report carries no weights
        (they never leave the members)."""
        trained = train_on_fragments(self, [self.worker.sample()])
        self.worker.set_weights(trained.weights)
        return Trained(trained.metrics, {}, trained.episodes)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """`PPOLearner.load_state_dict`, and the worker acts with the restored weights."""
        super().load_state_dict(state)
        if hasattr(self, "worker"):
            self.worker.set_weights(self.get_weights())


__all__ = ["DDPPOLearner"]
