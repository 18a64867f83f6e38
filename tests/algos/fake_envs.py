"""Gymnasium envs the algorithms cannot train on, registered on import (``tests.algos.fake_envs:...``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class MultiDiscreteEnv(gym.Env[np.ndarray, np.ndarray]):
    """A one-step env whose action space is MultiDiscrete (no policy head for it)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.MultiDiscrete([2, 3])

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """The one (zero) observation."""
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """End the episode at once."""
        return np.zeros(2, np.float32), 0.0, True, False, {}


class DictObservationEnv(MultiDiscreteEnv):
    """A Dict observation space (the MLP only takes Box and Discrete)."""

    observation_space = gym.spaces.Dict({"x": gym.spaces.Discrete(2)})  # type: ignore[assignment]
    action_space = gym.spaces.Discrete(2)  # type: ignore[assignment,var-annotated]


gym.register("MultiDiscreteActions-v0", entry_point=f"{__name__}:MultiDiscreteEnv")
gym.register("DictObservations-v0", entry_point=f"{__name__}:DictObservationEnv")
