"""QNetwork: the numpy rollout path agrees with torch (in a torch `QNetwork` and in a torch-free
`NumpyQNetwork`); seeding; spaces it refuses."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rxrl.rl.config import QNetConfig
from rxrl.rl.models.qforward import NumpyQNetwork
from rxrl.rl.models.qnet import QNetwork, make_q_network

BOX = gym.spaces.Box(-1.0, 1.0, (2, 3), np.float32)
ACTIONS: gym.spaces.Discrete[np.int64] = gym.spaces.Discrete(4)


def agree(net: QNetwork, obs: np.ndarray) -> None:
    with torch.no_grad():
        expected = net(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(net.q_values(obs), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(net.greedy(obs), expected.argmax(axis=1))


@pytest.mark.parametrize(
    "config",
    [QNetConfig(hidden_sizes=(8, 5)), QNetConfig(hidden_sizes=(7,), dueling=True, activation="tanh")],
)
def test_numpy_q_values_equal_torch_ones_through_updates_copies_and_pickles(config: QNetConfig) -> None:
    net = make_q_network(BOX, ACTIONS, config, seed=1)
    obs = np.random.default_rng(0).normal(size=(6, 2, 3)).astype(np.float32)
    agree(net, obs)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.1)
    net(torch.as_tensor(obs)).square().mean().backward()
    optimizer.step()
    agree(net, obs)
    other = make_q_network(BOX, ACTIONS, config, seed=2)
    other.set_weights(net.get_weights())
    agree(other, obs)
    np.testing.assert_array_equal(other.q_values(obs), net.q_values(obs))
    for clone in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        with torch.no_grad():
            next(clone.parameters()).add_(1.0)  # the copy's views must alias the copy
        agree(clone, obs)
        assert not np.array_equal(clone.q_values(obs), net.q_values(obs))


def test_dueling_q_is_value_plus_centred_advantages() -> None:
    net = make_q_network(BOX, ACTIONS, QNetConfig(hidden_sizes=(4,), dueling=True), seed=0)
    obs = torch.zeros(3, 2, 3)
    hidden = net.trunk(net.encode(obs))
    assert net.value_head is not None
    a, v = net.head(hidden), net.value_head(hidden)
    torch.testing.assert_close(net(obs), v + a - a.mean(dim=1, keepdim=True))


def test_discrete_observations_are_one_hot() -> None:
    net = make_q_network(gym.spaces.Discrete(5, start=2), ACTIONS, QNetConfig(hidden_sizes=(3,)), seed=0)
    obs = np.array([2, 6, 4])
    agree(net, obs)
    torch.testing.assert_close(net.encode(torch.as_tensor(obs))[1], torch.tensor([0.0, 0, 0, 0, 1]))


def test_equal_seeds_give_equal_weights_and_different_seeds_differ() -> None:
    a, b, c = (make_q_network(BOX, ACTIONS, seed=s).get_weights() for s in (3, 3, 4))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["head.weight"], c["head.weight"])


def test_spaces_dqn_cannot_handle_are_refused() -> None:
    with pytest.raises(ValueError, match=r"DQN needs a Discrete action space"):
        make_q_network(BOX, gym.spaces.Box(-1.0, 1.0, (2,)))
    with pytest.raises(ValueError, match=r"unsupported observation space"):
        make_q_network(gym.spaces.MultiBinary(3), ACTIONS)
    net = make_q_network(BOX, ACTIONS)
    with pytest.raises(ValueError, match=r"missing entries"):
        net.set_weights({})
    weights = net.get_weights()
    weights["head.bias"] = np.zeros(9, np.float32)
    with pytest.raises(ValueError, match=r"shape mismatch"):
        net.set_weights(weights)


MLP_CONFIGS = [QNetConfig(hidden_sizes=(8, 5)),
               QNetConfig(hidden_sizes=(7,), dueling=True, activation="tanh")]


@pytest.mark.parametrize("config", MLP_CONFIGS)
@pytest.mark.parametrize("space", [BOX, gym.spaces.Discrete(5, start=2)], ids=["box", "one_hot"])
def test_a_numpy_q_network_acts_exactly_as_the_torch_one_with_its_weights(
        config: QNetConfig, space: gym.Space[Any]) -> None:
    """Law: `NumpyQNetwork` (no torch: a DQN worker's) built from a `QNetwork`'s weights gives
    its `q_values` bit for bit, the torch `forward`'s within 1e-6, and the same greedy actions,
    before and after both load new weights."""
    net = make_q_network(space, ACTIONS, config, seed=5)
    numpy_net = NumpyQNetwork(space, ACTIONS, config, net.get_weights())
    rng = np.random.default_rng(1)
    obs = (rng.integers(2, 7, size=64) if isinstance(space, gym.spaces.Discrete)
           else rng.normal(size=(64, 2, 3)).astype(np.float32))
    for _ in range(2):
        np.testing.assert_array_equal(numpy_net.q_values(obs), net.q_values(obs))
        with torch.no_grad():
            expected = net(torch.as_tensor(obs)).numpy()
        np.testing.assert_allclose(numpy_net.q_values(obs), expected, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(numpy_net.greedy(obs), expected.argmax(axis=1))
        new = {k: (v + rng.normal(0, 0.5, v.shape)).astype(np.float32) for k, v in net.get_weights().items()}
        net.set_weights(new)
        numpy_net.set_weights(new)
    mine = numpy_net.get_weights()
    assert mine.keys() == net.get_weights().keys()
    assert all(np.array_equal(v, mine[k]) for k, v in net.get_weights().items())
    assert numpy_net.num_actions == net.num_actions


def test_a_numpy_q_network_refuses_what_the_torch_one_refuses_and_a_cnn() -> None:
    weights = make_q_network(BOX, ACTIONS, seed=0).get_weights()
    with pytest.raises(ValueError, match=r"DQN needs a Discrete action space"):
        NumpyQNetwork(BOX, gym.spaces.Box(-1.0, 1.0, (2,)), QNetConfig(), weights)
    with pytest.raises(ValueError, match=r"missing entries \['head.bias'\]"):
        NumpyQNetwork(BOX, ACTIONS, QNetConfig(), {k: v for k, v in weights.items() if k != "head.bias"})
    with pytest.raises(ValueError, match=r"shape mismatch.*trunk\.0\.weight"):
        NumpyQNetwork(BOX, ACTIONS, QNetConfig(hidden_sizes=(64, 128)), weights)
    net = NumpyQNetwork(BOX, ACTIONS, QNetConfig(), weights)
    with pytest.raises(ValueError, match=r"shape mismatch.*head\.bias"):
        net.set_weights({**weights, "head.bias": np.zeros(9, np.float32)})
    image = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    with pytest.raises(ValueError, match="nature_cnn trunk acts through torch"):
        NumpyQNetwork(image, ACTIONS, QNetConfig(), weights)
