"""Custom per-episode metrics (``episode_metrics``): computed on the workers, reported as
``custom/<name>`` columns."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from rxrl.rl.data.episode_metrics import EpisodeMetricsRecorder, env_info, join
from rxrl.rl.data.metrics import EpisodeStats, MetricsAccumulator
from rxrl.rl.workers.rollout import RolloutWorker

FN = "tests.rl.episode_metrics_fns:fn"


def test_env_info_splits_vector_infos_per_env() -> None:
    infos = {"x": np.array([1, 2]), "_x": np.array([False, True]),
             "episode": {"r": np.array([3.0, 4.0]), "_r": np.array([True, True])},
             "_episode": np.array([True, False])}
    assert env_info(infos, 0) == {"episode": {"r": 3.0}}
    assert env_info(infos, 1) == {"x": 2}


def test_same_step_reads_final_info() -> None:
    rec = EpisodeMetricsRecorder(lambda info: {"k": float(info["k"])})
    infos = {"final_info": {"k": np.array([0.0, 7.0]), "_k": np.array([False, True])}}
    rec.record(infos, np.array([1]), True, np.array([1.0]), np.array([5]))
    assert rec.take()["k"].tolist() == [7.0]


@pytest.mark.parametrize("same_step", [False, True])
def test_rollout_sample_carries_values_that_match_the_episodes(same_step: bool) -> None:
    vector_kwargs = {"autoreset_mode": AutoresetMode.SAME_STEP} if same_step else None
    worker = RolloutWorker("CartPole-v1", num_envs=4, fragment_length=64, seed=1,
                           vectorization_mode="sync" if same_step else None,
                           vector_kwargs=vector_kwargs, episode_metrics=FN, weights=None)
    batch = worker.sample()
    assert len(batch.episode_returns) > 0
    assert set(batch.episode_metrics) == {"length_seen", "env_info_keys"}
    np.testing.assert_array_equal(batch.episode_metrics["length_seen"], batch.episode_lengths)
    # an independent computation: CartPole's return is its length (reward 1 per step)
    np.testing.assert_array_equal(batch.episode_metrics["length_seen"], batch.episode_returns)
    fragment = worker.sample_fragment()
    np.testing.assert_array_equal(fragment.batch.episode_metrics["length_seen"],
                                  fragment.batch.episode_lengths)
    worker.close()


def test_without_the_setting_there_is_nothing() -> None:
    worker = RolloutWorker("CartPole-v1", num_envs=2, fragment_length=64, seed=0)
    assert worker.sample().episode_metrics == {}
    acc = MetricsAccumulator()
    assert not any(k.startswith("custom/") for k in acc.record().as_row())


def test_accumulator_windows_and_declares() -> None:
    acc = MetricsAccumulator(window=2, custom_names=["a"])
    first = acc.record().as_row()
    assert math.isnan(first["custom/a"])
    acc.observe_episodes(EpisodeStats(np.ones(3, np.float32), np.ones(3, np.int64), 3,
                                      {"a": np.array([1.0, 2.0, 4.0]), "b": np.array([np.nan] * 3)}))
    row = acc.record().as_row()
    assert row["custom/a"] == 3.0 and math.isnan(row["custom/b"])


def test_join_fills_missing_names_with_nan() -> None:
    out = join([({"a": np.array([1.0])}, 1), ({}, 2)])
    assert out["a"][0] == 1.0 and np.isnan(out["a"][1:]).all()


@pytest.mark.parametrize("name, match", [
    ("tests.rl.no_such_module:fn", "cannot import module"),
    ("tests.rl.episode_metrics_fns:missing", "has no"),
    ("tests.rl.episode_metrics_fns:not_callable", "not callable"),
    ("no_colon", "module:function"),
])
def test_a_bad_name_is_refused_naming_the_setting(name: str, match: str) -> None:
    from rxrl.algos.on_policy.ppo import PPO

    with pytest.raises(ValueError, match=match) as e:
        PPO(episode_metrics=name)
    assert "PPO.episode_metrics" in str(e.value) and "\n" not in str(e.value)


def test_cli_style_setting_parses_as_a_string() -> None:
    from rxrl.algos.configs import from_dict, parse_assignment, to_dict, with_settings
    from rxrl.algos.on_policy.ppo import PPO

    key, value = parse_assignment(f"episode_metrics={FN}")
    config = with_settings(PPO(), {key: value})
    assert config.episode_metrics == FN
    assert from_dict(PPO, to_dict(config)).episode_metrics == FN


def _columns(run: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return list(rows[0]), rows


def test_ppo_run_writes_custom_columns(tmp_path: Path) -> None:
    from rxrl.training.trainer import Trainer

    Trainer("ppo", tmp_path / "r", backend="reference", steps=3000,
            settings={"num_workers": 1, "episode_metrics": "tests.rl.episode_metrics_fns:declared"},
            loggers=["csv"], handle_signals=False).run()
    header, rows = _columns(tmp_path / "r")
    assert [h for h in header if h.startswith("custom/")] == ["custom/length_seen"]
    assert all(float(r["custom/length_seen"]) == pytest.approx(float(r["episode_length_mean"]))
               for r in rows)


def test_dqn_run_writes_custom_columns(tmp_path: Path) -> None:
    from rxrl.training.trainer import Trainer

    Trainer("dqn", tmp_path / "r", backend="reference", steps=1500,
            settings={"episode_metrics": FN, "learner.replay.learning_starts": 200},
            loggers=["csv"], handle_signals=False).run()
    header, rows = _columns(tmp_path / "r")
    assert {"custom/length_seen", "custom/env_info_keys"} <= set(header)
    assert float(rows[-1]["custom/length_seen"]) == pytest.approx(float(rows[-1]["episode_length_mean"]))
