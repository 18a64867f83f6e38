"""A metrics column is there only when the algorithm computes it (issue 27, item 9)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from rxrl.algos import MODULES
from rxrl.training import Trainer

#: settings that keep an iteration cheap on the reference backend
SMALL = {"maml": {"tasks_per_worker": 2, "num_envs_per_worker": 2}}
RECORDS = 4
#: algorithms whose computed columns need more records to move off 0: APPO's KL penalty keeps
#: its first four updates inside the clip range (clip fraction 0.0, then 0.03 at the fifth)
MORE_RECORDS = {"appo": 6}


@pytest.mark.parametrize("algo", sorted(MODULES))
def test_no_learner_column_is_a_constant_the_algorithm_does_not_compute(algo: str, tmp_path: Path) -> None:
    """Law: over a run's first records, no ``train/`` column of metrics.csv holds one constant
    0.0 or NaN in every row — DQN has no policy loss, entropy, KL or clip fraction column, SAC
    no KL or clip fraction, A2C/A3C no clip fraction, MAML no value loss or entropy — while
    the columns an algorithm computes are there."""
    trainer = Trainer(algo, tmp_path / "run", backend="reference", settings=SMALL.get(algo, {}),
                      steps=10**7, loggers=["csv"], handle_signals=False)
    trainer.start()
    try:
        for _ in range(MORE_RECORDS.get(algo, RECORDS)):
            trainer.step()
    finally:
        trainer.close()
    with open(tmp_path / "run" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == MORE_RECORDS.get(algo, RECORDS)
    train = [c for c in rows[0] if c.startswith("train/")]
    assert any(c.endswith("grad_norm") for c in train)  # a learner's columns are there
    for column in train:
        values = {float(r[column]) for r in rows}
        constant_zero = values == {0.0}
        all_nan = all(math.isnan(v) for v in values)
        assert not (constant_zero or all_nan), (algo, column, values)
