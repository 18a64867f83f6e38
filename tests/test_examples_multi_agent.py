"""The composition examples run: ``examples/two_trainer_mix.py`` and ``examples/interleaved.py``."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize("name", ["two_trainer_mix", "interleaved"])
def test_the_mix_examples_train_both_policies(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    main = runpy.run_path(str(ROOT / "examples" / f"{name}.py"))["main"]
    records = main("reference", records=40)
    out = capsys.readouterr().out
    assert "split(2, max_lag=1)" in out and "call(MultiReplay×1, store)" in out
    last = records[-1]
    assert set(last.policy_train) == {"cartpole_0", "cartpole_1"}
    assert last.agent_return_mean["cartpole_0"] > 1.2 * records[2].agent_return_mean["cartpole_0"]


def test_the_interleaved_rhythm_is_one_ppo_iteration_then_four_dqn_updates() -> None:
    main = runpy.run_path(str(ROOT / "examples" / "interleaved.py"))["main"]
    records = main("reference", records=30)
    kinds, last_dqn = [], None
    for r in records:  # a record closes on a new report of one of the two learners
        dqn = r.policy_train.get("cartpole_1")
        kinds.append("dqn" if dqn is not None and dqn is not last_dqn else "ppo")
        last_dqn = dqn
    started = kinds.index("dqn")
    assert started > 0 and set(kinds[:started]) == {"ppo"}  # DQN waits for learning_starts
    assert kinds[started:started + 10] == ["dqn"] * 4 + ["ppo"] + ["dqn"] * 4 + ["ppo"]
