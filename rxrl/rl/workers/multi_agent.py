"""MultiAgentRolloutWorker: steps copies of a PettingZoo Parallel env with one policy per policy id.

Agents follow PettingZoo's Parallel API: an agent that is terminated or truncated leaves
``env.agents`` after that step (its final observation and reward come with it); the others
go on, and agents may join mid-episode. An env copy whose agents are all gone is reset by
the worker (a reset is not a step). Each agent's transitions are one trajectory per agent
episode: GAE never crosses from one agent to another, nor over an agent's episode end.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch

from rxrl.envs import make_parallel_env
from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import PolicyConfig, QNetConfig, check_discount
from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.data.multiagent import (
    AgentID,
    MultiAgentBatch,
    PolicyID,
    PolicyMappingFn,
    map_agent,
    policy_mapping_fn,
    policy_spaces,
)
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.models.policy import ActorCritic, Weights, make_policy
from rxrl.rl.models.qnet import QNetwork, make_q_network
from rxrl.rl.objectives.gae import compute_gae
from rxrl.rl.replay.nstep import NStepFolder, StepArrays
from rxrl.rl.schedules import LinearSchedule


def policy_seed(seed: int, policy: PolicyID) -> int:
    """The initial-weights seed of ``policy`` in a run seeded ``seed`` (the same in every
    process: workers and learners build equal initial weights; policies differ)."""
    words = [seed, *policy.encode()]
    return int(np.random.SeedSequence(words).generate_state(1)[0] >> 1)


@attrs.frozen
class QPolicySpec:
    """How a worker acts and folds transitions for a Q-learning (DQN) policy."""

    q_net: QNetConfig = attrs.field(factory=QNetConfig)
    n_step: int = 1
    gamma: float = 0.99
    epsilon: float | LinearSchedule = 0.0


class MultiAgentRolloutWorker:
    """Samples `MultiAgentBatch` fragments from ``num_envs`` copies of a Parallel env.

    ``env`` names the env (`rxrl.envs.make_parallel_env`); ``policy_mapping`` maps agent ids
    to policy ids (``"independent"``, ``"shared"``, ``"module:function"`` or a function);
    ``policies`` optionally declares the policy ids (a mapping result outside them is a
    ValueError). Policies in ``q_policies`` act epsilon-greedily on a Q-network and return
    n-step `TransitionBatch` rows; every other policy is an actor-critic whose rows are GAE'd
    (``gamma``, ``lam``) `SampleBatch` rows.

    Each `sample()` steps every env copy ``fragment_length`` times. A policy's rows are
    agent-major within env copies: the rows of one agent episode are consecutive, in time
    order. Bootstraps: from the value of the agent's next observation at a truncation and
    at the fragment's end, none at a termination.

    Seeding: env copy ``j`` is reset first with a seed drawn from ``(seed, worker_index)``;
    a policy's initial weights depend on ``seed`` and its id only (`policy_seed`), equal to a
    learner's. ``torch_threads`` (default 1) is applied process-wide; None leaves it.
    """

    def __init__(
        self,
        env: str,
        num_envs: int = 8,
        fragment_length: int = 64,
        seed: int = 0,
        worker_index: int = 0,
        gamma: float = 0.99,
        lam: float = 0.95,
        policy: PolicyConfig | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        policy_mapping: str | PolicyMappingFn = "independent",
        policies: Sequence[PolicyID] = (),
        q_policies: Mapping[PolicyID, QPolicySpec] | None = None,
        torch_threads: int | None = 1,
    ) -> None:
        if fragment_length < 1 or num_envs < 1:
            raise ValueError(f"MultiAgentRolloutWorker: num_envs and fragment_length must be >= 1, got "
                             f"{num_envs} and {fragment_length}")
        check_discount(gamma, lam)
        if torch_threads is not None:
            torch.set_num_threads(torch_threads)
        self.env_id, self.num_envs, self.fragment_length = env, num_envs, fragment_length
        self.gamma, self.lam = gamma, lam
        self.envs = [make_parallel_env(env, env_kwargs) for _ in range(num_envs)]
        self.mapping = policy_mapping_fn(policy_mapping)
        self.spaces = policy_spaces(self.envs[0], self.mapping, policies)
        self.policy_ids = list(self.spaces)
        q_specs = dict(q_policies or {})
        unknown = sorted(set(q_specs) - set(self.policy_ids))
        if unknown:
            raise ValueError(f"q_policies names {unknown}, which are not policies of the mapping "
                             f"{self.policy_ids}")
        states = np.random.SeedSequence([seed, worker_index]).generate_state(num_envs + len(self.policy_ids))
        self.policies: dict[PolicyID, ActorCritic] = {}
        self.q_nets: dict[PolicyID, _QPolicy] = {}
        for k, (pid, spaces) in enumerate(self.spaces.items()):
            sampling = int(states[num_envs + k])
            if pid in q_specs:
                self.q_nets[pid] = _QPolicy(pid, spaces, q_specs[pid], policy_seed(seed, pid), sampling,
                                            self._slots_of(pid))
            else:
                ac = make_policy(spaces.observation, spaces.action, policy, policy_seed(seed, pid))
                ac.seed_sampling(sampling)
                self.policies[pid] = ac
        self._mapped: dict[AgentID, PolicyID] = {}
        self._obs: list[dict[AgentID, Any]] = []
        for j, copy in enumerate(self.envs):
            obs, _ = copy.reset(seed=int(states[j]))
            self._obs.append(dict(obs))
        self._agent_return: list[dict[AgentID, float]] = [defaultdict(float) for _ in self.envs]
        self._agent_length: list[dict[AgentID, int]] = [defaultdict(int) for _ in self.envs]
        self._env_return = np.zeros(num_envs)
        self._env_length = np.zeros(num_envs, dtype=np.int64)
        #: learner updates behind each policy's current weights
        self.weights_version: dict[PolicyID, int] = dict.fromkeys(self.policy_ids, 0)

    # -- sampling -----------------------------------------------------------------------

    def sample(self) -> MultiAgentBatch:
        """Step every env copy ``fragment_length`` times; the fragment (see the class docstring)."""
        rows = {pid: _Rows() for pid in self.policies}
        for q in self.q_nets.values():
            q.start_fragment(self.fragment_length)
        episodes = _Episodes()
        agent_steps = 0
        for t in range(self.fragment_length):
            actions, acted = self._act()
            for j, copy in enumerate(self.envs):
                if not actions[j]:
                    continue
                obs, rewards, terminated, truncated, _ = copy.step(actions[j])
                self._env_return[j] += float(sum(rewards.values()))
                self._env_length[j] += 1
                for agent, (pid, k, out) in acted[j].items():
                    r = float(rewards.get(agent, 0.0))
                    te, tr = bool(terminated.get(agent, False)), bool(truncated.get(agent, False))
                    if not (te or tr) and agent not in copy.agents:
                        raise ValueError(f"{self.env_id}: agent {agent!r} left env.agents without being "
                                         "terminated or truncated (the Parallel API needs one of them)")
                    nxt = obs.get(agent, self._obs[j][agent])
                    if pid in self.q_nets:
                        self.q_nets[pid].record(t, (j, agent), self._obs[j][agent], out, r, nxt, te, tr)
                    else:
                        rows[pid].add((j, agent), t, self._obs[j][agent], out, k, r, te, tr, nxt)
                    agent_steps += 1
                    self._agent_return[j][agent] += r
                    self._agent_length[j][agent] += 1
                    if te or tr:
                        episodes.agent(agent, pid, self._agent_return[j].pop(agent),
                                       self._agent_length[j].pop(agent))
                self._obs[j] = {**{a: o for a, o in obs.items() if a in copy.agents},
                                **{a: self._obs[j][a] for a in copy.agents if a not in obs}}
                if not copy.agents:
                    episodes.env(self._env_return[j], int(self._env_length[j]))
                    self._env_return[j], self._env_length[j] = 0.0, 0
                    self._agent_return[j].clear()
                    self._agent_length[j].clear()
                    reset_obs, _ = copy.reset()
                    self._obs[j] = dict(reset_obs)
        env_steps = self.num_envs * self.fragment_length
        batches = {pid: rows[pid].batch(self.policies[pid], self.spaces[pid], self.gamma, self.lam,
                                        episodes.of_policy(pid)) for pid in self.policies}
        transitions = {pid: q.fold(episodes.of_policy(pid)) for pid, q in self.q_nets.items()}
        return MultiAgentBatch(batches, transitions, env_steps, agent_steps, *episodes.totals(),
                               agent_returns=episodes.by_agent())

    def _act(self) -> tuple[list[dict[AgentID, Any]], list[dict[AgentID, tuple[PolicyID, int, Any]]]]:
        """Actions of every live agent, one forward pass per policy over all env copies."""
        members: dict[PolicyID, list[tuple[int, AgentID]]] = defaultdict(list)
        for j, copy in enumerate(self.envs):
            for agent in copy.agents:
                members[self._policy_of(agent)].append((j, agent))
        actions: list[dict[AgentID, Any]] = [{} for _ in self.envs]
        acted: list[dict[AgentID, tuple[PolicyID, int, Any]]] = [{} for _ in self.envs]
        for pid, who in members.items():
            obs = np.stack([np.asarray(self._obs[j][a]) for j, a in who])
            if pid in self.q_nets:
                chosen = self.q_nets[pid].act(obs)
                for (j, a), action in zip(who, chosen, strict=True):
                    actions[j][a] = self.q_nets[pid].env_action(action)
                    acted[j][a] = (pid, -1, action)
                continue
            sampled, logp, values = self.policies[pid].act(obs)
            space = self.spaces[pid].action
            for k, (j, a) in enumerate(who):
                actions[j][a] = _env_action(space, sampled[k])
                acted[j][a] = (pid, k, (sampled[k], logp[k], values[k]))
        return actions, acted

    def greedy(self, observations: Mapping[AgentID, Any]) -> dict[AgentID, Any]:
        """The deterministic env action of each agent in ``observations`` (its policy's
        argmax / mean action, or the argmax of its Q-network), for evaluation: no sampling,
        no exploration, nothing recorded."""
        members: dict[PolicyID, list[AgentID]] = defaultdict(list)
        for agent in observations:
            members[self._policy_of(agent)].append(agent)
        actions: dict[AgentID, Any] = {}
        for pid, agents in members.items():
            obs = np.stack([np.asarray(observations[a]) for a in agents])
            if pid in self.q_nets:
                q = self.q_nets[pid]
                actions.update((a, q.env_action(x)) for a, x in zip(agents, q.net.greedy(obs), strict=True))
                continue
            chosen, _, _ = self.policies[pid].act(obs, deterministic=True)
            space = self.spaces[pid].action
            actions.update((a, _env_action(space, x)) for a, x in zip(agents, chosen, strict=True))
        return actions

    def _policy_of(self, agent: AgentID) -> PolicyID:
        pid = self._mapped.get(agent)
        if pid is None:
            pid = self._mapped[agent] = map_agent(self.mapping, agent, self.policy_ids)
        return pid

    def _slots_of(self, pid: PolicyID) -> list[tuple[int, AgentID]]:
        agents = [a for a in self.envs[0].possible_agents if self.mapping(a) == pid]
        return [(j, a) for j in range(self.num_envs) for a in agents]

    # -- weights ------------------------------------------------------------------------

    def get_weights(self, policy_ids: Sequence[PolicyID] | None = None) -> dict[PolicyID, Weights]:
        """The weights of the named policies (all by default), by policy id."""
        ids = self.policy_ids if policy_ids is None else list(policy_ids)
        return {pid: (self.q_nets[pid].net if pid in self.q_nets else self.policies[pid]).get_weights()
                for pid in ids}

    def set_weights(self, weights: Mapping[PolicyID, Mapping[str, npt.NDArray[np.generic]]],
                    version: int | None = None) -> None:
        """Load the given policies' weights; the other policies are untouched."""
        unknown = sorted(set(weights) - set(self.policy_ids))
        if unknown:
            raise ValueError(f"set_weights: unknown policy id(s) {unknown}; this worker has "
                             f"{self.policy_ids}")
        for pid, w in weights.items():
            (self.q_nets[pid].net if pid in self.q_nets else self.policies[pid]).set_weights(w)
            if version is not None:
                self.weights_version[pid] = version

    def set_q_steps(self, steps: Mapping[PolicyID, int]) -> None:
        """Set the exploration clocks (agent transitions so far) of the named Q-learning
        policies, as a resumed worker continues them; ValueError for other ids."""
        unknown = sorted(set(steps) - set(self.q_nets))
        if unknown:
            raise ValueError(f"set_q_steps: {unknown} are not Q-learning policies of this worker "
                             f"({sorted(self.q_nets)})")
        for pid, n in steps.items():
            self.q_nets[pid].steps = int(n)

    def close(self) -> None:
        """Close the env copies."""
        for copy in self.envs:
            copy.close()


