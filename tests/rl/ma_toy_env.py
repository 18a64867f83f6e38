"""A tiny Parallel env whose agents join and leave mid-episode, for multi-agent bookkeeping tests.

Agent ``a`` acts from the start and is terminated at env step 2 (its 3rd step); agent ``b``
joins after step 1 and is truncated at step 4 (the 5th, the last). ``a`` earns 1 per step, ``b``
10. Observations are ``[env step count]``; actions ``Discrete(2)`` (ignored). An episode: 5
env steps, 3 transitions each, returns 3 and 30, total 33.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Relay:
    """See the module docstring; ``leave_silently=True`` drops ``a`` without a flag (a bad env)."""

    metadata: dict[str, Any] = {"name": "relay"}  # noqa: RUF012

    def __init__(self, leave_silently: bool = False) -> None:
        self.possible_agents = ["a", "b"]
        self.agents: list[str] = []
        self.leave_silently = leave_silently
        self._obs_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self._act_space: gym.spaces.Discrete[np.int64] = gym.spaces.Discrete(2)
        self._k = 0

    def observation_space(self, agent: str) -> gym.spaces.Box:
        return self._obs_space

    def action_space(self, agent: str) -> gym.spaces.Discrete[np.int64]:
        return self._act_space

    def _obs(self, agents: list[str]) -> dict[str, Any]:
        return {a: np.array([self._k], np.float32) for a in agents}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        self._k = 0
        self.agents = ["a"]
        return self._obs(self.agents), {"a": {}}

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        assert set(actions) == set(self.agents), (actions, self.agents)
        live, k = list(self.agents), self._k
        self._k += 1
        rewards = {a: 1.0 if a == "a" else 10.0 for a in live}
        terminated = {a: a == "a" and k == 2 and not self.leave_silently for a in live}
        truncated = {a: a == "b" and k == 4 for a in live}
        self.agents = [a for a in live if not (terminated[a] or truncated[a])]
        if self.leave_silently and k == 2:
            self.agents.remove("a")
        if k == 1:
            self.agents.append("b")
        return self._obs(self.agents + [a for a in live if a not in self.agents]), rewards, terminated, \
            truncated, {a: {} for a in live}

    def close(self) -> None:
        pass


def make(**kwargs: Any) -> Relay:
    """``tests.rl.ma_toy_env:make`` for `rxrl.envs.make_parallel_env`."""
    return Relay(**kwargs)
