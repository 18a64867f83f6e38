"""The acting path of an MLP Q-network, in numpy: no torch, no autograd (a CNN's acts through
torch: `rxrl.rl.models.qnet.QNetwork.q_values`).

Why numpy: at rollout batch sizes each torch op costs ~5 us of dispatch against ~1 us for
numpy. Why without torch: a DQN rollout worker that acts with numpy weights (a learner's
`get_weights`) need not import torch at all, ~180 MB of private memory per worker process
(docs/benchmarks.md, "Memory (issue 23)").

`QForward` runs the network over arrays keyed by torch state-dict name: *views* of a torch
`QNetwork`'s parameters (its `q_values` is this code) or the arrays a `NumpyQNetwork` owns.
Both compute the same float32 operations on the same values, so they act alike bit for bit
(`tests/rl/test_qnet.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from rxrl.rl.config import QNetConfig, resolve_trunk
from rxrl.rl.models.forward import NP_ACTIVATIONS, FloatArray, Weights, check_weights, features, one_hot_of


def check_q_spaces(observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> int:
    """The number of actions; ValueError unless the action space is `Discrete` (DQN needs
    one Q per action) and the observation space `Box` or `Discrete`."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(f"DQN needs a Discrete action space (one Q-value per action), got {action_space!r}")
    if not isinstance(observation_space, gym.spaces.Box | gym.spaces.Discrete):
        raise ValueError(
            f"make_q_network: unsupported observation space {observation_space!r}; "
            "supported: Box (flattened) and Discrete (one-hot)"
        )
    return int(action_space.n)


class QForward:
    """An MLP Q-network's forward pass over arrays keyed by state-dict name (``trunk.{i}``,
    ``head``, and ``value_head`` when dueling).

    ``params`` must stay the same array objects (updated in place) for the life of this
    object: the layers hold them (their weights transposed, as views), not copies.
    """

    def __init__(self, params: Mapping[str, npt.NDArray[Any]], config: QNetConfig,
                 observation_space: gym.Space[Any]) -> None:
        self.activation = NP_ACTIVATIONS[config.activation]
        self.one_hot, self.obs_start = one_hot_of(observation_space)
        trunk = sorted({int(k.split(".")[1]) for k in params if k.startswith("trunk.")})
        names = [f"trunk.{i}" for i in trunk] + ["head"]
        self.dueling = "value_head.weight" in params
        if self.dueling:
            names.append("value_head")
        #: ``(weight.T, bias)`` per linear layer: the trunk's, the (advantage) head, the value head
        self.layers: list[tuple[FloatArray, FloatArray]] = [
            (params[f"{name}.weight"].T, params[f"{name}.bias"]) for name in names]
        self.hidden = len(trunk)

    def q_values(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Q-values `[B, num_actions]` of a batch of raw observations."""
        x = self.encode(obs)
        for weight_t, bias in self.layers[: self.hidden]:
            x = self.activation(x @ weight_t + bias)
        weight_t, bias = self.layers[self.hidden]
        q: FloatArray = x @ weight_t + bias
        if self.dueling:
            v_weight_t, v_bias = self.layers[-1]
            q = (x @ v_weight_t + v_bias) + q - q.mean(axis=1, keepdims=True)
        return q

    def encode(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Observations as float features `[B, in_dim]` (one-hot, or flattened)."""
        return features(obs, self.one_hot, self.obs_start)


def mlp_shapes(config: QNetConfig, observation_space: gym.Space[Any], num_actions: int
               ) -> dict[str, tuple[int, ...]]:
    """The state-dict names and shapes of an MLP `QNetwork` (its trunk an ``nn.Sequential`` of
    linear layers and activations: the linear ones at even indices)."""
    n_in = (int(observation_space.n) if isinstance(observation_space, gym.spaces.Discrete)
            else int(np.prod(observation_space.shape or ())))
    shapes: dict[str, tuple[int, ...]] = {}
    for i, width in enumerate(config.hidden_sizes):
        shapes[f"trunk.{2 * i}.weight"], shapes[f"trunk.{2 * i}.bias"] = (width, n_in), (width,)
        n_in = width
    shapes["head.weight"], shapes["head.bias"] = (num_actions, n_in), (num_actions,)
    if config.dueling:
        shapes["value_head.weight"], shapes["value_head.bias"] = (1, n_in), (1,)
    return shapes


def greedy_actions(q_values: FloatArray) -> npt.NDArray[np.int64]:
    """The argmax action of each row of Q-values."""
    actions: npt.NDArray[np.int64] = q_values.argmax(axis=1).astype(np.int64, copy=False)
    return actions


class NumpyQNetwork:
    """An MLP Q-network's acting path with no torch at all: `q_values`, `greedy` and the
    weights of a learner's `get_weights`, as a DQN rollout worker holds it
    (`rxrl.rl.workers.qworker.QRolloutWorker`).

    It acts exactly as the torch `QNetwork` with the same weights (both run `QForward`).
    `set_weights` copies into the arrays it owns, in place. A CNN trunk is refused: a
    worker of a CNN Q-network acts through the torch `QNetwork`.
    """

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any],
                 config: QNetConfig, weights: Mapping[str, npt.NDArray[Any]]) -> None:
        self.num_actions = check_q_spaces(observation_space, action_space)
        trunk = resolve_trunk(config.trunk, observation_space, "q_net.trunk")
        if trunk != "mlp":
            raise ValueError(f"NumpyQNetwork: a {trunk} trunk acts through torch; build a QNetwork "
                             "(rxrl.rl.models.qnet.make_q_network) instead")
        check_weights(mlp_shapes(config, observation_space, self.num_actions), weights)
        self._params: Weights = {k: np.array(v, dtype=np.float32, copy=True) for k, v in weights.items()}
        self._forward = QForward(self._params, config, observation_space)

    def q_values(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Q-values `[B, num_actions]`, as `QNetwork.q_values`."""
        return self._forward.q_values(obs)

    def greedy(self, obs: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """The argmax action of each observation."""
        return greedy_actions(self.q_values(obs))

    def get_weights(self) -> Weights:
        """A copy of every entry."""
        return {k: v.copy() for k, v in self._params.items()}

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Copy ``weights`` in, in place (ValueError naming entries whose names or shapes differ)."""
        check_weights({k: v.shape for k, v in self._params.items()}, weights)
        for k, w in weights.items():
            np.copyto(self._params[k], np.asarray(w), casting="unsafe")


__all__ = ["NumpyQNetwork", "QForward", "check_q_spaces", "greedy_actions", "mlp_shapes"]