def _env_action(space: gym.Space[Any], action: npt.NDArray[Any]) -> Any:
    if isinstance(space, gym.spaces.Discrete):
        return int(action) + int(space.start)
    if isinstance(space, gym.spaces.Box):
        return np.clip(action, space.low, space.high)
    return action


class _Episodes:
    """Episode statistics of one fragment: per agent, per policy, and of whole env episodes."""

    def __init__(self) -> None:
        self.agent_returns: dict[AgentID, list[float]] = defaultdict(list)
        self.policy: dict[PolicyID, tuple[list[float], list[int]]] = defaultdict(lambda: ([], []))
        self.returns: list[float] = []
        self.lengths: list[int] = []

    def agent(self, agent: AgentID, pid: PolicyID, ret: float, length: int) -> None:
        self.agent_returns[agent].append(ret)
        self.policy[pid][0].append(ret)
        self.policy[pid][1].append(length)

    def env(self, ret: float, length: int) -> None:
        self.returns.append(ret)
        self.lengths.append(length)

    def of_policy(self, pid: PolicyID) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        returns, lengths = self.policy.get(pid, ([], []))
        return np.asarray(returns, np.float32), np.asarray(lengths, np.int64)

    def totals(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        return np.asarray(self.returns, np.float32), np.asarray(self.lengths, np.int64)

    def by_agent(self) -> dict[AgentID, npt.NDArray[np.float32]]:
        return {a: np.asarray(r, np.float32) for a, r in self.agent_returns.items()}


class _Rows:
    """An actor-critic policy's transitions of one fragment, row by row, then GAE'd."""

    def __init__(self) -> None:
        self.slot: list[int] = []
        self.t: list[int] = []
        self.cols: tuple[list[Any], ...] = tuple([] for _ in range(8))
        self._slots: dict[tuple[int, AgentID], int] = {}

    def add(self, key: tuple[int, AgentID], t: int, obs: Any, out: tuple[Any, Any, Any], k: int,
            reward: float, terminated: bool, truncated: bool, next_obs: Any) -> None:
        self.slot.append(self._slots.setdefault(key, len(self._slots)))
        self.t.append(t)
        action, logp, value = out
        for column, x in zip(self.cols, (obs, action, logp, value, reward, terminated, truncated, next_obs),
                             strict=True):
            column.append(x)

    def batch(self, policy: ActorCritic, spaces: EnvSpaces, gamma: float, lam: float,
              episodes: tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]) -> SampleBatch:
        obs_space = spaces.observation
        dtype = obs_space.dtype if obs_space.dtype is not None else np.float32
        shape = obs_space.shape or ()
        if not self.slot:
            f = np.zeros(0, np.float32)
            act_shape = spaces.action.shape or ()
            act_dtype = np.int64 if isinstance(spaces.action, gym.spaces.Discrete) else np.float32
            return SampleBatch(obs=np.zeros((0, *shape), dtype), actions=np.zeros((0, *act_shape), act_dtype),
                               rewards=f, terminateds=f > 0, truncateds=f > 0, logp=f, values=f, advantages=f,
                               value_targets=f, episode_returns=episodes[0], episode_lengths=episodes[1],
                               env_steps=0)
        order = np.lexsort((np.asarray(self.t), np.asarray(self.slot)))
        obs, actions, logp, values, rewards, terminated, truncated, next_obs = (
            np.asarray(c)[order] for c in self.cols)
        obs = obs.astype(dtype, copy=False).reshape(len(order), *shape)
        next_obs = next_obs.astype(dtype, copy=False).reshape(len(order), *shape)
        slot = np.asarray(self.slot)[order]
        last = np.append(slot[1:] != slot[:-1], True)  # the slot's last row in this fragment
        rewards, values = rewards.astype(np.float32), values.astype(np.float32)
        terminated, truncated = terminated.astype(np.bool_), truncated.astype(np.bool_)
        next_values = policy.value(next_obs)
        advantages, targets = compute_gae(rewards[:, None], values[:, None], next_values[:, None],
                                          terminated[:, None], (truncated | last)[:, None], gamma, lam)
        return SampleBatch(obs=obs, actions=actions, rewards=rewards, terminateds=terminated,
                           truncateds=truncated, logp=logp.astype(np.float32), values=values,
                           advantages=advantages[:, 0], value_targets=targets[:, 0],
                           episode_returns=episodes[0], episode_lengths=episodes[1])


