"""RolloutWorker: fragment layout, autoreset handling, GAE targets, seeding, action bounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.workers.rollout import RolloutWorker
from tests.rl.toy_env import TOY_ID, TOY_TRUNCATED_ID

SAME_STEP = {"autoreset_mode": AutoresetMode.SAME_STEP}
MODES = [pytest.param(None, id="next_step"), pytest.param(SAME_STEP, id="same_step")]


def blocks(batch: SampleBatch, worker: RolloutWorker) -> list[slice]:
    T = worker.fragment_length
    return [slice(i * T, (i + 1) * T) for i in range(worker.num_envs)]


def toy(env: str = TOY_ID, vector_kwargs: dict[str, Any] | None = None, **kw: Any) -> RolloutWorker:
    return RolloutWorker(
        env,
        num_envs=kw.pop("num_envs", 3),
        fragment_length=kw.pop("fragment_length", 10),
        vector_kwargs=vector_kwargs,
        **kw,
    )


@pytest.mark.parametrize("vector_kwargs", [*MODES, pytest.param({"copy": False}, id="shared_obs_buffer")])
def test_fragments_are_env_major_consecutive_transitions_without_reset_steps(
    vector_kwargs: dict[str, Any] | None,
) -> None:
    worker = toy(vector_kwargs=vector_kwargs)
    assert worker.next_step_reset is (vector_kwargs != SAME_STEP)
    for _ in range(3):
        batch = worker.sample()
        assert len(batch) == 30
        for rows in blocks(batch, worker):
            step, tag = batch.obs[rows, 0], batch.obs[rows, 1]
            assert len(set(tag.tolist())) == 1  # one sub-environment per block
            length = 4 + int(tag[0]) % 3
            assert step.max() < length  # no final observation: reset steps are not transitions
            done = batch.terminateds[rows]
            np.testing.assert_array_equal(batch.rewards[rows], step + 1)
            np.testing.assert_array_equal(done, step + 1 == length)
            # consecutive in time: the counter goes up by one, or restarts after an episode end
            assert all(step[1:][done[:-1]] == 0)
            assert all(step[1:][~done[:-1]] == step[:-1][~done[:-1]] + 1)


def test_next_step_mode_drops_surplus_and_counts_it_in_env_steps() -> None:
    worker = toy()  # episode lengths 4, 5, 6 across the three sub-environments
    batch = worker.sample()
    assert batch.env_steps > len(batch)
    same = toy(vector_kwargs=SAME_STEP).sample()
    assert same.env_steps == len(same)


@pytest.mark.parametrize("vector_kwargs", MODES)
def test_episode_statistics_are_those_of_finished_episodes(vector_kwargs: dict[str, Any] | None) -> None:
    worker = toy(vector_kwargs=vector_kwargs, fragment_length=30)
    batch = worker.sample()
    assert len(batch.episode_returns) >= 3 * 4
    np.testing.assert_array_equal(
        batch.episode_returns, batch.episode_lengths * (batch.episode_lengths + 1) / 2
    )
    assert set(batch.episode_lengths.tolist()) == {4, 5, 6}


@pytest.mark.parametrize("vector_kwargs", MODES)
def test_terminated_targets_are_exact_returns_to_go(vector_kwargs: dict[str, Any] | None) -> None:
    """gamma = lam = 1: a target is the undiscounted return to its episode's end if that end
    is inside the fragment, and otherwise includes the bootstrap value at the fragment's end."""
    worker = toy(vector_kwargs=vector_kwargs, gamma=1.0, lam=1.0)
    batch = worker.sample()
    checked = 0
    for rows in blocks(batch, worker):
        rewards, done = batch.rewards[rows], batch.terminateds[rows]
        targets = batch.value_targets[rows]
        for t in range(len(rewards)):
            ends = np.flatnonzero(done[t:])
            if len(ends):
                assert targets[t] == pytest.approx(rewards[t : t + ends[0] + 1].sum(), abs=1e-4)
                checked += 1
    assert checked > 20
    np.testing.assert_allclose(batch.advantages, batch.value_targets - batch.values, atol=1e-5)


