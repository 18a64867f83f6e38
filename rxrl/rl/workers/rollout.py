"""RolloutWorker: steps a gymnasium vector env with a policy and returns GAE'd fragments."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode

from rxrl.envs.vector import (
    EnvSpaces,
    autoreset_mode,
    make_vector_env,
    registered_id,
    reported_episodes,
)
from rxrl.rl.config import A2CConfig, PolicyConfig, check_discount
from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.data.episode_metrics import EpisodeMetricsRecorder
from rxrl.rl.data.fragment import Fragment
from rxrl.rl.data.running_stats import NormStats, ReturnTracker, RunningMoments
from rxrl.rl.data.sequences import SequenceBatch
from rxrl.rl.models.forward import FloatArray, NumpyActorCritic, ObsNormalizer, Weights
from rxrl.rl.models.initial import InitialWeights, weights_of
from rxrl.rl.objectives.gae import compute_gae

if TYPE_CHECKING:
    from rxrl.rl.objectives.losses import Gradients


class RolloutPolicy(Protocol):
    """What a rollout worker acts with: a torch `rxrl.rl.models.policy.ActorCritic`, or the same
    rollout path without torch (`rxrl.rl.models.forward.NumpyActorCritic`)."""

    @property
    def config(self) -> PolicyConfig:
        """The policy's settings."""
        ...

    @property
    def normalizer(self) -> ObsNormalizer | None:
        """Its running statistics, if it normalizes."""
        ...

    def act(self, obs: npt.NDArray[Any], deterministic: bool = False
            ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray]:
        """`(actions, logp, values)` of a batch of observations."""
        ...

    def value(self, obs: npt.NDArray[Any]) -> FloatArray:
        """Value estimates of a batch of observations."""
        ...

    def act_recurrent(self, obs: npt.NDArray[Any], state: FloatArray, deterministic: bool = False
                      ) -> tuple[npt.NDArray[Any], FloatArray, FloatArray, FloatArray]:
        """A recurrent policy's `(actions, logp, values, new_state)`."""
        ...

    def value_recurrent(self, obs: npt.NDArray[Any], state: FloatArray) -> FloatArray:
        """A recurrent policy's value estimates of observations seen in ``state``."""
        ...

    def seed_sampling(self, seed: int) -> None:
        """Reseed the generator actions are sampled from."""
        ...

    def get_weights(self) -> Weights:
        """A copy of the weights."""
        ...

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Load weights in place."""
        ...


class RolloutWorker:
    """Samples fixed-size fragments from `num_envs` copies of a gymnasium env.

    Each `sample()` returns exactly `num_envs * fragment_length` transitions, **env-major**:
    row `i * fragment_length + t` is step `t` of environment `i`, so each environment's
    transitions are consecutive and in time order. Advantages and value targets are
    GAE(`gamma`, `lam`), bootstrapped from the value of the next observation at the
    fragment's end and at truncations (the final observation), not at terminations.

    Autoreset: with gymnasium's NEXT_STEP mode (the default, and the only one
    `CartPoleVectorEnv` has) the step after an episode ends only resets that environment;
    it is not a transition and never appears in a batch. Environments then gather
    transitions at different rates, so the worker steps until every environment has
    `fragment_length` new ones and drops each environment's surplus (its newest few
    transitions; about 1 % of steps on CartPole early in training). Nothing carries over
    between fragments, so no batch holds data from before the previous `set_weights`.
    SAME_STEP envs (`vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}`) are
    supported as well; DISABLED is refused.

    Seeding: the env is reset once with a seed drawn from `(seed, worker_index)`, and the
    policy samples from a generator seeded the same way, so runs are reproducible and
    workers differ. Initial weights depend on `seed` only: equal to a learner's with the
    same `seed`. `torch_threads` (default 1) is applied to the whole process with
    `torch.set_num_threads`; pass None to leave it alone.

    Given `weights` (a learner's `get_weights`), the worker acts with them through
    `NumpyActorCritic` and never imports torch: the same actions, bit for bit, as the torch
    policy with those weights (`torch_threads` then applies only if torch is already loaded).
    Such a worker cannot `compute_gradients` (A3C).

    Episode statistics in a batch are those of episodes that ended during its sampling. An env
    that reports whole games (`rxrl.envs.vector.reported_episodes`: Atari, whose training
    episodes end at every lost life and whose rewards are clipped) has its games reported
    instead, with their raw scores. `env_steps` counts every transition stepped, dropped
    surplus included.

    With a normalizing policy (`PolicyConfig.normalize_obs` / `scale_rewards`) the worker
    acts on observations normalized with the statistics it was last sent, stores the raw
    observations (the learner's policy normalizes them the same way) and the *scaled*
    rewards (GAE is computed on those), keeps episode returns raw, and attaches the batch's
    contribution to the statistics as `norm_stats` (`rxrl.rl.data.running_stats`).

    ``episode_metrics`` (``"module:function"``, `rxrl.rl.data.episode_metrics`): called for
    every episode that ends, with that sub-env's final info and the episode's raw return and
    length; its values are the batch's ``episode_metrics``, aligned with ``episode_returns``.

    A recurrent policy (`PolicyConfig.recurrent`) acts with a state per environment that the
    worker carries from step to step and across fragments, and zeroes before the first step
    of each episode (per env: at its reset). `sample_sequences` returns the fragment as a
    `SequenceBatch` with the episode starts and the state each sequence of
    `PolicyConfig.sequence_length` steps started from, so that a learner recomputes exactly
    what the worker computed. Dropped surplus steps advance the state as they advanced the
    env: the next fragment's states are the ones its first steps were taken in.
    """

    def __init__(
        self,
        env: str,
        num_envs: int = 8,
        fragment_length: int = 128,
        seed: int = 0,
        worker_index: int = 0,
        gamma: float = 0.99,
        lam: float = 0.95,
        policy: PolicyConfig | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        vectorization_mode: str | None = None,
        vector_kwargs: Mapping[str, Any] | None = None,
        torch_threads: int | None = 1,
        weights: Mapping[str, npt.NDArray[Any]] | None = None,
        episode_metrics: str | None = None,
    ) -> None:
        if fragment_length < 1:
            raise ValueError(f"RolloutWorker: fragment_length must be >= 1, got {fragment_length}")
        self.episode_metrics = None if episode_metrics is None else EpisodeMetricsRecorder(episode_metrics)
        check_discount(gamma, lam)
        if torch_threads is not None and (weights is None or "torch" in sys.modules):
            import torch

            torch.set_num_threads(torch_threads)
        self.env_id, self.num_envs, self.fragment_length = env, num_envs, fragment_length
        self.seed, self.worker_index, self.gamma, self.lam = seed, worker_index, gamma, lam
        config = policy or PolicyConfig()
        if config.sequence_length is not None and fragment_length % config.sequence_length:
            raise ValueError(f"RolloutWorker: policy.sequence_length ({config.sequence_length}) must "
                             f"divide fragment_length ({fragment_length})")
        self.env = make_vector_env(env, num_envs, vectorization_mode, env_kwargs, vector_kwargs)
        self.next_step_reset = autoreset_mode(self.env) is AutoresetMode.NEXT_STEP
        self.spaces = EnvSpaces(self.env.single_observation_space, self.env.single_action_space)
        self.policy: RolloutPolicy
        if weights is None:
            from rxrl.rl.models.policy import make_policy

            self.policy = make_policy(self.spaces.observation, self.spaces.action, policy, seed)
        else:
            self.policy = NumpyActorCritic(self.spaces.observation, self.spaces.action,
                                           policy or PolicyConfig(), weights, seed)
        env_seed, sampling_seed = np.random.SeedSequence([seed, worker_index]).generate_state(2)
        self.policy.seed_sampling(int(sampling_seed))
        self._obs, _ = self.env.reset(seed=int(env_seed))
        #: learner updates behind the current weights (0: the seed's initial weights)
        self.weights_version = 0
        # NEXT_STEP: True where the previous step ended an episode, so this step resets.
        self._resetting = np.zeros(num_envs, dtype=np.bool_)
        # a recurrent policy's state per env, and where the next step starts an episode
        self._state: FloatArray | None = (np.zeros((num_envs, config.state_size), np.float32)
                                          if config.is_recurrent else None)
        self._starts = np.ones(num_envs, dtype=np.bool_)
        self._episode_return = np.zeros(num_envs, dtype=np.float64)
        self._episode_length = np.zeros(num_envs, dtype=np.int64)
        # reward scaling: the running discounted returns whose std rewards are divided by
        self._returns = ReturnTracker(num_envs, gamma) if self.policy.config.scale_rewards else None
        self._action_low: npt.NDArray[np.floating] | None = None
        self._action_high: npt.NDArray[np.floating] | None = None
        self._action_offset = 0
        action_space = self.spaces.action
        if isinstance(action_space, gym.spaces.Box):
            self._action_low, self._action_high = action_space.low, action_space.high
        elif isinstance(action_space, gym.spaces.Discrete):
            self._action_offset = int(action_space.start)

    def sample(self) -> SampleBatch:
        """Step the envs for one fragment and return it (see the class docstring)."""
        steps = self._step_fragment(final_obs=False)
        return self._with_stats(self._gae_batch(steps))

    def sample_sequences(self) -> SequenceBatch:
        """Step the envs for one fragment and return it as sequences, for a learner of a
        recurrent policy: `sample`'s transitions (advantages included) with the episode starts
        and the state at the start of every `PolicyConfig.sequence_length` steps (the class
        docstring). A policy without a core gives states of size 0."""
        steps = self._step_fragment(final_obs=False)
        batch = self._with_stats(self._gae_batch(steps))
        starts, states = steps.sequence_columns(self.fragment_length)
        length = self.policy.config.sequence_length or self.fragment_length
        return SequenceBatch(batch, length, starts, states[::length])

    def _gae_batch(self, steps: _Steps) -> SampleBatch:
        last_values = self._value(self._obs, self._state, self._starts)
        return steps.batch(last_values, self.fragment_length, self.gamma, self.lam)

    def _value(self, obs: npt.NDArray[Any], state: FloatArray | None,
               starts: npt.NDArray[np.bool_] | None = None) -> FloatArray:
        """Values of ``obs`` (seen in ``state``, zeroed where ``starts``, if recurrent)."""
        if state is None:
            return self.policy.value(obs)
        if starts is not None and starts.any():
            state = np.where(starts[:, None], np.float32(0.0), state)
        return self.policy.value_recurrent(obs, state)

    def sample_fragment(self) -> Fragment:
        """Step the envs for one fragment and return it raw, for an off-policy learner.

        The same transitions `sample` would return (behaviour log-probabilities in `logp`,
        behaviour values in `values`), without advantages, plus the observations a learner
        bootstraps its own values from and `weights_version` (see `Fragment`). A recurrent
        policy's fragment also has the episode starts and the state each of its sequences (one
        per env) started in, as `sample_sequences` gives them for sequences of `fragment_length`.
        """
        steps = self._step_fragment(final_obs=True)
        fragment = steps.fragment(self._obs, self.fragment_length, self.weights_version)
        if self._state is None:
            return attrs.evolve(fragment, batch=self._with_stats(fragment.batch))
        starts, states = steps.sequence_columns(self.fragment_length)
        return attrs.evolve(fragment, batch=self._with_stats(fragment.batch), starts=starts,
                            initial_state=states[::self.fragment_length])

    def _with_stats(self, batch: SampleBatch) -> SampleBatch:
        """`batch` with its contribution to the running statistics, if the policy normalizes."""
        config = self.policy.config
        if not config.normalizes:
            return batch
        obs = RunningMoments.of(batch.obs.reshape(len(batch), -1)) if config.normalize_obs else None
        returns = self._returns.take() if self._returns is not None else None
        return attrs.evolve(batch, norm_stats=NormStats(obs, returns))

    def _step_fragment(self, final_obs: bool) -> _Steps:
        """Step until every env has `fragment_length` new transitions (the class docstring);
        SAME_STEP envs record their ended episodes' final observations if `final_obs`, else
        those observations' values."""
        steps = _Steps()
        counts = np.zeros(self.num_envs, dtype=np.int64)
        target = self.fragment_length
        obs = self._obs
        while counts.min() < target:
            if self._state is not None:  # zero the state where an episode starts, then act in it
                self._state[self._starts] = 0.0
                steps.recurrent(self._starts, self._state)
                actions, logp, values, self._state = self.policy.act_recurrent(obs, self._state)
            else:
                actions, logp, values = self.policy.act(obs)
            obs = obs.copy()  # before stepping: some vector envs reuse one observation buffer
            next_obs, rewards, terminated, truncated, infos = self.env.step(self._env_actions(actions))
            valid = ~self._resetting
            counts += valid
            rewards = np.where(valid, rewards, 0.0).astype(np.float32)
            terminated, truncated = terminated & valid, truncated & valid
            done = terminated | truncated
            trained = rewards
            if self._returns is not None and self.policy.normalizer is not None:
                self._returns.step(rewards, valid, done)
                trained = self.policy.normalizer.scale_rewards(rewards)
            steps.add(obs, actions, logp, values, trained, terminated, truncated, valid)
            self._episode_return += rewards
            self._episode_length += valid
            if done.any():
                ended = np.flatnonzero(done)
                games, returns, lengths = reported_episodes(  # Atari: whole games, raw scores
                    infos, ended, not self.next_step_reset, self._episode_return[done],
                    self._episode_length[done])
                steps.episodes(returns, lengths)
                if self.episode_metrics is not None:
                    self.episode_metrics.record(infos, games, not self.next_step_reset, returns, lengths)
                self._episode_return[done], self._episode_length[done] = 0.0, 0
                if not self.next_step_reset:
                    finals = np.stack([np.asarray(infos["final_obs"][i]) for i in ended])
                    if final_obs:
                        steps.final_obs.append((len(steps.values) - 1, ended, finals))
                    else:
                        steps.final_values.append((len(steps.values) - 1, ended, self._value(
                            finals, None if self._state is None else self._state[ended])))
            # the next step starts an episode where this one reset (NEXT_STEP) or ended (SAME_STEP)
            self._starts = ~valid if self.next_step_reset else done
            if self.next_step_reset:
                self._resetting = done
            obs = next_obs
        self._obs = obs
        if self.episode_metrics is not None:
            steps.metrics = self.episode_metrics.take()
        return steps

    def get_weights(self) -> Weights:
        """The current policy weights as numpy arrays."""
        return self.policy.get_weights()

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]],
                    version: int | None = None) -> None:
        """Load policy weights (as from a learner's `get_weights`); `version`, if given, is
        the learner's update count behind them (`weights_version`, stamped on fragments)."""
        self.policy.set_weights(weights)
        if version is not None:
            self.weights_version = version

    def compute_gradients(self, batch: SampleBatch, config: A2CConfig | None = None) -> Gradients:
        """A3C: the A2C loss gradients of this worker's policy on `batch`, as numpy arrays."""
        from rxrl.rl.models.policy import ActorCritic
        from rxrl.rl.objectives.losses import a2c_gradients

        if not isinstance(self.policy, ActorCritic):
            raise ValueError("compute_gradients needs a torch policy: this RolloutWorker was built "
                             "from weights (a NumpyActorCritic); build it without `weights`")
        return a2c_gradients(self.policy, batch, config or A2CConfig())

    def close(self) -> None:
        """Close the vector env."""
        self.env.close()

    def _env_actions(self, actions: npt.NDArray[Any]) -> npt.NDArray[Any]:
        if self._action_low is not None and self._action_high is not None:
            clipped: npt.NDArray[Any] = np.clip(actions, self._action_low, self._action_high)
            return clipped
        return actions + self._action_offset if self._action_offset else actions


