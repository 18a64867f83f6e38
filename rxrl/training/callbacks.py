"""Callbacks: code of the user's that a training run calls at its start, at each record, at
each checkpoint and at its end, in that order, on the driver.

Subclass `Callback` and override what you need; pass instances as ``callbacks=[...]`` to
`rxrl.train` / `rxrl.Trainer`. ``on_iteration`` gets each record after the loggers wrote it
(the same rows metrics.csv gets); ``on_checkpoint`` gets the learner state the checkpoint file
holds, after it was written. An exception in a callback ends the run (a
``KeyboardInterrupt`` first checkpoints, see `rxrl.Trainer.run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rxrl.rl.data.metrics import Metrics

if TYPE_CHECKING:
    from rxrl.training.trainer import Trainer, TrainResult


class Callback:
    """The hooks of a run; each does nothing unless overridden."""

    def on_start(self, trainer: Trainer) -> None:
        """The run has been set up (config, run directory, plan), before its first record."""

    def on_iteration(self, trainer: Trainer, record: Metrics) -> None:
        """A record (counted from the first run's start), after the loggers wrote it."""

    def on_checkpoint(self, trainer: Trainer, path: Path, record: Metrics,
                      state: Mapping[str, Any]) -> None:
        """A checkpoint of ``record``'s iteration was written to ``path``; ``state`` is the
        learner state it holds."""

    def on_end(self, trainer: Trainer, result: TrainResult) -> None:
        """The run ended (completed, reached its target, interrupted or failed), after
        summary.json was written."""


__all__ = ["Callback"]
