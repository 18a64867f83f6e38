"""Bad input to ``rxrl``: a one-line error on stderr and exit status 1, never a traceback.

Every case runs through ``rxrl.cli.main`` in-process; a selection also runs through the
installed console script, concurrently (each process spends seconds importing torch).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rxrl.algos.on_policy.ppo import PPO
from rxrl.cli import main
from rxrl.rl import PPOLearner
from rxrl.training.checkpoint import Counters, save_checkpoint
from tests.cli.helpers import start

#: case -> (argv, the message's expected part); ``{tmp}`` is a directory holding the files below
CASES: dict[str, tuple[list[str], str]] = {
    "unknown algorithm": (["train", "nosuch"],
                          "rxrl train: error: unknown algorithm 'nosuch'; choose one of ['a2c', 'a3c', "),
    "unknown env id": (["train", "ppo", "--env", "CartPol-v1"],
                       "rxrl train: error: unknown env id 'CartPol-v1': Environment `CartPol` doesn't "
                       "exist. Did you mean: `CartPole`?"),
    "unsupported action space": (
        ["train", "a2c", "--env", "tests.algos.fake_envs:MultiDiscreteActions-v0"],
        "rxrl train: error: a2c does not support the action space MultiDiscrete([2 3]) of "
        "tests.algos.fake_envs:MultiDiscreteActions-v0; supported: Discrete and 1-D Box"),
    "unknown setting": (["train", "ppo", "--set", "lrr=0.1"],
                        "rxrl train: error: bad --set: unknown setting 'lrr' for PPO; did you mean "
                        "'learner.lr'?"),
    "setting without a value": (["train", "ppo", "--set", "lr"],
                                "rxrl train: error: bad setting 'lr': expected key=value"),
    "bad setting value": (["train", "a3c", "--set", "gamma=1.5"],
                          "rxrl train: error: bad --set: A3C.gamma must be a number in [0.0, 1.0], got 1.5"),
    "bad setting type": (["train", "ppo", "--set", "num_epochs=many"],
                         "rxrl train: error: bad --set: learner.num_epochs must be int, got 'many'"),
    "bad learner placement": (["train", "ppo", "--set", "learner_placement=gpu"],
                              "rxrl train: error: bad --set: learner_placement must be one of "
                              "['actor', 'driver'], got 'gpu'"),
    "bad --workers": (["train", "ppo", "--workers", "0"],
                      "rxrl train: error: bad option: PPO.num_workers must be an integer >= 1, got 0"),
    "unknown backend": (["train", "ppo", "--backend", "spark"],
                        "rxrl train: error: unknown backend 'spark'; choose one of "
                        "['ray', 'rx', 'reference']"),
    "unwritable --out": (["train", "ppo", "--backend", "reference", "--out", "{tmp}/a-file/run"],
                         "rxrl train: error: cannot write to --out {tmp}/a-file/run: Not a directory"),
    "corrupt checkpoint to resume": (
        ["train", "ppo", "--resume", "{tmp}/corrupt"],
        "rxrl train: error: corrupt checkpoint {tmp}/corrupt/checkpoint.pt: not a readable torch file"),
    "resume another algorithm's run": (["train", "a2c", "--resume", "{tmp}/ppo-run"],
                                       "rxrl train: error: --resume {tmp}/ppo-run is a ppo run, not a2c"),
    "resume on another env": (["train", "ppo", "--resume", "{tmp}/ppo-run", "--env", "Pendulum-v1"],
                              "rxrl train: error: --resume {tmp}/ppo-run trained on CartPole-v1, "
                              "not Pendulum-v1"),
    "no steps left": (["train", "ppo", "--resume", "{tmp}/ppo-run", "--steps", "100"],
                      "rxrl train: error: --steps 100 is not more than the 100 env steps already "
                      "trained"),
    "bad --steps": (["train", "a3c", "--steps", "-5"], "rxrl train: error: --steps must be >= 1, got -5"),
    "bad --checkpoint-every": (["train", "ppo", "--checkpoint-every", "0"],
                               "rxrl train: error: --checkpoint-every must be >= 1, got 0"),
    "bad --episodes": (["eval", "{tmp}/ppo-run", "--episodes", "0"],
                       "rxrl eval: error: --episodes must be >= 1, got 0"),
    "resume without a checkpoint": (["train", "ppo", "--resume", "{tmp}/empty"],
                                    "rxrl train: error: no checkpoint at {tmp}/empty"),
    "corrupt checkpoint to eval": (["eval", "{tmp}/corrupt/checkpoint.pt"],
                                   "rxrl eval: error: corrupt checkpoint {tmp}/corrupt/checkpoint.pt: not a "
                                   "readable torch file"),
    "wrong kind of checkpoint": (["eval", "{tmp}/not-rxrl.pt"],
                                 "rxrl eval: error: corrupt checkpoint {tmp}/not-rxrl.pt: "
                                 "not an rxrl checkpoint"),
    "not a trace": (["replay", "{tmp}/a-file"], "rxrl replay: error: {tmp}/a-file is not a trace file"),
    "no such trace": (["replay", "{tmp}/missing.json"],
                      "rxrl replay: error: cannot read trace {tmp}/missing.json: No such file or directory"),
    "plot without metrics": (["plot", "{tmp}/empty"],
                             "rxrl plot: error: no metrics.csv in {tmp}/empty "
                             "(is it an rxrl train run directory?)"),
    "unknown show format": (["show", "ppo", "--format", "png"],
                            "rxrl show: error: unknown format 'png'; choose text, dot or mermaid"),
    # issue 14, item 4: an existing run directory is never written over
    "--out of an existing run": (["train", "ppo", "--backend", "reference", "--out", "{tmp}/ppo-run"],
                                 "rxrl train: error: --out {tmp}/ppo-run already holds a run "
                                 "(config.json, checkpoint.pt): continue it with --resume "
                                 "{tmp}/ppo-run, or choose a new --out"),
    # issue 14, item 5: a resume whose config does not fit the checkpoint fails before writing
    "resume with another policy": (
        ["train", "ppo", "--resume", "{tmp}/ppo-run", "--set", "policy.hidden_sizes=32,32"],
        "rxrl train: error: --resume {tmp}/ppo-run: {tmp}/ppo-run/checkpoint.pt: its policy does "
        "not fit the config (policy {'hidden_sizes': [32, 32], 'activation': 'tanh', "
        "'shared_trunk': False, 'init_log_std': 0.0, 'normalize_obs': False, 'obs_clip': 10.0, "
        "'scale_rewards': False, 'reward_clip': 10.0, 'recurrent': 'none', 'recurrent_size': 64, "
        "'sequence_length': None, 'trunk': 'auto'}): pi_trunk.0.weight is [64, 4] in the "
        "checkpoint, [32, 4] in the config; 10 tensor(s) differ — resume with the policy settings "
        "it was trained with"),
    # issue 14, item 9
    "--target-return nan": (["train", "ppo", "--target-return", "nan"],
                            "rxrl train: error: --target-return must be a finite number, got nan"),
    "a negative --target-return without =": (
        ["train", "ppo", "--target-return", "-1e9", "--steps", "-5"],
        "rxrl train: error: --steps must be >= 1, got -5"),
    "--workers far beyond the machine": (
        ["train", "ppo", "--workers", "100000"],
        "rxrl train: error: --workers 100000: use at most "),
    "--steps less than one iteration": (
        ["train", "ppo", "--backend", "rx", "--workers", "100", "--steps", "20000"],
        "rxrl train: error: --steps: one training iteration samples 51,200 env steps (100 workers "
        "× 8 envs × 64 steps), more than the 20,000 left to train: raise --steps, or lower "
        "--workers or --set num_envs_per_worker / fragment_length"),
    "checkpoint with wrong-typed counters": (
        ["eval", "{tmp}/bad-counters.pt"],
        "rxrl eval: error: corrupt checkpoint {tmp}/bad-counters.pt: counters.iteration must be an "
        "integer >= 0, got '3'"),
    "checkpoint with a bad episode window": (
        ["eval", "{tmp}/bad-episodes.pt"],
        "rxrl eval: error: corrupt checkpoint {tmp}/bad-episodes.pt: its episode window is not two lists "
        "of numbers (returns, lengths)"),
    "--worker-restarts below -1": (["train", "ppo", "--worker-restarts", "-2"],
                                   "rxrl train: error: --worker-restarts must be >= 0 (or -1 for "
                                   "no limit), got -2"),
}


#: the cases also run through the installed console script (each process costs seconds of imports)
THROUGH_THE_SCRIPT = ("unknown algorithm", "unsupported action space", "bad setting value",
                      "unwritable --out", "corrupt checkpoint to eval", "not a trace",
                      "--out of an existing run", "--target-return nan",
                      "a negative --target-return without =", "--workers far beyond the machine",
                      "checkpoint with wrong-typed counters")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the broken and foreign files the cases name."""
    import torch

    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "a-file").write_text("not a directory, not a trace")
    (tmp / "corrupt").mkdir()
    (tmp / "corrupt" / "checkpoint.pt").write_bytes(b"\x80\x04 this is not a torch file")
    (tmp / "empty").mkdir()
    torch.save({"format": "someone-else/1", "weights": [1, 2]}, tmp / "not-rxrl.pt")
    (tmp / "ppo-run").mkdir()
    save_checkpoint(tmp / "ppo-run" / "checkpoint.pt", "ppo", PPO(),
                    PPOLearner("CartPole-v1").state_dict(), Counters(env_steps_sampled=100))
    (tmp / "ppo-run" / "config.json").write_text(CONFIG_JSON)
    save_checkpoint(tmp / "bad-counters.pt", "ppo", PPO(), PPOLearner("CartPole-v1").state_dict(),
                    Counters(iteration="3"))  # type: ignore[arg-type]
    save_checkpoint(tmp / "bad-episodes.pt", "ppo", PPO(), PPOLearner("CartPole-v1").state_dict(),
                    Counters(), episodes=BadWindow())  # type: ignore[arg-type]
    return tmp


