"""The DQN learner's step as one TorchScript call (`rxrl.rl.learners.dqn_script`) computes the
eager step's bits: every parameter, target parameter, Adam moment, gradient, report and
priority, step after step, over every setting the step reads."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import attrs
import gymnasium as gym
import numpy as np
import pytest
import torch

from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import DQNConfig, QNetConfig
from rxrl.rl.data.metrics import TrainMetrics
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.learners.dqn import DQNLearner
from rxrl.rl.learners.dqn_script import unoptimized

BOX = EnvSpaces(gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(3))
ONE_HOT = EnvSpaces(gym.spaces.Discrete(6, start=2), gym.spaces.Discrete(3))


def images(shape: tuple[int, int, int], high: int = 255) -> EnvSpaces:
    """uint8 image observations of ``shape`` (``[C, H, W]``), 3 actions."""
    return EnvSpaces(gym.spaces.Box(0, high, shape, np.uint8), gym.spaces.Discrete(3))


def batch(spaces: EnvSpaces, rng: np.random.Generator, n: int, weighted: bool) -> TransitionBatch:
    """Random transitions for ``spaces``: n-step returns of 1-3 steps, some terminated."""
    def obs() -> Any:
        space = spaces.observation
        if isinstance(space, gym.spaces.Discrete):
            return rng.integers(int(space.start), int(space.start) + int(space.n), n)
        assert isinstance(space, gym.spaces.Box)
        if space.dtype == np.uint8:
            return rng.integers(0, int(space.high.max()) + 1, (n, *space.shape)).astype(np.uint8)
        return rng.normal(size=(n, *space.shape)).astype(np.float32)

    return TransitionBatch(
        obs=obs(), actions=rng.integers(0, 3, n), rewards=rng.normal(size=n).astype(np.float32),
        next_obs=obs(), terminateds=rng.random(n) < 0.2, truncateds=np.zeros(n, bool),
        n_steps=rng.integers(1, 4, n), weights=rng.random(n).astype(np.float32) if weighted else None)


def equal_state(a: DQNLearner, b: DQNLearner) -> None:
    """Networks, gradients and optimizers of ``a`` and ``b`` bit for bit."""
    for x, y in zip([*a.q_net.parameters(), *a.target_net.parameters()],
                    [*b.q_net.parameters(), *b.target_net.parameters()], strict=True):
        assert torch.equal(x, y)
    for x, y in zip(a.q_net.parameters(), b.q_net.parameters(), strict=True):
        assert x.grad is not None and y.grad is not None and torch.equal(x.grad, y.grad)
    sa, sb = a.optimizer.state_dict(), b.optimizer.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for i, entry in sa["state"].items():
        assert all(torch.equal(v, sb["state"][i][k]) for k, v in entry.items())


SETTINGS: dict[str, tuple[EnvSpaces, dict[str, Any], bool]] = {
    # name: spaces, DQNConfig fields, importance weights
    "double, clipped, weighted": (BOX, {"max_grad_norm": 0.05}, True),
    "plain max, no clip, unweighted": (BOX, {"double_q": False, "max_grad_norm": None}, False),
    "dueling relu, polyak, rate decay": (
        BOX, {"q_net": QNetConfig(hidden_sizes=(16, 8), activation="relu", dueling=True), "tau": 0.3,
              "target_update_interval": 2, "lr_decay_steps": 400, "max_grad_norm": 1e6}, True),
    "one-hot observations": (ONE_HOT, {"gamma": 0.9, "huber_delta": 0.5}, False),
    "MinAtar CNN": (images((4, 10, 10), high=1), {"q_net": QNetConfig(trunk="minatar_cnn")}, True),
    "Nature CNN, dueling": (images((4, 84, 84)), {"q_net": QNetConfig(trunk="nature_cnn", dueling=True)},
                            False),
    "IMPALA CNN": (images((3, 24, 24)), {"q_net": QNetConfig(trunk="impala_cnn")}, False),
}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_scripted_step_computes_the_eager_steps_bits(setting: str) -> None:
    spaces, fields, weighted = SETTINGS[setting]
    config = DQNConfig(**{"lr": 3e-3, "target_update_interval": 3, **fields})
    eager = DQNLearner(spaces, config, seed=1, scripted=False)
    scripted = DQNLearner(spaces, config, seed=1)
    rng = np.random.default_rng(0)
    image = isinstance(spaces.observation, gym.spaces.Box) and len(spaces.observation.shape) == 3
    for step in range(8 if image else 40):
        n = int(rng.integers(1, 9 if image else 40))  # a single row included (no variance)
        b = batch(spaces, rng, n, weighted=weighted)
        (m_eager, p_eager), (m_scripted, p_scripted) = eager.train(b), scripted.train(b)
        assert scripted._script is not None and eager._script is None  # each took the path named
        assert np.array_equal(p_eager, p_scripted) and p_scripted.dtype == np.float32, step
        assert same_metrics(m_eager, m_scripted), step
        equal_state(eager, scripted)
    counts = [(x.num_updates, x.num_target_updates) for x in (scripted, eager)]
    assert counts[0] == counts[1]


def same_metrics(a: TrainMetrics, b: TrainMetrics) -> bool:
    """Equal but for the time taken (nan equal to nan)."""
    da, db = attrs.asdict(a), attrs.asdict(b)
    da.pop("learner_time_s"), db.pop("learner_time_s")
    return all(da[k] == db[k] or (da[k] != da[k] and db[k] != db[k]) for k in da)


def test_a_copy_pickle_or_checkpoint_of_a_scripted_learner_continues_as_the_original() -> None:
    """The TorchScript module is not part of a learner's state: a deep copy, a pickle and a
    `state_dict` round trip each build their own at their next step, on their own parameters."""
    spaces, config = BOX, DQNConfig(lr=3e-3, target_update_interval=2)
    rng = np.random.default_rng(1)
    original = DQNLearner(spaces, config)
    for _ in range(5):
        original.train(batch(spaces, rng, 16, weighted=True))
    copied, unpickled = copy.deepcopy(original), pickle.loads(pickle.dumps(original))
    restored = DQNLearner(spaces, config, seed=9)
    restored.load_state_dict(original.state_dict())
    for _ in range(6):
        b = batch(spaces, rng, 16, weighted=True)
        out = [learner.train(b)[1] for learner in (original, copied, unpickled, restored)]
        assert all(np.array_equal(out[0], o) for o in out[1:])
    for other in (copied, unpickled, restored):
        assert other._script is not None and other._script is not original._script
        assert all(torch.equal(a, b) and a.data_ptr() != b.data_ptr()
                   for a, b in zip(original.q_net.parameters(), other.q_net.parameters(), strict=True))


def test_weights_set_from_outside_reach_the_scripted_step() -> None:
    """`set_weights` and `update_target` write in place: the traces see them."""
    rng = np.random.default_rng(2)
    a, b = DQNLearner(BOX, DQNConfig(), seed=0), DQNLearner(BOX, DQNConfig(), seed=5, scripted=False)
    a.train(batch(BOX, rng, 8, weighted=False))
    b.load_state_dict(a.state_dict())
    b.set_weights(a.get_weights())
    fresh = DQNLearner(BOX, DQNConfig(), seed=7)
    a.set_weights(fresh.get_weights())
    b.set_weights(fresh.get_weights())
    x = batch(BOX, rng, 8, weighted=False)
    assert np.array_equal(a.train(x)[1], b.train(x)[1])


def test_the_executor_flag_is_restored_on_the_calling_thread() -> None:
    was = torch._C._get_graph_executor_optimize()
    with unoptimized():
        assert not torch._C._get_graph_executor_optimize()
    assert torch._C._get_graph_executor_optimize() == was
