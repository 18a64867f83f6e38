"""Multi-agent algorithms on PettingZoo Parallel envs: multi-agent PPO and two trainers."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    """The names of ``rxrl.algos.multi_agent.ma_ppo``, which was ``rxrl.algos.multi_agent``
    before algorithms were grouped by family (PEP 562: imported when first named)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module("rxrl.algos.multi_agent.ma_ppo"), name)
