"""V-trace algorithms: IMPALA and APPO, and what they share (`common`)."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    """The names of ``rxrl.algos.vtrace.common``, which was ``rxrl.algos.vtrace``
    before algorithms were grouped by family (PEP 562: imported when first named)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module("rxrl.algos.vtrace.common"), name)
