"""The stateless memory tasks: CartPole-v1 and Pendulum-v1 step for step with their velocities
dropped, single and native vector envs, their spaces, and idempotent registration."""

from __future__ import annotations

import subprocess
import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector import AutoresetMode

import rxrl.envs  # noqa: F401  (registers the ids)
from rxrl.envs.stateless import (
    STATELESS_ENV_IDS,
    StatelessCartPoleEnv,
    StatelessCartPoleVectorEnv,
    StatelessPendulumEnv,
    register_stateless_envs,
)
from rxrl.envs.vector import default_vectorization_mode, make_vector_env

CARTPOLE = "rxrl/StatelessCartPole-v0"
PENDULUM = "rxrl/StatelessPendulum-v0"


@pytest.mark.parametrize("max_episode_steps", [None, 12])
def test_stateless_cartpole_is_cartpole_v1_without_velocities(max_episode_steps: int | None) -> None:
    limit: dict[str, Any] = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    env = gym.make(CARTPOLE, **limit)
    ref = gym.make("CartPole-v1", **limit)
    obs, info = env.reset(seed=7)
    expected, ref_info = ref.reset(seed=7)
    np.testing.assert_array_equal(obs, expected[[0, 2]])
    assert info == ref_info
    rng = np.random.default_rng(0)
    ends = truncations = 0
    for _ in range(400):
        action = int(rng.integers(2))
        obs, reward, terminated, truncated, info = env.step(action)
        expected, ref_reward, ref_terminated, ref_truncated, ref_info = ref.step(action)
        assert obs.dtype == np.float32 and obs.shape == (2,)
        assert env.observation_space.contains(obs)
        np.testing.assert_array_equal(obs, expected[[0, 2]])
        assert (reward, terminated, truncated, info) == (ref_reward, ref_terminated, ref_truncated, ref_info)
        if terminated or truncated:
            ends += 1
            truncations += bool(truncated)
            obs, info = env.reset()
            expected, ref_info = ref.reset()
            np.testing.assert_array_equal(obs, expected[[0, 2]])
            assert info == ref_info
    assert ends >= 5
    assert (truncations > 0) == (max_episode_steps is not None)


@pytest.mark.parametrize("max_episode_steps", [None, 12])
def test_stateless_cartpole_vector_env_is_cartpole_vector_env_without_velocities(
    max_episode_steps: int | None,
) -> None:
    n = 8
    limit: dict[str, Any] = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    vec = gym.make_vec(CARTPOLE, n, vectorization_mode="vector_entry_point", **limit)
    ref = CartPoleVectorEnv(num_envs=n, max_episode_steps=max_episode_steps or 500)
    assert isinstance(vec.unwrapped, StatelessCartPoleVectorEnv)
    assert vec.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs, info = vec.reset(seed=3)
    expected, ref_info = ref.reset(seed=3)
    assert obs.dtype == np.float32 and obs.shape == (n, 2)
    np.testing.assert_array_equal(obs, expected[:, [0, 2]])
    assert info == ref_info
    rng = np.random.default_rng(1)
    terminations = truncations = 0
    for _ in range(300):
        actions = rng.integers(2, size=n)
        obs, reward, terminated, truncated, info = vec.step(actions)
        expected, ref_reward, ref_terminated, ref_truncated, ref_info = ref.step(actions)
        assert obs.dtype == np.float32 and obs.shape == (n, 2)
        assert vec.observation_space.contains(obs)
        np.testing.assert_array_equal(obs, expected[:, [0, 2]])
        np.testing.assert_array_equal(reward, ref_reward)
        np.testing.assert_array_equal(terminated, ref_terminated)
        np.testing.assert_array_equal(truncated, ref_truncated)
        assert info == ref_info
        terminations += int(terminated.sum())
        truncations += int(truncated.sum())
    assert terminations >= n
    assert (truncations > 0) == (max_episode_steps is not None)


