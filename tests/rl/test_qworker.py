"""QRolloutWorker: real transitions only, final observations, epsilon-greedy, n-step rows, seeding;
acting in numpy, without torch, given weights."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from rxrl.rl.config import QNetConfig
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.learners.dqn import DQNLearner
from rxrl.rl.models.qforward import NumpyQNetwork
from rxrl.rl.models.qnet import QNetwork
from rxrl.rl.schedules import LinearSchedule
from rxrl.rl.workers.qworker import QRolloutWorker
from tests.cli.helpers import ROOT, environment
from tests.rl.toy_env import TOY_ID, TOY_TRUNCATED_ID

SAME_STEP = {"autoreset_mode": AutoresetMode.SAME_STEP}
NEXT_STEP = {"autoreset_mode": AutoresetMode.NEXT_STEP}
MODES = [pytest.param(NEXT_STEP, id="next_step"), pytest.param(SAME_STEP, id="same_step"),
         pytest.param(None, id="default")]
SMALL = QNetConfig(hidden_sizes=(8,))


def toy(env: str = TOY_ID, **kw: Any) -> QRolloutWorker:
    kw.setdefault("num_envs", 3)
    kw.setdefault("fragment_length", 10)
    return QRolloutWorker(env, q_net=SMALL, **kw)


def episode_length(tag: np.ndarray) -> np.ndarray:
    return 4 + tag.astype(np.int64) % 3  # CountEnv's length for its sub-environment tag


@pytest.mark.parametrize("vector_kwargs", [*MODES, pytest.param({"copy": False}, id="shared_obs_buffer")])
def test_rows_are_real_transitions_with_the_final_observation_and_no_reset_steps(
    vector_kwargs: dict[str, Any] | None,
) -> None:
    """CountEnv's obs is (step, tag, last action): a transition goes from step s to s + 1
    of one sub-environment with reward s + 1; the terminated one's next_obs is the final
    observation (step == length), never the next episode's first (step 0)."""
    worker = toy(vector_kwargs=vector_kwargs, epsilon=0.5)
    total_steps = 0
    for _ in range(4):
        batch = worker.sample()
        step, tag = batch.obs[:, 0], batch.obs[:, 1]
        np.testing.assert_array_equal(batch.next_obs[:, 0], step + 1)
        np.testing.assert_array_equal(batch.next_obs[:, 1], tag)
        np.testing.assert_array_equal(batch.rewards, step + 1)
        np.testing.assert_array_equal(batch.terminateds, step + 1 == episode_length(tag))
        np.testing.assert_array_equal(batch.next_obs[:, 2], batch.actions)  # the action taken
        assert not batch.truncateds.any() and (step < episode_length(tag)).all()
        assert batch.terminateds.any() and len(batch) == batch.env_steps
        for t in np.unique(tag):  # env-major: each sub-environment's rows in time order
            rows = np.flatnonzero(tag == t)
            assert (np.diff(rows) == 1).all()
            s, done = step[rows], batch.terminateds[rows]
            assert (s[1:][done[:-1]] == 0).all() and (s[1:][~done[:-1]] == s[:-1][~done[:-1]] + 1).all()
        total_steps += batch.env_steps
    assert worker.env_steps == total_steps
    if not worker.next_step_reset:
        assert total_steps == 4 * 3 * 10  # every step is a transition
    else:
        assert total_steps < 4 * 3 * 10  # the reset steps are not


@pytest.mark.parametrize("vector_kwargs", MODES)
def test_truncated_rows_end_at_the_real_final_observation(vector_kwargs: dict[str, Any] | None) -> None:
    batch = toy(TOY_TRUNCATED_ID, vector_kwargs=vector_kwargs).sample()
    assert batch.truncateds.any() and not batch.terminateds.any()
    np.testing.assert_array_equal(batch.next_obs[batch.truncateds, 0], 4.0)


@pytest.mark.parametrize("vector_kwargs", MODES)
def test_episode_statistics_are_those_of_finished_episodes(vector_kwargs: dict[str, Any] | None) -> None:
    batch = toy(vector_kwargs=vector_kwargs, fragment_length=40).sample()
    assert len(batch.episode_returns) >= 3 * 5
    np.testing.assert_array_equal(
        batch.episode_returns, batch.episode_lengths * (batch.episode_lengths + 1) / 2
    )
    assert set(batch.episode_lengths.tolist()) == {4, 5, 6}


def test_epsilon_zero_is_greedy_and_epsilon_one_is_uniform() -> None:
    greedy = toy(epsilon=0.0, fragment_length=30)
    batch = greedy.sample()
    np.testing.assert_array_equal(batch.actions, greedy.q_net.greedy(batch.obs))
    random = toy(epsilon=1.0, fragment_length=200).sample()
    share = random.actions.mean()
    assert 0.4 < share < 0.6  # 2 actions, ~500 draws: a coin


def test_a_linear_epsilon_is_a_function_of_the_workers_env_steps() -> None:
    worker = toy(epsilon=LinearSchedule(1.0, 0.0, 100))
    assert worker.current_epsilon() == 1.0
    worker.sample()
    assert worker.current_epsilon() == pytest.approx(1.0 - worker.env_steps / 100)
    while worker.env_steps < 100:
        worker.sample()
    assert worker.current_epsilon() == 0.0
    batch = worker.sample()
    np.testing.assert_array_equal(batch.actions, worker.q_net.greedy(batch.obs))


def check_n_step_rows(batch: TransitionBatch, n: int, gamma: float) -> None:
    step, length = batch.obs[:, 0].astype(np.int64), episode_length(batch.obs[:, 1])
    m = np.minimum(n, length - step)
    np.testing.assert_array_equal(batch.n_steps, m)
    np.testing.assert_array_equal(batch.next_obs[:, 0], step + m)
    np.testing.assert_array_equal(batch.terminateds, step + m == length)
    expected = [sum(gamma**k * (s + 1 + k) for k in range(int(j))) for s, j in zip(step, m, strict=True)]
    np.testing.assert_allclose(batch.rewards, expected, rtol=1e-6)