class _QPolicy:
    """A Q-learning policy on a worker: epsilon-greedy actions, n-step folding per agent slot.

    Slots are ``(env copy, agent)`` pairs of the agents the mapping gives this policy
    (from ``possible_agents``), fixed for the worker's life, so that the n-step folder can
    complete windows across fragments.
    """

    def __init__(self, pid: PolicyID, spaces: EnvSpaces, spec: QPolicySpec, seed: int, sampling: int,
                 slots: list[tuple[int, AgentID]]) -> None:
        self.pid, self.spaces, self.spec = pid, spaces, spec
        self.net: QNetwork = make_q_network(spaces.observation, spaces.action, spec.q_net, seed)
        assert isinstance(spaces.action, gym.spaces.Discrete)  # make_q_network checked it
        self.offset = int(spaces.action.start)
        self.rng = np.random.default_rng(sampling)
        self.folder = NStepFolder(spec.n_step, spec.gamma)
        self.slots = {key: i for i, key in enumerate(slots)}
        self.steps = 0  # agent transitions so far: the epsilon schedule's clock
        self._arrays: dict[str, npt.NDArray[Any]] = {}

    def epsilon(self) -> float:
        e = self.spec.epsilon
        return e(self.steps) if isinstance(e, LinearSchedule) else e

    def act(self, obs: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        actions = self.net.greedy(obs)
        explore = self.rng.random(len(obs)) < self.epsilon()
        if explore.any():
            random = self.rng.integers(0, self.net.num_actions, len(obs), dtype=np.int64)
            actions = np.where(explore, random, actions)
        return actions

    def env_action(self, action: np.int64) -> int:
        return int(action) + self.offset

    def start_fragment(self, length: int) -> None:
        n = len(self.slots)
        shape = self.spaces.observation.shape or ()
        dtype = self.spaces.observation.dtype if self.spaces.observation.dtype is not None else np.float32
        kinds = {"obs": dtype, "next_obs": dtype, "actions": np.int64, "rewards": np.float32,
                 "terminateds": np.bool_, "truncateds": np.bool_, "valid": np.bool_}
        self._arrays = {name: np.zeros((length, n, *(shape if name.endswith("obs") else ())), kind)
                        for name, kind in kinds.items()}

    def record(self, t: int, key: tuple[int, AgentID], obs: Any, action: Any, reward: float, next_obs: Any,
               terminated: bool, truncated: bool) -> None:
        try:
            i = self.slots[key]
        except KeyError:
            raise ValueError(f"agent {key[1]!r} (mapped to Q-learning policy {self.pid!r}) is not one of the "
                             "env's possible_agents; a Q-learning policy needs its agents up front") from None
        a = self._arrays
        a["obs"][t, i], a["next_obs"][t, i], a["actions"][t, i] = obs, next_obs, action
        a["rewards"][t, i], a["terminateds"][t, i], a["truncateds"][t, i] = reward, terminated, truncated
        a["valid"][t, i] = True
        self.steps += 1

    def fold(self, episodes: tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]) -> TransitionBatch:
        batch = self.folder.fold(StepArrays(**self._arrays))
        return attrs.evolve(batch, episode_returns=episodes[0], episode_lengths=episodes[1])


__all__ = ["MultiAgentRolloutWorker", "QPolicySpec", "policy_seed"]
