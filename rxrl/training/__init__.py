"""Training as a library: `train` / `Trainer` own a run — its directory, checkpoints, resume,
trace, loggers, callbacks and summary; ``rxrl train`` is a thin command line over them.

Names load on first use (PEP 562): ``import rxrl`` stays free of torch and of the algorithms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rxrl._lazy import lazy_exports

if TYPE_CHECKING:
    from rxrl.training.callbacks import Callback
    from rxrl.training.checkpoint import Checkpoint, Counters, load_checkpoint
    from rxrl.training.loggers import CSVLogger, Logger, RunInfo, TensorBoardLogger, register_logger
    from rxrl.training.setup import Setup, prepare
    from rxrl.training.trainer import Trainer, TrainResult, train

#: where each public name lives
_MODULES: dict[str, str] = {
    "Callback": "rxrl.training.callbacks",
    "Checkpoint": "rxrl.training.checkpoint",
    "Counters": "rxrl.training.checkpoint",
    "load_checkpoint": "rxrl.training.checkpoint",
    "CSVLogger": "rxrl.training.loggers",
    "Logger": "rxrl.training.loggers",
    "RunInfo": "rxrl.training.loggers",
    "TensorBoardLogger": "rxrl.training.loggers",
    "register_logger": "rxrl.training.loggers",
    "Setup": "rxrl.training.setup",
    "prepare": "rxrl.training.setup",
    "TrainResult": "rxrl.training.trainer",
    "Trainer": "rxrl.training.trainer",
    "train": "rxrl.training.trainer",
}


__getattr__, __dir__ = lazy_exports("rxrl.training", _MODULES, globals())

__all__ = ["CSVLogger", "Callback", "Checkpoint", "Counters", "Logger", "RunInfo", "Setup",
           "TensorBoardLogger", "TrainResult", "Trainer", "load_checkpoint", "prepare",
           "register_logger", "train"]
