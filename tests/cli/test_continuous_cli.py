"""Continuous control through the console script: ``rxrl train sac`` (train, checkpoint with
the replay, resume, eval, show, replay, plot, bad input) and PPO's running normalization carried
through a checkpoint into ``rxrl eval``; MuJoCo's settings and the one-line error without it."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rxrl.algos.common import env_spaces
from rxrl.algos.qlearning.sac import SAC
from rxrl.cli import main
from rxrl.cli.tools import episode_returns
from rxrl.rl import make_policy
from rxrl.training.checkpoint import load_checkpoint
from tests.cli.helpers import console_script, environment, rxrl_cli

#: a small SAC: 32x32 nets, learning from 300 transitions on, 16 updates of 64 rows per call
SMALL_SAC = ["--set", "learner.hidden_sizes=32,32", "--set", "learner.replay.learning_starts=300",
             "--set", "learner.replay.batch_size=64", "--set", "updates_per_call=16"]
NORMALIZING = ["--set", "policy.normalize_obs=true", "--set", "policy.scale_rewards=true",
               "--set", "train_batch_size=512", "--set", "num_envs_per_worker=2",
               "--set", "fragment_length=64", "--set", "minibatch_size=256", "--set", "num_epochs=2"]
HAS_MUJOCO = importlib.util.find_spec("mujoco") is not None


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short SAC run on the reference backend, with a trace, checkpointed every 600 steps."""
    out = tmp_path_factory.mktemp("runs") / "sac"
    done = rxrl_cli("train", "sac", "--backend", "reference", "--steps", "1200", "--seed", "1",
                    "--out", out, "--trace", out.parent / "sac.trace.json", "--checkpoint-every", "600",
                    *SMALL_SAC)
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout
    return out


def test_a_sac_checkpoint_holds_the_learner_the_replay_and_the_env_steps(sac_run: Path) -> None:
    ckpt = load_checkpoint(sac_run)
    state = ckpt.learner_state
    assert {"policy", "critic", "critic_target", "log_alpha", "optimizer", "replay",
            "env_steps_sampled"} <= set(state)
    assert state["env_steps_sampled"] == ckpt.counters.env_steps_sampled >= 1200
    (shard,) = state["replay"]
    assert shard["buffer"]["num_added"] >= ckpt.counters.env_steps_sampled
    assert isinstance(ckpt.config, SAC) and ckpt.config.env == "Pendulum-v1"
    assert ckpt.config.learner.hidden_sizes == (32, 32)
    rows = list(csv.DictReader((sac_run / "metrics.csv").open()))
    assert {"train/alpha", "train/q_mean"} <= set(rows[0])  # SAC's own report columns
    assert float(rows[-1]["train/alpha"]) < 1.0  # the temperature was tuned down from 1


def test_resume_continues_with_the_replay_and_without_random_steps_again(sac_run: Path,
                                                                         tmp_path: Path) -> None:
    ckpt = load_checkpoint(sac_run)
    out = tmp_path / "resumed"
    done = rxrl_cli("train", "sac", "--backend", "reference", "--steps", "1500", "--resume", sac_run,
                    "--out", out)
    assert done.returncode == 0, done.stderr
    first = next(csv.DictReader((out / "metrics.csv").open()))
    # the restored replay is past learning_starts: the first call follows the first round
    assert int(first["env_steps_sampled"]) - ckpt.counters.env_steps_sampled <= 64
    again = load_checkpoint(out).learner_state
    assert again["replay"][0]["buffer"]["num_added"] > ckpt.learner_state["replay"][0]["buffer"]["num_added"]
    assert again["num_updates"] > ckpt.learner_state["num_updates"]


def test_eval_runs_the_actors_mean_action(sac_run: Path) -> None:
    done = rxrl_cli("eval", sac_run, "--episodes", "2")
    assert done.returncode == 0, done.stderr
    assert "sac Pendulum-v1: mean return" in done.stdout and "over 2 greedy episodes" in done.stdout


