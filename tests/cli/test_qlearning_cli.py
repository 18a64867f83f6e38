"""``rxrl train dqn|apex`` end to end: checkpoints with the replay, ``--resume`` continuing it,
greedy ``eval``, ``replay`` of a trace, ``show``, and bad input as one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import attrs
import pytest
import torch

import rxrl
from rxrl.algos.common import Start
from rxrl.algos.qlearning.common import QWorkerFactory, ShardFactory
from rxrl.algos.qlearning.dqn import DQN
from rxrl.cli import main
from rxrl.training.checkpoint import load_checkpoint
from tests.cli.helpers import rxrl_cli

#: a small DQN: training from 500 transitions on, a 32x32 net, intensity 8
SMALL = ["--set", "learning_starts=500", "--set", "learner.q_net.hidden_sizes=32,32",
         "--set", "training_intensity=8"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short DQN run on the reference backend, with a trace, checkpointed every 1000 steps."""
    out = tmp_path_factory.mktemp("runs") / "dqn"
    done = rxrl_cli("train", "dqn", "--backend", "reference", "--steps", "2000", "--seed", "1", "--out", out,
                    "--trace", out.parent / "dqn.trace.json", "--checkpoint-every", "1000", *SMALL)
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout
    return out


def test_a_checkpoint_holds_the_learner_the_replay_and_the_env_steps(trained: Path) -> None:
    ckpt = load_checkpoint(trained)
    state = ckpt.learner_state
    assert {"policy", "target", "optimizer", "replay", "env_steps_sampled"} <= set(state)
    assert state["env_steps_sampled"] == ckpt.counters.env_steps_sampled >= 2000
    (shard,) = state["replay"]
    # every transition stepped is stored, but the last n_step - 1 of each worker's env; the
    # checkpoint step reads one record ahead (the learner is pipelined 2 calls deep), so the
    # replay also holds the rounds stored before the next record: at most 1 / calls_per_round
    # rounds of 2 x 16 steps (DQN's docs/algorithms.md, "Checkpoints keep the replay")
    config = DQN(learner=attrs.evolve(DQN().learner, training_intensity=8.0))  # SMALL's intensity
    ahead = round(1 / config.calls_per_round) * config.num_workers * config.sample_size
    assert -2 * 2 <= shard["buffer"]["num_added"] - ckpt.counters.env_steps_sampled <= ahead
    summary = json.loads((trained / "summary.json").read_text())
    assert summary["env_steps_trained"] == ckpt.counters.env_steps_trained > 0


def test_resume_restores_the_replay_and_the_epsilon_clock(trained: Path, tmp_path: Path) -> None:
    ckpt = load_checkpoint(trained)
    start = Start(ckpt.learner_state, reseed=ckpt.counters.iteration)
    config = ckpt.config
    assert isinstance(config, DQN)
    shard = ShardFactory(config, start)(0)
    assert shard.num_added == ckpt.learner_state["replay"][0]["buffer"]["num_added"]
    worker = QWorkerFactory(config, config.epsilon, start)(1)
    assert worker.env_steps == ckpt.counters.env_steps_sampled // 2
    assert worker.current_epsilon() < 1.0
    out = tmp_path / "resumed"
    done = rxrl_cli("train", "dqn", "--backend", "reference", "--steps", "2500", "--resume", trained,
                    "--out", out)
    assert done.returncode == 0, done.stderr
    with (out / "metrics.csv").open(newline="") as f:
        first = next(csv.DictReader(f))
    # the restored replay holds 2000 transitions: the first call comes after 4 rounds of 32
    # steps (intensity 8: a call of 8 x 128 per 4 x 32 sampled), not after 500 steps refilling
    assert int(first["env_steps_sampled"]) - ckpt.counters.env_steps_sampled <= 4 * 32
    again = load_checkpoint(out).learner_state["replay"][0]["buffer"]["num_added"]
    assert again > ckpt.learner_state["replay"][0]["buffer"]["num_added"] + 400


def test_eval_runs_the_q_network_greedily(trained: Path) -> None:
    done = rxrl_cli("eval", trained, "--episodes", "2")
    assert done.returncode == 0, done.stderr
    assert "dqn CartPole-v1: mean return" in done.stdout and "over 2 greedy episodes" in done.stdout


