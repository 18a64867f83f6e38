"""Old import paths of moved modules: ``import rxrl.rl.worker`` still gives the module that now
lives at ``rxrl.rl.workers.rollout`` (the same module object, not a copy).

The modules were laid out by concept in December 2026 (docs/design-notes.md, "The layout");
code written against the old paths keeps running. Type checkers follow the new paths only.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

#: old module path -> where the module lives now
MOVED: dict[str, str] = {
    "rxrl.rl.batch": "rxrl.rl.data.batch",
    "rxrl.rl.fragment": "rxrl.rl.data.fragment",
    "rxrl.rl.transitions": "rxrl.rl.data.transitions",
    "rxrl.rl.multiagent": "rxrl.rl.data.multiagent",
    "rxrl.rl.metrics": "rxrl.rl.data.metrics",
    "rxrl.rl.ma_metrics": "rxrl.rl.data.ma_metrics",
    "rxrl.rl.normalize": "rxrl.rl.data.running_stats",
    "rxrl.rl.reply": "rxrl.rl.workers.reply",
    "rxrl.rl.forward": "rxrl.rl.models.forward",
    "rxrl.rl.policy": "rxrl.rl.models.policy",
    "rxrl.rl.qnet": "rxrl.rl.models.qnet",
    "rxrl.rl.normalizer": "rxrl.rl.models.normalizer",
    "rxrl.rl.initial": "rxrl.rl.models.initial",
    "rxrl.rl.gae": "rxrl.rl.objectives.gae",
    "rxrl.rl.losses": "rxrl.rl.objectives.losses",
    "rxrl.rl.sumtree": "rxrl.rl.replay.sumtree",
    "rxrl.rl.shard": "rxrl.rl.replay.shard",
    "rxrl.rl.nstep": "rxrl.rl.replay.nstep",
    "rxrl.rl.worker": "rxrl.rl.workers.rollout",
    "rxrl.rl.qworker": "rxrl.rl.workers.qworker",
    "rxrl.rl.ma_worker": "rxrl.rl.workers.multi_agent",
    "rxrl.rl.learner": "rxrl.rl.learners.actor_critic",
    "rxrl.rl.impala": "rxrl.rl.learners.vtrace",
    "rxrl.rl.dqn": "rxrl.rl.learners.dqn",
    "rxrl.rl.sac": "rxrl.rl.learners.sac",
    "rxrl.rl.maml": "rxrl.rl.learners.maml",
    "rxrl.rl.ma_learner": "rxrl.rl.learners.multi_agent",
    "rxrl.rl.adam": "rxrl.rl.learners.adam",
    "rxrl.rl.env": "rxrl.envs.vector",
    "rxrl.algos.ppo": "rxrl.algos.on_policy.ppo",
    "rxrl.algos.a2c": "rxrl.algos.on_policy.a2c",
    "rxrl.algos.a3c": "rxrl.algos.on_policy.a3c",
    "rxrl.algos.impala": "rxrl.algos.vtrace.impala",
    "rxrl.algos.appo": "rxrl.algos.vtrace.appo",
    "rxrl.algos.dqn": "rxrl.algos.qlearning.dqn",
    "rxrl.algos.apex": "rxrl.algos.qlearning.apex",
    "rxrl.algos.sac": "rxrl.algos.qlearning.sac",
    "rxrl.algos.qsteps": "rxrl.algos.qlearning.steps",
    "rxrl.algos.two_trainer": "rxrl.algos.multi_agent.two_trainer",
    "rxrl.algos.maml": "rxrl.algos.meta.maml",
    "rxrl.cli_run": "rxrl.training.checkpoint",
    "rxrl.cli_log": "rxrl.training.loggers",
    "rxrl.cli_machine": "rxrl.training.machine",
    "rxrl.cli_signals": "rxrl.training.interrupts",
    "rxrl.cli_train": "rxrl.cli.train",
    "rxrl.cli_tools": "rxrl.cli.tools",
}


class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of `MOVED` and loads it as the module at the new path."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old path, None for every other name."""
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The module at the new path (imported if it is not yet)."""
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing: the module ran when it was imported at its new path."""


def install() -> None:
    """Put the `AliasFinder` on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(AliasFinder())


__all__ = ["MOVED", "AliasFinder", "install"]
