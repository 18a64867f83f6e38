"""Learners and replay for several policies at once: PPO per policy, DQN per policy, replay per policy.

Each holds one single-policy object per policy id (`PPOLearner`, `DQNLearner`,
`ReplayShard`) and trains or stores only the policies it was built for, so that a plan can
give a PPO learner the PPO policies of a `MultiAgentBatch` and a DQN learner the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from rxrl.envs.vector import EnvSpaces
from rxrl.ready import NOT_READY, NotReady
from rxrl.rl.config import DQNConfig, PolicyConfig, PPOConfig, ReplayConfig
from rxrl.rl.data.batch import standardize
from rxrl.rl.data.metrics import TrainMetrics
from rxrl.rl.data.multiagent import MultiAgentBatch, PolicyID
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.learners.actor_critic import Device, PPOLearner
from rxrl.rl.learners.dqn import DQNLearner
from rxrl.rl.models.policy import Weights
from rxrl.rl.replay.shard import ReplayShard
from rxrl.rl.workers.multi_agent import policy_seed

_standardize_advantages = standardize("advantages")
#: the single-policy learner of a `_PerPolicy`
L = TypeVar("L", PPOLearner, DQNLearner)


def _flat(states: Mapping[PolicyID, Mapping[str, Any]], key: str) -> dict[str, Any]:
    """``{"pid/name": value}`` of every policy's ``state[key]`` (a checkpoint's "policy")."""
    return {f"{pid}/{name}": v for pid, s in states.items() for name, v in s[key].items()}


class _PerPolicy(Generic[L]):
    """What `MultiPPOLearner` and `MultiDQNLearner` share: ``learners`` (one single-policy
    learner per policy id), their update counts, weights and checkpoint state."""

    learners: dict[PolicyID, L]

    @property
    def num_updates(self) -> int:
        """Optimizer steps, summed over the policies."""
        return sum(learner.num_updates for learner in self.learners.values())

    def get_weights(self) -> dict[PolicyID, Weights]:
        """Every policy's weights, by policy id (what `MultiAgentRolloutWorker.set_weights` takes)."""
        return {pid: learner.get_weights() for pid, learner in self.learners.items()}

    def state_dict(self) -> dict[str, Any]:
        """Each policy's learner state under ``"learners"``; ``"policy"``/``"optimizer"`` list
        them flat (``"pid/name"``), as every rxrl checkpoint has these two keys."""
        states = {pid: learner.state_dict() for pid, learner in self.learners.items()}
        return {"policy": _flat(states, "policy"),
                "optimizer": {p: s["optimizer"] for p, s in states.items()}, "learners": states}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` with the same policies (ValueError naming any difference)."""
        _load_each(self.learners, state["learners"],
                   "the checkpoint has policies {saved}, this learner {own}")


class MultiPPOLearner(_PerPolicy[PPOLearner]):
    """A `PPOLearner` per policy id; `train` updates each policy on its own rows.

    ``spaces`` maps the policies this learner trains to their spaces. Policy ``p`` starts
    from the weights of seed `policy_seed(seed, p)`, as on the workers. Advantages are
    standardized per policy over the batch. Policies with no rows in a batch are skipped.
    """

    def __init__(self, spaces: Mapping[PolicyID, EnvSpaces], config: PPOConfig | None = None,
                 policy: PolicyConfig | None = None, seed: int = 0, device: Device = "cpu") -> None:
        self.learners = {pid: PPOLearner(s, config, policy, seed=policy_seed(seed, pid), device=device)
                         for pid, s in spaces.items()}

    def train(self, batch: MultiAgentBatch) -> dict[PolicyID, TrainMetrics]:
        """Update every policy of this learner that has rows in ``batch``."""
        reports = {}
        for pid, learner in self.learners.items():
            rows = batch.policy_batches.get(pid)
            if rows is not None and len(rows):
                reports[pid] = learner.train(_standardize_advantages(rows))
        return reports


class MultiDQNLearner(_PerPolicy[DQNLearner]):
    """A `DQNLearner` per Q-learning policy; `train` takes several optimizer steps per call.

    A call's batch per policy holds ``steps * batch_size`` replayed rows (`MultiReplay`
    samples them at once); it is cut into ``steps`` minibatches, one optimizer step each,
    so that a plan pays one learner call per ``steps`` updates.
    """

    def __init__(self, spaces: Mapping[PolicyID, EnvSpaces], config: DQNConfig | None = None,
                 seed: int = 0) -> None:
        self.config = config or DQNConfig()
        self.learners = {pid: DQNLearner(s, self.config, seed=policy_seed(seed, pid))
                         for pid, s in spaces.items()}

    def train(self, batches: Mapping[PolicyID, TransitionBatch], steps: int = 1
              ) -> dict[PolicyID, TrainMetrics]:
        """``steps`` optimizer steps per policy on consecutive slices of its batch; the mean report."""
        reports = {}
        for pid, batch in batches.items():
            learner = self.learners[pid]
            size = len(batch) // steps
            if size < 1:
                raise ValueError(f"MultiDQNLearner.train: {len(batch)} rows of policy {pid!r} for "
                                 f"{steps} steps")
            parts = [learner.train(batch.take(slice(k * size, (k + 1) * size)))[0] for k in range(steps)]
            reports[pid] = _mean_report(parts)
        return reports


class _Loads(Protocol):
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def _load_each(parts: Mapping[PolicyID, _Loads], saved: Mapping[PolicyID, Any], mismatch: str) -> None:
    """Restore each policy's part from ``saved``; ValueError (``mismatch``, formatted with the
    sorted ``saved`` and ``own`` ids) unless both hold the same policies."""
    if set(saved) != set(parts):
        raise ValueError(mismatch.format(saved=sorted(saved), own=sorted(parts)))
    for pid, part in parts.items():
        part.load_state_dict(saved[pid])


def _mean_report(parts: list[TrainMetrics]) -> TrainMetrics:
    """One report for several optimizer steps: means of the losses, sums of rows, steps, time."""
    def mean(name: str) -> float:
        return float(np.mean([getattr(p, name) for p in parts]))

    return TrainMetrics(
        policy_loss=mean("policy_loss"), value_loss=mean("value_loss"), entropy=mean("entropy"),
        approx_kl=mean("approx_kl"), clip_fraction=mean("clip_fraction"), grad_norm=mean("grad_norm"),
        explained_variance=float(np.nanmean([p.explained_variance for p in parts]))
        if any(np.isfinite(p.explained_variance) for p in parts) else float("nan"),
        env_steps_trained=sum(p.env_steps_trained for p in parts),
        num_updates=sum(p.num_updates for p in parts),
        learner_time_s=sum(p.learner_time_s for p in parts),
        unreported=frozenset.intersection(*(p.unreported for p in parts)))


class MultiReplay:
    """A `ReplayShard` per Q-learning policy, as one actor.

    `add` stores the policies' transitions of a `MultiAgentBatch` (other policies' rows
    are ignored) and returns the transitions stored so far; `sample` returns, per policy,
    ``steps * batch_size`` rows drawn uniformly (``steps`` minibatches at once), or
    `rxrl.NOT_READY` while any policy holds fewer than ``config.learning_starts``.
    """

    def __init__(self, policies: list[PolicyID], config: ReplayConfig | None = None, seed: int = 0,
                 steps: int = 1) -> None:
        if steps < 1:
            raise ValueError(f"MultiReplay: steps must be >= 1, got {steps}")
        self.config = config or ReplayConfig()
        if self.config.prioritized:
            raise ValueError("MultiReplay samples several minibatches at once, which prioritized replay "
                             "does not support: set replay.prioritized=false")
        self.steps = steps
        self.shards = {pid: ReplayShard(self.config, seed, shard_index=i) for i, pid in enumerate(policies)}

    def add(self, batch: MultiAgentBatch) -> int:
        """Store the transitions of this replay's policies; the transitions stored so far."""
        for pid, shard in self.shards.items():
            rows = batch.transitions.get(pid)
            if rows is not None and len(rows):
                shard.add(rows)
        return sum(shard.num_added for shard in self.shards.values())

    def state_dict(self) -> dict[str, Any]:
        """Every policy's shard (`ReplayShard.state_dict`: rows, counts, generator), by policy id."""
        return {"shards": {pid: shard.state_dict() for pid, shard in self.shards.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` of a replay with the same policies and config (ValueError
        naming the policies otherwise)."""
        _load_each(self.shards, state["shards"],
                   "the checkpoint's replay has policies {saved}, this replay {own}")

    def sample(self) -> dict[PolicyID, TransitionBatch] | NotReady:
        """``steps`` minibatches per policy, or `NOT_READY` before ``learning_starts``."""
        if any(len(shard) < self.config.learning_starts for shard in self.shards.values()):
            return NOT_READY
        return {pid: shard.buffer.sample(self.config.batch_size * self.steps)
                for pid, shard in self.shards.items()}


__all__ = ["MultiDQNLearner", "MultiPPOLearner", "MultiReplay"]
