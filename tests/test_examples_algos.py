"""The algorithm examples run and learn: ``examples/ppo_cartpole.py``, ``examples/custom_plan.py``
and ``examples/sac_pendulum.py``."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def test_ppo_cartpole_example_prints_the_plan_and_learns(capsys: pytest.CaptureFixture[str]) -> None:
    main = runpy.run_path(str(ROOT / "examples" / "ppo_cartpole.py"))["main"]
    final = main("reference", steps=20_000)
    out = capsys.readouterr().out
    assert "| call(PPOLearner×1 on the driver, train_on_fragments)" in out
    assert "env steps   return" in out
    assert final >= 60  # a random policy averages ~22 on CartPole


def test_custom_plan_batches_per_worker_and_learns(capsys: pytest.CaptureFixture[str]) -> None:
    main = runpy.run_path(str(ROOT / "examples" / "custom_plan.py"))["main"]
    records = main("reference", iterations=12)
    out = capsys.readouterr().out
    assert "| window(2)  [×2 shards]\n| map(SampleBatch.concat)  [×2 shards]" in out
    # 2 workers x 2 fragments x 4 envs x 64 steps per update
    assert [m.env_steps_trained for m in records] == [1024 * (i + 1) for i in range(12)]
    assert records[-1].episode_return_mean > 2 * records[0].episode_return_mean


def test_sac_pendulum_example_trains_at_one_update_per_step_and_evaluates(
        capsys: pytest.CaptureFixture[str]) -> None:
    main = runpy.run_path(str(ROOT / "examples" / "sac_pendulum.py"))["main"]
    records, greedy = main("reference", steps=1_600)
    out = capsys.readouterr().out
    assert "| call(SACLearner×1, actor_weights)" in out and "greedy return over 5 episodes" in out
    # learning starts once 1k env steps are stored (16 rounds of 2 x 32); then one update of 256
    # rows per env step, to within the round a record may lead or lag by
    last = records[-1]
    assert last.env_steps_sampled >= 1_600 and last.env_steps_trained % 256 == 0
    assert abs(last.env_steps_trained // 256 - (last.env_steps_sampled - 1_024)) <= 64
    assert -2_000 < greedy < 0
