"""Q-networks (plain or dueling): torch for the loss, a numpy mirror of an MLP for epsilon-greedy rollouts.

As in `rxrl.rl.models.policy`: a rollout step evaluates a handful of rows, where each torch op
costs ~5 us of dispatch and a numpy op ~1 us, so `q_values` runs the MLP in numpy
(`rxrl.rl.models.qforward.QForward`, which a torch-free worker's `NumpyQNetwork` runs too) on
*views* of the torch parameters (shared memory; every update — optimizer steps,
`set_weights`, `load_state_dict` — is in place, so both paths always agree). A CNN trunk
(`QNetConfig.trunk`, `rxrl.rl.models.cnn`) runs in torch on both paths (no autograd when
acting): its convolutions are what costs, not the dispatch.

Initial weights follow PyTorch's default `nn.Linear` init (Kaiming-uniform weights,
uniform biases), as CleanRL's and SB3's DQN use, drawn from a generator seeded with `seed`:
equal seeds give equal networks in every process. A CNN's layers are orthogonal, as
`rxrl.rl.models.cnn` says.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rxrl.rl.config import QNetConfig, resolve_trunk
from rxrl.rl.models.cnn import make_cnn
from rxrl.rl.models.forward import check_weights
from rxrl.rl.models.policy import Weights, one_thread
from rxrl.rl.models.qforward import QForward, check_q_spaces, greedy_actions

FloatArray = npt.NDArray[np.float32]
#: activation name -> (its module, for the trunk's layers; its function, which `forward` applies)
_ACTIVATIONS: dict[str, tuple[type[nn.Module], Callable[[torch.Tensor], torch.Tensor]]] = {
    "tanh": (nn.Tanh, torch.tanh), "relu": (nn.ReLU, torch.relu)}


def _linear(n_in: int, n_out: int, generator: torch.Generator) -> nn.Linear:
    """`nn.Linear`'s default init, but from `generator` instead of the global RNG."""
    layer = nn.Linear(n_in, n_out)
    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5.0), generator=generator)
    bound = 1.0 / math.sqrt(n_in)
    nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return layer


class QNetwork(nn.Module):
    """Q-values `[B, num_actions]` of a Box (flattened) or Discrete (one-hot) observation,
    or of an image through a CNN trunk (`QNetConfig.trunk`).

    `forward` is the differentiable torch path; `q_values` / `greedy` the numpy path for
    rollouts (no autograd, no torch dispatch; a CNN's: torch without autograd).
    `get_weights` / `set_weights` exchange numpy arrays keyed by state-dict name, like the
    actor-critic policies.
    """

    def __init__(
        self, observation_space: gym.Space[Any], num_actions: int, config: QNetConfig, seed: int
    ) -> None:
        super().__init__()
        init = torch.Generator().manual_seed(seed)
        self.config, self.num_actions = config, num_actions
        if isinstance(observation_space, gym.spaces.Discrete):
            self._one_hot: int | None = int(observation_space.n)
            self._obs_start = int(observation_space.start)
            in_dim = self._one_hot
        else:
            self._one_hot, self._obs_start = None, 0
            in_dim = int(np.prod(observation_space.shape or ()))
        #: the trunk `QNetConfig.trunk` resolved to for these observations
        self.trunk_kind = resolve_trunk(config.trunk, observation_space, "q_net.trunk")
        self.trunk: nn.Module
        if self.trunk_kind != "mlp":
            with one_thread():  # orthogonal init: the same bits on any thread count
                cnn = make_cnn(self.trunk_kind, observation_space, init)
            self.trunk, in_dim = cnn, cnn.out_dim
        else:
            layers: list[nn.Module] = []
            for width in config.hidden_sizes:
                layers += [_linear(in_dim, width, init), _ACTIVATIONS[config.activation][0]()]
                in_dim = width
            self.trunk = nn.Sequential(*layers)
        self.head = _linear(in_dim, num_actions, init)  # Q, or the advantages A when dueling
        self.value_head = _linear(in_dim, 1, init) if config.dueling else None
        #: an MLP trunk's linear layers and its activation, which `forward` applies as functions
        #: (a module call costs ~3 us of dispatch, a third of a CartPole learner step's forwards)
        self._layers: list[nn.Linear] | None = None
        self._activation = _ACTIVATIONS[config.activation][1]
        if isinstance(self.trunk, nn.Sequential):
            self._layers = [m for m in self.trunk if isinstance(m, nn.Linear)]
        self._observation_space = observation_space
        self._np: QForward | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The numpy views must alias *this* object's parameters: rebuild them after a copy.
        module_state: Callable[[], dict[str, Any]] = super().__getstate__  # untyped in torch
        state = dict(module_state())
        state["_np"] = None
        return state

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations `[B, *obs_shape]` as the trunk's input: float features `[B, in_dim]`
        for the MLP; images as they are (uint8) for a CNN, which makes them floats itself."""
        if self.trunk_kind != "mlp":
            return obs
        if self._one_hot is not None:
            return nn.functional.one_hot(obs.long() - self._obs_start, self._one_hot).float()
        return obs.reshape(obs.shape[0], -1).float()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Differentiable Q-values `[B, num_actions]`."""
        if self._layers is None:
            hidden = self.trunk(self.encode(obs))
        else:  # the MLP trunk's modules' own ops, without their module calls
            hidden = self.encode(obs)
            for layer in self._layers:
                hidden = self._activation(nn.functional.linear(hidden, layer.weight, layer.bias))
        q: torch.Tensor = self.head(hidden)
        if self.value_head is not None:
            q = self.value_head(hidden) + q - q.mean(dim=1, keepdim=True)
        return q

    def q_values(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Q-values `[B, num_actions]` in numpy (the rollout path; same numbers as `forward`)."""
        if self.trunk_kind != "mlp":
            with torch.inference_mode():
                device = self.head.weight.device
                q_cnn: FloatArray = self(torch.as_tensor(np.asarray(obs), device=device)).cpu().numpy()
            return q_cnn
        if self._np is None:  # views: every update of the parameters is in place
            views = {k: t.detach().numpy() for k, t in self.state_dict().items()}
            self._np = QForward(views, self.config, self._observation_space)
        return self._np.q_values(obs)

    def greedy(self, obs: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """The argmax action of each observation (numpy)."""
        return greedy_actions(self.q_values(obs))

    def get_weights(self) -> Weights:
        """A copy of every parameter as numpy arrays."""
        return {k: t.detach().cpu().numpy().copy() for k, t in self.state_dict().items()}

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Copy `weights` (as from `get_weights`) in place; ValueError naming bad entries."""
        own = self.state_dict()
        check_weights({k: tuple(t.shape) for k, t in own.items()}, weights)
        with torch.no_grad():
            for k, w in weights.items():
                own[k].copy_(torch.as_tensor(np.asarray(w)))


def make_q_network(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    config: QNetConfig | None = None,
    seed: int = 0,
) -> QNetwork:
    """The Q-network for these spaces. Raises ValueError unless the action space is
    `Discrete` and the observation space `Box` or `Discrete` (DQN needs one Q per action),
    or when ``config.trunk`` does not fit the observations (`rxrl.rl.config.resolve_trunk`)."""
    num_actions = check_q_spaces(observation_space, action_space)
    return QNetwork(observation_space, num_actions, config or QNetConfig(), seed)


__all__ = ["QNetwork", "make_q_network"]
