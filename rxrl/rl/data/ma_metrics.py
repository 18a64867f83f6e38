"""Multi-agent progress records: per-agent and total episode returns, per-policy learner reports.

>>> import numpy as np
>>> from rxrl.rl.data.multiagent import MultiAgentBatch
>>> progress = MultiAgentProgress(agents=["a", "b"], policies=["a", "b"], clock=lambda: 0.0)
>>> f = lambda *x: np.array(x, np.float32)
>>> batch = MultiAgentBatch({}, env_steps=10, agent_steps=15, episode_returns=f(30.0),
...                         episode_lengths=np.array([10]), agent_returns={"a": f(10.0), "b": f(20.0)})
>>> _ = progress.observe_samples(batch)
>>> m = progress.record()
>>> m.episode_return_mean, m.episode_total_return_mean, dict(m.agent_return_mean)
(10.0, 30.0, {'a': 10.0, 'b': 20.0})
>>> row = m.as_row()
>>> row["agent/b/episode_return_mean"], row["agent_steps_sampled"], np.isnan(row["train/a/policy_loss"])
(20.0, 15.0, np.True_)
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence

import attrs
import numpy as np

from rxrl.rl.data.metrics import Metrics, TrainMetrics
from rxrl.rl.data.multiagent import AgentID, MultiAgentBatch, PolicyID

_TRAIN_FIELDS = [f.name for f in attrs.fields(TrainMetrics) if f.name != "unreported"]


@attrs.frozen
class MultiAgentMetrics(Metrics):
    """A cumulative record of a multi-agent run (see `Metrics` for the shared fields).

    ``env_steps_sampled`` counts parallel env steps, ``agent_steps_sampled`` agent
    transitions. ``agent_return_mean[agent]`` is the mean return of the agent's last
    ``window`` episodes; ``episode_total_return_mean`` that of the env episodes' total
    (all agents' rewards summed). ``episode_return_mean`` is the *lowest* per-agent mean —
    so ``rxrl train --target-return R`` stops once every agent's mean reaches R — and
    ``episodes`` / ``episode_length_mean`` count env episodes. ``policy_train`` holds each
    policy's latest learner report (``train`` stays None); ``policy_unreported[pid]`` the
    fields that policy's learner does not compute (`TrainMetrics.unreported`: no column).
    """

    agent_steps_sampled: int = 0
    episode_total_return_mean: float = math.nan
    agent_return_mean: Mapping[AgentID, float] = attrs.field(factory=dict)
    policy_train: Mapping[PolicyID, TrainMetrics] = attrs.field(factory=dict)
    agents: tuple[AgentID, ...] = ()
    policies: tuple[PolicyID, ...] = ()
    policy_unreported: Mapping[PolicyID, frozenset[str]] = attrs.field(factory=dict)

    def as_row(self) -> dict[str, float]:
        """`Metrics.as_row` plus ``agent/<id>/episode_return_mean`` for every agent and
        ``train/<policy>/<field>`` for every policy (NaN until known: the columns are the
        same in every row)."""
        row = {f.name: float(getattr(self, f.name)) for f in attrs.fields(Metrics)
               if f.name not in ("train", "custom")}
        row["agent_steps_sampled"] = float(self.agent_steps_sampled)
        row["episode_total_return_mean"] = self.episode_total_return_mean
        for agent in self.agents:
            row[f"agent/{agent}/episode_return_mean"] = self.agent_return_mean.get(agent, math.nan)
        for pid in self.policies:
            report = self.policy_train.get(pid)
            skip = self.policy_unreported.get(pid, frozenset())
            for name in (n for n in _TRAIN_FIELDS if n not in skip):
                row[f"train/{pid}/{name}"] = math.nan if report is None else float(getattr(report, name))
        return row


class MultiAgentProgress:
    """Turns multi-agent batches' episodes and learner reports into `MultiAgentMetrics`.

    Driver-side, like `MetricsAccumulator`: ``agents`` and ``policies`` fix the record's
    columns. `observe_samples` records a batch's episodes and steps (rows are not needed:
    `MultiAgentBatch.episodes`); `observe_train` closes an iteration with one learner's
    per-policy reports (several learners may report into one progress). ``unreported``: per
    policy, the `TrainMetrics` fields its learner does not compute (no column for them).
    """

    def __init__(self, agents: Sequence[AgentID], policies: Sequence[PolicyID], window: int = 100,
                 clock: Callable[[], float] = time.perf_counter,
                 unreported: Mapping[PolicyID, frozenset[str]] | None = None) -> None:
        self.agents, self.policies = tuple(agents), tuple(policies)
        self.unreported = dict(unreported or {})
        self._clock = clock
        self._agent: dict[AgentID, deque[float]] = {a: deque(maxlen=window) for a in self.agents}
        self._total: deque[float] = deque(maxlen=window)
        self._lengths: deque[int] = deque(maxlen=window)
        self._latest: dict[PolicyID, TrainMetrics] = {}
        self._start = self._last_time = clock()
        self._sampled = self._last_sampled = self._agent_steps = self._trained = 0
        self._episodes = self._iteration = 0

    def observe_samples(self, batch: MultiAgentBatch) -> MultiAgentBatch:
        """Record ``batch``'s episodes and steps; return it unchanged."""
        self._sampled += batch.env_steps
        self._agent_steps += batch.agent_steps
        self._episodes += len(batch.episode_returns)
        self._total.extend(batch.episode_returns.tolist())
        self._lengths.extend(batch.episode_lengths.tolist())
        for agent, returns in batch.agent_returns.items():
            self._agent.setdefault(agent, deque(maxlen=self._total.maxlen)).extend(returns.tolist())
        return batch

    def observe_rounds(self, rounds: list[MultiAgentBatch]) -> list[MultiAgentBatch]:
        """`observe_samples` for every batch of a barrier round; the round unchanged."""
        for batch in rounds:
            self.observe_samples(batch)
        return rounds

    def observe_train(self, reports: Mapping[PolicyID, TrainMetrics]) -> MultiAgentMetrics:
        """Record one learner's per-policy reports; the cumulative record now."""
        self._latest.update(reports)
        self._trained += sum(r.env_steps_trained for r in reports.values())
        return self.record()

    def record(self) -> MultiAgentMetrics:
        """Close an iteration: the cumulative record now."""
        now = self._clock()
        elapsed = now - self._last_time
        rate = (self._sampled - self._last_sampled) / elapsed if elapsed > 0 else math.nan
        self._last_time, self._last_sampled = now, self._sampled
        self._iteration += 1
        means = {a: float(np.mean(r)) for a, r in self._agent.items() if r}
        nan = math.nan
        return MultiAgentMetrics(
            iteration=self._iteration, env_steps_sampled=self._sampled, env_steps_trained=self._trained,
            episodes=self._episodes, episode_return_mean=min(means.values()) if means else nan,
            episode_return_min=float(np.min(self._total)) if self._total else nan,
            episode_return_max=float(np.max(self._total)) if self._total else nan,
            episode_length_mean=float(np.mean(self._lengths)) if self._lengths else nan,
            steps_per_s=rate, time_s=now - self._start, agent_steps_sampled=self._agent_steps,
            episode_total_return_mean=float(np.mean(self._total)) if self._total else nan,
            agent_return_mean=means, policy_train=dict(self._latest), agents=self.agents,
            policies=self.policies, policy_unreported=self.unreported)


__all__ = ["MultiAgentMetrics", "MultiAgentProgress"]
