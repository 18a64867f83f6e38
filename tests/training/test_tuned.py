"""Tuned settings per env: an env's own entry, else the first pattern (``"ALE/*"``) that
matches it, applied before ``--set`` (`rxrl.algos.spec.Algorithm.tuned_for`)."""

from __future__ import annotations

import pytest

from rxrl.algos import MODULES, get
from rxrl.algos.configs import with_settings
from rxrl.algos.on_policy import ppo
from rxrl.training.setup import prepare


def test_an_env_s_own_entry_comes_before_a_pattern_and_no_match_is_no_settings() -> None:
    spec = get("ppo")
    assert spec.tuned_for("ALE/Pong-v5") is ppo.ATARI
    assert spec.tuned_for("MinAtar/Breakout-v1") is ppo.MINATAR
    assert spec.tuned_for("Hopper-v5") is ppo.MUJOCO
    assert spec.tuned_for("CartPole-v1") == {}
    assert spec.tuned_for("ALE") == {} and spec.tuned_for("xALE/Pong-v5") == {}


@pytest.mark.parametrize("algo", sorted(MODULES))
def test_every_tuned_entry_is_a_valid_config_of_its_algorithm(algo: str) -> None:
    """A misspelt path or a bad value in ``TUNED`` would fail only when a user picks that env."""
    spec = get(algo)
    for env, settings in spec.tuned.items():
        config = with_settings(spec.config(), dict(settings))
        assert isinstance(config, spec.config), env


def test_rxrl_train_applies_the_atari_pattern_with_the_budget_and_set_on_top() -> None:
    pytest.importorskip("ale_py")
    setup = prepare("ppo", env="ALE/Pong-v5", steps=5_000, settings={"learner.ent_coef": 0.0})
    config = setup.config
    assert isinstance(config, ppo.PPO)
    assert config.learner.lr == ppo.ATARI["learner.lr"] and config.learner.clip_coef == 0.1
    assert config.num_envs_per_worker == 4 and config.fragment_length == 128
    assert config.lr_decay_steps == 5_000  # the schedule spans the run's budget
    assert config.learner.ent_coef == 0.0  # --set comes last
