"""Evaluation in parallel with training: greedy episodes of the learner's policy on unseen seeds.

With evaluation on (`Evaluation`, ``rxrl train --eval-interval N``), `training_plan` runs an
evaluation branch beside its `Snapshot` stream (`with_evaluation`):

    snapshots ─ call(EvalInbox, offer) ──────────────────────────────────── union(async) ─ driver
    from_actors(EvalInbox, take) ─ gather ─ call(learner, attach_policy)              │
                                          ─ call(Evaluator×k, run_request) ────────────┘

The main branch passes every record through a driver-hosted `EvalInbox`, which queues an
`EvalRequest` for every ``interval``-th iteration (``iteration % interval == 0``); the
evaluation branch's source takes them (``NOT_READY`` while none waits, so it never pulls
training ahead of the Trainer, as a ``split`` branch would); the learner attaches its policy
weights (a checkpoint's own ``state["policy"]`` when the iteration is a due snapshot, so that
an evaluation of a checkpoint iteration evaluates exactly that checkpoint); one of the ``k``
`Evaluator` actors (round robin) runs ``episodes`` greedy episodes and answers an
`EvalResult`. Both calls are pipelined (``max_in_flight=k``) and the union is asynchronous, so
training goes on while the evaluators work (on the reference backend, deterministically in
turn). When evaluating takes longer than ``interval`` iterations, at most one request per
evaluator waits (the oldest is dropped: `EvalInbox`); evaluations still in flight when the
run ends are dropped. The evaluators' call
does not block (``block=False``): a pull of the evaluation branch submits the evaluation and
answers not ready until its result has landed, so the driver never waits for an evaluation
while training could go on (before, it waited for each one: 0.71 of the throughput without
evaluation; docs/design-notes.md).

Seeds: the n-th evaluation of a run (n = iteration // interval - 1, counted from 0) seeds its
env's first reset with ``config.seed + EVAL_SEED_OFFSET + n * episodes`` (the later episodes
continue that env's RNG), far from the training workers' seeds; ``rxrl eval CKPT --seed S
--episodes N`` runs the same episodes (`greedy_episodes`), so it gives the same returns for a
checkpoint of an evaluated iteration. The seed depends neither on ``k`` nor on which evaluator
ran it.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

import rxrl
from rxrl import ops
from rxrl.algos import Algorithm, Snapshot, get
from rxrl.algos.common import RolloutSettings
from rxrl.ready import NOT_READY, NotReady
from rxrl.training.spelling import option

#: evaluation seeds start this far above the config's seed (training seeds its workers with
#: ``(seed, i)``)
EVAL_SEED_OFFSET = 10_000
#: the algorithms evaluation during training supports (single-agent, one learner with a policy)
SUPPORTED = ("ppo", "a2c", "a3c", "ddppo", "impala", "appo", "dqn", "apex", "sac")
#: the columns `EvalResult.as_row` adds to a run's rows
COLUMNS = ("eval/return_mean", "eval/return_std", "eval/return_min", "eval/return_max",
           "eval/length_mean", "eval/episodes", "eval/iteration", "eval/env_steps", "eval/seed")


class PolicyMismatch(ValueError):
    """A learner state whose policy does not load into the policy its config builds."""


# ------------------------------------------------------------------------------ settings


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


@attrs.frozen
class Evaluation:
    """Evaluation settings: every ``interval`` iterations, ``episodes`` greedy episodes on one
    of ``workers`` evaluator actors (ValueError, one line, for bad values)."""

    interval: int
    workers: int = 1
    episodes: int = 10

    def __attrs_post_init__(self) -> None:
        _count(option("--eval-interval", "evaluation_interval"), self.interval, 1)
        _count(option("--eval-workers", "evaluation_workers"), self.workers, 1)
        _count(option("--eval-episodes", "evaluation_episodes"), self.episodes, 1)

    def seed(self, config: RolloutSettings, iteration: int) -> int:
        """The first env seed of the evaluation of ``iteration`` (see the module docstring)."""
        return config.seed + EVAL_SEED_OFFSET + (iteration // self.interval - 1) * self.episodes

    def due(self, iteration: int) -> bool:
        """Whether ``iteration`` (counted from 1) is evaluated."""
        return iteration % self.interval == 0


def evaluation_settings(interval: int | None, workers: int = 1, episodes: int = 10) -> Evaluation | None:
    """`Evaluation` from ``rxrl train``'s options; None when ``interval`` is 0 or None (off).

    >>> evaluation_settings(0) is None, evaluation_settings(5).episodes
    (True, 10)
    """
    if interval is None or (not isinstance(interval, bool) and interval == 0):
        _count(option("--eval-workers", "evaluation_workers"), workers, 1)
        _count(option("--eval-episodes", "evaluation_episodes"), episodes, 1)
        return None
    _count(option("--eval-interval", "evaluation_interval"), interval, 0)
    return Evaluation(interval, workers, episodes)


def check_supported(algo: Algorithm) -> None:
    """Raise ValueError (one line) unless evaluation during training supports ``algo``."""
    if algo.name not in SUPPORTED:
        raise ValueError(f"evaluation during training does not support {algo.name!r}; "
                         f"it supports {', '.join(SUPPORTED)}")


# -------------------------------------------------------------------------- greedy policy


def greedy_policy(algo: Algorithm, config: RolloutSettings,
                  learner_state: Mapping[str, Any]) -> Callable[..., Any]:
    """The greedy ``act(obs_batch, deterministic=True) -> (actions, _, _)`` of a learner state
    (a checkpoint's, or ``{"policy": ...}``): the algorithm's own (`Algorithm.greedy`: DQN's
    argmax Q, SAC's mean action) or else the config's actor-critic.

    The code path of ``rxrl eval`` and of the `Evaluator`. Raises `PolicyMismatch` (a
    ValueError) when the state does not load; ValueError for a multi-agent algorithm.
    """
    if algo.greedy is not None:
        try:
            return algo.greedy(config, learner_state)
        except ValueError as e:
            raise PolicyMismatch(str(e)) from e
    if algo.evaluate is not None:
        raise ValueError(f"{algo.name} has no single greedy policy (its policies are per agent)")
    policy = load_actor_critic(algo, config, learner_state)
    if policy.core is not None:
        return RecurrentActing(policy)
    act: Callable[..., Any] = policy.act
    return act


class RecurrentActing:
    """A recurrent policy's ``act(obs_batch, deterministic)``: carries its state from call to
    call, zeroed at the first call and after `reset` (an episode's start; `greedy_episodes`
    calls it before each episode)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.state: np.ndarray[Any, Any] | None = None

    def reset(self) -> None:
        """Forget the state: the next call starts an episode."""
        self.state = None

    def __call__(self, obs: np.ndarray[Any, Any], deterministic: bool = False) -> tuple[Any, Any, Any]:
        """``(actions, logp, values)``, as a stateless policy's ``act``."""
        if self.state is None or len(self.state) != len(obs):
            self.state = np.zeros((len(obs), self.policy.config.state_size), np.float32)
        actions, logp, values, self.state = self.policy.act_recurrent(obs, self.state, deterministic)
        return actions, logp, values


def load_actor_critic(algo: Algorithm, config: RolloutSettings, learner_state: Mapping[str, Any]) -> Any:
    """The config's actor-critic (`rxrl.rl.models.policy.ActorCritic`) with a learner state's
    policy loaded; `PolicyMismatch` when it does not fit."""
    from rxrl.algos.common import env_spaces
    from rxrl.rl.models.policy import make_policy  # torch: only for this

    spaces = env_spaces(config, algo.name)
    policy = make_policy(spaces.observation, spaces.action, config.policy, config.seed)
    try:
        policy.load_state_dict(learner_state["policy"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise PolicyMismatch(f"the policy does not fit its config "
                             f"({' '.join(str(e).split())[:200]})") from e
    return policy


def env_actions(space: Any, actions: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A policy's batch of actions as the env takes them: a Box's clipped to its bounds, a
    Discrete's shifted by its ``start`` (what ``rxrl eval`` steps the env with, and what an
    exported policy outputs)."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Box):
        clipped: np.ndarray[Any, Any] = np.clip(actions, space.low, space.high)
        return clipped
    if isinstance(space, gym.spaces.Discrete):
        return np.asarray(actions, dtype=np.int64) + int(space.start)
    return np.asarray(actions)


def greedy_episodes(env_id: str, env_kwargs: Mapping[str, Any], act: Callable[..., Any],
                    episodes: int, seed: int) -> tuple[list[float], list[int]]:
    """Returns and lengths of ``episodes`` episodes of ``act(obs_batch, deterministic=True)``
    on one env, seeded ``seed`` at its first reset (the later resets continue its RNG).

    The env is built for evaluation (`rxrl.envs.vector.make_env`): an Atari episode is a whole
    game with the game's rewards, its return the raw score."""
    import gymnasium as gym  # the driver of a run imports it only once it evaluates

    from rxrl.envs.vector import make_env

    env: Any = make_env(env_id, env_kwargs, training=False)
    space = env.action_space
    returns: list[float] = []
    lengths: list[int] = []
    reset = getattr(act, "reset", None)  # a recurrent policy's state: zeroed every episode
    try:
        obs, _ = env.reset(seed=seed)
        while len(returns) < episodes:
            if reset is not None:
                reset()
            total, steps, done = 0.0, 0, False
            while not done:
                actions, _, _ = act(np.asarray(obs)[None], deterministic=True)
                action = env_actions(space, actions)[0]
                if isinstance(space, gym.spaces.Discrete):
                    action = int(action)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                steps += 1
                done = bool(terminated or truncated)
            returns.append(total)
            lengths.append(steps)
            obs, _ = env.reset()
    finally:
        env.close()
    return returns, lengths


# ------------------------------------------------------------------------------ results


@attrs.frozen
class EvalResult:
    """One evaluation: the greedy episodes' returns and lengths, and what it evaluated (the
    training iteration and env steps, counted from this run's start until the Trainer offsets
    them), with its first env seed."""

    iteration: int
    env_steps: int
    seed: int
    episodes: int
    return_mean: float
    return_std: float
    return_min: float
    return_max: float
    length_mean: float
    time_s: float

    @staticmethod
    def of(returns: list[float], lengths: list[int], iteration: int, env_steps: int, seed: int,
           time_s: float = 0.0) -> EvalResult:
        """The result of the episodes ``returns``/``lengths``."""
        r = np.asarray(returns, dtype=np.float64)
        return EvalResult(iteration, env_steps, seed, len(returns), float(r.mean()), float(r.std()),
                          float(r.min()), float(r.max()), float(np.mean(lengths)), time_s)

    def as_row(self) -> dict[str, float]:
        """The `COLUMNS` of a run's row."""
        return {"eval/return_mean": self.return_mean, "eval/return_std": self.return_std,
                "eval/return_min": self.return_min, "eval/return_max": self.return_max,
                "eval/length_mean": self.length_mean, "eval/episodes": float(self.episodes),
                "eval/iteration": float(self.iteration), "eval/env_steps": float(self.env_steps),
                "eval/seed": float(self.seed)}

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (summary.json's ``"evaluation"``)."""
        return {k: (round(v, 4) if isinstance(v, float) and math.isfinite(v) else v)
                for k, v in attrs.asdict(self).items()}


def empty_row() -> dict[str, float]:
    """The `COLUMNS` before the first evaluation: NaN."""
    return dict.fromkeys(COLUMNS, math.nan)


# ------------------------------------------------------------------------------- actors


@attrs.frozen(eq=False)
class EvalRequest:
    """An iteration to evaluate: its counters, first seed, episodes and (once the learner
    attached them) the policy weights ``{"policy": state_dict}``."""

    iteration: int
    env_steps: int
    seed: int
    episodes: int
    state: Mapping[str, Any] | None = None


class Evaluator:
    """An actor that runs greedy episodes of a learner state's policy (`greedy_policy`)."""

    def __init__(self, algo: str, config: RolloutSettings) -> None:
        self.algo, self.config = get(algo), config
        # what the first evaluation would otherwise pay for (torch's import, the env's module),
        # paid while the run starts: an evaluation that does not block training should not
        # take seconds longer the first time
        import rxrl.rl.models.policy  # noqa: F401 - torch, and the policies' code
        from rxrl.envs.vector import make_env

        env: Any = make_env(config.env, config.env_kwargs, training=False)  # gymnasium's close() is untyped
        env.close()

    def evaluate(self, state: Mapping[str, Any], episodes: int, seed: int, iteration: int = 0,
                 env_steps: int = 0) -> EvalResult:
        """``episodes`` greedy episodes of ``state``'s policy, the env seeded ``seed`` first."""
        began = time.perf_counter()
        act = greedy_policy(self.algo, self.config, state)
        returns, lengths = greedy_episodes(self.config.env, self.config.env_kwargs, act, episodes, seed)
        return EvalResult.of(returns, lengths, iteration, env_steps, seed, time.perf_counter() - began)


def run_request(evaluator: Evaluator, request: EvalRequest) -> EvalResult:
    """On an evaluator: the evaluation of ``request`` (its policy attached)."""
    assert request.state is not None, "the learner attaches the policy before the evaluator"
    return evaluator.evaluate(request.state, request.episodes, request.seed, request.iteration,
                              request.env_steps)


def attach_policy(learner: Any, request: EvalRequest) -> EvalRequest:
    """On the learner: its policy weights (a copy) on a request that has none yet."""
    if request.state is not None:
        return request
    return attrs.evolve(request, state={"policy": _copy(learner.state_dict()["policy"])})


def _copy(state: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.detach().clone() if hasattr(v, "detach") else v) for k, v in state.items()}


class EvalInbox:
    """A driver-hosted actor between the main branch and the evaluation branch: `offer` (the
    main branch's call, per record) queues a request for every evaluated iteration; `take`
    (the evaluation branch's source) hands them out in order, ``NOT_READY`` while none waits;
    at most ``evaluation.workers`` wait (older ones are dropped when evaluation falls behind).

    So the evaluation branch only ever sees records the main branch has already passed on: it
    never pulls training ahead of the Trainer (a ``split`` branch would).
    """

    def __init__(self, evaluation: Evaluation, config: RolloutSettings) -> None:
        self.evaluation, self.config = evaluation, config
        #: at most one request waits per evaluator: when evaluation falls behind training, the
        #: oldest waiting request is dropped (the newest policy is the one worth evaluating),
        #: so the queue never grows without bound and training is never held back
        self.queue: deque[EvalRequest] = deque(maxlen=evaluation.workers)

    def offer(self, snapshot: Snapshot) -> Snapshot:
        """Queue a request if ``snapshot``'s iteration is evaluated (with a due snapshot's
        checkpoint policy); ``snapshot`` passes on."""
        m = snapshot.metrics
        if self.evaluation.due(m.iteration):
            state = None
            if snapshot.state is not None and "policy" in snapshot.state:
                state = {"policy": snapshot.state["policy"]}
            self.queue.append(EvalRequest(m.iteration, m.env_steps_sampled,
                                          self.evaluation.seed(self.config, m.iteration),
                                          self.evaluation.episodes, state))
        return snapshot

    def take(self) -> EvalRequest | NotReady:
        """The oldest queued request, or ``NOT_READY``."""
        return self.queue.popleft() if self.queue else NOT_READY


def evaluators(algo: Algorithm, config: RolloutSettings,
               evaluation: Evaluation) -> rxrl.ActorGroup[Evaluator]:
    """The ``evaluation.workers`` evaluator actors."""
    return rxrl.actors(Evaluator, evaluation.workers, algo.name, config)


def with_evaluation(snapshots: rxrl.Plan[Snapshot], learner: rxrl.ActorGroup[Any], algo: Algorithm,
                    config: RolloutSettings, evaluation: Evaluation) -> rxrl.Plan[Snapshot | EvalResult]:
    """``snapshots`` (a training plan's) and, beside them, the `EvalResult` of every
    ``evaluation.interval``-th iteration (see the module docstring)."""
    check_supported(algo)
    inbox = rxrl.actors(EvalInbox, 1, evaluation, config).on_driver()
    k = evaluation.workers
    main: rxrl.Plan[Snapshot | EvalResult] = snapshots | ops.call(inbox, EvalInbox.offer)
    results = (rxrl.from_actors(inbox, EvalInbox.take) | ops.gather()
               | ops.call(learner, attach_policy, max_in_flight=k)
               | ops.call(evaluators(algo, config, evaluation), run_request, max_in_flight=k,
                          block=False))
    return ops.union(main, results, mode="async")


__all__ = [
    "COLUMNS", "EVAL_SEED_OFFSET", "SUPPORTED", "EvalInbox", "EvalRequest", "EvalResult",
    "Evaluation", "Evaluator", "PolicyMismatch", "attach_policy", "check_supported", "empty_row",
    "RecurrentActing", "env_actions", "evaluation_settings", "evaluators", "greedy_episodes", "greedy_policy",
    "load_actor_critic", "run_request", "with_evaluation",
]
