"""Q-learning algorithms from replay: DQN, Ape-X, SAC, and what they share (`common`, `steps`)."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    """The names of ``rxrl.algos.qlearning.common``, which was ``rxrl.algos.qlearning``
    before algorithms were grouped by family (PEP 562: imported when first named)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module("rxrl.algos.qlearning.common"), name)
