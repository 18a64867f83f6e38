"""The algorithms, each a config and a plan: ``ALGORITHMS[name]`` and ``get(name)``.

>>> from rxrl.algos import get
>>> algo = get("ppo")
>>> algo.config().env, algo.name
('CartPole-v1', 'ppo')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs

from rxrl.algos.common import Groups, RolloutSettings, Start
from rxrl.plan import Plan
from rxrl.rl.metrics import Metrics

if TYPE_CHECKING:
    from rxrl.algos.multi_agent import GreedyReturns


@attrs.frozen
class Algorithm:
    """A registry entry: the config class, the plan function and what ``rxrl train`` needs.

    ``plan(config, groups)`` builds the plan on the actors ``groups(config, start)`` made
    (``plan(config)`` makes them itself). ``default_steps`` is ``rxrl train``'s default
    budget; ``tuned`` maps env ids to settings that learn faster there. ``records_in_flight``
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
    #: ``rxrl eval`` of a multi-agent checkpoint: ``evaluate(config, learner_state, episodes,
    #: seed)`` returns the greedy episodes' returns, per env episode and per agent; None: a
    #: single-agent env (``greedy``, or the config's actor-critic)
    evaluate: Callable[[Any, Mapping[str, Any], int, int], GreedyReturns] | None = None
    #: settings that ``rxrl train`` sets to ``--steps`` (schedules over the run), besides
    #: ``lr_decay_steps``
    budget_settings: tuple[str, ...] = ()

    def build(self, config: RolloutSettings, start: Start | None = None) -> tuple[Plan[Metrics], Groups[Any]]:
        """The plan and its actors, so that a caller can add operators naming the learner."""
        actors = self.groups(config, start)
        return self.plan(config, actors), actors


class Registry(Mapping[str, Algorithm]):
    """``name -> Algorithm``, each entry built (its module imported) when first looked up,
    so that ``rxrl train ppo`` imports PPO's module and not the others (nor, through them,
    torch: docs/design-notes.md, "The start-up's critical path")."""

    def __init__(self, entries: Mapping[str, Callable[[], Algorithm]]) -> None:
        self._entries = dict(entries)
        self._built: dict[str, Algorithm] = {}

    def __getitem__(self, name: str) -> Algorithm:
        if name not in self._built:
            self._built[name] = self._entries[name]()
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def _ppo() -> Algorithm:
    from rxrl.algos import ppo

    return Algorithm("ppo", ppo.PPO, ppo.plan, ppo.groups, 100_000, ppo.TUNED,
                     "proximal policy optimization, synchronous")


def _a2c() -> Algorithm:
    from rxrl.algos import a2c

    return Algorithm("a2c", a2c.A2C, a2c.plan, a2c.groups, 200_000, a2c.TUNED,
                     "advantage actor-critic, synchronous")


def _a3c() -> Algorithm:
    from rxrl.algos import a3c

    return Algorithm("a3c", a3c.A3C, a3c.plan, a3c.groups, 200_000, a3c.TUNED,
                     "advantage actor-critic, asynchronous gradients")


def _impala() -> Algorithm:
    from rxrl.algos import impala

    return Algorithm("impala", impala.IMPALA, impala.plan, impala.groups, 300_000, impala.TUNED,
                     "importance-weighted actor-learner (V-trace), asynchronous sampling",
                     records_in_flight=4)


def _appo() -> Algorithm:
    from rxrl.algos import appo

    return Algorithm("appo", appo.APPO, appo.plan, appo.groups, 200_000, appo.TUNED,
                     "asynchronous PPO (clipped surrogate on V-trace), asynchronous sampling",
                     records_in_flight=4)


def _ma_ppo() -> Algorithm:
    from rxrl.algos import multi_agent

    return Algorithm("ma-ppo", multi_agent.MultiAgentPPO, multi_agent.plan,
                     cast(Any, multi_agent.groups), 200_000, multi_agent.TUNED,
                     "multi-agent PPO (PettingZoo Parallel envs; independent or shared policies)",
                     check_env=multi_agent.check, evaluate=multi_agent.evaluate)


def _two_trainer() -> Algorithm:
    from rxrl.algos import two_trainer

    return Algorithm("two-trainer", two_trainer.TwoTrainer, two_trainer.plan,
                     cast(Any, two_trainer.groups), 300_000, two_trainer.TUNED,
                     "PPO and DQN policies trained concurrently on one multi-agent stream",
                     check_env=two_trainer.check, snapshot=two_trainer.snapshot,
                     evaluate=two_trainer.evaluate)


def _maml() -> Algorithm:
    from rxrl.algos import maml

    return Algorithm("maml", maml.MAML, maml.plan, cast(Any, maml.groups), 12_000_000, maml.TUNED,
                     "model-agnostic meta-learning (policy-gradient inner step on the workers)")


def _dqn() -> Algorithm:
    from rxrl.algos import dqn, qlearning

    return Algorithm("dqn", dqn.DQN, dqn.plan, cast(Any, dqn.groups), 100_000, dqn.TUNED,
                     "deep Q-learning (double, n-step) from a replay actor at a fixed training intensity",
                     check_env=qlearning.check("dqn"), snapshot=qlearning.snapshot(1),
                     greedy=qlearning.greedy, budget_settings=("exploration_steps",))


def _apex() -> Algorithm:
    from rxrl.algos import apex, qlearning

    return Algorithm("apex", apex.ApeX, apex.plan, cast(Any, apex.groups), 200_000, apex.TUNED,
                     "Ape-X DQN: asynchronous epsilon-greedy workers, prioritized replay shards, "
                     "a pipelined learner", check_env=qlearning.check("apex"),
                     snapshot=qlearning.snapshot(4), greedy=qlearning.greedy)


def _sac() -> Algorithm:
    from rxrl.algos import qlearning, sac

    return Algorithm("sac", sac.SAC, sac.plan, cast(Any, sac.groups), 100_000, sac.TUNED,
                     "soft actor-critic (twin Q, automatic entropy tuning) from a replay actor at a "
                     "fixed update-to-data ratio", check_env=sac.check, snapshot=qlearning.snapshot(1),
                     greedy=sac.greedy)


ALGORITHMS: Mapping[str, Algorithm] = Registry({
    "ppo": _ppo,
    "a2c": _a2c,
    "a3c": _a3c,
    "impala": _impala,
    "appo": _appo,
    "ma-ppo": _ma_ppo,
    "two-trainer": _two_trainer,
    "maml": _maml,
    "dqn": _dqn,
    "apex": _apex,
    "sac": _sac,
})


def get(name: str) -> Algorithm:
    """The algorithm called ``name``; a ValueError lists the known ones otherwise."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {sorted(ALGORITHMS)}") from None


__all__ = ["ALGORITHMS", "Algorithm", "Registry", "a2c", "a3c", "apex", "appo", "dqn", "get", "impala",
           "maml", "multi_agent", "ppo", "qlearning", "sac", "two_trainer"]

#: the algorithm modules, imported on first use as attributes of this package
_MODULES = frozenset({"a2c", "a3c", "apex", "appo", "dqn", "impala", "maml", "multi_agent", "ppo",
                      "qlearning", "sac", "two_trainer"})


def __getattr__(name: str) -> Any:
    """``rxrl.algos.ppo`` and the like, imported when first named (PEP 562)."""
    if name in _MODULES:
        return importlib.import_module(f"rxrl.algos.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
