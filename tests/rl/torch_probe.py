"""Run on a rollout worker by tests/rl/test_forward.py: whether its process has imported torch.
This module imports nothing that imports torch."""

from __future__ import annotations

import sys
from typing import Any


def torch_loaded(worker: Any, seen: object) -> list[bool]:
    """``seen`` (the results of the probes before this one, if any) and whether this process
    has torch loaded."""
    before = list(seen) if isinstance(seen, list) else []
    return [*before, "torch" in sys.modules]


class To:
    """A ``route`` to actor ``index`` (`rxrl.algos.qlearning.common.Fixed`, which would import torch)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __call__(self, _: object) -> int:
        return self.index
