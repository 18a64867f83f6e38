"""Atari through ``rxrl train``: a short run of every algorithm that takes discrete actions, a
traced Ray IMPALA run replayed exactly, and uint8 frames crossing Ray's object store unconverted
(issue 23). The preprocessing itself: tests/envs/test_atari.py; the CNNs: tests/rl/test_cnn.py;
the replay's frames: tests/rl/test_frame_replay.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rxrl.cli import main
from rxrl.rl.config import PolicyConfig, QNetConfig
from rxrl.rl.workers.qworker import QRolloutWorker
from rxrl.rl.workers.rollout import RolloutWorker
from rxrl.training.checkpoint import load_checkpoint
from tests.cli.helpers import rxrl_cli

#: a game with quick lives (life-loss episodes, raw whole-game scores)
GAME = "ALE/Breakout-v5"
FRAMES = (4, 84, 84)
SMALL = ["--set", "num_workers=1", "--set", "num_envs_per_worker=2", "--set", "fragment_length=32"]
#: per algorithm: the smallest settings that still train a few times within `STEPS`
SETTINGS: dict[str, list[str]] = {
    "ppo": [*SMALL, "--set", "train_batch_size=64", "--set", "learner.minibatch_size=32",
            "--set", "learner.num_epochs=1"],
    "a2c": [*SMALL, "--set", "train_batch_size=64"],
    "a3c": SMALL,
    "impala": [*SMALL, "--set", "train_batch_size=128"],
    "appo": [*SMALL, "--set", "train_batch_size=128"],
    "dqn": [*SMALL, "--set", "learner.replay.learning_starts=64", "--set", "learner.replay.batch_size=16"],
    "apex": [*SMALL, "--set", "learner.replay.learning_starts=64", "--set", "learner.replay.batch_size=16"],
}
STEPS = 256


@pytest.mark.parametrize("algo", sorted(SETTINGS))
def test_every_discrete_algorithm_trains_on_atari_frames(algo: str, tmp_path: Path) -> None:
    """``rxrl train ALGO --env ALE/Breakout-v5`` (the rx backend, one worker) runs its budget
    on 4x84x84 uint8 frames through the Nature CNN ("auto") and checkpoints the learner."""
    out = tmp_path / algo
    args = ["train", algo, "--env", GAME, "--backend", "rx", "--steps", str(STEPS), "--out", str(out),
            *SETTINGS[algo]]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env_steps_sampled"] >= STEPS
    ckpt = load_checkpoint(out)
    assert ckpt.counters.env_steps_sampled >= STEPS
    # the learner's network is the Nature CNN: its first layer takes the 4 stacked frames
    weights = [v for k, v in _flatten(ckpt.learner_state).items() if k.endswith("weight") and np.ndim(v) == 4]
    assert weights and weights[0].shape[1:] == (4, 8, 8), [np.shape(w) for w in weights]


def _flatten(state: Any, prefix: str = "") -> dict[str, Any]:
    """Every tensor of a nested learner state, by dotted path."""
    if isinstance(state, dict):
        out: dict[str, Any] = {}
        for key, value in state.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): state} if hasattr(state, "shape") else {}


def test_a_traced_ray_impala_run_on_atari_replays_exactly(tmp_path: Path) -> None:
    """The replay law on pixels: an IMPALA run on the default (Ray) backend, traced, and its
    trace replayed on the reference backend, give the same records."""
    out, trace = tmp_path / "impala", tmp_path / "impala.trace.json"
    done = rxrl_cli("train", "impala", "--env", GAME, "--steps", str(STEPS), "--out", out, "--trace", trace,
                    *SETTINGS["impala"], timeout=300)
    assert done.returncode == 0, done.stderr
    replayed = rxrl_cli("replay", trace, timeout=300)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "reproduced exactly" in replayed.stdout


@pytest.mark.usefixtures("ray_session")
@pytest.mark.timeout(180)
def test_frames_cross_the_object_store_as_uint8() -> None:
    """What a worker actor returns through Ray's object store keeps its frames uint8 (a quarter
    of float32's bytes): a PPO batch, an IMPALA fragment and DQN transitions."""
    import ray

    # Ray's stubs do not type an actor's methods' ``.remote``: the handles as Any
    rollout: Any = ray.remote(RolloutWorker).remote(GAME, num_envs=2, fragment_length=8,
                                                    policy=PolicyConfig())
    q: Any = ray.remote(QRolloutWorker).remote(GAME, num_envs=2, fragment_length=8, q_net=QNetConfig())
    try:
        batch, fragment, transitions = ray.get([rollout.sample.remote(), rollout.sample_fragment.remote(),
                                                q.sample.remote()], timeout=120)
    finally:
        for actor in (rollout, q):
            ray.kill(actor)
    assert batch.obs.dtype == np.uint8 and batch.obs.shape == (16, *FRAMES)
    assert fragment.batch.obs.dtype == np.uint8 and fragment.bootstrap_obs.dtype == np.uint8
    assert transitions.obs.dtype == np.uint8 and transitions.next_obs.dtype == np.uint8
    assert transitions.obs.shape[1:] == FRAMES
