"""A deterministic counting environment whose observations reveal exactly what happened."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

TOY_ID = "rxrl-test/Count-v0"
TOY_TRUNCATED_ID = "rxrl-test/CountTruncated-v0"


class CountEnv(gym.Env[npt.NDArray[np.float32], Any]):
    """Observation `[step, tag, last_action]`; reward `step` after each step; terminates at
    step `length + tag % 3`, so sub-environments differ in episode length. `tag` is the seed
    of the first seeded reset, which identifies the sub-environment within a vector env."""

    def __init__(self, length: int = 4, continuous: bool = False, action_start: int = 0) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space: gym.Space[Any] = (
            gym.spaces.Box(-0.5, 0.5, (1,), np.float32)
            if continuous
            else gym.spaces.Discrete(2, start=action_start)
        )
        self.base_length, self.tag, self.step_count, self.last_action = length, 0, 0, 0.0

    @property
    def length(self) -> int:
        return self.base_length + self.tag % 3

    def _obs(self) -> npt.NDArray[np.float32]:
        return np.array([self.step_count, self.tag, self.last_action], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.tag = seed % 1000
        self.step_count, self.last_action = 0, 0.0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        self.step_count += 1
        self.last_action = float(np.asarray(action).reshape(-1)[0])
        return self._obs(), float(self.step_count), self.step_count >= self.length, False, {}


def make_count_env(**kwargs: Any) -> gym.Env[Any, Any]:
    """The gymnasium entry point for `CountEnv`."""
    return CountEnv(**kwargs)


gym.register(TOY_ID, entry_point=make_count_env)
# The time limit cuts every episode of length >= 5 at step 4 (truncated, not terminated).
gym.register(TOY_TRUNCATED_ID, entry_point=make_count_env, kwargs={"length": 5}, max_episode_steps=4)
