"""``rxrl export`` (`rxrl.training.export`): the exported policy's actions equal ``rxrl eval``'s
on 1,000 observations (discrete identical, continuous within 1e-5), run by torch alone or by
onnxruntime alone with rxrl unimportable; bad input is refused in one line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rxrl.algos import get
from rxrl.cli import main
from rxrl.training import Trainer
from rxrl.training.checkpoint import load_checkpoint, save_checkpoint
from rxrl.training.evaluation import env_actions, greedy_policy
from rxrl.training.export import FORMATS, example_observations, export_policy

QUICK_PPO: dict[str, Any] = {"num_workers": 1, "num_envs_per_worker": 2, "fragment_length": 64,
                             "train_batch_size": 256, "num_epochs": 1, "minibatch_size": 128}
QUICK_Q: dict[str, Any] = {"num_workers": 1, "learner.replay.learning_starts": 200}

#: (case, algo, env, settings, steps): every exported kind of policy — categorical and
#: Gaussian actor-critics with running observation normalization, a one-hot (Discrete)
#: observation, argmax Q, SAC's squashed mean
CASES: list[tuple[str, str, str, dict[str, Any], int]] = [
    ("ppo-discrete", "ppo", "CartPole-v1", {**QUICK_PPO, "policy.normalize_obs": True}, 1024),
    ("ppo-continuous", "ppo", "Pendulum-v1",
     {**QUICK_PPO, "policy.normalize_obs": True, "policy.init_log_std": -0.5}, 1024),
    ("ppo-onehot", "ppo", "FrozenLake-v1", QUICK_PPO, 512),
    ("a2c", "a2c", "CartPole-v1", {"num_workers": 1}, 1024),
    ("impala", "impala", "CartPole-v1", {"num_workers": 1}, 1024),
    ("dqn", "dqn", "CartPole-v1", QUICK_Q, 600),
    ("sac", "sac", "Pendulum-v1", QUICK_Q, 400),
]
RUNNER = Path(__file__).with_name("exported_runner.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A short trained run of each case (reference backend)."""
    root = tmp_path_factory.mktemp("export-runs")
    out = {}
    for case, algo, env, settings, steps in CASES:
        Trainer(algo, root / case, env=env, backend="reference", steps=steps, settings=settings,
                loggers=["csv"], handle_signals=False).run()
        out[case] = root / case
    return out


