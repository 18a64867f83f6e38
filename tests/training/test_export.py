"""``rxrl export`` (`rxrl.training.export`): the exported policy's actions equal ``rxrl eval``'s
on 1,000 observations (discrete identical, continuous within 1e-5), run by torch alone or by
onnxruntime alone with rxrl unimportable; a recurrent policy's file, stepped through a rollout
with its state (zeroed at each episode's start), gives ``rxrl eval``'s actions and the actor
core's states step by step; bad input is refused in one line.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import rxrl.envs  # noqa: F401  (registers rxrl/StatelessCartPole-v0 and rxrl/StatelessPendulum-v0)
from rxrl.algos import get
from rxrl.algos.on_policy.ppo import PPO
from rxrl.cli import main
from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import PolicyConfig
from rxrl.training import Trainer
from rxrl.training.checkpoint import Counters, load_checkpoint, save_checkpoint
from rxrl.training.evaluation import RecurrentActing, env_actions, greedy_policy
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
    # CNN trunks over uint8 images (the MinAtar CNN): an actor-critic and a Q-network
    # (PPO's default step, not MinAtar's tuned one: two updates at lr 5e-4 decaying to 0 leave
    # the greedy policy constant on these observations)
    ("ppo-cnn", "ppo", "MinAtar/Breakout-v1",
     {**QUICK_PPO, "learner.lr": 2e-3, "lr_decay_steps": None, "learner.ent_coef": 0.0}, 512),
    ("dqn-cnn", "dqn", "MinAtar/Breakout-v1", QUICK_Q, 600),
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
    space = EnvSpaces.of(ckpt.config.env, ckpt.config.env_kwargs).action
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


# ------------------------------------------------------------------------- recurrent policies

CARTPOLE = "rxrl/StatelessCartPole-v0"
#: a small recurrent policy: one layer of 16 units, then a core of 8
SMALL = PolicyConfig(hidden_sizes=(16,), recurrent="lstm", recurrent_size=8)
#: case -> (env, policy): recurrent actor-critics — an LSTM and a GRU each beside a critic with
#: its own trunk and core (the file carries the actor's core alone), an LSTM feeding both heads
#: (``shared_trunk``), and a Gaussian GRU (a Box action, clipped to its bounds in the file)
RECURRENT_CASES: dict[str, tuple[str, PolicyConfig]] = {
    "lstm": (CARTPOLE, attrs.evolve(SMALL, normalize_obs=True)),
    "gru": (CARTPOLE, attrs.evolve(SMALL, recurrent="gru")),
    "lstm-shared": (CARTPOLE, attrs.evolve(SMALL, shared_trunk=True, normalize_obs=True)),
    "gru-pendulum": ("rxrl/StatelessPendulum-v0", attrs.evolve(SMALL, recurrent="gru", normalize_obs=True)),
}
#: the cases each format's file is checked on: every format on an LSTM and a GRU; the shared
#: core and the Gaussian head (the same graph around the core) on TorchScript, the quickest
FORMAT_CASES = {"torchscript": list(RECURRENT_CASES), "pt2": ["lstm", "gru"], "onnx": ["lstm", "gru"]}
#: envs stepped side by side, steps per rollout, steps per episode at most (so that every
#: rollout starts episodes midway, on the Pendulum too)
ENVS, STEPS, EPISODE_STEPS = 2, 60, 25


@pytest.fixture(scope="module")
def recurrent_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A PPO checkpoint of each recurrent case: an untrained learner's state with its weights
    redrawn (gain 2, small biases: an untrained head, of gain 0.01, barely depends on its
    input) and, where it normalizes observations, running statistics that shift them and scale
    them up (so that the greedy actions vary with what the core has seen)."""
    import torch

    from rxrl.rl.learners.actor_critic import PPOLearner

    root = tmp_path_factory.mktemp("recurrent-export")
    out = {}
    for seed, (case, (env, policy_config)) in enumerate(RECURRENT_CASES.items()):
        learner = PPOLearner(env, policy=policy_config, seed=seed)
        policy = learner.policy
        draw = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for param in policy.parameters():
                scale = 2.0 / param.shape[-1] ** 0.5 if param.dim() > 1 else 0.1  # a bias: small
                param.copy_(torch.randn(param.shape, generator=draw) * scale)
            if policy.normalizer is not None:
                stats = policy.normalizer
                stats.obs_mean.copy_(0.01 * torch.randn(stats.obs_mean.shape, generator=draw))
                stats.obs_var.copy_(0.001 + 0.01 * torch.rand(stats.obs_var.shape, generator=draw))
                stats.obs_count.fill_(100.0)
        out[case] = root / f"{case}.pt"
        config = PPO(env=env, policy=policy_config)
        save_checkpoint(out[case], "ppo", config, learner.state_dict(), Counters())
    return out


