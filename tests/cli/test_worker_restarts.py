"""A Ray run survives ``kill -9`` of a rollout worker's process (issue 14, item 8).

``rxrl train`` restarts rollout workers by default (``--worker-restarts 3``); the restarted
worker gets the current weights back and the round it was sampling is requested again, so
the run finishes with every iteration once and every batch the size it should be.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from rxrl.training.checkpoint import load_checkpoint
from tests.cli.helpers import QUICK, metrics_rows, start, wait_for
from tests.cli.pid_env import PIDS

#: the QUICK settings' iteration: 2 workers × 2 envs × 64 steps, one round per batch
ROUND = 256


def train_and_kill_a_worker(tmp_path: Path, *flags: str) -> tuple[Path, Path, int, str]:
    """Start a Ray run, ``kill -9`` a rollout worker after three iterations; the run
    directory, the directory of worker pid files, the exit status and stderr."""
    out, pids = tmp_path / "run", tmp_path / "pids"
    pids.mkdir()
    code, stderr = run_and_kill_a_worker(
        ["train", "ppo", "--env", "tests.cli.pid_env:PidCartPole-v0", "--steps", "25000",
         "--out", out, *QUICK, *flags], out, pids, 3)
    return out, pids, code, stderr


def run_and_kill_a_worker(args: list[str | Path], out: Path, pids: Path, rows: int) -> tuple[int, str]:
    """Run ``rxrl *args``, ``kill -9`` a rollout worker once ``out`` has ``rows`` metrics rows
    and two workers stepped; the exit status and stderr."""
    proc = start(args, env={PIDS: str(pids)})
    try:
        wait_for(lambda: len(metrics_rows(out)) >= rows and len(list(pids.iterdir())) >= 2, 240,
                 f"{rows} metrics rows and two rollout workers", proc)
        victim = min(int(p.name) for p in pids.iterdir())
        os.kill(victim, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, stderr


@pytest.mark.timeout(400)
def test_a_run_survives_kill_9_of_a_rollout_worker_with_nothing_lost_or_counted_twice(
        tmp_path: Path) -> None:
    out, pids, code, stderr = train_and_kill_a_worker(tmp_path)
    assert code == 0, stderr
    # the restart is said, in one line
    assert re.search(r"^rxrl: warning: actor RolloutWorker\[[01]\] died while running .*; it runs "
                     r"again on node \w+ .*\(restart 1 of \d+\) and the run goes on$", stderr, re.M), stderr
    assert len(list(pids.iterdir())) >= 3, "no rollout worker process was started again"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["env_steps_sampled"] >= 25_000
    rows = metrics_rows(out)
    assert [int(r["iteration"]) for r in rows] == list(range(1, len(rows) + 1))
    # every iteration trained on exactly one round: none lost, none counted twice
    assert [int(r["env_steps_trained"]) for r in rows] == [ROUND * i for i in range(1, len(rows) + 1)]
    steps = [int(r["env_steps_sampled"]) for r in rows]
    assert all(b - a >= ROUND for a, b in itertools.pairwise(steps))


@pytest.mark.timeout(400)
def test_without_restarts_a_killed_worker_ends_the_run_with_one_line_naming_it(tmp_path: Path) -> None:
    out, _, code, stderr = train_and_kill_a_worker(tmp_path, "--worker-restarts", "0")
    assert code == 1, stderr
    error = stderr.strip().splitlines()[-1]
    # the victim is the worker process with the lower pid, which may be either worker
    assert re.match(r"rxrl train: error: actor RolloutWorker\[[01]\] \(group built at ", error), error
    assert error.endswith("no restarts were allowed (--worker-restarts N restarts rollout workers)")
    assert json.loads((out / "summary.json").read_text())["status"] == "failed"


@pytest.mark.timeout(500)
def test_a_resumed_dqn_run_survives_kill_9_of_a_rollout_worker(tmp_path: Path) -> None:
    """Issue 27 item 11: a resumed run's workers (built from the checkpoint's weights) come
    back after ``kill -9`` too: the run completes with every iteration once and no env step
    lost (a record that stored a round grew by a whole round, both workers' fragments: 2 × 16
    env steps, less the steps whose n-step transitions are still pending), and Ray's "the
    actor restart will fail" warning about constructor arguments does not appear."""
    out, pids = tmp_path / "run", tmp_path / "pids"
    pids.mkdir()
    env = ["--env", "tests.cli.pid_env:PidCartPole-v0"]
    first = start(["train", "dqn", *env, "--backend", "reference", "--steps", "1200", "--out", out],
                  env={PIDS: str(pids)})  # a checkpoint is a checkpoint, whichever backend wrote it
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    for p in pids.iterdir():
        p.unlink()
    before = load_checkpoint(out).counters.iteration
    code, stderr = run_and_kill_a_worker(["train", "dqn", *env, "--steps", "4000", "--resume", out],
                                         out, pids, before + 3)
    assert code == 0, stderr
    assert "restart will fail" not in stderr and "core_worker" not in stderr
    assert len(list(pids.iterdir())) >= 3, "no rollout worker process was started again"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["env_steps_sampled"] >= 4_000
    rows = metrics_rows(out)
    assert [int(r["iteration"]) for r in rows] == list(range(1, len(rows) + 1))
    steps = [int(r["env_steps_sampled"]) for r in rows]
    grew = [b - a for a, b in itertools.pairwise(steps)]
    assert all(g == 0 or 16 < g <= 32 for g in grew), sorted(set(grew))
    assert sum(g > 0 for g in grew) >= (4_000 - 1_200) // 32