def test_replay_reproduces_the_recorded_dqn_run(trained: Path) -> None:
    done = rxrl_cli("replay", trained.parent / "dqn.trace.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: all" in done.stdout


def test_an_apex_run_on_the_rx_backend_replays_exactly_on_the_reference_backend(tmp_path: Path) -> None:
    trace = tmp_path / "apex.trace.json"
    done = rxrl_cli("train", "apex", "--backend", "rx", "--steps", "2000", "--out", tmp_path / "apex",
                    "--trace", trace, "--set", "learning_starts=300", "--set", "report_every=2", *SMALL[2:])
    assert done.returncode == 0, done.stderr
    doc = json.loads(trace.read_text())
    assert doc["trace"]["backend"] == "rx" and len(doc["records"]) >= 10
    assert len(load_checkpoint(tmp_path / "apex").learner_state["replay"]) == 2
    replayed = rxrl_cli("replay", trace)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"identical: all {len(doc['records'])} recorded iterations reproduced exactly" in replayed.stdout


@pytest.mark.parametrize("algo", ["dqn", "apex"])
def test_show_prints_the_plan(algo: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", algo]) == 0
    out = capsys.readouterr().out
    learner = "DQNLearner×1 on the driver" if algo == "dqn" else "DQNLearner×1"  # Ape-X's: a process
    assert f"call({learner}, train_on_" in out and "from_actors(ReplayShard×" in out


@pytest.mark.parametrize(("args", "message"), [
    (["dqn", "--env", "Pendulum-v1"],
     "dqn does not support the action space Box(-2.0, 2.0, (1,), float32) of Pendulum-v1: it needs a "
     "Discrete one (a Q-value per action)"),
    (["apex", "--set", "capacity=100", "--set", "batch_size=128"],
     "ReplayConfig.batch_size (128) must not exceed ReplayConfig.capacity (100)"),
    (["dqn", "--set", "learning_starts=200000"],
     "ReplayConfig.learning_starts (200000) must not exceed ReplayConfig.capacity (100000)"),
    (["dqn", "--set", "training_intensity=0"], "'training_intensity' must be > 0.0: 0"),
    (["apex", "--set", "training_intensity=-1"], "'training_intensity' must be > 0.0: -1"),
    (["dqn", "--set", "gamma=0.9"], "DQN.gamma does not apply to Q-learning: set learner.gamma"),
    (["apex", "--set", "policy.hidden_sizes=8"],
     "ApeX.policy does not apply to Q-learning: set learner.q_net"),
])
def test_bad_input_is_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str],
                               tmp_path: Path) -> None:
    assert main(["train", *args, "--backend", "reference", "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_resume_that_does_not_fit_its_checkpoint_is_one_line(trained: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "run")
    assert main(["train", "dqn", "--backend", "reference", "--steps", "3000", "--resume", str(trained),
                 "--set", "learner.q_net.hidden_sizes=16,16", "--out", out]) == 1
    assert "its Q-network does not fit the config" in capsys.readouterr().err
    assert main(["train", "dqn", "--backend", "reference", "--steps", "3000", "--resume", str(trained),
                 "--set", "capacity=5000", "--out", out]) == 1
    assert "its replay (capacity 100000, prioritized False) does not fit learner.replay (capacity 5000" in (
        capsys.readouterr().err)


def test_a_checkpoint_loads_without_pickles(trained: Path) -> None:
    """Every tensor and number of the replay survives ``torch.load(weights_only=True)``."""
    doc = torch.load(trained / "checkpoint.pt", weights_only=True)
    columns = doc["learner"]["replay"][0]["buffer"]["columns"]
    assert set(columns) >= {"obs", "actions", "rewards", "next_obs"} and len(columns["obs"]) > 1000


@pytest.mark.parametrize("queue", [1, 2, 3])
def test_the_checkpoint_step_reads_as_far_ahead_as_the_learner_is_pipelined(queue: int) -> None:
    """Its call to the learner is queued behind the plan's pipelined calls: a step that waited
    for it before asking for the next record would stall the pipeline at every record."""
    from rxrl.algos import get
    from rxrl.training.checkpoint import CheckpointClock, training_plan

    algo = get("dqn")
    shown = rxrl.show(training_plan(algo, DQN(learner_queue=queue), None, CheckpointClock(25_000, 100_000)))
    ahead = f", max_in_flight={queue}" if queue > 1 else ""
    assert f"call(DQNLearner×1 on the driver, learner_state_if_due{ahead})" in shown, shown
    assert "call(ReplayShard×1 on the driver, shard_state_if_due, route=Fixed(index=0))" in shown, shown
