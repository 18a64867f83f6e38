"""CNN trunks: shapes, the choice of trunk, uint8 frames up to the forward, acting as learners evaluate."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
import torch
from torch import nn

from rxrl.algos.configs import with_settings
from rxrl.algos.on_policy.ppo import PPO
from rxrl.algos.qlearning.dqn import DQN
from rxrl.cli import main
from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import (
    A2CConfig,
    DQNConfig,
    IMPALAConfig,
    PolicyConfig,
    PPOConfig,
    QNetConfig,
    ReplayConfig,
    resolve_trunk,
)
from rxrl.rl.data.sequences import SequenceBatch
from rxrl.rl.learners.actor_critic import A2CLearner, Learner, PPOLearner
from rxrl.rl.learners.dqn import DQNLearner
from rxrl.rl.learners.vtrace import IMPALALearner
from rxrl.rl.models.cnn import make_cnn, pixel_divisor
from rxrl.rl.models.forward import NumpyActorCritic
from rxrl.rl.models.policy import TorchForward, make_policy
from rxrl.rl.models.qnet import make_q_network
from rxrl.rl.objectives.losses import TensorBatch
from rxrl.rl.workers.qworker import QRolloutWorker
from rxrl.rl.workers.rollout import RolloutWorker

PIXELS_ID = "rxrl-test/Pixels-v0"
UInt8Array = npt.NDArray[np.uint8]


class PixelEnv(gym.Env[UInt8Array, Any]):
    """Random uint8 frames ``[channels, side, side]`` (values up to ``high``) from the env's
    seeded generator; reward 1 for action 1; episodes of ``4 + tag % 3`` steps, ``tag`` the
    first reset's seed, so sub-environments end their episodes at different steps."""

    def __init__(self, channels: int = 2, side: int = 10, high: int = 255) -> None:
        self.observation_space = gym.spaces.Box(0, high, (channels, side, side), np.uint8)
        self.action_space = gym.spaces.Discrete(3)
        self.high, self.tag, self.steps = high, 0, 0

    def _obs(self) -> UInt8Array:
        shape = self.observation_space.shape
        return self.np_random.integers(0, self.high + 1, shape, dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[UInt8Array, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.tag = seed % 1000
        self.steps = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[UInt8Array, float, bool, bool, dict[str, Any]]:
        self.steps += 1
        return self._obs(), float(int(action) == 1), self.steps >= 4 + self.tag % 3, False, {}


def make_pixel_env(**kwargs: Any) -> gym.Env[Any, Any]:
    """The gymnasium entry point for `PixelEnv`."""
    return PixelEnv(**kwargs)


gym.register(PIXELS_ID, entry_point=make_pixel_env)

ATARI = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
MINATAR = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)
#: a small image per CNN, and its env kwargs (the fake env's frames are square)
SMALL = {"nature_cnn": (2, 36), "impala_cnn": (2, 12), "minatar_cnn": (3, 10)}


def env_kwargs(trunk: str) -> dict[str, int]:
    channels, side = SMALL[trunk]
    return {"channels": channels, "side": side}


def spaces(trunk: str) -> EnvSpaces:
    return EnvSpaces.of(PIXELS_ID, env_kwargs(trunk))


def image_shape(trunk: str) -> tuple[int, ...]:
    shape = spaces(trunk).observation.shape
    assert shape is not None
    return shape


def frames(n: int, shape: tuple[int, ...], high: int = 255, seed: int = 0) -> UInt8Array:
    return np.random.default_rng(seed).integers(0, high + 1, (n, *shape), dtype=np.uint8)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tests that train run on one thread (the machine is shared); restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- the networks ----------------------------------------------------------------------------


@pytest.mark.parametrize(("trunk", "space", "width"), [
    ("nature_cnn", ATARI, 512),
    ("nature_cnn", gym.spaces.Box(0, 255, (1, 36, 36), np.uint8), 512),
    ("impala_cnn", ATARI, 256),
    ("impala_cnn", gym.spaces.Box(0, 255, (3, 10, 10), np.uint8), 256),
    ("minatar_cnn", MINATAR, 128),
    ("minatar_cnn", gym.spaces.Box(0, 1, (7, 3, 3), np.uint8), 128),
], ids=lambda x: str(getattr(x, "shape", x)))
def test_each_cnn_turns_uint8_images_into_float_features(trunk: Any, space: gym.spaces.Box,
                                                         width: int) -> None:
    cnn = make_cnn(trunk, space, torch.Generator().manual_seed(0))
    high = int(space.high.max())
    with torch.no_grad():
        out = cnn(torch.as_tensor(frames(3, space.shape, high)))
    assert out.shape == (3, width) and out.dtype == torch.float32 and cnn.out_dim == width
    assert bool((out >= 0).all()) and bool((out > 0).any())  # its last layer's ReLU units


def test_pixels_are_divided_by_the_spaces_upper_bound_inside_the_forward() -> None:
    """A uint8 0..255 frame gives what the same network gives the frame / 255 as floats in a
    0..1 space; a 0/1 image (MinAtar) is not scaled."""
    assert pixel_divisor(ATARI) == 255.0 and pixel_divisor(MINATAR) is None
    assert pixel_divisor(gym.spaces.Box(0.0, 1.0, (3, 8, 8), np.float32)) is None
    images = frames(2, (3, 8, 8))
    scaled = gym.spaces.Box(0.0, 1.0, (3, 8, 8), np.float32)
    frames_space = gym.spaces.Box(0, 255, (3, 8, 8), np.uint8)
    raw = make_cnn("impala_cnn", frames_space, torch.Generator().manual_seed(3))
    unit = make_cnn("impala_cnn", scaled, torch.Generator().manual_seed(3))
    with torch.no_grad():
        np.testing.assert_allclose(raw(torch.as_tensor(images)).numpy(),
                                   unit(torch.as_tensor(images.astype(np.float32) / 255)).numpy(), atol=1e-6)
    minatar = make_cnn("minatar_cnn", MINATAR, torch.Generator().manual_seed(0))
    bits = frames(2, MINATAR.shape, high=1)
    with torch.no_grad():
        np.testing.assert_array_equal(minatar(torch.as_tensor(bits)).numpy(),
                                      minatar(torch.as_tensor(bits.astype(np.float32))).numpy())


@pytest.mark.parametrize(("space", "expected"), [
    (gym.spaces.Box(-1, 1, (4,)), "mlp"),
    (gym.spaces.Box(-1, 1, (3, 5)), "mlp"),
    (gym.spaces.Discrete(7), "mlp"),
    (ATARI, "nature_cnn"),
    (gym.spaces.Box(0, 255, (1, 36, 40), np.uint8), "nature_cnn"),
    (gym.spaces.Box(0, 255, (4, 35, 84), np.uint8), "minatar_cnn"),
    (MINATAR, "minatar_cnn"),
    (gym.spaces.Box(0, 1, (4, 2, 2), np.uint8), "mlp"),
], ids=str)
def test_auto_picks_the_mlp_for_flat_observations_and_a_cnn_by_image_size(space: gym.Space[Any],
                                                                         expected: str) -> None:
    assert resolve_trunk("auto", space) == expected
    two: gym.spaces.Discrete[Any] = gym.spaces.Discrete(2)
    assert make_policy(space, two, PolicyConfig(hidden_sizes=(8,)), 0).trunk_kind == expected
    assert make_q_network(space, two, QNetConfig(hidden_sizes=(8,))).trunk_kind == expected


@pytest.mark.parametrize(("trunk", "space", "message"), [
    ("nature_cnn", gym.spaces.Box(-1, 1, (4,)),
     "policy.trunk='nature_cnn' needs image observations (a 3-D Box [C, H, W]), got a Box of shape (4,) "
     "float32: use policy.trunk='mlp' or 'auto'"),
    ("impala_cnn", gym.spaces.Discrete(5), "policy.trunk='impala_cnn' needs image observations"),
    ("nature_cnn", MINATAR,
     "policy.trunk='nature_cnn' needs images of at least 36 px a side, got 10x10 (shape (4, 10, 10)): "
     "use policy.trunk='auto' or 'impala_cnn' (any size)"),
    ("minatar_cnn", gym.spaces.Box(0, 1, (4, 2, 9), np.uint8),
     "policy.trunk='minatar_cnn' needs images of at least 3 px a side, got 2x9"),
    ("auto", gym.spaces.Box(0, 255, (84, 84, 4), np.uint8),
     "policy.trunk='auto': observations of shape (84, 84, 4) look channels-last; the CNN trunks take "
     "[C, H, W]"),
])
def test_a_trunk_that_does_not_fit_the_observations_is_a_one_line_error(
        trunk: Any, space: gym.Space[Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        make_policy(space, gym.spaces.Discrete(2), PolicyConfig(trunk=trunk), 0)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    with pytest.raises(ValueError, match=r"^q_net\.trunk="):
        make_q_network(space, gym.spaces.Discrete(2), QNetConfig(trunk=trunk))


def test_normalize_obs_is_refused_for_a_cnn_in_one_line() -> None:
    message = r"^policy.normalize_obs does not apply to a CNN trunk \(nature_cnn\)"
    with pytest.raises(ValueError, match=message):
        make_policy(ATARI, gym.spaces.Discrete(2), PolicyConfig(normalize_obs=True), 0)


def test_trunks_are_settings_of_the_command_line() -> None:
    """``--set policy.trunk=...`` (actor-critic algorithms) and ``--set learner.q_net.trunk=...``
    (DQN, Ape-X) resolve to the configs' fields; other values are refused naming the choices."""
    assert with_settings(PPO(), {"policy.trunk": "impala_cnn"}).policy.trunk == "impala_cnn"
    assert with_settings(DQN(), {"learner.q_net.trunk": "nature_cnn"}).learner.q_net.trunk == "nature_cnn"
    with pytest.raises(ValueError, match=r"policy.trunk must be one of \['auto', 'mlp', 'nature_cnn'"):
        with_settings(PPO(), {"policy.trunk": "resnet"})


# -- uint8 until the forward, and training -----------------------------------------------------


def spy_on(module: nn.Module) -> list[torch.dtype]:
    """The dtypes of every input ``module`` is called with, from now on."""
    seen: list[torch.dtype] = []

    def record(_module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        seen.append(inputs[0].dtype)

    module.register_forward_pre_hook(record)
    return seen


def snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: t.detach().clone() for k, t in module.state_dict().items()}


def changed(before: dict[str, torch.Tensor], module: nn.Module) -> set[str]:
    return {k for k, t in module.state_dict().items() if not torch.equal(before[k], t)}


@pytest.mark.parametrize("algo", ["ppo", "a2c", "impala"])
@pytest.mark.parametrize("trunk", ["nature_cnn", "minatar_cnn"])
def test_uint8_frames_reach_the_cnn_of_an_actor_critic_learner_unconverted(
        algo: str, trunk: Any, one_thread: None) -> None:
    """The worker's batch holds the env's uint8 frames, the learner's tensors keep them, the
    CNN's forward gets them as uint8, and a step changes every part of the network."""
    config = PolicyConfig(trunk=trunk)
    worker = RolloutWorker(PIXELS_ID, num_envs=2, fragment_length=8, policy=config,
                           env_kwargs=env_kwargs(trunk), torch_threads=None)
    learner: Learner
    if algo == "impala":
        learner = IMPALALearner(spaces(trunk), IMPALAConfig(), config)
        fragment = worker.sample_fragment()
        assert fragment.batch.obs.dtype == np.uint8 and fragment.bootstrap_obs.dtype == np.uint8
    else:
        learner = (PPOLearner(spaces(trunk), PPOConfig(minibatch_size=8, num_epochs=1), config)
                   if algo == "ppo" else A2CLearner(spaces(trunk), A2CConfig(), config))
        batch = worker.sample()
        assert batch.obs.dtype == np.uint8
        assert TensorBatch.from_batch(batch).obs.dtype == torch.uint8
    assert learner.policy.torso is not None
    seen = spy_on(learner.policy.torso)
    before = snapshot(learner.policy)
    if isinstance(learner, IMPALALearner):
        learner.train([fragment])
    else:
        assert isinstance(learner, PPOLearner | A2CLearner)
        learner.train(batch)
    assert seen and set(seen) == {torch.uint8}
    assert changed(before, learner.policy) == set(before)


@pytest.mark.parametrize("dueling", [False, True])
def test_uint8_frames_reach_the_cnn_of_a_dqn_learner_unconverted(dueling: bool, one_thread: None) -> None:
    q_net = QNetConfig(trunk="impala_cnn", dueling=dueling)
    worker = QRolloutWorker(PIXELS_ID, num_envs=2, fragment_length=4, epsilon=0.5, q_net=q_net,
                            env_kwargs=env_kwargs("impala_cnn"), torch_threads=None)
    batch = worker.sample()
    assert batch.obs.dtype == np.uint8 and batch.next_obs.dtype == np.uint8
    config = DQNConfig(replay=ReplayConfig(batch_size=8, learning_starts=8), q_net=q_net)
    learner = DQNLearner(spaces("impala_cnn"), config)
    seen, seen_target = spy_on(learner.q_net.trunk), spy_on(learner.target_net.trunk)
    before = snapshot(learner.q_net)
    learner.train(batch)
    assert seen and set(seen) == {torch.uint8} and set(seen_target) == {torch.uint8}
    assert changed(before, learner.q_net) == set(before)


# -- acting through torch ----------------------------------------------------------------------


@pytest.mark.parametrize("trunk", ["nature_cnn", "impala_cnn", "minatar_cnn"])
@pytest.mark.parametrize("action", [gym.spaces.Discrete(4), gym.spaces.Box(-1, 1, (2,))],
                         ids=["discrete", "box"])
def test_acting_with_a_cnn_gives_what_the_learner_evaluates(trunk: Any, action: gym.Space[Any]) -> None:
    policy = make_policy(spaces(trunk).observation, action, PolicyConfig(trunk=trunk), 0)
    assert isinstance(policy.rollout_path(), TorchForward)
    obs = frames(5, image_shape(trunk))
    actions, logp, values = policy.act(obs)
    assert logp.dtype == np.float32 and values.dtype == np.float32
    with torch.no_grad():
        t_logp, _, t_values = policy.evaluate(torch.as_tensor(obs), torch.as_tensor(actions))
    np.testing.assert_allclose(logp, t_logp.numpy(), atol=1e-5)
    np.testing.assert_allclose(values, t_values.numpy(), atol=1e-5)
    np.testing.assert_allclose(policy.value(obs), t_values.numpy(), atol=1e-5)


@pytest.mark.parametrize("trunk", ["nature_cnn", "minatar_cnn"])
def test_q_values_of_a_cnn_are_the_learners_forward(trunk: Any) -> None:
    q_net = make_q_network(spaces(trunk).observation, gym.spaces.Discrete(3),
                           QNetConfig(trunk=trunk, dueling=True))
    obs = frames(6, image_shape(trunk))
    with torch.no_grad():
        expected = q_net(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(q_net.q_values(obs), expected, atol=1e-6)
    np.testing.assert_array_equal(q_net.greedy(obs), expected.argmax(axis=1))


@pytest.mark.parametrize("recurrent", ["none", "lstm"])
def test_a_torch_free_worker_of_a_cnn_policy_acts_as_the_torch_one(recurrent: Any) -> None:
    """A worker given weights acts through torch for a CNN (a numpy CNN would not pay) and
    returns what the worker with the torch policy returns."""
    config = PolicyConfig(trunk="minatar_cnn", recurrent=recurrent, recurrent_size=8)
    kwargs: dict[str, Any] = {"num_envs": 2, "fragment_length": 6, "policy": config,
                              "env_kwargs": env_kwargs("minatar_cnn"), "torch_threads": None}
    torch_worker = RolloutWorker(PIXELS_ID, **kwargs)
    free = RolloutWorker(PIXELS_ID, weights=torch_worker.get_weights(), **kwargs)
    assert isinstance(free.policy, NumpyActorCritic)
    for _ in range(2):
        if config.is_recurrent:
            a, b = torch_worker.sample_sequences(), free.sample_sequences()
            np.testing.assert_array_equal(a.initial_state, b.initial_state)
            a_rows, b_rows = a.batch, b.batch
        else:
            a_rows, b_rows = torch_worker.sample(), free.sample()
        assert b_rows.obs.dtype == np.uint8
        np.testing.assert_array_equal(a_rows.actions, b_rows.actions)
        np.testing.assert_array_equal(a_rows.logp, b_rows.logp)
        np.testing.assert_array_equal(a_rows.values, b_rows.values)
    weights = {k: v + 1 for k, v in torch_worker.get_weights().items()}
    free.set_weights(weights)
    assert all(np.array_equal(v, weights[k]) for k, v in free.get_weights().items())


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("shared", [False, True], ids=["two_cores", "shared_core"])
def test_the_learner_reproduces_a_recurrent_cnn_workers_outputs_over_sequences(
        kind: Any, shared: bool) -> None:
    """A core on top of a CNN: the learner's forward over the sequences gives the
    log-probabilities and values the worker computed step by step in torch (several fragments:
    the state crossed their boundaries)."""
    config = PolicyConfig(trunk="impala_cnn", recurrent=kind, recurrent_size=16, shared_trunk=shared,
                          sequence_length=5)
    worker = RolloutWorker(PIXELS_ID, num_envs=3, fragment_length=10, policy=config,
                           env_kwargs=env_kwargs("impala_cnn"), torch_threads=None)
    batch = SequenceBatch.concat([worker.sample_sequences() for _ in range(2)])
    assert batch.starts.any() and not batch.starts.all() and batch.batch.obs.dtype == np.uint8
    learner = PPOLearner(spaces("impala_cnn"), PPOConfig(), config)
    with torch.no_grad():
        logp, _, values = TensorBatch.from_batch(batch).evaluate(learner.policy)
    np.testing.assert_allclose(logp.numpy(), batch.batch.logp, atol=1e-5)
    np.testing.assert_allclose(values.numpy(), batch.batch.values, atol=1e-5)
    obs, state = batch.batch.obs[:4], np.random.default_rng(0).normal(size=(4, config.state_size))
    state32 = state.astype(np.float32)
    _, _, acted, _ = learner.policy.act_recurrent(obs, state32)
    np.testing.assert_allclose(learner.policy.value_recurrent(obs, state32), acted, atol=1e-6)


# -- rxrl show ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "line"), [
    (["ppo", "--set", "policy.trunk=impala_cnn", "--set", "policy.recurrent=lstm"],
     "policy: impala_cnn trunk (3x10x10 uint8) + lstm 64 ×2 (actor, critic) + categorical(3) and value "
     "heads"),
    (["appo"], "policy: minatar_cnn trunk (3x10x10 uint8) + categorical(3) and value heads"),
    (["dqn", "--set", "learner.q_net.dueling=true"],
     "q_net: minatar_cnn trunk (3x10x10 uint8) + dueling value and advantage heads (3 actions)"),
    (["ppo", "--env", "CartPole-v1"],
     "policy: mlp trunk 64x64 tanh ×2 (actor, critic) (4 float32) + categorical(2) and value heads"),
])
def test_show_names_the_model(argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    env = [] if "--env" in argv else ["--env", f"tests.rl.test_cnn:{PIXELS_ID}", "--set",
                                      'env_kwargs={"channels": 3}']
    assert main(["show", *argv, *env]) == 0
    assert capsys.readouterr().out.rstrip("\n").endswith("\n" + line)
