"""Comparing algorithm runs record by record (the replay plans' backend and replay tests)."""

from __future__ import annotations

from typing import Any

import rxrl
from rxrl import ops
from rxrl.rl import Metrics
from rxrl.training.checkpoint import deterministic_fields, same


def records(plan: rxrl.Plan[Metrics], n: int, backend: str = "reference", **options: Any
            ) -> tuple[list[dict[str, float]], rxrl.Trace]:
    """The exact fields of the first ``n`` records, and the run's trace."""
    with rxrl.run(plan | ops.take(n), backend, **options) as run:
        return [deterministic_fields(m) for m in run], run.trace


def identical(a: list[dict[str, float]], b: list[dict[str, float]]) -> bool:
    """The same records, NaN equal to NaN."""
    return len(a) == len(b) and all(x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
                                    for x, y in zip(a, b, strict=True))
