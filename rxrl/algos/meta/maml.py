"""MAML: workers adapt the meta-policy to tasks of their own; the learner takes the meta-update."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import attrs
import numpy as np
import torch

import rxrl
from rxrl import ops
from rxrl.actors import ActorGroup
from rxrl.algos.common import (
    IterationSample,
    RolloutSettings,
    Start,
    device_of,
    env_spaces,
    for_workers,
    hosted,
    instance_of,
    int_at_least,
    placed,
    registered_id,
    times,
)
from rxrl.algos.spec import Algorithm
from rxrl.envs import TASK_ENVS, TaskEnv
from rxrl.rl import Metrics, MetricsAccumulator, PolicyConfig, TrainMetrics
from rxrl.rl.learners.maml import MAMLConfig, MAMLLearner, MAMLWorker, TaskBatch
from rxrl.rl.models.policy import Weights

#: a Gaussian policy whose initial actions are not mostly clipped (Navigation2D's steps are <= 0.1)
POLICY = PolicyConfig(hidden_sizes=(64, 64), init_log_std=-1.0)


@attrs.frozen(kw_only=True)
class MAML(RolloutSettings):
    """Model-agnostic meta-learning (Finn et al., 2017) with a policy-gradient inner step.

    ``env`` is a task-distribution env (`rxrl.envs.TASK_ENVS`: ``rxrl/Navigation2D-v0``).
    Each iteration every one of ``num_workers`` workers draws ``tasks_per_worker`` tasks
    and, per task, samples ``num_envs_per_worker`` episodes with the meta-policy, adapts a
    copy by one inner step (``maml.inner_lr``), and samples as many episodes after it; the
    learner takes the meta-update (``maml``) on all the tasks' batches, and the new
    meta-policy reaches every worker before its next tasks. ``fragment_length`` is not used
    (an episode is the env's horizon). ``maml.meta_gradient=false`` trains PPO on the task
    mixture instead, with the same data: the baseline.
    """

    env: str = attrs.field(default="rxrl/Navigation2D-v0")
    num_envs_per_worker: int = attrs.field(default=20, validator=int_at_least(1))
    tasks_per_worker: int = attrs.field(default=10, validator=int_at_least(1))
    policy: PolicyConfig = attrs.field(default=POLICY, validator=instance_of(PolicyConfig))
    maml: MAMLConfig = attrs.field(factory=MAMLConfig, validator=instance_of(MAMLConfig))

    @property
    def batch_rows(self) -> int:
        """Env steps one iteration samples: every task's episodes, before and after adaptation."""
        return 2 * self.num_workers * self.tasks_per_worker * self.num_envs_per_worker * horizon(self)

    def iteration_sample(self) -> IterationSample:
        """Every task's episodes, before and after adaptation (``fragment_length`` is not used)."""
        return IterationSample(self.batch_rows, times(
            (self.num_workers, "workers"), (self.tasks_per_worker, "tasks"),
            (self.num_envs_per_worker, "episodes"), (horizon(self), "steps"),
            (2, "passes, before and after adaptation")),
            ("num_workers", "tasks_per_worker", "num_envs_per_worker"))


def task_env(config: MAML, seed: int, worker_index: int) -> TaskEnv:
    """The task env of ``config``: ``num_envs_per_worker`` episodes per task, tasks seeded
    from ``(seed, worker_index)``; ValueError if ``config.env`` has no task distribution."""
    name = registered_id(config.env)
    make = TASK_ENVS.get(name)
    if make is None:
        raise ValueError(f"maml needs a task-distribution env (sample_tasks / set_task); {config.env!r} "
                         f"is not one: choose one of {sorted(TASK_ENVS)}")
    return make(num_envs=config.num_envs_per_worker, seed=int(np.random.SeedSequence([seed, worker_index])
                                                                 .generate_state(1)[0]), **config.env_kwargs)


def horizon(config: MAML) -> int:
    """The env's episode length."""
    return task_env(config, 0, 0).horizon


@attrs.frozen
class MAMLWorkerFactory:
    """``index -> MAMLWorker``, picklable; ``start`` gives the workers a checkpoint's meta-policy."""

    config: MAML
    start: Start | None = attrs.field(default=None, converter=for_workers)

    def __call__(self, index: int) -> MAMLWorker:
        c = self.config
        reseed = self.start.reseed if self.start is not None else 0
        worker = MAMLWorker(task_env(c, c.seed + 7919 * reseed, index), c.maml, c.tasks_per_worker, c.policy,
                            seed=c.seed, worker_index=index + 1000 * reseed)
        if self.start is not None:
            worker.set_weights(self.start.weights())
        return worker


@attrs.frozen
class MAMLLearnerFactory:
    """``index -> MAMLLearner``, picklable; restores ``start``."""

    config: MAML
    start: Start | None = None

    def __call__(self, index: int) -> MAMLLearner:
        c = self.config
        torch.set_num_threads(c.learner_threads)
        learner = MAMLLearner(registered_id(c.env), c.maml, c.policy, seed=c.seed, env_kwargs=c.env_kwargs,
                              device=device_of(c))
        if self.start is not None:
            learner.load_state_dict(self.start.learner_state)
        return learner


@attrs.frozen
class MAMLGroups:
    """The actors: MAML workers and the meta-learner (``learner``, what ``rxrl train`` checkpoints)."""

    workers: ActorGroup[MAMLWorker]
    learner: ActorGroup[MAMLLearner]


def groups(config: MAML, start: Start | None = None) -> MAMLGroups:
    """``num_workers`` MAML workers and one `MAMLLearner`."""
    env_spaces(config, "maml")
    task_env(config, config.seed, 0)  # a task-distribution env, or one line saying it is not
    workers = rxrl.indexed_actors(MAMLWorkerFactory(config, start), config.num_workers, name="MAMLWorker")
    learner = hosted(rxrl.indexed_actors(MAMLLearnerFactory(config, start), 1, name="MAMLLearner"), config)
    return MAMLGroups(placed(workers, config.placement.workers), placed(learner, config.placement.learner))


@attrs.frozen(eq=False)
class MetaUpdated:
    """The learner's reply: its report, the new meta-weights, and the returns before/after adaptation."""

    metrics: TrainMetrics
    weights: Weights
    pre_returns: np.ndarray[Any, np.dtype[np.float32]]
    post_returns: np.ndarray[Any, np.dtype[np.float32]]
    env_steps: int


def meta_update(learner: MAMLLearner, rounds: list[list[TaskBatch]]) -> MetaUpdated:
    """On the learner: the meta-update from every worker's task batches (rows stay here)."""
    tasks = [tb for batches in rounds for tb in batches]
    report = learner.meta_update(tasks)
    pre = np.concatenate([tb.pre.episode_returns for tb in tasks])
    post = np.concatenate([tb.post.episode_returns for tb in tasks])
    steps = sum(tb.pre.env_steps + tb.post.env_steps for tb in tasks)
    return MetaUpdated(report, learner.get_weights(), pre, post, steps)


def set_meta_weights(worker: MAMLWorker, reply: MetaUpdated) -> None:
    """Load the new meta-policy into ``worker``."""
    worker.set_weights({k: np.array(v) for k, v in reply.weights.items()})


@attrs.frozen
class MAMLMetrics(Metrics):
    """`Metrics` whose returns are post-adaptation episodes', plus this iteration's mean
    return before (``pre_adaptation_return``) and after (``post_adaptation_return``) the inner step."""

    pre_adaptation_return: float = float("nan")
    post_adaptation_return: float = float("nan")

    def as_row(self) -> dict[str, float]:
        """`Metrics.as_row` with the two adaptation returns."""
        return {**super().as_row(), "pre_adaptation_return": self.pre_adaptation_return,
                "post_adaptation_return": self.post_adaptation_return}


class Progress(MetricsAccumulator):
    """Driver side: post-adaptation episodes count as the run's returns."""

    def observe_update(self, reply: MetaUpdated) -> MAMLMetrics:
        """Close an iteration with the learner's reply."""
        self._returns.extend(reply.post_returns.tolist())
        self._episodes += len(reply.post_returns)
        self._lengths.extend([reply.env_steps // (2 * len(reply.post_returns))] * len(reply.post_returns))
        self._sampled += reply.env_steps
        m = self.observe_train(reply.metrics)
        return MAMLMetrics(**attrs.asdict(m, recurse=False),
                           pre_adaptation_return=float(reply.pre_returns.mean()),
                           post_adaptation_return=float(reply.post_returns.mean()))


def plan(config: MAML, actors: MAMLGroups | None = None) -> rxrl.Plan[MAMLMetrics]:
    """MAML as a plan: one `MAMLMetrics` record per meta-update, forever."""
    g = actors or groups(config)
    progress = Progress()
    adapt: Callable[[MAMLWorker], list[TaskBatch]] = MAMLWorker.adapt_and_sample
    return (
        rxrl.from_actors(g.workers, adapt)          # per worker: its tasks, inner step, after-episodes
        | ops.barrier()                             # every worker's tasks, from one meta-policy
        | ops.call(g.learner, meta_update)          # the meta-gradient through the inner step
        | ops.broadcast(g.workers, set_meta_weights)  # the new meta-policy, before the next tasks
        | ops.map(progress.observe_update)          # MAMLMetrics
    )


#: settings that learn faster than the defaults on particular envs
TUNED: Mapping[str, Mapping[str, Any]] = {}

__all__ = ["SPEC", "MAML", "POLICY", "TUNED", "MAMLGroups", "MAMLLearnerFactory", "MAMLMetrics",
           "MAMLWorkerFactory",
           "MetaUpdated", "Progress", "groups", "horizon", "meta_update", "plan", "set_meta_weights",
           "task_env"]

#: what the registry reads (`rxrl.algos.ALGORITHMS`)
SPEC = Algorithm("maml", MAML, plan, cast(Any, groups), 12_000_000, TUNED,
                 "model-agnostic meta-learning (policy-gradient inner step on the workers)")
