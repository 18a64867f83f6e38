"""``rxrl train impala|appo`` end to end: metrics with staleness, replay, eval, resume, show,
plot, an asynchronous rx run replayed, and bad settings as one-line errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rxrl.cli import main
from rxrl.training.checkpoint import load_checkpoint
from tests.cli.helpers import rxrl_cli

#: a small, quick V-trace run: 2 workers x 2 envs x 32 steps, batches of 128
SMALL = ["--set", "num_envs_per_worker=2", "--set", "train_batch_size=128", "--set", "minibatch_size=64"]


def rows(run: Path) -> list[dict[str, str]]:
    """The rows of a run's metrics.csv."""
    with (run / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def appo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short APPO run on the reference backend, with a trace and checkpoints."""
    out = tmp_path_factory.mktemp("runs") / "appo"
    done = rxrl_cli("train", "appo", "--backend", "reference", "--steps", "3000", "--seed", "2",
                    "--out", out, "--trace", out.parent / "appo.trace.json",
                    "--checkpoint-every", "1000", *SMALL)
    assert done.returncode == 0, done.stderr
    return out


def test_train_writes_staleness_into_every_metrics_row(appo_run: Path) -> None:
    table = rows(appo_run)
    assert [int(r["iteration"]) for r in table] == list(range(1, len(table) + 1))
    assert int(table[-1]["env_steps_trained"]) == 128 * len(table)
    assert all(float(r["train/staleness_max"]) >= float(r["train/staleness_min"]) >= 0 for r in table)
    assert {"train/staleness_mean", "train/rho_mean", "train/fragments", "train/approx_kl"} <= set(table[0])
    summary = json.loads((appo_run / "summary.json").read_text())
    assert summary["algo"] == "appo" and summary["status"] == "completed"
    state = load_checkpoint(appo_run).learner_state
    assert {"policy", "target", "version", "updates_since_target"} <= set(state)
    # the final checkpoint: one update per record, and the batches queued at the learner
    # behind it (an asynchronous learner's snapshot is taken when the learner gets to it)
    assert len(table) <= state["version"] <= len(table) + 4


def test_replay_reproduces_the_recorded_appo_run(appo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(appo_run.parent / "appo.trace.json")]) == 0
    assert "identical: all" in capsys.readouterr().out


def test_eval_and_plot_read_an_appo_run(appo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(appo_run), "--episodes", "2"]) == 0
    assert capsys.readouterr().out.startswith("appo CartPole-v1: mean return ")
    png = appo_run.parent / "curves.png"
    assert main(["plot", str(appo_run), "--out", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_resume_restores_the_learner_and_its_target_network(appo_run: Path) -> None:
    resumed = appo_run.parent / "resumed"
    assert main(["train", "appo", "--backend", "reference", "--resume", str(appo_run), "--out",
                 str(resumed), "--steps", "4000"]) == 0
    before, after = load_checkpoint(appo_run), load_checkpoint(resumed)
    assert int(rows(resumed)[0]["iteration"]) == before.counters.iteration + 1
    assert after.learner_state["version"] > before.learner_state["version"]
    # the resumed workers start from the checkpoint's weights, stamped with its version
    assert float(rows(resumed)[0]["train/staleness_min"]) == 0


@pytest.mark.parametrize("algo", ["impala", "appo"])
def test_show_prints_the_asynchronous_plan(algo: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", algo, "--set", "num_workers=3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("from_actors(RolloutWorker×3, RolloutWorker.sample_fragment)")
    assert f"| call({algo.upper()}Learner×1, learn_on_batches, max_in_flight=4)" in out
    assert "| call(RolloutWorker×3, load_weights_if_sent, max_in_flight=4)" in out


def test_an_impala_run_on_the_rx_backend_replays_exactly_on_the_reference_backend(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "impala.trace.json"
    assert main(["train", "impala", "--backend", "rx", "--steps", "2500", "--out", str(tmp_path / "impala"),
                 "--trace", str(trace), "--set", "max_in_flight=2", *SMALL]) == 0
    doc = json.loads(trace.read_text())
    assert doc["trace"]["backend"] == "rx" and len(doc["records"]) >= 10
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 0
    out = capsys.readouterr().out
    assert f"identical: all {len(doc['records'])} recorded iterations reproduced exactly" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["train", "impala", "--set", "minibatch_size=100"],
     "rxrl train: error: bad --set: IMPALA.learner.minibatch_size (100) must be a multiple of "
     "IMPALA.fragment_length (32): minibatches are whole sequences"),
    (["train", "appo", "--set", "rho_clip=0"],
     "rxrl train: error: bad --set: learner: APPOConfig.rho_clip must be a number > 0 (inf: no "
     "clipping), got 0"),
    (["train", "appo", "--set", "broadcast_interval=0"],
     "rxrl train: error: bad --set: APPO.broadcast_interval must be an integer >= 1, got 0"),
    (["train", "impala", "--set", "target_update_interval=2"],
     "rxrl train: error: bad --set: unknown setting 'target_update_interval' for IMPALA"),
    (["train", "impala", "--backend", "reference", "--steps", "100"],
     "rxrl train: error: --steps: one training iteration samples 512 env steps"),
])
def test_bad_settings_are_one_line_errors(argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(message), err
