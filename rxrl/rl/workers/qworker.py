"""Transition workers: step a gymnasium vector env and return (n-step) transitions for replay;
`QRolloutWorker` acts epsilon-greedily on a Q-network (in numpy, without torch, given weights).

This module imports no torch: a worker that needs it (a CNN Q-network, SAC's actor) imports it.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Protocol

import attrs
import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode

from rxrl.envs.vector import (
    EnvSpaces,
    autoreset_mode,
    make_vector_env,
    reported_episodes,
    same_step_unless_native,
)
from rxrl.rl.config import QNetConfig, resolve_trunk
from rxrl.rl.data.episode_metrics import EpisodeMetricsRecorder
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.models.forward import Weights
from rxrl.rl.models.qforward import NumpyQNetwork, check_q_spaces
from rxrl.rl.replay.nstep import NStepFolder, StepArrays
from rxrl.rl.schedules import LinearSchedule


class ActingQNetwork(Protocol):
    """What a `QRolloutWorker` acts with: a `NumpyQNetwork` (no torch), or for a CNN trunk (or
    without weights to start from) a torch `rxrl.rl.models.qnet.QNetwork`."""

    @property
    def num_actions(self) -> int:
        """Actions of the (Discrete) action space."""
        ...

    def greedy(self, obs: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """The argmax action of each observation."""
        ...

    def get_weights(self) -> Weights:
        """A copy of the weights."""
        ...

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Load weights in place."""
        ...