#: IMPALA through 2 aggregators: 4 workers × 2 envs × 32 steps, a batch of two fragments
AGGREGATED = ["--set", "num_workers=4", "--set", "num_aggregators=2", "--set", "num_envs_per_worker=2",
              "--set", "fragment_length=32", "--set", "train_batch_size=128",
              "--set", "learner.minibatch_size=64"]


@pytest.mark.timeout(400)
def test_an_aggregated_impala_run_survives_kill_9_of_a_rollout_worker(tmp_path: Path) -> None:
    """Issue 25: the killed worker's aggregator recovers it (and the driver, for what it sent
    through the aggregator); every record trains one more batch, none lost or counted twice."""
    out, pids = tmp_path / "run", tmp_path / "pids"
    pids.mkdir()
    code, stderr = run_and_kill_a_worker(
        ["train", "impala", "--env", "tests.cli.pid_env:PidCartPole-v0", "--steps", "40000",
         "--out", out, *AGGREGATED], out, pids, 3)
    assert code == 0, stderr
    assert len(list(pids.iterdir())) >= 5, "no rollout worker process was started again"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["env_steps_sampled"] >= 40_000
    rows = metrics_rows(out)
    assert [int(r["iteration"]) for r in rows] == list(range(1, len(rows) + 1))
    assert [int(r["env_steps_trained"]) for r in rows] == [128 * i for i in range(1, len(rows) + 1)]


@pytest.mark.timeout(400)
def test_without_restarts_an_aggregated_run_ends_with_one_line_naming_the_killed_worker(
        tmp_path: Path) -> None:
    out, pids = tmp_path / "run", tmp_path / "pids"
    pids.mkdir()
    code, stderr = run_and_kill_a_worker(
        ["train", "impala", "--env", "tests.cli.pid_env:PidCartPole-v0", "--steps", "40000",
         "--out", out, *AGGREGATED, "--worker-restarts", "0"], out, pids, 3)
    assert code == 1, stderr
    error = stderr.strip().splitlines()[-1]
    assert re.match(r"rxrl train: error: actor RolloutWorker\[[0-3]\] \(group built at ", error), error
    assert error.endswith("no restarts were allowed (--worker-restarts N restarts rollout workers)")
    assert json.loads((out / "summary.json").read_text())["status"] == "failed"
