"""A run's files through the console script: resumes never mix data, plot copes with real
directories, a ``module:Env-v0`` from the working directory trains (issue 14, items 3, 5, 9)."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from rxrl.training.checkpoint import load_checkpoint
from tests.cli.helpers import QUICK, metrics_rows, rxrl_cli, start, wait_for

#: the QUICK settings' iteration: 2 workers × 2 envs × 64 steps, one round per batch
ROUND = 256


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short PPO run on the reference backend, checkpointed at 1,000 env steps and at the end."""
    out = tmp_path_factory.mktemp("runs") / "ppo"
    done = rxrl_cli("train", "ppo", "--backend", "reference", "--steps", "2000", "--out", out,
                    "--checkpoint-every", "1000", *QUICK)
    assert done.returncode == 0, done.stderr
    return out


def killed_after_its_checkpoint(run: Path, into: Path) -> Path:
    """A copy of ``run`` as if killed two iterations after its checkpoint, mid-row."""
    shutil.copytree(run, into)
    text = (into / "metrics.csv").read_text()
    lines = text.splitlines()[1:]
    last = lines[-1].split(",")
    for n in (1, 2):  # iterations the checkpoint does not have
        later = [str(int(last[0]) + n), str(int(last[1]) + n * ROUND), *last[2:]]
        text += ",".join(later) + "\n"
    text += f"{int(last[0]) + 3},{int(last[1]) + 3 * ROUND},5"  # torn: no more fields, no newline
    (into / "metrics.csv").write_text(text)
    return into


def test_a_resume_cuts_the_metrics_back_to_its_checkpoint_and_repairs_a_torn_row(
        run: Path, tmp_path: Path) -> None:
    killed = killed_after_its_checkpoint(run, tmp_path / "killed")
    checkpoint = load_checkpoint(killed).counters
    done = rxrl_cli("train", "ppo", "--backend", "reference", "--resume", killed, "--steps", "3000")
    assert done.returncode == 0, done.stderr
    assert "metrics.csv cut back to the checkpoint's" in done.stderr
    rows = metrics_rows(killed)
    iterations = [int(r["iteration"]) for r in rows]
    steps = [int(r["env_steps_sampled"]) for r in rows]
    assert iterations == list(range(1, len(rows) + 1))  # nothing twice, nothing missing
    assert steps == sorted(set(steps))  # env steps never go backwards
    assert iterations[checkpoint.iteration - 1] == checkpoint.iteration
    assert steps[checkpoint.iteration - 1] == checkpoint.env_steps_sampled
    assert all(len(r) == len(rows[0]) and "" not in r.values() for r in rows[:checkpoint.iteration])
    assert (killed / "metrics.csv").read_text().endswith("\n")
    config = json.loads((killed / "config.json").read_text())
    assert config["resumed_from"] == str(killed / "checkpoint.pt") and config["steps"] == 3000