class _Steps:
    """Per-step arrays of one `sample()` call, stacked into a batch at the end."""

    def __init__(self) -> None:
        self.obs: list[npt.NDArray[Any]] = []
        self.actions: list[npt.NDArray[Any]] = []
        self.logp: list[npt.NDArray[np.float32]] = []
        self.values: list[npt.NDArray[np.float32]] = []
        self.rewards: list[npt.NDArray[np.float32]] = []
        self.terminated: list[npt.NDArray[np.bool_]] = []
        self.truncated: list[npt.NDArray[np.bool_]] = []
        self.valid: list[npt.NDArray[np.bool_]] = []
        self.returns: list[npt.NDArray[np.float64]] = []
        self.lengths: list[npt.NDArray[np.int64]] = []
        # SAME_STEP only: (step, env indices, values of their final observations) for
        # `batch`, or the observations themselves for `fragment`.
        self.final_values: list[tuple[int, npt.NDArray[np.intp], npt.NDArray[np.float32]]] = []
        self.final_obs: list[tuple[int, npt.NDArray[np.intp], npt.NDArray[Any]]] = []
        #: the ended episodes' custom metrics (`RolloutWorker`'s ``episode_metrics``)
        self.metrics: dict[str, npt.NDArray[np.float64]] = {}
        # recurrent policies: per step, where an episode started and the state acted in
        self.starts: list[npt.NDArray[np.bool_]] = []
        self.states: list[FloatArray] = []
        self._kept: dict[int, tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]] = {}

    def recurrent(self, starts: npt.NDArray[np.bool_], state: FloatArray) -> None:
        self.starts.append(starts.copy())
        self.states.append(state.copy())

    def _rows(self, length: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """``(rows, cols)``: indexing a ``[S, N, ...]`` stack of steps with them gives each
        env's first `length` valid steps, ``[N, length, ...]`` (env-major once flattened);
        computed once per call of the worker (`batch` or `fragment`, then `sequence_columns`)."""
        if length not in self._kept:
            valid = np.stack(self.valid)
            rows = np.stack([np.flatnonzero(valid[:, i])[:length] for i in range(valid.shape[1])])
            self._kept[length] = rows, np.arange(valid.shape[1])[:, None]
        return self._kept[length]

    def sequence_columns(self, length: int) -> tuple[npt.NDArray[np.bool_], FloatArray]:
        """Per kept row, env-major: whether it starts an episode, and the state it was acted
        in (``[B, 0]`` states for a policy without a core)."""
        rows, cols = self._rows(length)
        n = rows.size
        if not self.states:
            return np.zeros(n, np.bool_), np.zeros((n, 0), np.float32)
        starts = np.stack(self.starts)[rows, cols].reshape(n)
        states: FloatArray = np.stack(self.states)[rows, cols].reshape(n, -1)
        return starts, states

    def add(self, *arrays: npt.NDArray[Any]) -> None:
        obs, actions, logp, values, rewards, terminated, truncated, valid = arrays
        self.obs.append(obs)
        self.actions.append(actions)
        self.logp.append(logp)
        self.values.append(values)
        self.rewards.append(rewards)
        self.terminated.append(terminated)
        self.truncated.append(truncated)
        self.valid.append(valid)

    def episodes(self, returns: npt.NDArray[np.float64], lengths: npt.NDArray[np.int64]) -> None:
        self.returns.append(returns.copy())
        self.lengths.append(lengths.copy())

    def batch(
        self, last_values: npt.NDArray[np.float32], length: int, gamma: float, lam: float
    ) -> SampleBatch:
        """The first `length` valid transitions of every env, env-major, with GAE."""
        values = np.stack(self.values)  # [S, N]
        next_values = np.empty_like(values)
        next_values[:-1], next_values[-1] = values[1:], last_values
        for step, envs, finals in self.final_values:
            next_values[step, envs] = finals
        valid = np.stack(self.valid)
        num_envs = valid.shape[1]
        rows, cols = self._rows(length)

        def take(a: npt.NDArray[Any] | list[npt.NDArray[Any]]) -> npt.NDArray[Any]:
            stacked: npt.NDArray[Any] = np.stack(a) if isinstance(a, list) else a
            return stacked[rows, cols]

        rewards, vals = take(self.rewards), take(values)
        terminated, truncated = take(self.terminated), take(self.truncated)
        advantages, targets = compute_gae(
            rewards.T, vals.T, take(next_values).T, terminated.T, truncated.T, gamma, lam
        )

        def flat(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
            return a.reshape(num_envs * length, *a.shape[2:])

        return SampleBatch(
            obs=flat(take(self.obs)),
            actions=flat(take(self.actions)),
            rewards=flat(rewards),
            terminateds=flat(terminated),
            truncateds=flat(truncated),
            logp=flat(take(self.logp)),
            values=flat(vals),
            advantages=flat(advantages.T),
            value_targets=flat(targets.T),
            episode_returns=np.concatenate(self.returns or [np.zeros(0)]).astype(np.float32),
            episode_lengths=np.concatenate(self.lengths or [np.zeros(0, np.int64)]),
            env_steps=int(valid.sum()),
            episode_metrics=self.metrics,
        )


    def fragment(self, last_obs: npt.NDArray[Any], length: int, version: int) -> Fragment:
        """The first `length` valid transitions of every env, env-major, raw (see `Fragment`)."""
        valid = np.stack(self.valid)
        num_envs = valid.shape[1]
        rows, cols = self._rows(length)
        obs = np.stack(self.obs)  # [S, N, *obs_shape]
        # the observation after each step: the next step's input (NEXT_STEP: the final one
        # when the episode ended, since that step only resets), or a SAME_STEP final one
        following = np.concatenate([obs[1:], np.asarray(last_obs)[None]])
        for step, envs, finals in self.final_obs:
            following[step, envs] = finals

        def take(a: npt.NDArray[Any] | list[npt.NDArray[Any]]) -> npt.NDArray[Any]:
            stacked: npt.NDArray[Any] = np.stack(a) if isinstance(a, list) else a
            flat: npt.NDArray[Any] = stacked[rows, cols]
            return flat.reshape(num_envs * length, *flat.shape[2:])

        truncated = take(self.truncated)
        ends = np.zeros_like(truncated)
        ends[length - 1 :: length] = True
        bootstrap = np.flatnonzero(truncated | ends)
        zeros = np.zeros(num_envs * length, dtype=np.float32)
        batch = SampleBatch(
            obs=take(obs),
            actions=take(self.actions),
            rewards=take(self.rewards),
            terminateds=take(self.terminated),
            truncateds=truncated,
            logp=take(self.logp),
            values=take(self.values),
            advantages=zeros,
            value_targets=zeros,
            episode_returns=np.concatenate(self.returns or [np.zeros(0)]).astype(np.float32),
            episode_lengths=np.concatenate(self.lengths or [np.zeros(0, np.int64)]),
            env_steps=int(valid.sum()),
            episode_metrics=self.metrics,
        )
        return Fragment(batch, length, bootstrap, take(following)[bootstrap], version)


@attrs.frozen
class RolloutWorkerFactory:
    """``index -> RolloutWorker``, picklable, so that a Ray actor can build its worker.
    ``env`` may be ``module:Env-v0`` (`registered_id`).

    With ``weights`` (a learner's `get_weights`, a checkpoint's, or
    `rxrl.rl.models.initial.InitialWeights`, built when first needed) the worker acts with them
    through `NumpyActorCritic` and never imports torch (~0.9 s of CPU per Ray worker process
    at start-up); ``version`` is their `weights_version`. With ``torch_policy`` it has a
    torch policy instead, loaded with ``weights`` if given (A3C's workers compute gradients);
    without ``weights`` that policy starts from ``seed``'s initial weights.
    ``episode_metrics``: the workers' ``episode_metrics`` function, if any.
    """

    env: str
    num_envs: int
    fragment_length: int
    seed: int
    gamma: float
    lam: float
    policy: PolicyConfig
    weights: Weights | InitialWeights | None = attrs.field(default=None, eq=False, repr=False)
    env_kwargs: Mapping[str, Any] = attrs.field(factory=dict)
    version: int = 0
    torch_policy: bool = False
    episode_metrics: str | None = None

    @property
    def torch_free(self) -> bool:
        """Whether the workers it builds never import torch (`rxrl.training.setup.ray_init_options`
        then leaves torch out of the Ray worker processes' preloaded modules)."""
        return self.weights is not None and not self.torch_policy

    def __call__(self, index: int) -> RolloutWorker:
        weights = None if self.weights is None else weights_of(self.weights)
        worker = RolloutWorker(registered_id(self.env), num_envs=self.num_envs,
                               fragment_length=self.fragment_length, seed=self.seed, worker_index=index,
                               gamma=self.gamma, lam=self.lam, policy=self.policy,
                               env_kwargs=self.env_kwargs,
                               weights=None if self.torch_policy else weights,
                               episode_metrics=self.episode_metrics)
        if self.torch_policy and weights is not None:
            worker.set_weights(weights, version=self.version)
        else:
            worker.weights_version = self.version
        return worker


__all__ = ["RolloutPolicy", "RolloutWorker", "RolloutWorkerFactory"]