def use_torch_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)``, if this process has loaded torch (None: leave it).
    A worker acting in numpy leaves torch unloaded rather than load it for this."""
    if threads is not None and "torch" in sys.modules:
        import torch

        torch.set_num_threads(threads)


class TransitionWorker(ABC):
    """Steps `num_envs` copies of a gymnasium env and returns (n-step) transitions for replay.

    Each `sample()` steps the vector env `fragment_length` times with the actions `_act`
    chooses and returns the transitions stepped, env-major (each sub-environment's rows
    consecutive, in time order). Subclasses own the network that acts (`QRolloutWorker`:
    epsilon-greedy on a Q-network; `rxrl.rl.learners.sac.SACRolloutWorker`: a squashed Gaussian actor).

    Autoreset: gymnasium's own vector envs (``"sync"``, ``"async"``, MinAtar's, Atari's) are
    made in SAME_STEP mode unless ``vector_kwargs`` names a mode
    (`rxrl.envs.vector.same_step_unless_native`): every step is a transition, the final
    observation from `info["final_obs"]`. A native vector env in NEXT_STEP mode (the only
    one `CartPoleVectorEnv` has) spends the step after an episode ends on the reset alone;
    it is not a transition and never appears in a batch. DISABLED is refused.

    With `n_step > 1` each row folds up to `n_step` steps (`rxrl.rl.replay.nstep`): a row is
    emitted once its window has closed, so the last `n_step - 1` transitions of each
    sub-environment wait for the next `sample()`; `env_steps` counts the transitions
    stepped during this call, emitted or not.

    Seeding: the env reset seed and the generator `rng` (exploration) come from
    `(seed, worker_index)`. `torch_threads` (default 1) is applied process-wide if the
    process has torch (a subclass that imports torch later applies it then); None leaves
    it. Episode statistics are those of episodes that ended during the call (an env that
    reports whole games, as Atari does: its games with their raw scores,
    `rxrl.envs.vector.reported_episodes`); `env_steps` (the attribute) counts every transition
    stepped so far (an exploration schedule's clock).

    ``episode_metrics`` (``"module:function"``, `rxrl.rl.data.episode_metrics`): called for
    every episode that ends, with that sub-env's final info and the episode's return and
    length; its values are the batch's ``episode_metrics``, aligned with ``episode_returns``.
    """

    def __init__(
        self,
        env: str,
        num_envs: int,
        fragment_length: int,
        seed: int,
        worker_index: int,
        n_step: int,
        gamma: float,
        env_kwargs: Mapping[str, Any] | None,
        vectorization_mode: str | None,
        vector_kwargs: Mapping[str, Any] | None,
        torch_threads: int | None,
        episode_metrics: str | None = None,
    ) -> None:
        if fragment_length < 1:
            raise ValueError(f"{type(self).__name__}: fragment_length must be >= 1, got {fragment_length}")
        self.episode_metrics = None if episode_metrics is None else EpisodeMetricsRecorder(episode_metrics)
        self.folder = NStepFolder(n_step, gamma)
        self.torch_threads = torch_threads
        use_torch_threads(torch_threads)
        self.env_id, self.num_envs, self.fragment_length = env, num_envs, fragment_length
        self.seed, self.worker_index = seed, worker_index
        self.env = make_vector_env(env, num_envs, vectorization_mode, env_kwargs,
                                   same_step_unless_native(env, vectorization_mode, vector_kwargs))
        self.next_step_reset = autoreset_mode(self.env) is AutoresetMode.NEXT_STEP
        self.spaces = EnvSpaces(self.env.single_observation_space, self.env.single_action_space)
        env_seed, explore_seed = np.random.SeedSequence([seed, worker_index]).generate_state(2)
        self.rng = np.random.default_rng(int(explore_seed))
        self._env_seed = int(env_seed)
        self._obs: npt.NDArray[Any] | None = None
        self._resetting = np.zeros(num_envs, dtype=np.bool_)  # NEXT_STEP: this step resets
        self._episode_return = np.zeros(num_envs, dtype=np.float64)
        self._episode_length = np.zeros(num_envs, dtype=np.int64)
        self.env_steps = 0  # transitions stepped so far: the exploration schedule's clock

    def step_fragment(self) -> TransitionBatch:
        """Step the envs `fragment_length` times; the transitions (see the class docstring).

        Subclasses expose it as their own ``sample`` (so that a plan reads
        ``from_actors(QRolloutWorker×2, QRolloutWorker.sample)``)."""
        if self._obs is None:  # reset at the first sample: the subclass has built its network
            obs, _ = self.env.reset(seed=self._env_seed)
            self._obs = obs.copy()  # a vector env may write its next observations into this buffer
        steps = _Steps()
        obs = self._obs
        for _ in range(self.fragment_length):
            actions = self._act(obs)
            next_obs, rewards, terminated, truncated, infos = self.env.step(self._env_actions(actions))
            next_obs = next_obs.copy()  # some vector envs reuse one observation buffer
            valid = ~self._resetting
            terminated, truncated = terminated & valid, truncated & valid
            rewards = np.where(valid, rewards, 0.0).astype(np.float32)
            done = terminated | truncated
            stored_next = next_obs
            if done.any() and not self.next_step_reset:  # SAME_STEP: next_obs is the reset obs
                stored_next = next_obs.copy()
                for i in np.flatnonzero(done):
                    stored_next[i] = infos["final_obs"][i]
            steps.add(obs, actions, rewards, stored_next, terminated, truncated, valid)
            self.env_steps += int(valid.sum())
            self._episode_return += rewards
            self._episode_length += valid
            if done.any():
                games, returns, lengths = reported_episodes(  # Atari: whole games, raw scores
                    infos, np.flatnonzero(done), not self.next_step_reset, self._episode_return[done],
                    self._episode_length[done])
                steps.episodes(returns, lengths)
                if self.episode_metrics is not None:
                    self.episode_metrics.record(infos, games, not self.next_step_reset, returns, lengths)
                self._episode_return[done], self._episode_length[done] = 0.0, 0
            if self.next_step_reset:
                self._resetting = done
            obs = next_obs
        self._obs = obs
        batch = self.folder.fold(steps.fragment())
        metrics = {} if self.episode_metrics is None else self.episode_metrics.take()
        return attrs.evolve(batch, episode_returns=steps.returns(), episode_lengths=steps.lengths(),
                            episode_metrics=metrics)

    def close(self) -> None:
        """Close the vector env."""
        self.env.close()

    @abstractmethod
    def get_weights(self) -> Weights:
        """The acting network's weights as numpy arrays."""

    @abstractmethod
    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Load the acting network's weights (as from the learner's `get_weights`)."""

    @abstractmethod
    def _act(self, obs: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """The actions (as stored in the batch) for a batch of observations."""

    def _env_actions(self, actions: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """The stored actions as the env takes them (identity unless overridden)."""
        return actions


class QRolloutWorker(TransitionWorker):
    """Samples transitions for Q-learning, epsilon-greedily on a Q-network (`TransitionWorker`).

    Actions are the Q-network's argmax, replaced with probability epsilon by a uniformly
    random action. `epsilon` is a float (fixed, as Ape-X gives each worker:
    `rxrl.rl.schedules.apex_epsilon`) or a `LinearSchedule` evaluated at this worker's env
    steps so far (`epsilon_schedule` builds DQN's linear decay over a fraction of a run).
    Initial weights come from `seed` alone (equal to a `DQNLearner`'s with that seed), or are
    ``weights`` (a learner's `get_weights`; `rxrl.algos.qlearning.common.QWorkerFactory` gives
    its workers the learner's initial ones, built once: `rxrl.rl.models.initial.InitialWeights`).

    Given ``weights``, an MLP Q-network acts through `NumpyQNetwork` and the worker never
    imports torch: the same actions, bit for bit, as the torch `QNetwork` with those weights.
    A CNN Q-network (`QNetConfig.trunk`), or an MLP without ``weights`` (its initial weights
    are drawn by torch's generator), is a torch `QNetwork`.
    ``episode_metrics``: as `TransitionWorker`'s.
    """

    def __init__(
        self,
        env: str,
        num_envs: int = 1,
        fragment_length: int = 1,
        seed: int = 0,
        worker_index: int = 0,
        epsilon: float | LinearSchedule = 0.0,
        n_step: int = 1,
        gamma: float = 0.99,
        q_net: QNetConfig | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        vectorization_mode: str | None = None,
        vector_kwargs: Mapping[str, Any] | None = None,
        torch_threads: int | None = 1,
        episode_metrics: str | None = None,
        weights: Mapping[str, npt.NDArray[Any]] | None = None,
    ) -> None:
        _check_epsilon(epsilon)
        super().__init__(env, num_envs, fragment_length, seed, worker_index, n_step, gamma,
                         env_kwargs, vectorization_mode, vector_kwargs, torch_threads, episode_metrics)
        self.epsilon = epsilon
        self.q_net: ActingQNetwork = self._q_network(q_net or QNetConfig(), seed, weights)
        assert isinstance(self.spaces.action, gym.spaces.Discrete)  # check_q_spaces checked it
        self._action_offset = int(self.spaces.action.start)

    def _q_network(self, config: QNetConfig, seed: int,
                   weights: Mapping[str, npt.NDArray[Any]] | None) -> ActingQNetwork:
        """`NumpyQNetwork` of ``weights`` for an MLP, else a torch `QNetwork` (see the class)."""
        observation, action = self.spaces.observation, self.spaces.action
        check_q_spaces(observation, action)
        if weights is not None and resolve_trunk(config.trunk, observation, "q_net.trunk") == "mlp":
            return NumpyQNetwork(observation, action, config, weights)
        from rxrl.rl.models.qnet import make_q_network  # torch: only for a network that needs it

        use_torch_threads(self.torch_threads)  # torch is loaded now
        q_net = make_q_network(observation, action, config, seed)
        if weights is not None:
            q_net.set_weights(weights)
        return q_net

    def sample(self) -> TransitionBatch:
        """Step the envs `fragment_length` times, epsilon-greedily; the transitions."""
        return self.step_fragment()

    def current_epsilon(self) -> float:
        """The exploration probability at this worker's current env step count."""
        return self.epsilon(self.env_steps) if isinstance(self.epsilon, LinearSchedule) else self.epsilon

    def get_weights(self) -> Weights:
        """The Q-network's weights as numpy arrays."""
        return self.q_net.get_weights()

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Load Q-network weights (as from `DQNLearner.get_weights`)."""
        self.q_net.set_weights(weights)

    def _act(self, obs: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        actions = self.q_net.greedy(obs)
        explore = self.rng.random(self.num_envs) < self.current_epsilon()
        if explore.any():
            random = self.rng.integers(0, self.q_net.num_actions, self.num_envs, dtype=np.int64)
            actions = np.where(explore, random, actions)
        return actions

    def _env_actions(self, actions: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return actions + self._action_offset


def _check_epsilon(epsilon: float | LinearSchedule) -> None:
    values = (epsilon.start, epsilon.end) if isinstance(epsilon, LinearSchedule) else (epsilon,)
    if not all(0.0 <= e <= 1.0 for e in values):
        raise ValueError(f"QRolloutWorker: epsilon must lie in [0, 1], got {epsilon!r}")


class _Steps:
    """Per-step arrays of one `sample()` call, stacked time-major at the end."""

    def __init__(self) -> None:
        self.columns: tuple[list[npt.NDArray[Any]], ...] = tuple([] for _ in range(7))
        self._returns: list[npt.NDArray[np.float64]] = []
        self._lengths: list[npt.NDArray[np.int64]] = []

    def add(self, *arrays: npt.NDArray[Any]) -> None:
        """One vector step: obs, actions, rewards, next_obs, terminateds, truncateds, valid."""
        for column, array in zip(self.columns, arrays, strict=True):
            column.append(array)

    def episodes(self, returns: npt.NDArray[np.float64], lengths: npt.NDArray[np.int64]) -> None:
        """Record the returns and lengths of the episodes that just ended."""
        self._returns.append(returns.copy())
        self._lengths.append(lengths.copy())

    def fragment(self) -> StepArrays:
        """The steps, stacked time-major `[S, N, ...]`."""
        obs, actions, rewards, next_obs, terminated, truncated, valid = (np.stack(c) for c in self.columns)
        return StepArrays(obs, actions, rewards, next_obs, terminated, truncated, valid)

    def returns(self) -> npt.NDArray[np.float32]:
        """Returns of the episodes that ended, float32."""
        return np.concatenate(self._returns or [np.zeros(0)]).astype(np.float32)

    def lengths(self) -> npt.NDArray[np.int64]:
        """Lengths of the episodes that ended."""
        return np.concatenate(self._lengths or [np.zeros(0, np.int64)])


__all__ = ["ActingQNetwork", "QRolloutWorker", "TransitionWorker", "use_torch_threads"]
