"""The rollout path of an MLP actor-critic, in numpy: no torch, no autograd (a CNN's acts
through torch: `NumpyActorCritic`).

Why numpy in the hot path: at rollout batch sizes (8-16 rows) each torch op costs ~5 us of
dispatch overhead against ~1 us for numpy, so `act` on CartPole with 16 envs takes ~38 us
instead of ~146 us. Why without torch: a rollout worker that acts with numpy weights (a
learner's `get_weights`) need not import torch at all, ~0.9 s of CPU per worker process at
start-up (docs/benchmarks.md, "Start-up").

`Forward` runs the network over arrays keyed by torch state-dict name: *views* of a torch
`ActorCritic`'s parameters (`rxrl.rl.models.policy`, whose `act` and `value` are this code) or the
arrays a `NumpyActorCritic` owns. Both compute the same float32 operations on the same
values, so they act alike bit for bit (`tests/rl/test_forward.py`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from rxrl.rl.config import PolicyConfig, resolve_trunk
from rxrl.rl.data.running_stats import ArrayNormalizer
from rxrl.rl.models.cells import Cell

#: Policy weights as plain numpy arrays, keyed by torch state-dict name: cheap to pickle.
Weights = dict[str, npt.NDArray[np.float32]]
FloatArray = npt.NDArray[np.float32]

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
#: the MLPs' activations in numpy, by `PolicyConfig.activation` / `QNetConfig.activation`
NP_ACTIVATIONS: dict[str, Callable[[FloatArray], FloatArray]] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, np.float32(0.0)),
}


def one_hot_of(space: gym.Space[Any]) -> tuple[int | None, int]:
    """``(n, start)`` of a Discrete observation space, whose observations an MLP sees one-hot;
    ``(None, 0)`` for any other (flattened)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n), int(space.start)
    return None, 0


def features(obs: npt.NDArray[Any], one_hot: int | None, start: int) -> FloatArray:
    """Observations as an MLP's float input ``[B, in_dim]``: one-hot rows (``one_hot`` values
    from ``start``: `one_hot_of`), or each observation flattened."""
    if one_hot is not None:
        return np.eye(one_hot, dtype=np.float32)[np.asarray(obs, dtype=np.intp) - start]
    return np.asarray(obs, dtype=np.float32).reshape(len(obs), -1)
#: the network's parts, as the torch module names them
PARTS = ("pi_trunk", "vf_trunk", "pi_head", "vf_head")


class ObsNormalizer(Protocol):
    """What the rollout path needs of a policy's running statistics."""

    def obs_np(self, x: FloatArray) -> FloatArray:
        """Normalized observations."""
        ...

    def scale_rewards(self, rewards: npt.NDArray[Any]) -> FloatArray:
        """Scaled, clipped rewards."""
        ...


