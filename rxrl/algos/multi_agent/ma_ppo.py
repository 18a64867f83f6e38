"""Multi-agent PPO: PettingZoo Parallel envs, a policy per policy id, one PPO learner for them all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

import attrs
import numpy as np
import torch

import rxrl
from rxrl import ops
from rxrl.actors import ActorGroup
from rxrl.algos.common import (
    RolloutSettings,
    Start,
    device_of,
    hosted,
    instance_of,
    int_at_least,
    placed,
)
from rxrl.algos.spec import Algorithm, GreedyReturns
from rxrl.envs import make_parallel_env
from rxrl.envs.vector import EnvSpaces
from rxrl.rl import PPOConfig
from rxrl.rl.data.ma_metrics import MultiAgentMetrics, MultiAgentProgress
from rxrl.rl.data.metrics import TrainMetrics
from rxrl.rl.data.multiagent import MultiAgentBatch, PolicyID, policy_mapping_fn, policy_spaces
from rxrl.rl.learners.multi_agent import MultiPPOLearner
from rxrl.rl.models.policy import Weights
from rxrl.rl.workers.multi_agent import MultiAgentRolloutWorker, QPolicySpec

L = TypeVar("L")

#: PPO's learner settings (rxrl.algos.on_policy.ppo.LEARNER), per policy
LEARNER = PPOConfig(lr=2e-3, num_epochs=10, minibatch_size=256, ent_coef=0.0, clip_vloss=False)


def _mapping_spec(inst: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not (value in ("independent", "shared") or ":" in value):
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be 'independent', 'shared' or "
                         f"'module:function', got {value!r}")


def _ids(inst: Any, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]) -> None:
    if not isinstance(value, tuple) or not all(isinstance(x, str) and x for x in value):
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be a tuple of policy ids, "
                         f"got {value!r}")


@attrs.frozen(kw_only=True)
class MultiAgentSettings(RolloutSettings):
    """Rollout settings of a multi-agent algorithm (the rest are `RolloutSettings`').

    ``env`` names a PettingZoo Parallel env (`rxrl.envs.make_parallel_env`: the built-in
    ``MultiCartPole-v0``, a module with ``parallel_env()`` such as ``mpe2.simple_spread_v3``,
    or ``module:function``), built with ``env_kwargs``. ``policy_mapping`` maps agent ids to
    policy ids: ``"independent"`` (a policy per agent, named after it), ``"shared"`` (one
    policy, ``"shared"``) or ``"module:function"``. ``policies``, if given, declares the policy
    ids the mapping may return. Steps count parallel env steps: ``fragment_length`` per env
    copy per fragment, ``round_size`` per round (agent transitions are counted apart).
    """

    env: str = attrs.field(default="MultiCartPole-v0")
    policy_mapping: str = attrs.field(default="independent", validator=_mapping_spec)
    policies: tuple[str, ...] = attrs.field(default=(), validator=_ids)


def env_policies(config: MultiAgentSettings, algorithm: str) -> dict[PolicyID, EnvSpaces]:
    """The policies of ``config``'s env and mapping, with their spaces (one throwaway env).

    ValueError in one line if the env is not a multi-agent (Parallel) env, or the mapping
    returns an unknown policy id.
    """
    try:
        env = make_parallel_env(config.env, config.env_kwargs)
    except ValueError as e:
        raise ValueError(f"{algorithm} needs a multi-agent env: {e}") from None
    try:
        return policy_spaces(env, policy_mapping_fn(config.policy_mapping), config.policies)
    except ValueError as e:
        raise ValueError(f"{algorithm} on {config.env}: {e}") from None
    finally:
        env.close()


def agents_of(config: MultiAgentSettings) -> list[str]:
    """The env's ``possible_agents`` (the columns of its per-agent metrics)."""
    env = make_parallel_env(config.env, config.env_kwargs)
    try:
        return [str(a) for a in env.possible_agents]
    finally:
        env.close()


def learner_weights(state: Mapping[str, Any]) -> dict[PolicyID, Weights]:
    """The policy weights in a multi-policy learner's ``state_dict`` (a checkpoint's)."""
    return {pid: {k: t.detach().cpu().numpy().copy() for k, t in s["policy"].items()}
            for pid, s in state["learners"].items()}


def starts_for_workers(starts: tuple[Start, ...]) -> tuple[Start, ...]:
    """`Start.for_workers` of each start (an attrs converter)."""
    return tuple(start.for_workers() for start in starts)


@attrs.frozen
class MultiAgentWorkerFactory:
    """``index -> MultiAgentRolloutWorker``: picklable, so that a Ray actor can build its worker.

    ``q_policies`` are the Q-learning policies (two-trainer); ``starts`` learner states
    whose policies' weights the workers begin with (a resumed run), ``q_steps`` the Q-learning
    policies' exploration clocks they continue.
    """

    settings: MultiAgentSettings
    q_policies: Mapping[PolicyID, QPolicySpec] = attrs.field(factory=dict)
    starts: tuple[Start, ...] = attrs.field(default=(), converter=starts_for_workers)
    #: the Q-learning policies' exploration clocks a resumed worker continues from
    q_steps: Mapping[PolicyID, int] = attrs.field(factory=dict)

    def __call__(self, index: int) -> MultiAgentRolloutWorker:
        s = self.settings
        seed, reseed = s.seed, max((start.reseed for start in self.starts), default=0)
        if reseed:
            seed = int(np.random.SeedSequence([s.seed, reseed]).generate_state(1)[0] >> 1)
        worker = MultiAgentRolloutWorker(
            s.env, num_envs=s.num_envs_per_worker, fragment_length=s.fragment_length, seed=seed,
            worker_index=index, gamma=s.gamma,
            lam=s.lam, policy=s.policy, env_kwargs=s.env_kwargs, policy_mapping=s.policy_mapping,
            policies=s.policies, q_policies=self.q_policies)
        for start in self.starts:
            worker.set_weights(learner_weights(start.learner_state))
        worker.set_q_steps(self.q_steps)
        return worker


#: an eval episode that has not ended after this many env steps is an error (an env without
#: truncation would run forever)
MAX_EVAL_STEPS = 1_000_000


def greedy_returns(factory: MultiAgentWorkerFactory, episodes: int, seed: int) -> GreedyReturns:
    """Run ``episodes`` episodes of one env copy with the policies of ``factory``'s worker
    (its checkpoint's weights), every agent acting deterministically
    (`MultiAgentRolloutWorker.greedy`); the env is seeded ``seed`` at its first reset."""
    worker = factory(0)
    env = make_parallel_env(factory.settings.env, factory.settings.env_kwargs)
    returns: list[float] = []
    agent_returns: dict[str, list[float]] = {str(a): [] for a in env.possible_agents}
    try:
        obs, _ = env.reset(seed=seed)
        while len(returns) < episodes:
            totals: dict[str, float] = {}
            steps = 0
            while env.agents:
                if steps == MAX_EVAL_STEPS:
                    raise ValueError(f"{factory.settings.env}: an eval episode ran {MAX_EVAL_STEPS:,} "
                                     "steps without ending (does the env truncate its episodes?)")
                actions = worker.greedy({a: obs[a] for a in env.agents})
                obs, rewards, _, _, _ = env.step(actions)
                for agent, reward in rewards.items():
                    totals[str(agent)] = totals.get(str(agent), 0.0) + float(reward)
                steps += 1
            returns.append(sum(totals.values()))
            for agent, total in totals.items():
                agent_returns.setdefault(agent, []).append(total)
            obs, _ = env.reset()
    finally:
        env.close()
        worker.close()
    return GreedyReturns(returns, {a: r for a, r in agent_returns.items() if r})


def evaluate(config: MultiAgentPPO, learner_state: Mapping[str, Any], episodes: int,
             seed: int) -> GreedyReturns:
    """``rxrl eval`` of a multi-agent PPO checkpoint (`greedy_returns`); ValueError if its
    policies are not the config's (`check`)."""
    check(config, learner_state)
    return greedy_returns(MultiAgentWorkerFactory(config, starts=(Start(learner_state),)), episodes, seed)


@attrs.frozen
class MultiPPOLearnerFactory:
    """``index -> MultiPPOLearner`` for the PPO policies ``policies`` of ``settings``' env."""

    settings: MultiAgentSettings
    config: PPOConfig
    policies: tuple[PolicyID, ...]
    start: Start | None = None

    def __call__(self, index: int) -> MultiPPOLearner:
        s = self.settings
        torch.set_num_threads(s.learner_threads)
        spaces = env_policies(s, "multi-agent PPO")
        learner = MultiPPOLearner({p: spaces[p] for p in self.policies}, self.config, s.policy, seed=s.seed,
                                  device=device_of(s))
        if self.start is not None:
            learner.load_state_dict(self.start.learner_state)
        return learner


@attrs.frozen
class MultiAgentGroups(Generic[L]):
    """The actor groups of a multi-agent plan: rollout workers and a learner (``learner`` is
    what ``rxrl train`` checkpoints)."""

    workers: ActorGroup[MultiAgentRolloutWorker]
    learner: ActorGroup[L]

    @property
    def pair(self) -> tuple[ActorGroup[MultiAgentRolloutWorker], ActorGroup[L]]:
        """``workers, learner = groups.pair``."""
        return self.workers, self.learner


@attrs.frozen(eq=False)
class MultiTrained:
    """A multi-policy learner's reply: per-policy reports, the new weights, the episodes behind them."""

    reports: Mapping[PolicyID, TrainMetrics]
    weights: Mapping[PolicyID, Weights]
    episodes: MultiAgentBatch | None = None


def train_on_rounds(learner: MultiPPOLearner, rounds: list[MultiAgentBatch]) -> MultiTrained:
    """On the learner: join the round's batches, train every PPO policy on its rows, reply
    with the reports, the new weights and the episodes (no rows)."""
    batch = MultiAgentBatch.concat(rounds)
    return MultiTrained(learner.train(batch), learner.get_weights(), batch.episodes())


def set_policy_weights(worker: MultiAgentRolloutWorker, trained: MultiTrained) -> None:
    """Load the learner's policies' weights into ``worker`` (its other policies untouched)."""
    # writable copies: weights that arrive through Ray's object store are read-only views
    worker.set_weights({pid: {k: np.array(v) for k, v in w.items()} for pid, w in trained.weights.items()})


def join_rounds(rounds: list[list[MultiAgentBatch]]) -> list[MultiAgentBatch]:
    """The batches of several barrier rounds, in order."""
    return [batch for batches in rounds for batch in batches]


def env_steps(batches: list[MultiAgentBatch]) -> int:
    """Parallel env steps in a round (or a joined list of rounds)."""
    return sum(b.env_steps for b in batches)


@attrs.frozen(kw_only=True)
class MultiAgentPPO(MultiAgentSettings):
    """PPO for every policy of a multi-agent env (independent or shared, by ``policy_mapping``).

    Every round each worker samples one fragment with the current weights of all policies;
    rounds are joined until ``train_batch_size`` env steps, and the learner runs PPO
    (``learner``) on each policy's rows, advantages standardized per policy; the new
    weights of every policy reach every worker before its next fragment.
    """

    fragment_length: int = attrs.field(default=64, validator=int_at_least(1))
    train_batch_size: int = attrs.field(default=1024, validator=int_at_least(1))
    learner: PPOConfig = attrs.field(default=LEARNER, validator=instance_of(PPOConfig))


class Progress(MultiAgentProgress):
    """The driver-side progress of a multi-agent plan, with an adapter for learner replies."""

    def observe_trained(self, trained: MultiTrained) -> MultiAgentMetrics:
        """Close an iteration with a learner's reply (and the episodes it carries, if any)."""
        if trained.episodes is not None:
            self.observe_samples(trained.episodes)
        return self.observe_train(trained.reports)


def check(config: MultiAgentSettings, learner_state: Mapping[str, Any] | None = None,
          algorithm: str = "ma-ppo") -> dict[PolicyID, EnvSpaces]:
    """`env_policies`, and that a checkpoint's learner state has the same policies."""
    spaces = env_policies(config, algorithm)
    if learner_state is not None:
        saved = sorted(learner_state.get("learners", {}))
        if saved != sorted(spaces):
            raise ValueError(f"the checkpoint has policies {saved}, the config {sorted(spaces)}")
    return spaces


def groups(config: MultiAgentPPO, start: Start | None = None) -> MultiAgentGroups[MultiPPOLearner]:
    """The plan's actors: ``num_workers`` multi-agent rollout workers and one `MultiPPOLearner`."""
    spaces = check(config, None if start is None else start.learner_state)
    workers = rxrl.indexed_actors(MultiAgentWorkerFactory(config, starts=() if start is None else (start,)),
                                  config.num_workers, name="MultiAgentRolloutWorker")
    factory = MultiPPOLearnerFactory(config, config.learner, tuple(spaces), start)
    learner = hosted(rxrl.indexed_actors(factory, 1, name="MultiPPOLearner"), config)
    where = config.placement
    return MultiAgentGroups(placed(workers, where.workers), placed(learner, where.learner))


def plan(config: MultiAgentPPO, actors: MultiAgentGroups[MultiPPOLearner] | None = None
         ) -> rxrl.Plan[MultiAgentMetrics]:
    """Multi-agent PPO as a plan: one `MultiAgentMetrics` record per training iteration, forever."""
    workers, learner = (actors or groups(config)).pair
    progress = Progress(agents_of(config), list(env_policies(config, "ma-ppo")))
    rounds = (rxrl.from_actors(workers, MultiAgentRolloutWorker.sample)  # a MultiAgentBatch each
              | ops.barrier())                                          # one round, one set of weights
    if config.train_batch_size > config.round_size:                       # a batch of several rounds
        rounds = rounds | ops.window(min_size=config.train_batch_size, combine=join_rounds, size=env_steps)
    return (
        rounds
        | ops.call(learner, train_on_rounds)           # PPO on each policy's rows, on the learner
        | ops.broadcast(workers, set_policy_weights)   # every policy's weights, before the next round
        | ops.map(progress.observe_trained)            # MultiAgentMetrics
    )


#: settings that learn faster than the defaults on particular envs
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["SPEC", "LEARNER", "TUNED", "MultiAgentGroups", "MultiAgentPPO", "MultiAgentSettings",
           "MultiAgentWorkerFactory", "MultiPPOLearnerFactory", "MultiTrained", "Progress", "agents_of",
           "GreedyReturns", "MAX_EVAL_STEPS", "check", "env_policies", "env_steps", "evaluate",
           "greedy_returns", "groups", "join_rounds", "learner_weights", "plan",
           "set_policy_weights", "starts_for_workers", "train_on_rounds"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("ma-ppo", MultiAgentPPO, plan, cast(Any, groups), 200_000, TUNED,
                 "multi-agent PPO (PettingZoo Parallel envs; independent or shared policies)",
                 check_env=check, evaluate=evaluate)
