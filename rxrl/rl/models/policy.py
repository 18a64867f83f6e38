"""Actor-critic policies: torch for losses; for rollouts a numpy mirror of an MLP's forward,
torch itself for a CNN's.

The rollout path (`act`, `value`) of an MLP policy is `rxrl.rl.models.forward.Forward` over
numpy *views* of the torch parameters (shared memory), and every weight update here is in
place (optimizer steps, `set_weights`, `load_state_dict`), so both paths always use the same
weights; tests check they agree. `rxrl.rl.models.forward.NumpyActorCritic` is the same rollout
path without torch. A CNN trunk (`PolicyConfig.trunk`, `rxrl.rl.models.cnn`) cannot
reasonably run in numpy: its rollout path is `TorchForward`, the same torch modules the
losses run, without autograd, sampling as `Forward` does.

Over ~400 lines for that reason: `TorchForward` is the rollout path of the modules defined
here and reads their parts (torso, trunks, cores, heads) as `Forward` reads their weights.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rxrl.rl.config import PolicyConfig, resolve_trunk
from rxrl.rl.models.cnn import ImageTrunk, make_cnn
from rxrl.rl.models.forward import (
    LOG_SQRT_2PI,
    FloatArray,
    Forward,
    RolloutPath,
    Weights,
    categorical_sample,
    check_normalizable,
    check_spaces,
    check_weights,
    gaussian_sample,
)
from rxrl.rl.models.normalizer import Normalizer
from rxrl.rl.models.recurrent import Segments, make_core, step

_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Within the block, torch runs on one thread. Orthogonal init (a QR factorization) gives
    different last bits on 1 and 2 threads, and a driver that builds the seed's initial weights
    for torch-free workers runs at the process default while a learner runs at
    ``learner_threads``: both build them on one thread, so they are equal bit for bit."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _layer(n_in: int, n_out: int, gain: float, generator: torch.Generator) -> nn.Linear:
    """A linear layer with orthogonal weights of `gain` and zero bias (CleanRL's init)."""
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


def _trunk(n_in: int, config: PolicyConfig, generator: torch.Generator) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in config.hidden_sizes:
        layers += [_layer(n_in, width, math.sqrt(2.0), generator), _ACTIVATIONS[config.activation]()]
        n_in = width
    return nn.Sequential(*layers)


class ActorCritic(nn.Module, ABC):
    """An actor-critic over a Box (flattened) or Discrete (one-hot) observation space, or
    over images through a CNN `torso` (`PolicyConfig.trunk`).

    Two entry points: `act` / `value` (numpy in and out, no autograd, no
    `torch.distributions` objects) for the rollout hot path, and `evaluate` (tensors,
    differentiable) for losses. Weight init draws from a generator seeded with `seed`, so
    equal seeds give equal weights in every process; `act` samples from a separate numpy
    generator (`seed_sampling`).

    With a CNN, `encode` is the CNN (`torso`, one for both heads: `PolicyConfig`), and
    `pi_trunk` / `vf_trunk` are empty (its last layer is the trunk's output).
    """

    #: set by the subclass
    action_space: gym.Space[Any]

    def __init__(
        self, observation_space: gym.Space[Any], out_dim: int, config: PolicyConfig, seed: int
    ) -> None:
        super().__init__()
        init = torch.Generator().manual_seed(seed)
        self.config = config
        self.observation_space = observation_space
        if isinstance(observation_space, gym.spaces.Discrete):
            self._one_hot: int | None = int(observation_space.n)
            self._obs_start = int(observation_space.start)
            in_dim = self._one_hot
        else:
            self._one_hot, self._obs_start = None, 0
            in_dim = int(np.prod(observation_space.shape or ()))
        #: the trunk `PolicyConfig.trunk` resolved to for these observations
        self.trunk_kind = resolve_trunk(config.trunk, observation_space)
        width = config.hidden_sizes[-1]
        check_normalizable(config, observation_space)
        #: running statistics (`PolicyConfig.normalize_obs` / `scale_rewards`), else None
        self.normalizer = (Normalizer(in_dim, config.obs_clip, config.reward_clip)
                           if config.normalizes else None)
        with one_thread():  # initial weights that do not depend on the process's thread count
            #: the CNN that `encode` is, feeding both heads (None: an MLP policy)
            self.torso: ImageTrunk | None = None
            if self.trunk_kind != "mlp":
                self.torso = make_cnn(self.trunk_kind, observation_space, init)
                width = self.torso.out_dim
            self.pi_trunk = _trunk(in_dim, config, init) if self.torso is None else nn.Sequential()
            self.vf_trunk = (None if config.shared_trunk
                             else _trunk(in_dim, config, init) if self.torso is None else nn.Sequential())
            #: the actor's recurrent core (`rxrl.rl.models.recurrent`), or None; the critic's is
            #: `vf_core` (None with `shared_trunk`: this one feeds both heads)
            self.core = make_core(config, width, init) if config.is_recurrent else None
            self.vf_core = (make_core(config, width, init)
                            if config.is_recurrent and not config.shared_trunk else None)
            if self.core is not None:
                width = config.recurrent_size
            self.pi_head = _layer(width, out_dim, 0.01, init)
            self.vf_head = _layer(width, 1, 1.0, init)
        self.sampler = np.random.default_rng(seed)
        self._np: RolloutPath | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The numpy views must alias *this* object's parameters: rebuild them after a copy.
        module_state: Callable[[], dict[str, Any]] = super().__getstate__  # untyped in torch
        state = dict(module_state())
        state["_np"] = None
        return state

    def seed_sampling(self, seed: int) -> None:
        """Reseed the generator `act` samples from (weights are untouched)."""
        self.sampler = np.random.default_rng(seed)

    # -- torch: the differentiable path -------------------------------------------------

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations `[B, *obs_shape]` as float features `[B, in_dim]` (a CNN policy's:
        the CNN's output, from images of any dtype: uint8 stays uint8 until the CNN)."""
        if self.torso is not None:
            features: torch.Tensor = self.torso(obs)
            return features
        if self._one_hot is not None:
            return nn.functional.one_hot(obs.long() - self._obs_start, self._one_hot).float()
        flat = obs.reshape(obs.shape[0], -1)
        if self.normalizer is not None and self.config.normalize_obs:
            return self.normalizer.obs_torch(flat)
        return flat.float()

    def heads(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy head output `[B, out_dim]` and values `[B]` from encoded observations."""
        pi_hidden = self.pi_trunk(features)
        vf_hidden = pi_hidden if self.vf_trunk is None else self.vf_trunk(features)
        return self.pi_head(pi_hidden), self.vf_head(vf_hidden).squeeze(-1)

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Differentiable `(logp, entropy, values)`, each `[B]`, of `actions` at `obs`
        (a recurrent policy: `evaluate_sequences`)."""
        if self.core is not None:
            raise ValueError("ActorCritic.evaluate: this policy is recurrent (PolicyConfig.recurrent="
                             f"{self.config.recurrent!r}); evaluate sequences with evaluate_sequences")
        out, values = self.heads(self.encode(obs))
        logp, entropy = self._logp_entropy(out, actions)
        return logp, entropy, values

    def evaluate_sequences(
        self, obs: torch.Tensor, actions: torch.Tensor, starts: torch.Tensor, initial_state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Differentiable `(logp, entropy, values)`, each `[B]`, over env-major sequences: the
        `B` rows are `S = len(initial_state)` sequences of `B / S` steps; sequence `s` starts
        from `initial_state[s]` and the state is zeroed at every row of `starts` (`[B]` bool),
        as the worker computed them (`rxrl.rl.models.recurrent.run_sequences`). A policy
        without a core evaluates the rows as `evaluate` does."""
        if self.core is None:
            return self.evaluate(obs, actions)
        out, values, _ = self.sequence_heads(obs, starts, initial_state)
        logp, entropy = self._logp_entropy(out, actions)
        return logp, entropy, values

    def sequence_heads(
        self, obs: torch.Tensor, starts: torch.Tensor, initial_state: torch.Tensor,
        bootstrap_rows: torch.Tensor | None = None, bootstrap_obs: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """A recurrent policy's `heads` over env-major sequences (laid out as for
        `evaluate_sequences`): the policy head output `[B, out_dim]`, the values `[B]`, and,
        given `bootstrap_rows` (`[K]`) and `bootstrap_obs` (`[K, *obs_shape]`), the values `[K]`
        of `bootstrap_obs[j]` seen in the critic core's state after row `bootstrap_rows[j]`
        (None without them). Each such row must end its stretch of an episode in its sequence
        (a sequence's last row, or one whose successor starts an episode), as a
        `rxrl.rl.data.fragment.Fragment`'s bootstrap rows do: its observation is then one more
        step of that segment (`rxrl.rl.models.recurrent.Segments.run_past`)."""
        if self.core is None:
            raise ValueError("ActorCritic.sequence_heads: this policy has no recurrent core "
                             "(PolicyConfig.recurrent='none'); use heads(encode(obs))")
        segments = Segments(starts.reshape(initial_state.shape[0], -1))
        x = self.encode(obs)
        size = self.config.core_state_size
        pi_hidden: torch.Tensor | None = None
        if self.vf_core is not None and self.vf_trunk is not None:
            pi_hidden = segments.run(self.core, self.pi_trunk(x), initial_state[:, :size])
            vf_core, vf_trunk, vf_state = self.vf_core, self.vf_trunk, initial_state[:, size:]
        else:  # one trunk and one core feed both heads
            vf_core, vf_trunk, vf_state = self.core, self.pi_trunk, initial_state[:, :size]
        boot: torch.Tensor | None = None
        if bootstrap_rows is None or bootstrap_obs is None:
            vf_hidden = segments.run(vf_core, vf_trunk(x), vf_state)
        else:
            vf_hidden, after = segments.run_past(vf_core, vf_trunk(x), vf_state, bootstrap_rows,
                                                 vf_trunk(self.encode(bootstrap_obs)))
            boot = self.vf_head(after).squeeze(-1)
        if pi_hidden is None:
            pi_hidden = vf_hidden
        return self.pi_head(pi_hidden), self.vf_head(vf_hidden).squeeze(-1), boot

    def log_prob_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable log-probs and entropies of `actions` given a policy head output
        (`heads`), for losses that also need the distribution itself (a KL term)."""
        return self._logp_entropy(out, actions)

    # -- numpy: the rollout path ----------------------------------------------------------

    def act(
        self, obs: npt.NDArray[Any], deterministic: bool = False
    ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray]:
        """Sample actions for a batch of observations: `(actions, logp, values)`.

        `deterministic=True` takes the mode (argmax / mean) instead of sampling; `logp` is
        then that mode's log-probability.
        """
        return self.rollout_path().act(obs, self.sampler, deterministic)

    def value(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Value estimates `[B]` for a batch of observations (numpy, no autograd)."""
        return self.rollout_path().value(obs)

    def act_recurrent(self, obs: npt.NDArray[Any], state: FloatArray, deterministic: bool = False
                      ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray, FloatArray]:
        """A recurrent policy's `act`: `(actions, logp, values, new_state)` for observations
        seen in states `[B, state_size]` (zero a row's state before its episode's first step)."""
        return self.rollout_path().act_recurrent(obs, state, self.sampler, deterministic)

    def value_recurrent(self, obs: npt.NDArray[Any], state: FloatArray) -> FloatArray:
        """A recurrent policy's `value`: estimates `[B]` for observations seen in ``state``."""
        return self.rollout_path().value_recurrent(obs, state)

    def rollout_path(self) -> RolloutPath:
        """What `act` and `value` run: the numpy forward over views of this policy's
        parameters and buffers, or, for a CNN policy, `TorchForward`."""
        if self._np is None:
            if self.torso is not None:
                self._np = TorchForward(self)
            else:
                params = {k: t.detach().numpy() for k, t in self.state_dict().items()}
                self._np = Forward(params, self.config, self.observation_space, self.action_space,
                                   self.normalizer)
        return self._np

    # -- weights ----------------------------------------------------------------------------

    def get_weights(self) -> Weights:
        """A copy of every parameter and buffer as numpy arrays."""
        return {k: t.detach().cpu().numpy().copy() for k, t in self.state_dict().items()}

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Copy `weights` (as from `get_weights`) into this policy, in place.

        Raises ValueError naming the offending entries when names or shapes differ.
        """
        own = self.state_dict()
        check_weights({k: tuple(t.shape) for k, t in own.items()}, weights)
        with torch.no_grad():
            for k, w in weights.items():
                own[k].copy_(torch.as_tensor(np.asarray(w)))

    @abstractmethod
    def _logp_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable log-probs and entropies of `actions` given the head output."""


class CategoricalActorCritic(ActorCritic):
    """Actor-critic with a categorical head for a `Discrete(n)` action space.

    Actions are int64 indices `0..n-1` (add the space's `start` when stepping the env).
    Sampling uses the Gumbel-max trick: `argmax(logits + Gumbel noise)`.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.spaces.Discrete[Any],
        config: PolicyConfig,
        seed: int,
    ) -> None:
        super().__init__(observation_space, int(action_space.n), config, seed)
        self.action_space = action_space

    def _logp_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs = torch.log_softmax(out, dim=-1)
        logp = log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        return logp, entropy


class GaussianActorCritic(ActorCritic):
    """Actor-critic with a diagonal Gaussian head and a state-independent log-std.

    For a 1-D `Box` action space; actions are unbounded float32 samples (clip them to the
    space when stepping the env, and keep the unclipped ones for the loss).
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.spaces.Box,
        config: PolicyConfig,
        seed: int,
    ) -> None:
        act_dim = int(action_space.shape[0])
        super().__init__(observation_space, act_dim, config, seed)
        self.action_space = action_space
        self.log_std = nn.Parameter(torch.full((act_dim,), float(config.init_log_std)))

    def _logp_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = (actions - out) * torch.exp(-self.log_std)
        logp = (-0.5 * z.square() - self.log_std - LOG_SQRT_2PI).sum(-1)
        entropy = (0.5 + LOG_SQRT_2PI + self.log_std).sum().expand(out.shape[0])
        return logp, entropy


class TorchForward:
    """A CNN actor-critic's rollout path: `Forward`'s methods run through the policy's own
    torch modules (inference mode, no autograd), its recurrent cores stepped in torch
    (`rxrl.rl.models.recurrent.step`), and actions sampled from the outputs exactly as
    `Forward` samples them. Images go in as they are (uint8): the CNN makes them floats.

    A worker acting so uses torch on the thread count its process set (`RolloutWorker` and
    `NumpyActorCritic` set one thread: many workers share a machine's cores)."""

    def __init__(self, policy: ActorCritic) -> None:
        self.policy = policy

    def _tensor(self, array: npt.NDArray[Any]) -> torch.Tensor:
        device = self.policy.pi_head.weight.device
        return torch.as_tensor(np.asarray(array), device=device)

    def _sample(self, out: torch.Tensor, sampler: np.random.Generator, deterministic: bool
                ) -> tuple[npt.NDArray[Any], FloatArray]:
        logits: FloatArray = out.cpu().numpy()
        log_std = getattr(self.policy, "log_std", None)
        if log_std is None:
            return categorical_sample(logits, sampler, deterministic)
        return gaussian_sample(logits, log_std.detach().cpu().numpy(), sampler, deterministic)

    def _stateless(self, method: str) -> None:
        if self.policy.core is not None:
            raise ValueError(f"{method}: this policy is recurrent (PolicyConfig.recurrent="
                             f"{self.policy.config.recurrent!r}); use {method}_recurrent with a state")

    def act(self, obs: npt.NDArray[Any], sampler: np.random.Generator, deterministic: bool = False
            ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray]:
        """`(actions, logp, values)`, as `Forward.act`."""
        self._stateless("act")
        with torch.inference_mode():
            out, values = self.policy.heads(self.policy.encode(self._tensor(obs)))
        actions, logp = self._sample(out, sampler, deterministic)
        return actions, logp, values.cpu().numpy()

    def value(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Value estimates `[B]`, as `Forward.value`."""
        self._stateless("value")
        with torch.inference_mode():
            values: FloatArray = self.policy.heads(self.policy.encode(self._tensor(obs)))[1].cpu().numpy()
        return values

    def act_recurrent(self, obs: npt.NDArray[Any], state: FloatArray, sampler: np.random.Generator,
                      deterministic: bool = False
                      ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray, FloatArray]:
        """`(actions, logp, values, new_state)`, as `Forward.act_recurrent`."""
        with torch.inference_mode():
            (pi_hidden, vf_hidden), new_state = self._cores(obs, state, actor=True)
            out, values = self.policy.pi_head(pi_hidden), self.policy.vf_head(vf_hidden)[:, 0]
        actions, logp = self._sample(out, sampler, deterministic)
        return actions, logp, values.cpu().numpy(), new_state.cpu().numpy()

    def value_recurrent(self, obs: npt.NDArray[Any], state: FloatArray) -> FloatArray:
        """Value estimates `[B]` for observations seen in ``state``, as `Forward.value_recurrent`."""
        with torch.inference_mode():
            (_, vf_hidden), _ = self._cores(obs, state, actor=False)
            values: FloatArray = self.policy.vf_head(vf_hidden)[:, 0].cpu().numpy()
        return values

    def _cores(self, obs: npt.NDArray[Any], state: FloatArray, actor: bool
               ) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        """`Forward._cores` in torch: ``((actor hidden, critic hidden), new state)``."""
        p = self.policy
        if p.core is None:
            raise ValueError("act_recurrent / value_recurrent need a recurrent policy "
                             "(PolicyConfig.recurrent='lstm' or 'gru'); use act / value")
        x, states = p.encode(self._tensor(obs)), self._tensor(state)
        if p.vf_core is None or p.vf_trunk is None:  # one core feeds both heads
            hidden, new = step(p.core, p.pi_trunk(x), states)
            return (hidden, hidden), new
        size = p.config.core_state_size
        vf_hidden, vf_new = step(p.vf_core, p.vf_trunk(x), states[:, size:])
        if not actor:
            return (vf_hidden, vf_hidden), states
        pi_hidden, pi_new = step(p.core, p.pi_trunk(x), states[:, :size])
        return (pi_hidden, vf_hidden), torch.cat([pi_new, vf_new], dim=1)


def make_policy(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    config: PolicyConfig | None = None,
    seed: int = 0,
) -> ActorCritic:
    """Build the actor-critic for these spaces; equal seeds give equal initial weights.

    Observations: `Box` (any shape, flattened; an image ``[C, H, W]`` through a CNN, as
    `PolicyConfig.trunk` says) or `Discrete` (one-hot). Actions: `Discrete` (categorical
    head) or 1-D `Box` (Gaussian head). Anything else raises ValueError naming the space.
    """
    config = config or PolicyConfig()
    check_spaces(observation_space, action_space)
    if isinstance(action_space, gym.spaces.Discrete):
        return CategoricalActorCritic(observation_space, action_space, config, seed)
    assert isinstance(action_space, gym.spaces.Box)
    return GaussianActorCritic(observation_space, action_space, config, seed)


def acting_policy(observation_space: gym.Space[Any], action_space: gym.Space[Any], config: PolicyConfig,
                  weights: Mapping[str, npt.NDArray[np.generic]]) -> ActorCritic:
    """An actor-critic holding ``weights``, for acting only (no gradients): what a
    `rxrl.rl.models.forward.NumpyActorCritic` of a CNN policy acts through."""
    policy = make_policy(observation_space, action_space, config).requires_grad_(False)
    policy.set_weights(weights)
    return policy


__all__ = [
    "ActorCritic",
    "CategoricalActorCritic",
    "FloatArray",
    "GaussianActorCritic",
    "TorchForward",
    "Weights",
    "acting_policy",
    "make_policy",
]