class RolloutPath(Protocol):
    """An actor-critic's rollout path: `Forward` (numpy) or, for a CNN policy,
    `rxrl.rl.models.policy.TorchForward`."""

    def act(self, obs: npt.NDArray[Any], sampler: np.random.Generator, deterministic: bool = False
            ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray]:
        """`(actions, logp, values)` for a batch of observations."""
        ...

    def value(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Value estimates `[B]`."""
        ...

    def act_recurrent(self, obs: npt.NDArray[Any], state: FloatArray, sampler: np.random.Generator,
                      deterministic: bool = False
                      ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray, FloatArray]:
        """`(actions, logp, values, new_state)` of a recurrent policy."""
        ...

    def value_recurrent(self, obs: npt.NDArray[Any], state: FloatArray) -> FloatArray:
        """Value estimates `[B]` of a recurrent policy for observations seen in ``state``."""
        ...


def check_spaces(observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
    """ValueError naming the space unless observations are `Box` or `Discrete` and actions
    `Discrete` or 1-D `Box` (what an MLP actor-critic supports)."""
    if not isinstance(observation_space, gym.spaces.Box | gym.spaces.Discrete):
        raise ValueError(
            f"make_policy: unsupported observation space {observation_space!r}; "
            "supported: Box (flattened) and Discrete (one-hot)"
        )
    if isinstance(action_space, gym.spaces.Discrete):
        return
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return
    raise ValueError(
        f"make_policy: unsupported action space {action_space!r}; supported: Discrete and 1-D Box"
    )


def check_normalizable(config: PolicyConfig, observation_space: gym.Space[Any]) -> None:
    """ValueError unless observations can be normalized where ``config`` asks for it (a
    `Discrete` observation is one-hot: there is nothing to normalize; a CNN scales its images
    itself)."""
    if config.normalize_obs and isinstance(observation_space, gym.spaces.Discrete):
        raise ValueError("PolicyConfig.normalize_obs needs a Box observation space, got "
                         f"{observation_space!r}")
    trunk = resolve_trunk(config.trunk, observation_space)
    if config.normalize_obs and trunk != "mlp":
        raise ValueError(f"policy.normalize_obs does not apply to a CNN trunk ({trunk}): it divides "
                         "images by their upper bound itself; set policy.normalize_obs=False")


def check_weights(own: Mapping[str, tuple[int, ...]], weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
    """ValueError naming the offending entries unless ``weights`` has exactly the names of
    ``own`` (name -> shape), with those shapes."""
    missing, extra = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    if missing or extra:
        raise ValueError(f"set_weights: missing entries {missing}, unexpected {extra}")
    wrong = {k: (own[k], np.shape(w)) for k, w in weights.items() if own[k] != np.shape(w)}
    if wrong:
        raise ValueError(f"set_weights: shape mismatch (expected, got): {wrong}")


class _Linear:
    """A linear layer over a weight `[out, in]` and a bias (numpy arrays, views or own)."""

    def __init__(self, weight: FloatArray, bias: FloatArray) -> None:
        self.weight_t: FloatArray = weight.T
        self.bias = bias

    def __call__(self, x: FloatArray) -> FloatArray:
        return x @ self.weight_t + self.bias


class Forward:
    """An actor-critic's forward pass and sampling over arrays keyed by state-dict name.

    ``params`` must stay the same array objects (updated in place) for the life of this
    object: the layers hold them, not copies.
    """

    def __init__(self, params: Mapping[str, npt.NDArray[Any]], config: PolicyConfig,
                 observation_space: gym.Space[Any], action_space: gym.Space[Any],
                 normalizer: ObsNormalizer | None) -> None:
        self.config, self.normalizer = config, normalizer
        self.activation = NP_ACTIVATIONS[config.activation]
        self.one_hot, self.obs_start = one_hot_of(observation_space)
        self.categorical = isinstance(action_space, gym.spaces.Discrete)
        self.log_std: FloatArray | None = None if self.categorical else params["log_std"]
        self.layers: dict[str, list[_Linear]] = {}
        for part in PARTS:
            if f"{part}.weight" in params:  # a head: one layer
                self.layers[part] = [_Linear(params[f"{part}.weight"], params[f"{part}.bias"])]
                continue
            indices = sorted({int(k.split(".")[1]) for k in params if k.startswith(f"{part}.")})
            if indices:
                self.layers[part] = [_Linear(params[f"{part}.{i}.weight"], params[f"{part}.{i}.bias"])
                                     for i in indices]
        #: the actor's recurrent core's step (`PolicyConfig.recurrent`), else None; the
        #: critic's is `vf_cell` (None when the actor's feeds both heads)
        self.cell = Cell.of(params, config.recurrent) if config.is_recurrent else None
        self.vf_cell = (Cell.of(params, config.recurrent, "vf_core")
                        if config.is_recurrent and "vf_core.weight_ih_l0" in params else None)

    def act(self, obs: npt.NDArray[Any], sampler: np.random.Generator, deterministic: bool = False
            ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray]:
        """`(actions, logp, values)` for a batch of observations, sampling from ``sampler``
        (the mode instead with ``deterministic``; `logp` is then the mode's)."""
        self._stateless("act")
        x = self.encode(obs)
        pi_hidden = self.mlp("pi_trunk", x)
        vf_hidden = pi_hidden if "vf_trunk" not in self.layers else self.mlp("vf_trunk", x)
        actions, logp = self.sample(self.mlp("pi_head", pi_hidden), sampler, deterministic)
        return actions, logp, self.mlp("vf_head", vf_hidden)[:, 0]

    def act_recurrent(self, obs: npt.NDArray[Any], state: FloatArray, sampler: np.random.Generator,
                      deterministic: bool = False
                      ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray, FloatArray]:
        """`(actions, logp, values, new_state)` of a recurrent policy for observations and
        the states ``[B, state_size]`` they are seen in (zeroed by the caller where an
        episode starts)."""
        (pi_hidden, vf_hidden), new_state = self._cores(obs, state, actor=True)
        actions, logp = self.sample(self.mlp("pi_head", pi_hidden), sampler, deterministic)
        return actions, logp, self.mlp("vf_head", vf_hidden)[:, 0], new_state

    def value_recurrent(self, obs: npt.NDArray[Any], state: FloatArray) -> FloatArray:
        """Value estimates `[B]` of a recurrent policy for observations seen in ``state``."""
        (_, vf_hidden), _ = self._cores(obs, state, actor=False)
        return self.mlp("vf_head", vf_hidden)[:, 0]

    def sample(self, out: FloatArray, sampler: np.random.Generator, deterministic: bool
               ) -> tuple[npt.NDArray[Any], FloatArray]:
        """Actions and their log-probabilities from the policy head's output."""
        if self.categorical:
            return categorical_sample(out, sampler, deterministic)
        assert self.log_std is not None
        return gaussian_sample(out, self.log_std, sampler, deterministic)

    def _cores(self, obs: npt.NDArray[Any], state: FloatArray, actor: bool
               ) -> tuple[tuple[FloatArray, FloatArray], FloatArray]:
        """``((actor hidden, critic hidden), new state)``; the actor's core is skipped when
        only the critic's output is needed (``actor=False``; its state is then not advanced)."""
        if self.cell is None:
            raise ValueError("act_recurrent / value_recurrent need a recurrent policy "
                             "(PolicyConfig.recurrent='lstm' or 'gru'); use act / value")
        x = self.encode(obs)
        if self.vf_cell is None:  # one core feeds both heads
            hidden, new = self.cell(self.mlp("pi_trunk", x), state)
            return (hidden, hidden), new
        size = self.config.core_state_size
        vf_hidden, vf_new = self.vf_cell(self.mlp("vf_trunk", x), state[:, size:])
        if not actor:
            return (vf_hidden, vf_hidden), state
        pi_hidden, pi_new = self.cell(self.mlp("pi_trunk", x), state[:, :size])
        return (pi_hidden, vf_hidden), np.concatenate([pi_new, vf_new], axis=1)

    def _stateless(self, method: str) -> None:
        if self.cell is not None:
            raise ValueError(f"{method}: this policy is recurrent (PolicyConfig.recurrent="
                             f"{self.config.recurrent!r}); use {method}_recurrent with a state")

    def value(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Value estimates `[B]` for a batch of observations."""
        self._stateless("value")
        x = self.encode(obs)
        hidden = self.mlp("pi_trunk" if "vf_trunk" not in self.layers else "vf_trunk", x)
        return self.mlp("vf_head", hidden)[:, 0]

    def encode(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Observations as float features `[B, in_dim]` (one-hot, or flattened and normalized)."""
        x = features(obs, self.one_hot, self.obs_start)
        if self.one_hot is None and self.normalizer is not None and self.config.normalize_obs:
            return self.normalizer.obs_np(x)
        return x

    def mlp(self, part: str, x: FloatArray) -> FloatArray:
        """Run one part (a trunk: linear + activation per layer; a head: one linear)."""
        layers = self.layers[part]
        if part.endswith("_head"):
            return layers[0](x)
        for layer in layers:
            x = self.activation(layer(x))
        return x


def categorical_sample(out: FloatArray, sampler: np.random.Generator, deterministic: bool
                       ) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """Actions (Gumbel-max: `argmax(logits + Gumbel noise)`, or the argmax) and log-probs."""
    if deterministic:
        actions = out.argmax(axis=1)
    else:
        u = sampler.random(out.shape, dtype=np.float32)
        with np.errstate(divide="ignore"):  # u == 0 gives noise -inf: never the argmax
            actions = (out - np.log(-np.log(u))).argmax(axis=1)
    top = out.max(axis=1)
    log_norm = top + np.log(np.exp(out - top[:, None]).sum(axis=1))
    logp = np.take_along_axis(out, actions[:, None], axis=1)[:, 0] - log_norm
    return actions.astype(np.int64, copy=False), logp


def gaussian_sample(out: FloatArray, log_std: FloatArray, sampler: np.random.Generator,
                    deterministic: bool) -> tuple[FloatArray, FloatArray]:
    """Actions `mean + exp(log_std) * noise` (the mean with ``deterministic``) and log-probs."""
    noise: FloatArray = (np.zeros_like(out) if deterministic
                         else sampler.standard_normal(out.shape, dtype=np.float32))
    actions = cast(FloatArray, out + np.exp(log_std) * noise)  # float32 throughout
    logp: FloatArray = (np.float32(-0.5) * np.square(noise) - log_std - np.float32(LOG_SQRT_2PI)).sum(axis=1)
    return actions, logp


class NumpyActorCritic:
    """An actor-critic's rollout path with no torch at all: `act`, `value` and the weights
    of a learner's `get_weights` (every entry, the normalization statistics included), as a
    rollout worker that never trains holds it (`rxrl.rl.workers.rollout.RolloutWorkerFactory`).

    It acts exactly as the torch `ActorCritic` with the same weights and sampling seed.
    `set_weights` copies into the arrays it owns, in place.

    A CNN policy (`PolicyConfig.trunk`) cannot reasonably act in numpy: this one then imports
    torch and acts through a torch `ActorCritic` holding the weights
    (`rxrl.rl.models.policy.TorchForward`), on one thread when this process had not loaded
    torch before (a worker among others on the machine's cores).
    """

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any],
                 config: PolicyConfig, weights: Mapping[str, npt.NDArray[Any]], seed: int) -> None:
        check_spaces(observation_space, action_space)
        check_normalizable(config, observation_space)
        self.config = config
        self.observation_space, self.action_space = observation_space, action_space
        self.sampler = np.random.default_rng(seed)
        self._torch: Any = None  # a CNN policy's torch `ActorCritic`, else None
        self.normalizer: ObsNormalizer | None
        self._forward: RolloutPath
        if resolve_trunk(config.trunk, observation_space) != "mlp":
            self._torch = _acting_policy(observation_space, action_space, config, weights)
            self._params: dict[str, npt.NDArray[Any]] = {  # views: `get_weights` copies them
                k: t.detach().cpu().numpy() for k, t in self._torch.state_dict().items()}
            self.normalizer, self._forward = self._torch.normalizer, self._torch.rollout_path()
            return
        self._params = {k: np.array(v, copy=True) for k, v in weights.items()}
        self.normalizer = (ArrayNormalizer(self._params, config.obs_clip, config.reward_clip)
                           if config.normalizes else None)
        self._forward = Forward(self._params, config, observation_space, action_space, self.normalizer)

    def seed_sampling(self, seed: int) -> None:
        """Reseed the generator `act` samples from (weights are untouched)."""
        self.sampler = np.random.default_rng(seed)

    def act(self, obs: npt.NDArray[Any], deterministic: bool = False
            ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray]:
        """`(actions, logp, values)`, as `ActorCritic.act`."""
        return self._forward.act(obs, self.sampler, deterministic)

    def value(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Value estimates `[B]`, as `ActorCritic.value`."""
        return self._forward.value(obs)

    def act_recurrent(self, obs: npt.NDArray[Any], state: FloatArray, deterministic: bool = False
                      ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray, FloatArray]:
        """`(actions, logp, values, new_state)`, as `ActorCritic.act_recurrent`."""
        return self._forward.act_recurrent(obs, state, self.sampler, deterministic)

    def value_recurrent(self, obs: npt.NDArray[Any], state: FloatArray) -> FloatArray:
        """Value estimates `[B]`, as `ActorCritic.value_recurrent`."""
        return self._forward.value_recurrent(obs, state)

    def get_weights(self) -> Weights:
        """A copy of every entry."""
        return {k: v.copy() for k, v in self._params.items()}

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Copy ``weights`` in, in place (ValueError naming entries whose names or shapes differ)."""
        if self._torch is not None:  # copies into the tensors `_params` views
            self._torch.set_weights(weights)
            return
        check_weights({k: v.shape for k, v in self._params.items()}, weights)
        for k, w in weights.items():
            np.copyto(self._params[k], np.asarray(w), casting="unsafe")
        if isinstance(self.normalizer, ArrayNormalizer):
            self.normalizer.changed()


def _acting_policy(observation_space: gym.Space[Any], action_space: gym.Space[Any], config: PolicyConfig,
                   weights: Mapping[str, npt.NDArray[Any]]) -> Any:
    """A torch actor-critic holding ``weights`` (`rxrl.rl.models.policy.acting_policy`); a
    process that loads torch for it acts on one thread."""
    fresh = "torch" not in sys.modules
    from rxrl.rl.models.policy import acting_policy  # torch: only for a policy that needs it

    if fresh:
        import torch

        torch.set_num_threads(1)
    return acting_policy(observation_space, action_space, config, weights)


__all__ = ["LOG_SQRT_2PI", "NP_ACTIVATIONS", "PARTS", "FloatArray", "Forward", "NumpyActorCritic",
           "ObsNormalizer", "RolloutPath", "Weights", "categorical_sample", "check_normalizable",
           "check_spaces", "check_weights", "features", "gaussian_sample", "one_hot_of"]
