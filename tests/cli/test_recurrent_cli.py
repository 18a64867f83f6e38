"""Recurrent policies through the console script: a Ray run traced and replayed exactly, stateful
``rxrl eval`` equal to a plain rollout of the checkpoint, resume, show, and the one-line errors."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rxrl.envs  # noqa: F401  (registers rxrl/StatelessCartPole-v0)
from rxrl.algos.common import env_spaces
from rxrl.algos.on_policy.ppo import PPO
from rxrl.cli import main
from rxrl.rl import make_policy
from rxrl.training.checkpoint import load_checkpoint
from tests.cli.helpers import rxrl_cli

ENV = "rxrl/StatelessCartPole-v0"
SMALL = ["--set", "policy.recurrent=gru", "--set", "policy.recurrent_size=16",
         "--set", "policy.sequence_length=16", "--set", "num_envs_per_worker=2",
         "--set", "fragment_length=32", "--set", "train_batch_size=128",
         "--set", "learner.minibatch_size=64", "--set", "learner.num_epochs=2"]


@pytest.fixture(scope="module")
def gru_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short recurrent PPO run on the default (Ray) backend, traced and checkpointed."""
    out = tmp_path_factory.mktemp("runs") / "gru"
    done = rxrl_cli("train", "ppo", "--env", ENV, "--steps", "1500", "--seed", "3", "--out", out,
                    "--trace", out.parent / "gru.trace.json", "--checkpoint-every", "500", *SMALL)
    assert done.returncode == 0, done.stderr
    return out


def test_a_traced_ray_run_of_a_recurrent_policy_replays_exactly(gru_run: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads((gru_run.parent / "gru.trace.json").read_text())
    assert doc["trace"]["backend"] == "ray"
    assert main(["replay", str(gru_run.parent / "gru.trace.json")]) == 0
    out = capsys.readouterr().out
    assert f"identical: all {len(doc['records'])} recorded iterations reproduced exactly" in out


def greedy_returns(run: Path, episodes: int, seed: int) -> list[float]:
    """The checkpoint's greedy episodes rolled out plainly: the GRU's state carried from step
    to step and zeroed at each episode's start."""
    ckpt = load_checkpoint(run)
    assert isinstance(ckpt.config, PPO)
    spaces = env_spaces(ckpt.config, "ppo")
    policy = make_policy(spaces.observation, spaces.action, ckpt.config.policy, 0)
    policy.load_state_dict(ckpt.learner_state["policy"])
    env = gym.make(ENV)
    returns = []
    obs, _ = env.reset(seed=seed)
    for _ in range(episodes):
        state = np.zeros((1, policy.config.state_size), np.float32)
        total, done = 0.0, False
        while not done:
            action, _, _, state = policy.act_recurrent(np.asarray(obs)[None], state, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action[0]))
            total, done = total + float(reward), bool(terminated or truncated)
        returns.append(total)
        obs, _ = env.reset()
    return returns


def test_eval_rolls_the_recurrent_policy_out_with_its_state(gru_run: Path) -> None:
    done = rxrl_cli("eval", gru_run, "--episodes", "3", "--seed", "5")
    assert done.returncode == 0, done.stderr
    match = re.search(r"mean return ([\d.]+)", done.stdout)
    assert match, done.stdout
    assert float(match.group(1)) == pytest.approx(np.mean(greedy_returns(gru_run, 3, 5)), abs=0.05)


def test_resume_continues_a_recurrent_run(gru_run: Path, tmp_path: Path) -> None:
    before = load_checkpoint(gru_run)
    out = tmp_path / "resumed"
    done = rxrl_cli("train", "ppo", "--resume", gru_run, "--out", out, "--steps", "2000", "--backend", "rx")
    assert done.returncode == 0, done.stderr
    after = load_checkpoint(out)
    assert isinstance(after.config, PPO) and after.config.policy.recurrent == "gru"
    assert after.learner_state["num_updates"] > before.learner_state["num_updates"]
    with (out / "metrics.csv").open(newline="") as f:
        first = next(csv.DictReader(f))
    assert int(first["iteration"]) == before.counters.iteration + 1


def test_show_names_the_sequence_dataflow(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "a2c", "--env", ENV, "--set", "policy.recurrent=lstm"]) == 0
    out = capsys.readouterr().out
    assert "from_actors(RolloutWorker×2, RolloutWorker.sample_sequences)" in out
    assert "train_on_sequences" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["train", "dqn", "--set", "policy.recurrent=lstm"],
     "DQN does not support policy.recurrent='lstm' (recurrent policies train with: ppo, a2c, impala, appo)"),
    (["train", "impala", "--set", "policy.recurrent=lstm", "--set", "policy.sequence_length=16"],
     "IMPALA.policy.sequence_length (16) must be unset or fragment_length (32)"),
    (["train", "ppo", "--set", "policy.recurrent=rnn"], "policy.recurrent"),
    (["train", "ppo", "--set", "policy.recurrent=lstm", "--set", "policy.sequence_length=48"],
     "PPO.policy.sequence_length (48) must divide fragment_length (64)"),
])
def test_bad_recurrent_settings_are_one_line_errors(argv: list[str], message: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("rxrl train: error: bad --set: ") and message in err, err


def test_export_writes_a_recurrent_policy_with_its_state(gru_run: Path, tmp_path: Path) -> None:
    """``rxrl export`` of a recurrent run writes the actor's step, its state an input and an
    output, and says so (the actions themselves: tests/training/test_export.py)."""
    done = rxrl_cli("export", gru_run, "--format", "torchscript", "--out", tmp_path / "p.pt")
    assert done.returncode == 0, done.stderr
    assert "state [B, 16] float32 -> greedy env actions, next state" in done.stdout
    assert (tmp_path / "p.pt").stat().st_size > 0