def test_replay_reproduces_the_recorded_sac_run(sac_run: Path) -> None:
    done = rxrl_cli("replay", sac_run.parent / "sac.trace.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: all" in done.stdout


def test_plot_draws_the_sac_run(sac_run: Path, tmp_path: Path) -> None:
    done = rxrl_cli("plot", sac_run, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "learning_curves.png").stat().st_size > 1000


def test_show_prints_the_sac_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "sac"]) == 0
    out = capsys.readouterr().out
    assert "call(SACLearner×1, train_on_batches" in out and "from_actors(SACRolloutWorker×2" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--env", "CartPole-v1"], "sac does not support the action space Discrete(2) of CartPole-v1"),
    (["--set", "gamma=0.9"], "SAC.gamma does not apply to SAC: set learner.gamma"),
    (["--set", "learner.tau=2"], "SACConfig.tau must be in (0, 1]"),
])
def test_bad_sac_input_is_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    done = rxrl_cli("train", "sac", "--backend", "reference", "--steps", "100", "--out",
                    tmp_path / "bad", *args)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_ppo_normalization_travels_through_the_checkpoint_into_eval(tmp_path: Path) -> None:
    """The checkpoint's policy holds the statistics merged from every trained row, and
    ``rxrl eval`` acts with them: its returns equal those of the checkpoint's policy, not
    those of the same weights with the statistics reset."""
    out = tmp_path / "ppo"
    done = rxrl_cli("train", "ppo", "--env", "Pendulum-v1", "--backend", "reference", "--steps", "1024",
                    "--out", out, *NORMALIZING)
    assert done.returncode == 0, done.stderr
    ckpt = load_checkpoint(out)
    policy_state = ckpt.learner_state["policy"]
    assert float(policy_state["normalizer.obs_count"]) == ckpt.counters.env_steps_trained == 1024
    assert float(policy_state["normalizer.return_var"]) > 100  # Pendulum's returns: hundreds
    shown = rxrl_cli("eval", out, "--episodes", "2", "--seed", "5")
    assert shown.returncode == 0, shown.stderr
    match = re.search(r"mean return (-?[\d.]+)", shown.stdout)
    assert match, shown.stdout
    spaces = env_spaces(ckpt.config, "ppo")
    policy = make_policy(spaces.observation, spaces.action, ckpt.config.policy, ckpt.config.seed)
    policy.load_state_dict(policy_state)
    ours = float(np.mean(episode_returns("Pendulum-v1", {}, policy.act, 2, 5)))
    assert abs(ours - float(match.group(1))) < 0.06  # printed to one decimal
    assert policy.normalizer is not None
    policy.normalizer.obs_mean.zero_()
    policy.normalizer.obs_var.fill_(1.0)
    reset = float(np.mean(episode_returns("Pendulum-v1", {}, policy.act, 2, 5)))
    assert abs(reset - ours) > 1.0


@pytest.mark.skipif(not HAS_MUJOCO, reason="MuJoCo is not installed (pip install -e '.[mujoco]')")
def test_ppo_on_a_mujoco_env_takes_cleanrls_settings_and_decays_its_lr_over_the_budget(
        tmp_path: Path) -> None:
    out = tmp_path / "hopper"
    done = rxrl_cli("train", "ppo", "--env", "Hopper-v5", "--backend", "reference", "--steps", "4096",
                    "--out", out, "--set", "num_epochs=1")
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["policy"]["normalize_obs"] and config["policy"]["scale_rewards"]
    assert config["lr_decay_steps"] == 4096 and config["fragment_length"] == 1024
    assert config["learner"]["minibatch_size"] == 64
    state = load_checkpoint(out).learner_state
    # set before each batch of 2048: 3e-4 at 0 steps trained, half of it at 2048
    assert state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(1.5e-4)
    assert float(state["policy"]["normalizer.obs_count"]) == 4096
    # a resume with a larger budget stretches the schedule over it (else the lr would be 0 for
    # the whole extension): at 4096 of 6144 steps, a third of the initial lr
    done = rxrl_cli("train", "ppo", "--resume", out, "--backend", "reference", "--steps", "6144")
    assert done.returncode == 0, done.stderr
    resumed = load_checkpoint(out)
    assert resumed.config.lr_decay_steps == 6144  # type: ignore[attr-defined]
    assert resumed.learner_state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(1e-4)
    assert float(resumed.learner_state["policy"]["normalizer.obs_count"]) == 6144


def test_a_mujoco_env_without_mujoco_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    """Run with a ``mujoco`` module that fails to import first on the path."""
    blocker = tmp_path / "block" / "mujoco"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('MuJoCo blocked by a test')\n")
    env = environment()
    env["PYTHONPATH"] = os.pathsep.join([str(blocker.parent), env["PYTHONPATH"]])
    for algo in ("ppo", "sac"):
        done = subprocess.run([console_script(), "train", algo, "--env", "Hopper-v5", "--steps", "10",
                               "--out", str(tmp_path / algo)], capture_output=True, text=True,
                              env=env, timeout=120, stdin=subprocess.DEVNULL)
        assert done.returncode != 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert 'Hopper-v5 needs MuJoCo, which is not installed here: pip install -e ".[mujoco]"' in lines[0]