def test_stateless_pendulum_is_pendulum_v1_without_angular_velocity() -> None:
    env = gym.make(PENDULUM)
    ref = gym.make("Pendulum-v1")
    obs, info = env.reset(seed=5)
    expected, ref_info = ref.reset(seed=5)
    np.testing.assert_array_equal(obs, expected[:2])
    assert info == ref_info
    rng = np.random.default_rng(2)
    truncations = 0
    for _ in range(450):
        action = rng.uniform(-2.0, 2.0, size=(1,)).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        expected, ref_reward, ref_terminated, ref_truncated, ref_info = ref.step(action)
        assert obs.dtype == np.float32 and obs.shape == (2,)
        assert env.observation_space.contains(obs)
        np.testing.assert_array_equal(obs, expected[:2])
        assert (reward, terminated, truncated, info) == (ref_reward, ref_terminated, ref_truncated, ref_info)
        if terminated or truncated:
            truncations += bool(truncated)
            obs, _ = env.reset()
            expected, _ = ref.reset()
            np.testing.assert_array_equal(obs, expected[:2])
    assert truncations == 2  # Pendulum-v1's 200 steps


def test_spaces() -> None:
    cartpole = gym.make(CARTPOLE)
    full = gym.make("CartPole-v1").observation_space
    assert isinstance(cartpole.observation_space, gym.spaces.Box)
    assert isinstance(full, gym.spaces.Box)
    assert cartpole.observation_space.shape == (2,) and cartpole.observation_space.dtype == np.float32
    np.testing.assert_array_equal(cartpole.observation_space.low, full.low[[0, 2]])
    np.testing.assert_array_equal(cartpole.observation_space.high, full.high[[0, 2]])
    assert cartpole.action_space == gym.make("CartPole-v1").action_space
    assert cartpole.spec is not None and cartpole.spec.max_episode_steps == 500
    assert isinstance(cartpole.unwrapped, StatelessCartPoleEnv)

    vec = gym.make_vec(CARTPOLE, 4, vectorization_mode="vector_entry_point")
    assert vec.single_observation_space == cartpole.observation_space
    assert vec.observation_space.shape == (4, 2) and vec.observation_space.dtype == np.float32

    pendulum = gym.make(PENDULUM)
    assert pendulum.observation_space == gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert pendulum.action_space == gym.make("Pendulum-v1").action_space
    assert pendulum.spec is not None and pendulum.spec.max_episode_steps == 200
    assert isinstance(pendulum.unwrapped, StatelessPendulumEnv)


def test_rollout_workers_vectorize_cartpole_natively_and_pendulum_in_sync() -> None:
    assert default_vectorization_mode(CARTPOLE) == "vector_entry_point"
    assert default_vectorization_mode(PENDULUM) == "sync"
    for env_id in STATELESS_ENV_IDS:
        vec = make_vector_env(env_id, 3)
        obs, _ = vec.reset(seed=0)
        assert obs.dtype == np.float32 and obs.shape == (3, 2)
        obs, *_ = vec.step(vec.action_space.sample())
        assert obs.dtype == np.float32 and obs.shape == (3, 2)
        vec.close()


def test_registration_is_idempotent() -> None:
    specs = [gym.spec(env_id) for env_id in STATELESS_ENV_IDS]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # gymnasium warns when an id is registered again
        register_stateless_envs()
        register_stateless_envs()
    assert [gym.registry[env_id] for env_id in STATELESS_ENV_IDS] == specs
    assert all(gym.registry[env_id] is spec for env_id, spec in zip(STATELESS_ENV_IDS, specs, strict=True))


def test_a_fresh_process_importing_rxrl_envs_vector_can_build_them() -> None:
    code = (
        "import gymnasium as gym, rxrl.envs.vector\n"
        "v = gym.make_vec('rxrl/StatelessCartPole-v0', 2, vectorization_mode='vector_entry_point')\n"
        "assert v.reset(seed=0)[0].shape == (2, 2)\n"
        "assert gym.make('rxrl/StatelessPendulum-v0').reset(seed=0)[0].shape == (2,)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
