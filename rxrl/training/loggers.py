"""Where a run's records go: one `Logger` protocol; metrics.csv, TensorBoard, Weights & Biases
and MLflow behind it, chosen by name (``loggers=("csv", "tensorboard")``, ``--logger``).

Every logger gets the same rows (`Metrics.as_row`, counted from the first run's start) with
env steps sampled as the step, and is opened at the first row: a run that fails to start
leaves nothing behind. A run resumed in its own directory continues its loggers' files,
first cut back to the checkpoint it starts from (rows after it are trained again).
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

import attrs

from rxrl.training.checkpoint import Counters, MetricsRepair, repair_metrics

if TYPE_CHECKING:  # imported when the first row is written: it takes a while
    from tensorboardX import SummaryWriter

#: metrics columns written as integers
COUNTS = frozenset({"iteration", "env_steps_sampled", "env_steps_trained", "episodes",
                    "train/env_steps_trained", "train/num_updates"})
#: what `rxrl.train` and ``rxrl train`` log to unless told otherwise
DEFAULT_LOGGERS = ("csv", "tensorboard")


@attrs.frozen
class RunInfo:
    """What a logger knows of its run: the directory, the algorithm, its config as a dict, and
    the counters of the checkpoint it resumes in place (None: a new run, or one resumed into a
    new directory)."""

    out: Path
    algo: str
    config: Mapping[str, Any]
    resumed: Counters | None = None
    stream: IO[str] = sys.stderr
    #: the metrics row of the checkpoint resumed in place, when it holds one
    resumed_row: Mapping[str, float] | None = None

    @property
    def name(self) -> str:
        """The run's name: its directory's."""
        return self.out.name


class Logger(Protocol):
    """Takes a run's records, one row per iteration."""

    def write(self, row: Mapping[str, float], step: int) -> None:
        """Log one row; ``step`` is the env steps sampled so far (the x axis)."""

    def close(self) -> None:
        """Flush and let go of what was opened (a logger never opened closes as a no-op)."""


def csv_row(row: Mapping[str, float]) -> dict[str, float]:
    """``row`` as metrics.csv holds it: the counts as integers."""
    return {k: int(v) if k in COUNTS else v for k, v in row.items()}


class CSVLogger:
    """metrics.csv, one row per iteration, flushed at once (a killed run's file ends with a whole
    row, or a torn one the next resume removes).

    Resumed in place, it continues the directory's metrics.csv after cutting it back to the
    checkpoint's rows (and without a torn last row): `repair` says what was cut.
    """

    def __init__(self, run: RunInfo) -> None:
        self.run = run
        self.path = run.out / "metrics.csv"
        self.repair: MetricsRepair | None = None
        self._file: IO[str] | None = None
        self._csv: csv.DictWriter[str] | None = None

    def _open(self, row: Mapping[str, float]) -> csv.DictWriter[str]:
        header = list(row)
        if self.run.resumed is not None:
            saved = self.run.resumed_row
            self.repair = repair_metrics(self.path, self.run.resumed.iteration,
                                         None if saved is None else csv_row(saved))
        if self.repair is not None:
            r = self.repair
            if r.dropped or r.torn or r.restored:
                what = [f"{r.dropped} later row(s) dropped"] if r.dropped else []
                what += ["a torn last row removed"] if r.torn else []
                what += ["the checkpoint's own row put back"] if r.restored else []
                print(f"resuming: metrics.csv cut back to the checkpoint's {r.kept} rows "
                      f"({', '.join(what)})", file=self.run.stream)
            header = r.header
        self._file = self.path.open("a" if self.repair is not None else "w", newline="")
        writer = csv.DictWriter(self._file, fieldnames=header, extrasaction="ignore", restval="")
        if self.repair is None:
            writer.writeheader()
        return writer

    def write(self, row: Mapping[str, float], step: int) -> None:
        """Append ``row`` (counts as integers) and flush."""
        if self._csv is None:
            self._csv = self._open(row)
        self._csv.writerow(csv_row(row))
        assert self._file is not None
        self._file.flush()

    def close(self) -> None:
        """Close the file (if opened)."""
        if self._file is not None:
            self._file.close()
            self._file = None


class TensorBoardLogger:
    """TensorBoard scalars under ``tb/``; resumed in place, the events past the checkpoint's
    step are purged."""

    def __init__(self, run: RunInfo) -> None:
        self.run = run
        self._tb: SummaryWriter | None = None

    def write(self, row: Mapping[str, float], step: int) -> None:
        """One scalar per finite column (but the step and the iteration)."""
        if self._tb is None:
            from tensorboardX import SummaryWriter

            purge = None if self.run.resumed is None else self.run.resumed.env_steps_sampled + 1
            self._tb = SummaryWriter(logdir=str(self.run.out / "tb"), purge_step=purge)
        for key, value in row.items():
            if key not in ("iteration", "env_steps_sampled") and math.isfinite(value):
                self._tb.add_scalar(key, value, global_step=step)

    def close(self) -> None:
        """Flush and close the event file (if opened)."""
        if self._tb is not None:
            self._tb.close()
            self._tb = None


#: logger name -> factory; `register_logger` adds one
LOGGERS: dict[str, Callable[[RunInfo], Logger]] = {
    "csv": CSVLogger,
    "tensorboard": TensorBoardLogger,
}


def _wandb(run: RunInfo) -> Logger:
    from rxrl.training.tracking import WandbLogger

    return WandbLogger(run)


def _mlflow(run: RunInfo) -> Logger:
    from rxrl.training.tracking import MLflowLogger

    return MLflowLogger(run)


LOGGERS["wandb"] = _wandb
LOGGERS["mlflow"] = _mlflow


def register_logger(name: str, factory: Callable[[RunInfo], Logger]) -> None:
    """Make ``factory`` selectable as ``name`` (``loggers=(name,)``, ``--logger name``)."""
    if not name or "," in name:
        raise ValueError(f"a logger name must be a non-empty word, got {name!r}")
    LOGGERS[name] = factory


LoggerSpec = str | Callable[[RunInfo], Logger]


def check_loggers(loggers: Sequence[LoggerSpec]) -> None:
    """Refuse an unknown logger name in one line that lists the known ones, and a tracker whose
    library is missing (ImportError naming the extra)."""
    for spec in loggers:
        if isinstance(spec, str) and spec not in LOGGERS:
            raise ValueError(f"unknown logger {spec!r}; choose from {sorted(LOGGERS)}")
        if spec in ("wandb", "mlflow"):  # its library, looked up before anything starts
            from rxrl.training.tracking import require

            require(spec)


def make_loggers(loggers: Sequence[LoggerSpec], run: RunInfo) -> list[Logger]:
    """The loggers named (or built by the factories given) for ``run``."""
    check_loggers(loggers)
    return [LOGGERS[spec](run) if isinstance(spec, str) else spec(run) for spec in loggers]


__all__ = ["COUNTS", "DEFAULT_LOGGERS", "LOGGERS", "CSVLogger", "Logger", "LoggerSpec", "RunInfo",
           "TensorBoardLogger", "check_loggers", "csv_row", "make_loggers", "register_logger"]
