"""``rxrl train`` end to end through the console script, then ``eval``, ``plot``, ``replay``, ``show``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rxrl.algos.configs import to_dict
from rxrl.cli import main
from rxrl.training.checkpoint import load_checkpoint
from tests.cli.helpers import QUICK, rxrl_cli


def rows(run: Path) -> list[dict[str, str]]:
    """The rows of a run's metrics.csv."""
    with (run / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short PPO run on the reference backend, with a trace."""
    out = tmp_path_factory.mktemp("runs") / "ppo"
    done = rxrl_cli("train", "ppo", "--backend", "reference", "--steps", "2000", "--seed", "1",
                    "--out", out, "--trace", out.parent / "ppo.trace.json",
                    "--checkpoint-every", "1000", *QUICK)
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout
    return out


def test_train_writes_metrics_tensorboard_a_checkpoint_and_a_summary(trained: Path) -> None:
    table = rows(trained)
    steps = [int(r["env_steps_sampled"]) for r in table]
    assert [int(r["iteration"]) for r in table] == list(range(1, len(table) + 1))
    assert steps == sorted(steps) and steps[-1] >= 2000 > steps[-2]
    assert {"episode_return_mean", "train/policy_loss", "train/approx_kl", "steps_per_s"} <= set(table[0])
    events = list((trained / "tb").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 1000
    summary = json.loads((trained / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["algo"] == "ppo" and summary["seed"] == 1
    assert summary["env_steps_sampled"] == steps[-1] and summary["iterations"] == len(table)
    assert summary["config"]["train_batch_size"] == 256  # --set reached the config
    ckpt = load_checkpoint(trained)
    assert ckpt.counters.env_steps_sampled == steps[-1]  # the final checkpoint
    assert ckpt.config.seed == 1 and ckpt.learner_state["num_updates"] > 0
    config = json.loads((trained / "config.json").read_text())
    assert config["algo"] == "ppo" and config["backend"] == "reference"


def test_train_shows_live_progress_on_stderr(trained: Path) -> None:
    done = rxrl_cli("train", "a2c", "--backend", "reference", "--steps", "600", "--out",
                    trained.parent / "a2c", "--set", "num_envs_per_worker=2")
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if "steps/s" in line]
    assert progress, done.stderr
    assert progress[-1].startswith("a2c CartPole-v1 [reference] | steps ")
    assert "(100%)" in progress[-1] and "| return " in progress[-1]


@pytest.fixture(scope="module")
def resumed(trained: Path) -> Path:
    """``trained`` resumed into a new directory, to 3,000 env steps (a fixture: the plot test
    needs it too, and with ``-n`` it may run in another worker than the resume test)."""
    out = trained.parent / "resumed"
    done = rxrl_cli("train", "ppo", "--backend", "reference", "--resume", trained, "--out", out,
                    "--steps", "3000")
    assert done.returncode == 0, done.stderr
    return out


def test_resume_continues_the_counters_and_the_metrics(trained: Path, resumed: Path) -> None:
    before = load_checkpoint(trained).counters
    table = rows(resumed)
    assert int(table[0]["iteration"]) == before.iteration + 1
    assert int(table[0]["env_steps_sampled"]) > before.env_steps_sampled
    assert float(table[0]["time_s"]) > before.time_s
    after = load_checkpoint(resumed)
    assert after.counters.env_steps_sampled >= 3000
    assert after.learner_state["num_updates"] > load_checkpoint(trained).learner_state["num_updates"]
    assert to_dict(after.config)["train_batch_size"] == 256  # the resumed run's config
    assert json.loads((resumed / "config.json").read_text())["resumed_from"].endswith("checkpoint.pt")


def test_replay_reproduces_the_recorded_run(trained: Path) -> None:
    done = rxrl_cli("replay", trained.parent / "ppo.trace.json")
    assert done.returncode == 0, done.stderr
    assert "identical: all" in done.stdout and "reproduced exactly" in done.stdout


def test_replay_reports_a_run_that_does_not_match_its_records(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads((trained.parent / "ppo.trace.json").read_text())
    doc["records"][1]["train/policy_loss"] += 1e-9
    tampered = trained.parent / "tampered.json"
    tampered.write_text(json.dumps(doc))
    assert main(["replay", str(tampered)]) == 1  # in-process: the script's replay is tested above
    assert "diverged at iteration 2: train/policy_loss recorded" in capsys.readouterr().out


def test_eval_runs_the_policy_greedily(trained: Path) -> None:
    done = rxrl_cli("eval", trained / "checkpoint.pt", "--episodes", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ppo CartPole-v1: mean return ")
    assert "over 3 greedy episodes" in done.stdout


def test_plot_overlays_runs_in_one_png(trained: Path, resumed: Path) -> None:
    png = trained.parent / "curves.png"
    done = rxrl_cli("plot", trained, resumed, "--out", png)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {png} (2 runs)"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_show_prints_the_plan() -> None:
    done = rxrl_cli("show", "a3c", "--set", "num_workers=3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("from_actors(RolloutWorker×3, sample_and_compute_gradients)")
    assert "| call(RolloutWorker×3, set_weights_of_sender)" in done.stdout


@pytest.mark.parametrize(("fmt", "expected"), [
    ("text", "| call(PPOLearner×1 on the driver, train_on_fragments)\n"),
    ("dot", "digraph plan {"),
    ("mermaid", "flowchart TD"),
])
def test_show_formats(fmt: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "ppo", "--format", fmt]) == 0  # in-process: the formats, not the script
    assert expected in capsys.readouterr().out


def test_an_a3c_run_on_the_rx_backend_replays_exactly_on_the_reference_backend(tmp_path: Path) -> None:
    """The asynchronous run's completion order is recorded; the replay follows it bit for bit."""
    trace = tmp_path / "a3c.trace.json"
    done = rxrl_cli("train", "a3c", "--backend", "rx", "--steps", "1500", "--out", tmp_path / "a3c",
                    "--trace", trace, "--set", "num_envs_per_worker=2", "--set", "fragment_length=32")
    assert done.returncode == 0, done.stderr
    doc = json.loads(trace.read_text())
    assert doc["trace"]["backend"] == "rx" and len(doc["records"]) >= 10
    assert sum(len(c) for c in doc["trace"]["choices"].values()) >= len(doc["records"])
    replayed = rxrl_cli("replay", trace)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"identical: all {len(doc['records'])} recorded iterations reproduced exactly" in replayed.stdout


@pytest.mark.timeout(420)
def test_train_on_a_local_ray_started_for_the_run(tmp_path: Path) -> None:
    done = rxrl_cli("train", "ppo", "--backend", "ray", "--steps", "4000", "--out", tmp_path / "ray",
                    *QUICK, timeout=400)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["backend"] == "ray" and summary["status"] == "completed"
    assert summary["env_steps_sampled"] >= 4000
    assert load_checkpoint(tmp_path / "ray").learner_state["num_updates"] > 0
    assert "Traceback" not in done.stderr


def test_train_stops_at_the_target_return_and_checkpoints_there(tmp_path: Path) -> None:
    out = tmp_path / "a3c"
    done = rxrl_cli("train", "a3c", "--backend", "reference", "--steps", "50000", "--out", out,
                    "--target-return", "40", "--set", "num_envs_per_worker=4")
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "reached target" and summary["target_return"] == 40
    reached = summary["reached_target"]
    assert reached["env_steps"] == summary["env_steps_sampled"] < 50_000
    assert summary["episode_return_mean"] >= 40
    assert load_checkpoint(out).counters.env_steps_sampled == reached["env_steps"]