@pytest.mark.parametrize("fragment_length", [1, 2, 7])
def test_n_step_rows_fold_n_steps_up_to_the_episode_end_whatever_the_fragment_length(
    fragment_length: int,
) -> None:
    worker = toy(n_step=3, gamma=0.5, fragment_length=fragment_length, vector_kwargs=NEXT_STEP)
    rows, stepped = 0, 0
    for _ in range(60 // fragment_length):
        batch = worker.sample()
        check_n_step_rows(batch, 3, 0.5)
        rows, stepped = rows + len(batch), stepped + batch.env_steps
    assert rows == stepped - worker.folder.held and 0 < worker.folder.held <= 3 * 2


def test_gymnasiums_own_vector_envs_autoreset_in_the_same_step_unless_told_a_native_keeps_its_own() -> None:
    """A transition worker steps no reset-only steps where it can choose (SB3's and CleanRL's
    schedule: every env step is a transition); CartPole's native vector env has NEXT_STEP only."""
    assert not toy().next_step_reset and not toy(vector_kwargs={"copy": False}).next_step_reset
    assert toy(vector_kwargs=NEXT_STEP).next_step_reset
    assert QRolloutWorker("CartPole-v1", 2, 4).next_step_reset
    assert not QRolloutWorker("CartPole-v1", 2, 4, vectorization_mode="sync").next_step_reset


def test_discrete_action_spaces_with_an_offset_step_the_env_with_it() -> None:
    batch = toy(env_kwargs={"action_start": 3}, epsilon=1.0).sample()
    assert set(batch.actions.tolist()) == {0, 1}
    np.testing.assert_array_equal(batch.next_obs[:, 2], batch.actions + 3)


def test_same_seed_and_index_reproduce_and_indices_differ() -> None:
    a, b = (QRolloutWorker("CartPole-v1", 2, 16, seed=3, worker_index=1, epsilon=0.5) for _ in range(2))
    c = QRolloutWorker("CartPole-v1", 2, 16, seed=3, worker_index=2, epsilon=0.5)
    for _ in range(2):
        x, y, z = a.sample(), b.sample(), c.sample()
        np.testing.assert_array_equal(x.obs, y.obs)
        np.testing.assert_array_equal(x.actions, y.actions)
        assert not np.array_equal(x.obs, z.obs)
    learner = DQNLearner("CartPole-v1", seed=3)
    assert all(np.array_equal(v, learner.get_weights()[k]) for k, v in c.get_weights().items())
    a.set_weights(DQNLearner("CartPole-v1", seed=4).get_weights())
    assert not np.array_equal(a.get_weights()["head.weight"], c.get_weights()["head.weight"])


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="DQN needs a Discrete action space"):
        toy(env_kwargs={"continuous": True})
    with pytest.raises(ValueError, match=r"epsilon must lie in \[0, 1\]"):
        toy(epsilon=1.5)
    with pytest.raises(ValueError, match="fragment_length must be >= 1"):
        toy(fragment_length=0)
    with pytest.raises(ValueError, match="n_step must be an integer >= 1"):
        toy(n_step=0)


def test_a_worker_with_numpy_weights_samples_what_the_torch_worker_samples() -> None:
    """Law: for the same seed, a worker given the initial weights (`NumpyQNetwork`, no torch)
    returns the same batches, bit for bit, as one that builds its torch Q-network from the
    seed, and still does after both load new weights."""
    kw: dict[str, Any] = {"seed": 3, "worker_index": 1, "epsilon": 0.3, "n_step": 2}
    torch_worker = QRolloutWorker("CartPole-v1", 4, 16, **kw)
    assert isinstance(torch_worker.q_net, QNetwork)
    numpy_worker = QRolloutWorker("CartPole-v1", 4, 16, weights=torch_worker.get_weights(), **kw)
    assert isinstance(numpy_worker.q_net, NumpyQNetwork)
    rng = np.random.default_rng(0)
    for _ in range(3):
        a, b = torch_worker.sample(), numpy_worker.sample()
        for name in ("obs", "actions", "rewards", "next_obs", "terminateds", "truncateds", "n_steps"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        np.testing.assert_array_equal(a.episode_returns, b.episode_returns)
        new = {k: (v + rng.normal(0, 0.3, v.shape)).astype(np.float32)
               for k, v in torch_worker.get_weights().items()}
        torch_worker.set_weights(new)
        numpy_worker.set_weights(new)
    mine = numpy_worker.get_weights()
    assert all(np.array_equal(v, mine[k]) for k, v in torch_worker.get_weights().items())


#: run in a fresh process: a worker given numpy weights (pickled by this process) samples and
#: loads weights; what it imported
NUMPY_WORKER = """
import pickle, sys
from rxrl.rl.workers.qworker import QRolloutWorker
weights = pickle.loads(open(sys.argv[1], "rb").read())
worker = QRolloutWorker("CartPole-v1", 2, 8, epsilon=0.5, weights=weights)
worker.sample()
worker.set_weights(weights)
worker.sample()
print("torch" in sys.modules)
"""


def test_a_worker_of_an_mlp_given_weights_never_imports_torch(tmp_path: Path) -> None:
    weights = tmp_path / "weights.pkl"
    weights.write_bytes(pickle.dumps(DQNLearner("CartPole-v1", seed=0).get_weights()))
    done = subprocess.run([sys.executable, "-c", NUMPY_WORKER, str(weights)], cwd=ROOT, env=environment(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
