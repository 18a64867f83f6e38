"""``rxrl train ma-ppo | two-trainer | maml``: runs, per-agent metrics, both learners checkpointed
and resumed, a trace replayed, and bad input (an env that is not multi-agent, a mapping to an
unknown policy) in one line; ``rxrl eval`` of their checkpoints."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import pytest

from rxrl.cli import main
from rxrl.training import Trainer
from rxrl.training.checkpoint import load_checkpoint
from tests.cli.helpers import metrics_rows, rxrl_cli

SMALL_TWO_TRAINER = [
    "--set", "num_envs_per_worker=2", "--set", "fragment_length=8", "--set", "train_batch_size=64",
    "--set", "dqn.replay.learning_starts=32", "--set", "dqn.replay.batch_size=16",
    "--set", "dqn_steps_per_call=2", "--set", "dqn.training_intensity=4", "--set", "ppo.num_epochs=1",
    "--set", "ppo.minibatch_size=32"]


def _header(run: Path) -> list[str]:
    with (run / "metrics.csv").open(newline="") as f:
        return next(csv.reader(f))


def _stored(run: Path) -> int:
    """The transitions the DQN policy's replay had stored at the run's checkpoint."""
    replay = load_checkpoint(run).learner_state["dqn_replay"]
    return int(replay["shards"]["cartpole_1"]["buffer"]["num_added"])


def test_two_trainer_on_rx_writes_per_agent_metrics_and_replays_exactly(tmp_path: Path) -> None:
    out, trace = tmp_path / "tt", tmp_path / "tt.trace.json"
    done = rxrl_cli("train", "two-trainer", "--backend", "rx", "--steps", "1200", "--out", out,
                    "--trace", trace, "--checkpoint-every", "600", *SMALL_TWO_TRAINER)
    assert done.returncode == 0, done.stderr
    header = _header(out)
    for column in ("agent/cartpole_0/episode_return_mean", "agent/cartpole_1/episode_return_mean",
                   "episode_total_return_mean", "agent_steps_sampled", "train/cartpole_1/value_loss"):
        assert column in header
    state = load_checkpoint(out).learner_state
    assert sorted(state["learners"]) == ["cartpole_0"] and sorted(state["dqn"]["learners"]) == ["cartpole_1"]
    replayed = rxrl_cli("replay", trace)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "reproduced exactly" in replayed.stdout


def test_a_two_trainer_run_resumes_both_learners_and_its_replay(tmp_path: Path) -> None:
    out = tmp_path / "tt"
    assert main(["train", "two-trainer", "--backend", "reference", "--steps", "640", "--out", str(out),
                 *SMALL_TWO_TRAINER]) == 0
    first = json.loads((out / "summary.json").read_text())
    first_stored = _stored(out)
    assert first_stored > 0
    assert main(["train", "two-trainer", "--backend", "reference", "--steps", "1280", "--resume", str(out),
                 *SMALL_TWO_TRAINER]) == 0
    second = json.loads((out / "summary.json").read_text())
    assert second["env_steps_sampled"] >= 1280 > first["env_steps_sampled"]
    state = load_checkpoint(out).learner_state
    assert state["dqn"]["learners"]["cartpole_1"]["num_updates"] > 0
    # the replay went through the checkpoint: the resumed run added to it, not to an empty one
    assert _stored(out) > 1.5 * first_stored
    done = rxrl_cli("eval", out, "--episodes", "2")  # PPO's mean actions and DQN's argmax together
    assert done.returncode == 0, done.stderr
    assert "two-trainer MultiCartPole-v0: mean return" in done.stdout
    assert "over 2 greedy episodes" in done.stdout
    assert "per agent: cartpole_0" in done.stdout and "cartpole_1" in done.stdout
    assert "as in training" in done.stdout and "total per episode" in done.stdout


def test_ma_ppo_trains_on_a_real_pettingzoo_env(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mpe"
    assert main(["train", "ma-ppo", "--backend", "reference", "--env", "mpe2.simple_speaker_listener_v4",
                 "--set", "env_kwargs={\"continuous_actions\": false}", "--set", "num_envs_per_worker=2",
                 "--set", "fragment_length=25", "--set", "train_batch_size=100", "--set", "minibatch_size=50",
                 "--steps", "300", "--out", str(out)]) == 0
    columns = {"agent/speaker_0/episode_return_mean", "agent/listener_0/episode_return_mean"}
    assert columns <= set(_header(out))
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "2"]) == 0  # two heterogeneous policies, greedily
    printed = capsys.readouterr().out
    assert "ma-ppo mpe2.simple_speaker_listener_v4: mean return" in printed
    assert "speaker_0" in printed and "listener_0" in printed


CASES = {
    "a single-agent env for a multi-agent algorithm": (
        ["train", "ma-ppo", "--env", "CartPole-v1"],
        "rxrl train: error: ma-ppo needs a multi-agent env: 'CartPole-v1' is a single-agent gymnasium env"),
    "a mapping to an unknown policy id": (
        ["train", "ma-ppo", "--set", "policies=a,b"],
        "rxrl train: error: ma-ppo on MultiCartPole-v0: the policy mapping maps agent 'cartpole_0' to "
        "policy 'cartpole_0', which is not one of the policies ['a', 'b']"),
    "an unknown mapping": (
        ["train", "ma-ppo", "--set", "policy_mapping=every-agent"],
        "rxrl train: error: bad --set: MultiAgentPPO.policy_mapping must be 'independent', 'shared' or "
        "'module:function', got 'every-agent'"),
    "a DQN policy the env has not": (
        ["train", "two-trainer", "--set", "dqn_policies=nope"],
        "rxrl train: error: two-trainer: dqn_policies names ['nope'], which are not policies of "
        "MultiCartPole-v0"),
    "no policy left to PPO": (
        ["train", "two-trainer", "--set", "dqn_policies=cartpole_0,cartpole_1"],
        "rxrl train: error: two-trainer: every policy (['cartpole_0', 'cartpole_1']) is in dqn_policies"),
    "a split lag below one": (
        ["train", "two-trainer", "--set", "max_lag=0"],
        "rxrl train: error: bad --set: TwoTrainer.max_lag must be an integer >= 1"),
    "maml on an env without tasks": (
        ["train", "maml", "--env", "CartPole-v1", "--backend", "reference"],
        "rxrl train: error: maml needs a task-distribution env"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line(case: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv, message = CASES[case]
    assert main([*argv, "--out", str(tmp_path / "never")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err, err
    assert not (tmp_path / "never" / "config.json").exists()


@pytest.mark.parametrize("algo", ["ma-ppo", "two-trainer", "maml"])
def test_show_prints_the_plans(algo: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", algo]) == 0
    out = capsys.readouterr().out
    assert "barrier()" in out and ("split(2" in out) == (algo == "two-trainer")


def _window(run: Path, since: int) -> tuple[int, int, int, int]:
    """From the first record at ``since`` env steps on: records, env steps sampled, env steps
    trained, and the longest streak of records that sampled nothing."""
    rows = metrics_rows(run)
    k = next(i for i, r in enumerate(rows) if int(r["env_steps_sampled"]) >= since)
    a, b = rows[k], rows[-1]
    streak = longest = 0
    for before, after in itertools.pairwise(rows[k:]):
        streak = streak + 1 if after["env_steps_sampled"] == before["env_steps_sampled"] else 0
        longest = max(longest, streak)
    return (len(rows) - 1 - k, int(b["env_steps_sampled"]) - int(a["env_steps_sampled"]),
            int(b["env_steps_trained"]) - int(a["env_steps_trained"]), longest)


def test_a_two_trainer_resume_keeps_its_training_intensity(tmp_path: Path) -> None:
    """Issue 27 item 1: resumed, the DQN branch does not replay one token per minibatch the
    replay ever stored (it trained for dozens of records while nothing was sampled): env steps
    per record and trained/sampled stay near an uninterrupted run's over the same env steps.

    Not exact: the driver's schedule (the round robin's phase, the rounds a split holds for
    the lagging branch) is not in a checkpoint, so the resumed part starts it afresh."""
    settings = {"dqn.replay.learning_starts": 256, "train_batch_size": 256}
    common = {"backend": "reference", "settings": settings, "loggers": ["csv"], "handle_signals": False}
    Trainer("two-trainer", tmp_path / "whole", steps=9000, checkpoint_every=10**9, **common).run()  # type: ignore[arg-type]
    Trainer("two-trainer", tmp_path / "cut", steps=3000, **common).run()  # type: ignore[arg-type]
    since = int(load_checkpoint(tmp_path / "cut").counters.env_steps_sampled)
    Trainer("two-trainer", resume=tmp_path / "cut", steps=9000, **common).run()  # type: ignore[arg-type]
    records, sampled, trained, streak = _window(tmp_path / "cut", since)
    w_records, w_sampled, w_trained, w_streak = _window(tmp_path / "whole", since)
    assert streak <= w_streak + 3  # a start-up transient of a few DQN calls, not dozens
    assert abs(sampled / records / (w_sampled / w_records) - 1) < 0.2
    assert abs(trained / sampled / (w_trained / w_sampled) - 1) < 0.3