def test_a_torn_row_of_the_checkpoints_own_iteration_is_put_back(run: Path, tmp_path: Path) -> None:
    """Issue 27 item 4: killed after its checkpoint was written and while the checkpoint's own
    row was being written, a run resumed in place has every row up to the checkpoint's (the
    torn one put back from the checkpoint) and says how many it holds."""
    killed = tmp_path / "killed"
    shutil.copytree(run, killed)
    checkpoint = load_checkpoint(killed).counters
    lines = (killed / "metrics.csv").read_text().splitlines(keepends=True)
    assert int(lines[-1].split(",")[0]) == checkpoint.iteration  # the run ended on a checkpoint
    whole = metrics_rows(killed)[checkpoint.iteration - 1]
    (killed / "metrics.csv").write_text("".join(lines[:-1]) + lines[-1][:len(lines[-1]) // 2])
    done = rxrl_cli("train", "ppo", "--backend", "reference", "--resume", killed, "--steps", "3000")
    assert done.returncode == 0, done.stderr
    assert (f"metrics.csv cut back to the checkpoint's {checkpoint.iteration} rows (a torn last "
            "row removed, the checkpoint's own row put back)") in done.stderr
    rows = metrics_rows(killed)
    assert [int(r["iteration"]) for r in rows] == list(range(1, len(rows) + 1))
    assert len(rows) > checkpoint.iteration
    assert rows[checkpoint.iteration - 1] == whole  # the row as it was first written


def test_a_resume_that_fails_leaves_the_run_as_it_was(run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    before = {p.name: p.read_bytes() for p in copy.iterdir() if p.is_file()}
    done = rxrl_cli("train", "ppo", "--backend", "reference", "--resume", copy, "--steps", "5000",
                    "--set", "policy.hidden_sizes=32,32")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "its policy does not fit the config" in done.stderr
    assert {p.name: p.read_bytes() for p in copy.iterdir() if p.is_file()} == before


def test_plot_skips_a_run_without_metrics_and_writes_into_an_out_directory(
        run: Path, tmp_path: Path) -> None:
    empty = tmp_path / "just-started"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    done = rxrl_cli("plot", run, empty, "--out", pictures)
    assert done.returncode == 0, done.stderr
    png = pictures / "learning_curves.png"
    assert done.stdout.strip() == f"wrote {png} (1 run)"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert done.stderr.strip() == (f"rxrl plot: warning: skipping a run: no metrics.csv in {empty} "
                                   "(is it an rxrl train run directory?)")


def test_plot_names_the_file_it_wrote_when_out_has_no_suffix(run: Path, tmp_path: Path) -> None:
    done = rxrl_cli("plot", run, "--out", tmp_path / "curves")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {tmp_path / 'curves.png'} (1 run)"
    assert (tmp_path / "curves.png").is_file()


def test_plot_out_with_a_trailing_slash_is_a_directory(run: Path, tmp_path: Path) -> None:
    """Issue 27, item 7: ``--out nodir/sub/`` writes nodir/sub/learning_curves.png."""
    done = rxrl_cli("plot", run, "--out", f"{tmp_path / 'nodir' / 'sub'}/")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "nodir" / "sub" / "learning_curves.png").is_file()
    assert not (tmp_path / "nodir" / "sub.png").exists()


MY_ENVS = '''\
import gymnasium as gym

gym.register("MyCartPole-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
             max_episode_steps=200)
'''


def test_an_env_of_a_module_in_the_working_directory_trains(tmp_path: Path) -> None:
    """``--env my_envs:MyCartPole-v0`` with ``my_envs.py`` in the working directory."""
    (tmp_path / "my_envs.py").write_text(MY_ENVS)
    done = rxrl_cli("train", "ppo", "--backend", "reference", "--env", "my_envs:MyCartPole-v0",
                    "--steps", "600", "--out", "run", *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["env"] == "my_envs:MyCartPole-v0" and summary["status"] == "completed"


def test_train_help_lists_every_registered_algorithm_with_its_summary(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27, item 8: the help comes from the registry (sac was missing from it)."""
    from rxrl.algos import ALGORITHMS, MODULES
    from rxrl.cli import main

    with pytest.raises(SystemExit) as done:
        main(["train", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for name in MODULES:
        assert f"  {name} " in out and ALGORITHMS[name].summary in out, name


@pytest.mark.timeout(200)
def test_a_run_still_going_cannot_be_resumed_or_written_to_by_another_process(tmp_path: Path) -> None:
    """One live run per directory, across processes: a second terminal resuming a run that is
    still going, or a second run given its ``--out``, is refused in one line and writes
    nothing; once the first has ended, the resume goes on."""
    out = tmp_path / "run"
    first = start(["train", "ppo", "--backend", "reference", "--out", out, "--steps", "100000000",
                   "--checkpoint-every", "512", *QUICK])
    try:
        wait_for(lambda: (out / "checkpoint.pt").exists(), 120, "a checkpoint", first)
        resume = rxrl_cli("train", "ppo", "--backend", "reference", "--resume", out, *QUICK)
        assert resume.returncode == 1
        assert resume.stderr.strip() == (f"rxrl train: error: --resume {out}: the run is still "
                                         f"going (process {first.pid}); stop it first, or "
                                         "resume into a new --out")
        again = rxrl_cli("train", "ppo", "--backend", "reference", "--out", out, *QUICK)
        assert again.returncode == 1 and "already holds a run" in again.stderr
        first.send_signal(signal.SIGINT)
        _, stderr = first.communicate(timeout=120)
    finally:
        first.kill()
        first.wait()
    assert first.returncode == 130, stderr
    rows = metrics_rows(out)
    assert [int(r["iteration"]) for r in rows] == list(range(1, len(rows) + 1))  # one writer
    later = rxrl_cli("train", "ppo", "--backend", "reference", "--resume", out,
                     "--steps", str(int(rows[-1]["env_steps_sampled"]) + ROUND), *QUICK)
    assert later.returncode == 0, later.stderr
