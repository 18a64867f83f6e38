"""Experiment trackers as loggers: Weights & Biases and MLflow (optional extras)."""

from __future__ import annotations

from collections.abc import Mapping

from rxrl.training.loggers import RunInfo


class WandbLogger:
    """Weights & Biases (``pip install -e ".[wandb]"``)."""

    def __init__(self, run: RunInfo) -> None:
        raise ImportError("the wandb logger is not built yet")

    def write(self, row: Mapping[str, float], step: int) -> None:
        """Log one row."""

    def close(self) -> None:
        """Finish the run."""


class MLflowLogger:
    """MLflow (``pip install -e ".[mlflow]"``)."""

    def __init__(self, run: RunInfo) -> None:
        raise ImportError("the mlflow logger is not built yet")

    def write(self, row: Mapping[str, float], step: int) -> None:
        """Log one row."""

    def close(self) -> None:
        """End the run."""


__all__ = ["MLflowLogger", "WandbLogger"]
