"""Bad input to ``rxrl``: a one-line error on stderr and exit status 1, never a traceback.

The cases run concurrently (each process spends most of its time importing torch).
"""

from __future__ import annotations

import subprocess

import pytest

from tests.cli.helpers import start

#: case -> (argv, the message's expected part); ``{tmp}`` is a directory holding the files below
CASES: dict[str, tuple[list[str], str]] = {
    "unknown algorithm": (["train", "dqn"],
                          "rxrl train: error: unknown algorithm 'dqn'; choose one of ['a2c', 'a3c', 'ppo']"),
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
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, str, str]]:
    """Every case's (exit status, stdout, stderr, tmp dir), run a few at a time."""
    import torch

    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "a-file").write_text("not a directory, not a trace")
    (tmp / "corrupt").mkdir()
    (tmp / "corrupt" / "checkpoint.pt").write_bytes(b"\x80\x04 this is not a torch file")
    (tmp / "empty").mkdir()
    torch.save({"format": "someone-else/1", "weights": [1, 2]}, tmp / "not-rxrl.pt")
    out: dict[str, tuple[int, str, str, str]] = {}
    pending = list(CASES.items())
    while pending:
        batch, pending = pending[:4], pending[4:]
        procs = [(name, start([a.replace("{tmp}", str(tmp)) for a in argv], cwd=tmp))
                 for name, (argv, _) in batch]
        for name, proc in procs:
            try:
                stdout, stderr = proc.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            out[name] = (proc.returncode, stdout, stderr, str(tmp))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_a_one_line_error(case: str, results: dict[str, tuple[int, str, str, str]]) -> None:
    code, _, stderr, tmp = results[case]
    expected = CASES[case][1].replace("{tmp}", tmp)
    assert "Traceback" not in stderr
    assert code == 1, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert stderr.startswith(expected), stderr