class BadWindow:
    """What a damaged checkpoint's episode window reads as."""

    def as_dict(self) -> dict[str, list[object]]:
        return {"returns": ["x"], "lengths": [1]}


#: the config.json of ``ppo-run``: no failed command may change it
CONFIG_JSON = '{"algo": "ppo", "note": "written by the fixture"}\n'



def argv(case: str, tmp: Path) -> list[str]:
    """The case's command line with ``{tmp}`` filled in."""
    return [a.replace("{tmp}", str(tmp)) for a in CASES[case][0]]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_a_one_line_error(case: str, files: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(files)
    code = main(argv(case, files))
    err = capsys.readouterr().err
    assert code == 1, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(CASES[case][1].replace("{tmp}", str(files))), err
    assert (files / "ppo-run" / "config.json").read_text() == CONFIG_JSON
    assert sorted(p.name for p in (files / "ppo-run").iterdir()) == ["checkpoint.pt", "config.json"]


def test_the_console_script_reports_bad_input_in_one_line_without_a_traceback(files: Path) -> None:
    procs = {case: start(argv(case, files), cwd=files) for case in THROUGH_THE_SCRIPT}
    for case, proc in procs.items():
        try:
            _, stderr = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
        assert "Traceback" not in stderr, (case, stderr)
        assert proc.returncode == 1, (case, stderr)
        assert stderr.splitlines() == [stderr.strip()], (case, stderr)
        assert stderr.startswith(CASES[case][1].replace("{tmp}", str(files))), (case, stderr)