def recurrent_rollout(checkpoint: Path, seed: int) -> dict[str, np.ndarray[Any, Any]]:
    """``rxrl eval``'s greedy policy of a recurrent checkpoint (`RecurrentActing`'s step,
    ``act_recurrent(obs, state, deterministic=True)``) stepping `ENVS` envs for `STEPS` steps,
    each env's row of the state zeroed where its episode starts: the observations
    ``[T, B, *obs_shape]``, the episode starts ``[T, B]``, the env actions ``[T, B, ...]`` and
    the actor core's part of each step's new state ``[T, B, core_state_size]``."""
    import gymnasium as gym

    ckpt = load_checkpoint(checkpoint)
    acting = greedy_policy(ckpt.algo, ckpt.config, ckpt.learner_state)
    assert isinstance(acting, RecurrentActing)
    policy, size = acting.policy, ckpt.config.policy.core_state_size
    envs: list[Any] = [gym.make(ckpt.config.env, max_episode_steps=EPISODE_STEPS) for _ in range(ENVS)]
    obs = [np.asarray(env.reset(seed=seed + i)[0]) for i, env in enumerate(envs)]
    starts = np.ones(ENVS, bool)
    state = np.zeros((ENVS, policy.config.state_size), np.float32)
    record: dict[str, list[np.ndarray[Any, Any]]] = {"obs": [], "starts": [], "actions": [], "states": []}
    for _ in range(STEPS):
        state[starts] = 0.0
        batch = np.stack(obs)
        actions, _, _, state = policy.act_recurrent(batch, state, deterministic=True)
        actions = env_actions(envs[0].action_space, actions)
        for key, value in (("obs", batch), ("starts", starts), ("actions", actions),
                           ("states", state[:, :size])):
            record[key].append(np.array(value))
        starts = np.zeros(ENVS, bool)
        for i, env in enumerate(envs):
            obs[i], _, terminated, truncated, _ = env.step(actions[i])
            if terminated or truncated:
                obs[i], starts[i] = env.reset()[0], True
    for env in envs:
        env.close()
    return {key: np.stack(values) for key, values in record.items()}


@pytest.mark.parametrize("fmt", FORMATS)
def test_exported_recurrent_policies_step_as_rxrl_evals_without_rxrl(
        recurrent_checkpoints: dict[str, Path], fmt: str, tmp_path: Path) -> None:
    """Law: for LSTM and GRU policies (each with the critic's own core, or one core for both
    heads; a categorical and a Gaussian head), the file — run by torch alone or onnxruntime
    alone, rxrl unimportable — stepped through a rollout of two envs, each row's state zeroed
    where its episode starts (midway too), gives ``rxrl eval``'s actions at every step
    (identical for Discrete actions, within 1e-5 for Box ones), and returns the state of the
    actor's core alone (within 1e-5): ``[B, core_state_size]``, the critic's core not in the
    file."""
    args, expected = [], {}
    for seed, case in enumerate(FORMAT_CASES[fmt]):
        checkpoint = recurrent_checkpoints[case]
        model = tmp_path / f"{case}.{fmt}"
        exported = export_policy(checkpoint, model, fmt)
        policy_config = RECURRENT_CASES[case][1]
        assert exported.state_size == policy_config.core_state_size, case
        assert exported.state_size == (2 if policy_config.recurrent == "lstm" else 1) * 8, case
        rollout = recurrent_rollout(checkpoint, 10 * seed)
        assert rollout["starts"][1:].any(), f"{case}: an episode must start midway for this to test resets"
        np.savez(tmp_path / f"{case}-in.npz", obs=rollout["obs"], starts=rollout["starts"],
                 state=np.zeros((ENVS, exported.state_size), np.float32))
        expected[case] = rollout
        args += [str(tmp_path / f"{case}-in.npz"), str(model), str(tmp_path / f"{case}-out.npz")]
    subprocess.run([sys.executable, str(RUNNER), fmt, *args], check=True, timeout=300)
    for case, want in expected.items():
        with np.load(tmp_path / f"{case}-out.npz") as got:
            actions, states = got["actions"], got["states"]
        assert actions.shape == want["actions"].shape, case
        if want["actions"].dtype.kind in "iu":
            assert actions.dtype == np.int64 and np.array_equal(actions, want["actions"]), case
            assert len(np.unique(want["actions"])) > 1, f"{case}: a constant policy tests little"
        else:
            assert np.max(np.abs(actions - want["actions"])) <= 1e-5, case
            assert np.all(np.abs(actions) <= 2.0), f"{case}: actions inside the bounds"
        assert states.shape == want["states"].shape and states.dtype == np.float32, case
        assert np.max(np.abs(states - want["states"])) <= 1e-5, case
        assert np.abs(want["states"]).max() > 0.1, f"{case}: states that stay near zero test little"


def test_rxrl_export_of_a_recurrent_policy_names_its_state_input(
        recurrent_checkpoints: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``rxrl export`` of a GRU policy says the file takes and returns a state of the actor
    core's size, and the file does: a zero state of one row, one step, actions and a state of
    that size back."""
    import torch

    out = tmp_path / "gru.pt"
    assert main(["export", str(recurrent_checkpoints["gru"]), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert ("torchscript: ppo rxrl/StatelessCartPole-v0, obs [B, 2] float32, state [B, 8] float32 "
            "-> greedy env actions, next state") in said, said
    with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript, still the default format
        warnings.simplefilter("ignore", DeprecationWarning)
        policy = torch.jit.load(str(out))  # type: ignore[no-untyped-call]
    with torch.no_grad():
        action, state = policy(torch.zeros(1, 2), torch.zeros(1, 8))
    assert action.dtype == torch.int64 and tuple(action.shape) == (1,) and tuple(state.shape) == (1, 8)
