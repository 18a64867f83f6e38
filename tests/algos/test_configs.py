"""Algorithm configs: validation names the field; dict round trips; ``key=value`` settings."""

from __future__ import annotations

from typing import Any

import pytest

from rxrl.algos import ALGORITHMS, get
from rxrl.algos.configs import from_dict, parse_assignment, paths, resolve, to_dict, with_settings
from rxrl.algos.on_policy.a2c import A2C
from rxrl.algos.on_policy.a3c import A3C
from rxrl.algos.on_policy.ppo import PPO
from rxrl.algos.qlearning.common import QSettings
from rxrl.algos.qlearning.sac import SAC
from rxrl.rl import A2CConfig, PolicyConfig, PPOConfig


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"num_workers": 0}, "PPO.num_workers must be an integer >= 1, got 0"),
    ({"num_workers": True}, "PPO.num_workers must be an integer >= 1, got True"),
    ({"num_envs_per_worker": 2.5}, "PPO.num_envs_per_worker must be an integer >= 1, got 2.5"),
    ({"fragment_length": -3}, "PPO.fragment_length must be an integer >= 1, got -3"),
    ({"train_batch_size": 0}, "PPO.train_batch_size must be an integer >= 1, got 0"),
    ({"seed": -1}, "PPO.seed must be an integer >= 0, got -1"),
    ({"gamma": 1.5}, "PPO.gamma must be a number in [0.0, 1.0], got 1.5"),
    ({"lam": -0.1}, "PPO.lam must be a number in [0.0, 1.0], got -0.1"),
    ({"env": ""}, "PPO.env must be a gymnasium env id, got ''"),
    ({"env_kwargs": {1: 2}}, "PPO.env_kwargs must be a mapping with str keys"),
    ({"policy": "big"}, "PPO.policy must be a PolicyConfig, got 'big'"),
    ({"learner": A2CConfig()}, "PPO.learner must be a PPOConfig"),
    ({"learner": PPOConfig(minibatch_size=4096)},
     "PPO.learner.minibatch_size (4096) must not exceed PPO.train_batch_size (1024)"),
])
def test_a_bad_ppo_setting_is_an_error_naming_the_field(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        PPO(**kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize(("cls", "kwargs", "message"), [
    (A2C, {"learner": PPOConfig()}, "A2C.learner must be a A2CConfig"),
    (A2C, {"num_workers": -1}, "A2C.num_workers must be an integer >= 1"),
    (A3C, {"max_in_flight": 0}, "A3C.max_in_flight must be an integer >= 1, got 0"),
    (A3C, {"learner_threads": 0}, "A3C.learner_threads must be an integer >= 1, got 0"),
])
def test_a_bad_a2c_or_a3c_setting_is_an_error_naming_the_field(
        cls: type[Any], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        cls(**kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_a_config_survives_a_round_trip_through_a_dict(name: str) -> None:
    cls = get(name).config
    # Q-learning and SAC have no actor-critic policy: their networks are the learner's
    net = "learner.q_net" if issubclass(cls, QSettings) else "learner" if cls is SAC else "policy"
    config = with_settings(cls(), {f"{net}.hidden_sizes": [32], "env_kwargs": {"max_episode_steps": 9},
                                   "seed": 7})
    data = to_dict(config)
    for part in net.split("."):
        data = data[part]
    assert data["hidden_sizes"] == [32]  # JSON-able: tuples become lists
    data = to_dict(config)
    assert from_dict(cls, data) == config
    assert from_dict(cls, {}) == cls()


def test_settings_take_dotted_paths_and_unique_bare_names() -> None:
    config = with_settings(PPO(), {"learner.clip_coef": 0.1, "lr": 3e-4, "hidden_sizes": 32,
                                   "activation": "relu", "target_kl": None, "train_batch_size": 2e3})
    assert config.learner.clip_coef == 0.1 and config.learner.lr == 3e-4
    assert config.policy == PolicyConfig(hidden_sizes=(32,), activation="relu")
    assert config.train_batch_size == 2000 and isinstance(config.train_batch_size, int)
    assert resolve(PPO, "num_epochs") == "learner.num_epochs"
    assert "policy.init_log_std" in paths(PPO) and "learner.lr" in paths(A3C)


@pytest.mark.parametrize(("settings", "message"), [
    ({"lrr": 1}, "unknown setting 'lrr' for PPO; did you mean 'learner.lr'?"),
    ({"bogus_thing": 1}, "unknown setting 'bogus_thing' for PPO; known settings: ['env', "),
    ({"seed": 1.5}, "seed must be int, got 1.5"),
    ({"learner.clip_vloss": 1}, "learner.clip_vloss must be bool, got 1"),
    ({"activation": "sigmoid"}, "policy.activation must be one of ['tanh', 'relu'], got 'sigmoid'"),
    ({"lr": -1}, "learner: 'lr' must be > 0.0"),
    ({"hidden_sizes": [64, "x"]}, "policy.hidden_sizes[1] must be int, got 'x'"),
    ({"learner": 3}, "learner must be a mapping, got 3"),
    ({"num_workers": 0}, "PPO.num_workers must be an integer >= 1, got 0"),
])
def test_a_bad_setting_is_an_error_naming_it(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        with_settings(PPO(), settings)
    assert message in str(info.value)


def test_an_ambiguous_bare_name_is_refused() -> None:
    # `lr` is unique, but a name that two nested configs share is not
    from rxrl.algos import configs

    with pytest.raises(ValueError, match="ambiguous"):
        configs.resolve(_TwoNested, "lr")


@pytest.mark.parametrize(("text", "expected"), [
    ("lr=0.001", ("lr", 0.001)),
    ("num_workers=4", ("num_workers", 4)),
    ("policy.hidden_sizes=[32, 32]", ("policy.hidden_sizes", [32, 32])),
    ("hidden_sizes=32,32", ("hidden_sizes", [32, 32])),
    ("clip_vloss=false", ("clip_vloss", False)),
    ("clip_vloss=True", ("clip_vloss", True)),
    ("target_kl=None", ("target_kl", None)),
    ("activation=relu", ("activation", "relu")),
    (" env = Pendulum-v1 ", ("env", "Pendulum-v1")),
    ('env_kwargs={"g": 9.8}', ("env_kwargs", {"g": 9.8})),
])
def test_parse_assignment_reads_json_or_a_string(text: str, expected: tuple[str, Any]) -> None:
    assert parse_assignment(text) == expected


@pytest.mark.parametrize("text", ["lr", "=3", ""])
def test_parse_assignment_refuses_text_without_key_and_value(text: str) -> None:
    with pytest.raises(ValueError, match="expected key=value"):
        parse_assignment(text)


import attrs  # noqa: E402 - a config class for the ambiguity test only


@attrs.frozen
class _TwoNested:
    a: PPOConfig = attrs.field(factory=PPOConfig)
    b: A2CConfig = attrs.field(factory=A2CConfig)