def eval_actions(run: Path, obs: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``rxrl eval``'s actions on ``obs``: its greedy policy, then what it steps the env with."""
    ckpt = load_checkpoint(run)
    act = greedy_policy(ckpt.algo, ckpt.config, ckpt.learner_state)
    import gymnasium as gym

    space = gym.make(ckpt.config.env).action_space
    return env_actions(space, act(obs, deterministic=True)[0])


@pytest.mark.parametrize("fmt", FORMATS)
def test_exported_actions_equal_rxrl_evals_without_rxrl(runs: dict[str, Path], fmt: str,
                                                        tmp_path: Path) -> None:
    """Law: for every exported kind of policy, the file's actions on 1,000 observations the env
    visits equal ``rxrl eval``'s — identical for Discrete actions, within 1e-5 for Box ones —
    and the file runs in a process that cannot import rxrl (nor torch, for ONNX)."""
    args, expected = [], {}
    for case, run in runs.items():
        ckpt = load_checkpoint(run)
        obs = example_observations(ckpt.config, 1000, seed=7)
        np.save(tmp_path / f"{case}-obs.npy", obs)
        model = tmp_path / f"{case}.{fmt}"
        exported = export_policy(run, model, fmt)
        assert exported.obs_shape == obs.shape[1:] and exported.obs_dtype == str(obs.dtype)
        expected[case] = eval_actions(run, obs)
        args += [str(tmp_path / f"{case}-obs.npy"), str(model), str(tmp_path / f"{case}-actions.npy")]
    subprocess.run([sys.executable, str(RUNNER), fmt, *args], check=True, timeout=300)
    for case in runs:
        got, want = np.load(tmp_path / f"{case}-actions.npy"), expected[case]
        assert got.shape == want.shape, case
        if want.dtype.kind in "iu":
            assert got.dtype == np.int64 and np.array_equal(got, want), case
            assert len(np.unique(want)) > 1 or case == "ppo-onehot", f"{case}: a constant policy tests little"
        else:
            assert np.max(np.abs(got - want)) <= 1e-5, case
            assert np.all(got >= -2.0) and np.all(got <= 2.0), f"{case}: actions inside the bounds"


def test_the_continuous_export_clips_to_the_action_bounds(runs: dict[str, Path], tmp_path: Path) -> None:
    """The Gaussian mean is clipped inside the exported graph, as ``rxrl eval`` clips it: with
    a policy head whose means leave [-2, 2] (its bias moved to +-3), the file's actions do not."""
    import torch

    ckpt = load_checkpoint(runs["ppo-continuous"])
    state = dict(ckpt.learner_state)
    policy = dict(state["policy"])
    policy["pi_head.bias"] = torch.full_like(policy["pi_head.bias"], 3.0)
    state["policy"] = policy
    moved = tmp_path / "moved.pt"
    save_checkpoint(moved, ckpt.algo.name, ckpt.config, state, ckpt.counters)
    model = tmp_path / "p.torchscript"
    export_policy(moved, model, "torchscript")
    obs = example_observations(ckpt.config, 500, seed=3)
    raw = greedy_policy(ckpt.algo, ckpt.config, state)(obs, deterministic=True)[0]
    got = torch.jit.load(str(model))(torch.as_tensor(obs)).numpy()  # type: ignore[no-untyped-call]
    assert raw.max() > 2.0, "the raw means must leave the bounds for this to test anything"
    assert got.max() == 2.0 and got.min() >= -2.0
    assert np.max(np.abs(got - np.clip(raw, -2, 2))) <= 1e-5


def test_rxrl_export_from_the_command_line(runs: dict[str, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``rxrl export RUN --out FILE`` writes the file and says what it computes; a second time
    it refuses to overwrite it unless ``--force``."""
    out = tmp_path / "policy.pt"
    assert main(["export", str(runs["dqn"]), "--out", str(out)]) == 0
    assert out.is_file() and "torchscript: dqn CartPole-v1, obs [B, 4] float32" in capsys.readouterr().out
    before = out.read_bytes()
    assert main(["export", str(runs["dqn"]), "--out", str(out)]) == 1
    assert "exists; remove it or pass --force" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert main(["export", str(runs["ppo-discrete"]), "--out", str(out), "--force"]) == 0
    assert out.read_bytes() != before


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "tflite"], "unknown export format 'tflite'; choose torchscript, pt2, onnx"),
    (["--out", "NOWHERE/sub/p.pt"], "cannot write NOWHERE/sub/p.pt: no directory NOWHERE/sub"),
    (["--out", "DIR/"], "is a directory; name the file to write"),
    (["--checkpoint", "no-such-run"], "no checkpoint at no-such-run"),
    (["--checkpoint", "EMPTY"], "no checkpoint at"),
])
def test_bad_export_input_is_one_line(runs: dict[str, Path], tmp_path: Path, args: list[str],
                                      message: str, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown format, an unwritable --out, a run without a checkpoint: one line, status 1,
    nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "DIR").mkdir()
    (tmp_path / "EMPTY").mkdir()
    checkpoint, out, fmt = str(runs["ppo-discrete"]), "p.pt", "torchscript"
    opts = dict(zip(args[::2], args[1::2], strict=True))
    checkpoint = opts.get("--checkpoint", checkpoint)
    out, fmt = opts.get("--out", out), opts.get("--format", fmt)
    assert main(["export", checkpoint, "--out", out, "--format", fmt]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["DIR", "EMPTY"]


def test_a_multi_agent_checkpoint_is_refused(tmp_path: Path) -> None:
    """ma-ppo has a policy per agent: exporting one is refused, naming why."""
    from rxrl.training.export import greedy_module

    with pytest.raises(ValueError, match="no single greedy policy to export"):
        greedy_module(get("ma-ppo"), get("ma-ppo").config(), {"policy": {}})
