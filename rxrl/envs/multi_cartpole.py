"""MultiAgentCartPole: k independent CartPoles as k agents of one PettingZoo Parallel env.

Each agent balances its own pole with CartPole-v1's physics (Euler integration, the same
thresholds, reward 1 per step alive). An agent whose pole falls (or cart leaves the track)
is *terminated* and leaves ``env.agents``, as PettingZoo's Parallel API defines it; the others
go on. At ``max_cycles`` env steps every agent still alive is *truncated*. The episode ends
when no agent is left; then the caller resets.

The Parallel API is implemented without importing pettingzoo (so ``rxrl`` installs without
it); ``pettingzoo.test.parallel_api_test`` checks it in tests/envs.

>>> env = MultiAgentCartPole(num_agents=2)
>>> obs, infos = env.reset(seed=0)
>>> env.agents, obs["cartpole_0"].shape
(['cartpole_0', 'cartpole_1'], (4,))
>>> obs, rewards, terminated, truncated, infos = env.step({"cartpole_0": 1, "cartpole_1": 0})
>>> rewards
{'cartpole_0': 1.0, 'cartpole_1': 1.0}
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt

# CartPole-v1's constants (gymnasium.envs.classic_control.cartpole)
_GRAVITY, _MASSCART, _MASSPOLE, _LENGTH, _FORCE, _TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
_TOTAL_MASS = _MASSCART + _MASSPOLE
_POLEMASS_LENGTH = _MASSPOLE * _LENGTH
_THETA_LIMIT = 12 * 2 * math.pi / 360
_X_LIMIT = 2.4


class MultiAgentCartPole:
    """``num_agents`` CartPole-v1 systems stepped together, one agent each (Parallel API).

    Agents are ``cartpole_0 .. cartpole_{k-1}``; observations are each cart's
    ``(x, x_dot, theta, theta_dot)`` (float32), actions ``Discrete(2)`` (push left/right).
    ``reset(seed=s)`` seeds the initial states (uniform in ±0.05, as CartPole); later
    resets without a seed continue the same generator. ``max_cycles`` (default 500, CartPole-v1's
    limit) may be changed between episodes.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "multi_cartpole_v0", "render_modes": [],
                                          "is_parallelizable": True}

    def __init__(self, num_agents: int = 2, max_cycles: int = 500) -> None:
        if isinstance(num_agents, bool) or not isinstance(num_agents, int) or num_agents < 1:
            raise ValueError(f"MultiAgentCartPole: num_agents must be an integer >= 1, got {num_agents!r}")
        if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
            raise ValueError(f"MultiAgentCartPole: max_cycles must be an integer >= 1, got {max_cycles!r}")
        self.possible_agents = [f"cartpole_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self.max_cycles = max_cycles
        self.render_mode = None
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._state = np.zeros((num_agents, 4), dtype=np.float64)
        self._alive = np.zeros(num_agents, dtype=np.bool_)
        self._steps = 0
        self._rng = np.random.default_rng()
        high = np.array([_X_LIMIT * 2, np.finfo(np.float32).max, _THETA_LIMIT * 2,
                         np.finfo(np.float32).max], dtype=np.float32)
        self._observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    @functools.cache  # noqa: B019 - the API asks for the same object per agent
    def observation_space(self, agent: str) -> gym.spaces.Box:
        """Each cart's 4-vector observation space (the same object for every call)."""
        self._check_agent(agent)
        return self._observation_space

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> gym.spaces.Discrete[np.int64]:
        """``Discrete(2)``: push the cart left (0) or right (1); one object per agent."""
        self._check_agent(agent)
        return gym.spaces.Discrete(2)

    @property
    def num_agents(self) -> int:
        """Agents alive now."""
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        """All agents an episode starts with."""
        return len(self.possible_agents)

    @property
    def unwrapped(self) -> MultiAgentCartPole:
        """This env (it wraps nothing)."""
        return self

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, npt.NDArray[np.float32]], dict[str, dict[str, Any]]]:
        """Start an episode with every agent alive; ``seed`` reseeds the generator."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._state = self._rng.uniform(-0.05, 0.05, size=self._state.shape)
        self._alive[:] = True
        self._steps = 0
        self.agents = list(self.possible_agents)
        return self._observations(self.agents), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[
        dict[str, npt.NDArray[np.float32]], dict[str, float], dict[str, bool], dict[str, bool],
        dict[str, dict[str, Any]]
    ]:
        """Step every live agent's cart; each needs an action. Finished agents leave ``agents``."""
        live = list(self.agents)
        missing = [a for a in live if a not in actions]
        if missing:
            raise ValueError(f"MultiAgentCartPole.step: no action for live agent(s) {missing}")
        rows = np.array([self._index[a] for a in live], dtype=np.intp)
        push = np.array([_FORCE if int(actions[a]) == 1 else -_FORCE for a in live])
        x, x_dot, theta, theta_dot = self._state[rows].T
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (push + _POLEMASS_LENGTH * theta_dot**2 * sin) / _TOTAL_MASS
        theta_acc = (_GRAVITY * sin - cos * temp) / (
            _LENGTH * (4.0 / 3.0 - _MASSPOLE * cos**2 / _TOTAL_MASS))
        x_acc = temp - _POLEMASS_LENGTH * theta_acc * cos / _TOTAL_MASS
        x, x_dot = x + _TAU * x_dot, x_dot + _TAU * x_acc
        theta, theta_dot = theta + _TAU * theta_dot, theta_dot + _TAU * theta_acc
        self._state[rows] = np.stack([x, x_dot, theta, theta_dot], axis=1)
        self._steps += 1
        fell = (x < -_X_LIMIT) | (x > _X_LIMIT) | (theta < -_THETA_LIMIT) | (theta > _THETA_LIMIT)
        out_of_time = self._steps >= self.max_cycles
        obs = self._observations(live)
        rewards = {a: 1.0 for a in live}
        terminated = {a: bool(f) for a, f in zip(live, fell, strict=True)}
        truncated = {a: out_of_time and not terminated[a] for a in live}
        self.agents = [a for a in live if not (terminated[a] or truncated[a])]
        return obs, rewards, terminated, truncated, {a: {} for a in live}

    def state(self) -> npt.NDArray[np.float32]:
        """Every cart's state, ``[num_agents * 4]`` (the global state)."""
        return self._state.astype(np.float32).ravel()

    def render(self) -> None:
        """No rendering."""

    def close(self) -> None:
        """Nothing to release."""

    def __str__(self) -> str:
        return str(self.metadata["name"])

    def _observations(self, agents: list[str]) -> dict[str, npt.NDArray[np.float32]]:
        return {a: self._state[self._index[a]].astype(np.float32) for a in agents}

    def _check_agent(self, agent: str) -> None:
        if agent not in self._index:
            raise KeyError(f"MultiAgentCartPole has no agent {agent!r}; agents are {self.possible_agents}")


__all__ = ["MultiAgentCartPole"]
