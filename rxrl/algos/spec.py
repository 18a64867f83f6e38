"""An algorithm's spec (`Algorithm`), the one record the registry, the CLI and `rxrl.train` read,
and `Snapshot`, the item an algorithm's checkpoint step passes."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from rxrl.algos.common import Groups, RolloutSettings, Start
from rxrl.plan import Plan
from rxrl.rl.data.metrics import Metrics


@attrs.frozen(eq=False)
class Snapshot:
    """A plan's `Metrics` record, with the learner's state when a checkpoint is due."""

    metrics: Metrics
    due: bool = False
    state: Mapping[str, Any] | None = None


@attrs.frozen
class GreedyReturns:
    """Returns of greedy episodes of a multi-agent policy set: ``returns`` per env episode
    (the sum over its agents, as ``episode_total_return_mean`` in metrics.csv) and
    ``agent_returns`` per agent (its own episodes, as ``agent/<id>/episode_return_mean``)."""

    returns: list[float]
    agent_returns: dict[str, list[float]]

    def lowest_agent(self) -> tuple[str, list[float]]:
        """The agent with the lowest mean return and its returns: what ``episode_return_mean``
        (and ``--target-return``) is in training."""
        agent = min(self.agent_returns, key=lambda a: float(np.mean(self.agent_returns[a])))
        return agent, self.agent_returns[agent]


@attrs.frozen
class Algorithm:
    """An algorithm's spec: the config class, the plan function and what `rxrl.train` needs.

    Each algorithm module ends with one ``SPEC = Algorithm(...)``; the registry
    (`rxrl.algos.ALGORITHMS`) reads it, and the CLI's choices and help come from the registry.

    ``plan(config, groups)`` builds the plan on the actors ``groups(config, start)`` made
    (``plan(config)`` makes them itself). ``default_steps`` is ``rxrl train``'s default
    budget; ``tuned`` maps env ids to settings that learn faster there (a key with ``*`` is a
    pattern, ``"ALE/*"``: `tuned_for`). ``records_in_flight``
    is how many records ``rxrl train``'s checkpoint step may have at the learner at once:
    1 for the synchronous algorithms (each record's snapshot before the next update);
    more for those whose learner keeps training meanwhile, so that the driver never waits
    for a snapshot behind the queued batches.
    """

    name: str
    config: type[RolloutSettings]
    plan: Callable[[Any, Any], Plan[Metrics]]
    groups: Callable[[Any, Start | None], Groups[Any]]
    default_steps: int
    tuned: Mapping[str, Mapping[str, Any]]
    summary: str
    records_in_flight: int = 1
    #: the algorithm's own check of its env (and of a checkpoint's learner state), for envs
    #: that are not single-agent gymnasium ids (multi-agent); None: `env_spaces` and the
    #: policy check of a resume
    check_env: Callable[[Any, Mapping[str, Any] | None], object] | None = None
    #: the checkpoint step ``rxrl train`` appends, for plans with more than one learner:
    #: ``snapshot(groups)`` is an operator that attaches every learner's state to a due
    #: `Snapshot`; None: ``call(groups.learner, snapshot_if_due)``
    snapshot: Callable[[Any], Any] | None = None
    #: ``rxrl eval``'s greedy policy of a checkpoint, for learners whose policy is not an
    #: actor-critic: ``greedy(config, learner_state) -> act(obs_batch, deterministic=True)``
    #: returning ``(actions, _, _)``; None: the config's actor-critic
    greedy: Callable[[Any, Mapping[str, Any]], Callable[..., Any]] | None = None
    #: ``rxrl export``'s greedy policy of a checkpoint, for the same learners as ``greedy``:
    #: ``greedy_module(config, learner_state)`` returns the
    #: `rxrl.rl.models.greedy.GreedyPolicy` (raw observations to env actions, one torch
    #: module); None: the config's actor-critic
    greedy_module: Callable[[Any, Mapping[str, Any]], Any] | None = None
    #: ``rxrl eval`` of a multi-agent checkpoint: ``evaluate(config, learner_state, episodes,
    #: seed)`` returns the greedy episodes' returns, per env episode and per agent; None: a
    #: single-agent env (``greedy``, or the config's actor-critic)
    evaluate: Callable[[Any, Mapping[str, Any], int, int], GreedyReturns] | None = None
    #: settings that ``rxrl train`` sets to ``--steps`` (schedules over the run), besides
    #: ``lr_decay_steps``
    budget_settings: tuple[str, ...] = ()
    #: the settings (``--set`` paths, or prefixes ending in ``.``) that the checkpoint's learner
    #: state depends on (the networks' architecture, the replay's layout): a resume that
    #: changes one is refused, naming it
    state_settings: tuple[str, ...] = ("policy.",)

    def tuned_for(self, env: str) -> Mapping[str, Any]:
        """The tuned settings for ``env``: its own entry, else those of the first pattern key
        (``fnmatch``: ``"ALE/*"``, ``"MinAtar/*"``) that matches it, else none."""
        if env in self.tuned:
            return self.tuned[env]
        return next((v for k, v in self.tuned.items() if "*" in k and fnmatch.fnmatchcase(env, k)), {})

    def depends_on(self, path: str) -> bool:
        """Whether the learner state depends on setting ``path`` (`state_settings`)."""
        return any(path == s or (s.endswith(".") and path.startswith(s)) for s in self.state_settings)

    def build(self, config: RolloutSettings, start: Start | None = None) -> tuple[Plan[Metrics], Groups[Any]]:
        """The plan and its actors, so that a caller can add operators naming the learner."""
        actors = self.groups(config, start)
        return self.plan(config, actors), actors


__all__ = ["Algorithm", "GreedyReturns", "Snapshot"]
