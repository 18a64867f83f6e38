"""Memory tasks for recurrent policies: CartPole and Pendulum with their velocities hidden."""

from __future__ import annotations

from typing import Any, Final, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.cartpole import CartPoleEnv, CartPoleVectorEnv
from gymnasium.envs.classic_control.pendulum import PendulumEnv
from gymnasium.vector.utils import batch_space
from numpy.typing import NDArray

#: the entries of CartPole's observation kept: cart position and pole angle
CARTPOLE_KEPT: Final = (0, 2)
#: the entries of Pendulum's observation kept: cos(theta) and sin(theta)
PENDULUM_KEPT: Final = (0, 1)

_CARTPOLE_KEPT = list(CARTPOLE_KEPT)
_PENDULUM_KEPT = list(PENDULUM_KEPT)

_Obs = NDArray[np.float32]


def _kept_box(space: gym.Space[Any], kept: tuple[int, ...]) -> spaces.Box:
    assert isinstance(space, spaces.Box), space
    index = list(kept)
    return spaces.Box(space.low[index], space.high[index], dtype=np.float32)


class StatelessCartPoleEnv(CartPoleEnv):
    """CartPole-v1 observing only [cart position, pole angle]: a Box (2,) float32 with CartPole's
    bounds for those entries; reward and termination are CartPole's."""

    def __init__(self, sutton_barto_reward: bool = False, render_mode: str | None = None) -> None:
        """A CartPole (same arguments as gymnasium's) whose velocities are not observed."""
        super().__init__(sutton_barto_reward=sutton_barto_reward, render_mode=render_mode)
        self.observation_space = _kept_box(self.observation_space, CARTPOLE_KEPT)

    def step(self, action: int | np.ndarray) -> tuple[_Obs, SupportsFloat, bool, bool, dict[str, Any]]:
        """CartPole's step, observing position and angle."""
        obs, reward, terminated, truncated, info = super().step(action)  # type: ignore[no-untyped-call]
        return obs[_CARTPOLE_KEPT], reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[_Obs, dict[str, Any]]:
        """CartPole's reset, observing position and angle."""
        obs, info = super().reset(seed=seed, options=options)
        return obs[_CARTPOLE_KEPT], info


class StatelessCartPoleVectorEnv(CartPoleVectorEnv):
    """gymnasium's native CartPole vector env observing only columns [0, 2] (position, angle):
    observations are float32 (num_envs, 2); rewards, ends, infos and the autoreset mode
    (``metadata["autoreset_mode"]``) are CartPoleVectorEnv's."""

    def __init__(
        self,
        num_envs: int = 1,
        max_episode_steps: int = 500,
        render_mode: str | None = None,
        sutton_barto_reward: bool = False,
    ) -> None:
        """`num_envs` CartPoles (same arguments as CartPoleVectorEnv) whose velocities are hidden."""
        super().__init__(
            num_envs=num_envs,
            max_episode_steps=max_episode_steps,
            render_mode=render_mode,
            sutton_barto_reward=sutton_barto_reward,
        )
        self.single_observation_space = _kept_box(self.single_observation_space, CARTPOLE_KEPT)
        self.observation_space = batch_space(self.single_observation_space, num_envs)

    def step(
        self, action: np.ndarray
    ) -> tuple[_Obs, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """CartPoleVectorEnv's step, observing positions and angles."""
        obs, reward, terminated, truncated, info = super().step(action)
        return obs[:, _CARTPOLE_KEPT], reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[_Obs, dict[str, Any]]:
        """CartPoleVectorEnv's reset, observing positions and angles."""
        obs, info = super().reset(seed=seed, options=options)
        return obs[:, _CARTPOLE_KEPT], info


class StatelessPendulumEnv(PendulumEnv):
    """Pendulum-v1 observing only [cos(theta), sin(theta)]: a Box (2,) float32 in [-1, 1];
    reward and dynamics are Pendulum's."""

    def __init__(self, render_mode: str | None = None, g: float = 10.0) -> None:
        """A Pendulum (same arguments as gymnasium's) whose angular velocity is not observed."""
        super().__init__(render_mode=render_mode, g=g)
        self.observation_space = _kept_box(self.observation_space, PENDULUM_KEPT)

    def step(self, u: np.ndarray) -> tuple[_Obs, SupportsFloat, bool, bool, dict[str, Any]]:
        """Pendulum's step, observing cos and sin of the angle."""
        obs, reward, terminated, truncated, info = super().step(u)  # type: ignore[no-untyped-call]
        return obs[_PENDULUM_KEPT], reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[_Obs, dict[str, Any]]:
        """Pendulum's reset, observing cos and sin of the angle."""
        obs, info = super().reset(seed=seed, options=options)
        return obs[_PENDULUM_KEPT], info


def make_stateless_cartpole(**kwargs: Any) -> StatelessCartPoleEnv:
    """Entry point of ``rxrl/StatelessCartPole-v0``."""
    return StatelessCartPoleEnv(**kwargs)


def make_stateless_cartpole_vector(**kwargs: Any) -> StatelessCartPoleVectorEnv:
    """Vector entry point of ``rxrl/StatelessCartPole-v0`` (``num_envs=``, ``max_episode_steps=``, ...)."""
    return StatelessCartPoleVectorEnv(**kwargs)


def make_stateless_pendulum(**kwargs: Any) -> StatelessPendulumEnv:
    """Entry point of ``rxrl/StatelessPendulum-v0``."""
    return StatelessPendulumEnv(**kwargs)


#: the ids `register_stateless_envs` registers
STATELESS_ENV_IDS: Final = ("rxrl/StatelessCartPole-v0", "rxrl/StatelessPendulum-v0")


def register_stateless_envs() -> None:
    """Register ``rxrl/StatelessCartPole-v0`` (500 steps, with a native vector env) and
    ``rxrl/StatelessPendulum-v0`` (200 steps) with gymnasium; an id already registered is
    left as it is (rxrl.envs does this on import)."""
    if "rxrl/StatelessCartPole-v0" not in gym.registry:
        gym.register(
            "rxrl/StatelessCartPole-v0",
            entry_point="rxrl.envs.stateless:make_stateless_cartpole",
            vector_entry_point="rxrl.envs.stateless:make_stateless_cartpole_vector",
            max_episode_steps=500,
            reward_threshold=475.0,
        )
    if "rxrl/StatelessPendulum-v0" not in gym.registry:
        gym.register(
            "rxrl/StatelessPendulum-v0",
            entry_point="rxrl.envs.stateless:make_stateless_pendulum",
            max_episode_steps=200,
        )


register_stateless_envs()

__all__ = ["CARTPOLE_KEPT", "PENDULUM_KEPT", "STATELESS_ENV_IDS", "StatelessCartPoleEnv",
           "StatelessCartPoleVectorEnv", "StatelessPendulumEnv",
           "make_stateless_cartpole", "make_stateless_cartpole_vector", "make_stateless_pendulum",
           "register_stateless_envs"]