@pytest.mark.parametrize("vector_kwargs", MODES)
def test_truncated_targets_bootstrap_from_the_final_observation(vector_kwargs: dict[str, Any] | None) -> None:
    worker = toy(TOY_TRUNCATED_ID, vector_kwargs=vector_kwargs, gamma=0.5, lam=1.0)
    batch = worker.sample()
    assert not batch.terminateds.any() and batch.truncateds.any()
    trunc = np.flatnonzero(batch.truncateds)
    final_obs = batch.obs[trunc] + np.array([1, 0, 0], dtype=np.float32)  # the step counter moves on
    final_obs[:, 2] = batch.actions[trunc]  # the last action is recorded too
    expected = batch.rewards[trunc] + 0.5 * worker.policy.value(final_obs)
    np.testing.assert_allclose(batch.value_targets[trunc], expected, rtol=1e-5)


def test_same_seed_and_index_reproduce_and_indices_differ() -> None:
    a, b = (RolloutWorker("CartPole-v1", 4, 32, seed=3, worker_index=1) for _ in range(2))
    c = RolloutWorker("CartPole-v1", 4, 32, seed=3, worker_index=2)
    for _ in range(2):
        x, y, z = a.sample(), b.sample(), c.sample()
        np.testing.assert_array_equal(x.obs, y.obs)
        np.testing.assert_array_equal(x.actions, y.actions)
        np.testing.assert_array_equal(x.advantages, y.advantages)
        assert not np.array_equal(x.obs, z.obs)
    # initial weights depend on the seed only (so they match a learner with that seed)
    assert all(np.array_equal(v, c.get_weights()[k]) for k, v in a.get_weights().items())


def test_cartpole_batch_shapes_and_dtypes() -> None:
    worker = RolloutWorker("CartPole-v1", num_envs=8, fragment_length=64)
    assert type(worker.env).__name__ == "CartPoleVectorEnv"  # the native vector env
    batch = worker.sample()
    assert len(batch) == 512 and batch.obs.shape == (512, 4) and batch.obs.dtype == np.float32
    assert batch.actions.dtype == np.int64 and set(np.unique(batch.actions)) <= {0, 1}
    assert (batch.rewards == 1.0).all()
    for name in ("logp", "values", "advantages", "value_targets"):
        assert getattr(batch, name).dtype == np.float32
    assert (batch.logp < 0).all()


def test_box_actions_are_clipped_for_the_env_but_stored_unclipped() -> None:
    worker = toy(env_kwargs={"continuous": True}, fragment_length=40, num_envs=2)
    batch = worker.sample()
    assert batch.actions.shape == (80, 1) and batch.actions.dtype == np.float32
    assert np.abs(batch.actions).max() > 0.5  # std 1 samples leave the [-0.5, 0.5] box
    for rows in blocks(batch, worker):
        obs, actions, done = batch.obs[rows], batch.actions[rows, 0], batch.terminateds[rows]
        seen = obs[1:, 2][~done[:-1]]  # the action the env received, observed one step later
        np.testing.assert_allclose(seen, np.clip(actions[:-1][~done[:-1]], -0.5, 0.5))


def test_discrete_actions_are_shifted_by_the_space_start() -> None:
    worker = toy(env_kwargs={"action_start": 5}, num_envs=2)
    batch = worker.sample()
    assert set(batch.actions.tolist()) == {0, 1}  # the policy's indices are stored
    seen = batch.obs[:, 2][batch.obs[:, 0] > 0]  # the action the env received last step
    assert set(seen.tolist()) == {5.0, 6.0}


def test_discrete_observations_frozen_lake() -> None:
    worker = RolloutWorker("FrozenLake-v1", num_envs=2, fragment_length=16)
    batch = worker.sample()
    assert len(batch) == 32 and batch.obs.dtype == np.int64 and batch.obs.shape == (32,)
    assert np.isfinite(batch.value_targets).all()


def test_set_weights_changes_the_behaviour_policy() -> None:
    a = RolloutWorker("CartPole-v1", 2, 16, seed=0)
    b = RolloutWorker("CartPole-v1", 2, 16, seed=1)
    a.set_weights(b.get_weights())
    obs = np.zeros((1, 4), dtype=np.float32)
    assert a.policy.value(obs) == pytest.approx(b.policy.value(obs))


def test_invalid_arguments_raise() -> None:
    with pytest.raises(ValueError, match="fragment_length"):
        RolloutWorker("CartPole-v1", fragment_length=0)
    with pytest.raises(ValueError, match="gamma"):
        RolloutWorker("CartPole-v1", gamma=1.5)
    with pytest.raises(ValueError, match="num_envs"):
        RolloutWorker("CartPole-v1", num_envs=0)
    with pytest.raises(ValueError, match="DISABLED"):
        toy(vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})
