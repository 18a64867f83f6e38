"""The built-in multi-agent CartPole: PettingZoo's Parallel API checker, CartPole-v1's physics per
agent, agents finishing one by one, seeding; the env registry's one-line refusals."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test  # type: ignore[import-untyped]

from rxrl.envs import make_parallel_env
from rxrl.envs.multi_cartpole import MultiAgentCartPole


def test_passes_pettingzoo_s_parallel_api_test_without_warnings() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(MultiAgentCartPole(num_agents=3), num_cycles=1000)
    assert [str(w.message) for w in caught] == []


def test_each_agent_follows_cartpole_v1_exactly() -> None:
    env = MultiAgentCartPole(num_agents=2)
    single: Any = gym.make("CartPole-v1").unwrapped
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(200):
        if "cartpole_1" not in env.agents:
            break
        single.state = env._state[1].copy()  # agent 1's cart, stepped by gymnasium's CartPole
        action = int(rng.integers(2))
        expected, _, fell, _, _ = single.step(action)
        obs, rewards, terminated, _, _ = env.step({a: action for a in env.agents})
        np.testing.assert_allclose(obs["cartpole_1"], expected, rtol=1e-6)
        assert terminated["cartpole_1"] == fell and rewards["cartpole_1"] == 1.0
    else:
        pytest.fail("agent 1 never fell under random actions")


def test_agents_finish_one_by_one_and_the_episode_ends_with_the_last() -> None:
    env = MultiAgentCartPole(num_agents=2, max_cycles=500)
    env.reset(seed=0)
    ended: list[str] = []
    while env.agents:
        live = list(env.agents)
        _, rewards, terminated, truncated, _ = env.step({a: 0 if a == "cartpole_0" else 1 for a in live})
        assert set(rewards) == set(live)  # only the agents alive before the step are stepped
        ended += [a for a in live if terminated[a] or truncated[a]]
    assert sorted(ended) == ["cartpole_0", "cartpole_1"] and env.num_agents == 0


def test_max_cycles_truncates_every_agent_still_alive() -> None:
    env = MultiAgentCartPole(num_agents=2, max_cycles=3)
    env.reset(seed=0)
    for _ in range(2):
        env.step({a: 0 for a in env.agents})
    _, _, terminated, truncated, _ = env.step({a: 0 for a in env.agents})
    assert truncated == {"cartpole_0": True, "cartpole_1": True} and not any(terminated.values())
    assert env.agents == []


def test_a_seed_fixes_the_episode_and_agents_differ() -> None:
    first = MultiAgentCartPole(2).reset(seed=7)[0]
    again = MultiAgentCartPole(2).reset(seed=7)[0]
    assert all(np.array_equal(first[a], again[a]) for a in first)
    assert not np.array_equal(first["cartpole_0"], first["cartpole_1"])


def test_a_missing_action_is_an_error_naming_the_agent() -> None:
    env = MultiAgentCartPole(2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"no action for live agent\(s\) \['cartpole_1'\]"):
        env.step({"cartpole_0": 0})


@pytest.mark.parametrize(("name", "message"), [
    ("CartPole-v1", "'CartPole-v1' is a single-agent gymnasium env, not a multi-agent (PettingZoo Parallel)"),
    ("no_such_env", "'no_such_env' is not a multi-agent (PettingZoo Parallel) env"),
    ("no_such.module", "cannot import the multi-agent env module 'no_such.module'"),
    ("mpe2.simple_spread_v3:raw_env", "made a 'raw_env', not a PettingZoo Parallel env (an AEC env"),
])
def test_names_that_are_no_multi_agent_env_are_one_line_errors(name: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        make_parallel_env(name)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_real_pettingzoo_env_loads_through_the_registry() -> None:
    env = make_parallel_env("mpe2.simple_speaker_listener_v4", {"continuous_actions": False})
    assert env.possible_agents == ["speaker_0", "listener_0"]
