"""Multi-agent batches and policy mappings: policy id -> batch, agent id -> policy id.

A multi-agent rollout (`rxrl.rl.workers.multi_agent.MultiAgentRolloutWorker`) returns one
`MultiAgentBatch`: for every policy the transitions of the agents mapped to it — a GAE'd
`SampleBatch` for on-policy (PPO) policies, n-step `TransitionBatch` rows for Q-learning
(DQN) policies — plus the episode statistics of the env (total returns) and of each agent.
`select(policy_ids)` keeps the named policies' batches: what each branch of a two-trainer
plan trains on.

>>> import numpy as np
>>> from rxrl.rl.data.batch import SampleBatch
>>> def rows(n):
...     f = np.zeros(n, np.float32)
...     return SampleBatch(obs=np.zeros((n, 4), np.float32), actions=np.zeros(n, np.int64), rewards=f,
...                        terminateds=f > 0, truncateds=f > 0, logp=f, values=f, advantages=f,
...                        value_targets=f)
>>> batch = MultiAgentBatch({"a": rows(3), "b": rows(2)}, env_steps=3)
>>> len(batch), batch.policies, len(batch.select(["b"]))
(5, ['a', 'b'], 2)
>>> len(MultiAgentBatch.concat([batch, batch]).policy_batches["a"])
6
>>> batch.select(["c"])
Traceback (most recent call last):
ValueError: MultiAgentBatch.select: unknown policy id(s) ['c']; the batch has ['a', 'b']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from rxrl.envs.vector import EnvSpaces
from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.data.transitions import TransitionBatch

PolicyID = str
AgentID = str
#: agent id -> policy id
PolicyMappingFn = Callable[[AgentID], PolicyID]


def _floats() -> npt.NDArray[np.float32]:
    return np.zeros(0, dtype=np.float32)


def _ints() -> npt.NDArray[np.int64]:
    return np.zeros(0, dtype=np.int64)


@attrs.frozen(eq=False)
class MultiAgentBatch:
    """The transitions of one multi-agent rollout, by policy, with its episodes.

    ``policy_batches``: policy id -> `SampleBatch` (on-policy policies); ``transitions``:
    policy id -> `TransitionBatch` (Q-learning policies). Each holds the rows of every agent
    mapped to that policy, agent by agent (each agent's rows consecutive, in time order);
    its ``episode_returns`` are the returns of those agents' ended episodes.

    Batch-level: ``env_steps`` counts parallel env steps (one per ``env.step`` of one env
    copy, however many agents acted — how PettingZoo and RLlib count env steps), and
    ``agent_steps`` the agent transitions stepped. ``episode_returns`` / ``episode_lengths``
    are the *total* return (summed over agents) and length (env steps) of every env episode
    that ended; ``agent_returns`` maps each agent id to the returns of its ended episodes.
    `select`, `concat` and `episodes` keep these statistics (a branch of a split still sees
    them; count them in one place only).
    """

    policy_batches: Mapping[PolicyID, SampleBatch]
    transitions: Mapping[PolicyID, TransitionBatch] = attrs.field(factory=dict)
    env_steps: int = 0
    agent_steps: int = 0
    episode_returns: npt.NDArray[np.float32] = attrs.field(factory=_floats)
    episode_lengths: npt.NDArray[np.int64] = attrs.field(factory=_ints)
    agent_returns: Mapping[AgentID, npt.NDArray[np.float32]] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        both = sorted(set(self.policy_batches) & set(self.transitions))
        if both:
            raise ValueError(f"MultiAgentBatch: policies {both} have both a SampleBatch and a "
                             "TransitionBatch; a policy is on-policy or Q-learning, not both")
        if len(self.episode_returns) != len(self.episode_lengths):
            raise ValueError("MultiAgentBatch: episode_returns and episode_lengths differ in length")

    def __len__(self) -> int:
        """Rows held, over all policies."""
        return (sum(len(b) for b in self.policy_batches.values())
                + sum(len(b) for b in self.transitions.values()))

    @property
    def policies(self) -> list[PolicyID]:
        """The policy ids this batch has rows for (both kinds), sorted."""
        return sorted([*self.policy_batches, *self.transitions])

    def select(self, policy_ids: Iterable[PolicyID]) -> MultiAgentBatch:
        """Only the named policies' batches (episode statistics and step counts kept).

        ValueError for an id the batch does not have.
        """
        wanted = list(policy_ids)
        unknown = sorted(set(wanted) - set(self.policies))
        if unknown:
            raise ValueError(f"MultiAgentBatch.select: unknown policy id(s) {unknown}; the batch has "
                             f"{self.policies}")
        return attrs.evolve(
            self,
            policy_batches={p: b for p, b in self.policy_batches.items() if p in wanted},
            transitions={p: b for p, b in self.transitions.items() if p in wanted},
        )

    def episodes(self) -> MultiAgentBatch:
        """The episode statistics and step counts, without rows (cheap to send to the driver)."""
        return attrs.evolve(self, policy_batches={}, transitions={})

    @staticmethod
    def concat(batches: Sequence[MultiAgentBatch]) -> MultiAgentBatch:
        """Join batches in order: each policy's rows concatenated, statistics joined.

        Every batch must have the same policies (ValueError naming the difference).
        """
        if not batches:
            raise ValueError("MultiAgentBatch.concat needs at least one batch, got none")
        if len(batches) == 1:
            return batches[0]
        first = batches[0]
        for i, b in enumerate(batches[1:], start=1):
            if b.policies != first.policies:
                raise ValueError(f"MultiAgentBatch.concat: batch 0 has policies {first.policies}, "
                                 f"batch {i} {b.policies}")
        agents = sorted({a for b in batches for a in b.agent_returns})
        return MultiAgentBatch(
            policy_batches={p: SampleBatch.concat([b.policy_batches[p] for b in batches])
                            for p in first.policy_batches},
            transitions={p: TransitionBatch.concat([b.transitions[p] for b in batches])
                         for p in first.transitions},
            env_steps=sum(b.env_steps for b in batches),
            agent_steps=sum(b.agent_steps for b in batches),
            episode_returns=np.concatenate([b.episode_returns for b in batches]),
            episode_lengths=np.concatenate([b.episode_lengths for b in batches]),
            agent_returns={a: np.concatenate([b.agent_returns.get(a, _floats()) for b in batches])
                           for a in agents},
        )


# ------------------------------------------------------------------------- policy mapping


def independent_policies(agent: AgentID) -> PolicyID:
    """Every agent its own policy, named after it (``"independent"``)."""
    return str(agent)


def shared_policy(agent: AgentID) -> PolicyID:
    """One policy, ``"shared"``, for every agent (``"shared"``: parameter sharing)."""
    return "shared"


#: the mappings a config names by word
MAPPINGS: Mapping[str, PolicyMappingFn] = {"independent": independent_policies, "shared": shared_policy}


def policy_mapping_fn(spec: str | PolicyMappingFn) -> PolicyMappingFn:
    """The mapping a config names: ``"independent"``, ``"shared"`` or ``"module:function"``
    (an importable function, so that every Ray actor can load it); a callable is itself."""
    if callable(spec):
        return spec
    if spec in MAPPINGS:
        return MAPPINGS[spec]
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"policy_mapping must be 'independent', 'shared' or 'module:function', got {spec!r}")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"policy_mapping {spec!r}: cannot load it ({e})") from None
    if not callable(fn):
        raise ValueError(f"policy_mapping {spec!r} is not a function")
    return fn  # type: ignore[no-any-return]


def map_agent(mapping: PolicyMappingFn, agent: AgentID, policies: Sequence[PolicyID]) -> PolicyID:
    """``mapping(agent)``, checked to be one of ``policies`` (one-line ValueError otherwise)."""
    policy = mapping(agent)
    if policy not in policies:
        raise ValueError(f"the policy mapping maps agent {agent!r} to policy {policy!r}, which is not "
                         f"one of the policies {sorted(policies)}")
    return policy


def policy_spaces(env: Any, mapping: PolicyMappingFn, policies: Sequence[PolicyID] = ()
                  ) -> dict[PolicyID, EnvSpaces]:
    """The spaces of each policy: those of the env's ``possible_agents`` mapped to it.

    ``policies`` (if given) are the policy ids a config declares: a mapping result outside
    them, or a declared policy no agent maps to, is a ValueError. Agents sharing a policy
    must have equal spaces (ValueError naming both agents otherwise).
    """
    found: dict[PolicyID, tuple[AgentID, EnvSpaces]] = {}
    for agent in env.possible_agents:
        policy = map_agent(mapping, agent, policies) if policies else mapping(agent)
        spaces = EnvSpaces(env.observation_space(agent), env.action_space(agent))
        if policy in found and found[policy][1] != spaces:
            other, theirs = found[policy]
            raise ValueError(f"agents {other!r} and {agent!r} share policy {policy!r} but have different "
                             f"spaces ({theirs.observation}, {theirs.action} vs {spaces.observation}, "
                             f"{spaces.action}): map them to separate policies")
        found.setdefault(policy, (agent, spaces))
    unused = sorted(set(policies) - set(found))
    if unused:
        raise ValueError(f"no agent of the env maps to policy(ies) {unused} (agents "
                         f"{list(env.possible_agents)})")
    return {p: s for p, (_, s) in sorted(found.items())}


__all__ = ["MAPPINGS", "AgentID", "MultiAgentBatch", "PolicyID", "PolicyMappingFn", "independent_policies",
           "map_agent", "policy_mapping_fn", "policy_spaces", "shared_policy"]
